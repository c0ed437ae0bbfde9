import { describe, expect, it } from 'vitest';
import { gracePeriodEnd, invoiceDueDates, overdueAt } from '../../src/domain/invoice-due';
import { localDate } from '../../src/domain/periods';

// Expected instants are written by hand in UTC from the zone's offset on that date, independently
// of luxon (Paris: +01:00, +02:00 from 2025-03-30 to 2025-10-26; Los Angeles: -08:00, -07:00 from
// 2025-03-09; Tokyo: +09:00, no DST).

describe('invoiceDueDates and overdueAt', () => {
  it.each([
    // zone, finalized at, net payment term, issuing date, due date, overdue at
    ['UTC', '2025-01-15T10:00:00Z', 30, '2025-01-15', '2025-02-14', '2025-02-15T00:00:00.000Z'],
    ['UTC', '2025-01-15T10:00:00Z', 0, '2025-01-15', '2025-01-15', '2025-01-16T00:00:00.000Z'],
    // Month ends: the term counts calendar days, February included.
    ['UTC', '2024-01-31T12:00:00Z', 30, '2024-01-31', '2024-03-01', '2024-03-02T00:00:00.000Z'],
    ['UTC', '2025-01-31T12:00:00Z', 30, '2025-01-31', '2025-03-02', '2025-03-03T00:00:00.000Z'],
    ['UTC', '2024-12-31T23:59:59Z', 0, '2024-12-31', '2024-12-31', '2025-01-01T00:00:00.000Z'],
    // Paris: due on the day clocks go forward (a 23-hour date), across it, on the day they go back.
    ['Europe/Paris', '2025-03-15T12:00:00Z', 15, '2025-03-15', '2025-03-30', '2025-03-30T22:00:00.000Z'],
    ['Europe/Paris', '2025-03-01T12:00:00Z', 30, '2025-03-01', '2025-03-31', '2025-03-31T22:00:00.000Z'],
    ['Europe/Paris', '2025-10-01T10:00:00Z', 25, '2025-10-01', '2025-10-26', '2025-10-26T23:00:00.000Z'],
    // Already the next date in Paris while it is still the previous one in UTC.
    ['Europe/Paris', '2025-01-31T23:30:00Z', 0, '2025-02-01', '2025-02-01', '2025-02-01T23:00:00.000Z'],
    // Los Angeles: still the previous year locally; a term across the spring DST change.
    ['America/Los_Angeles', '2025-01-01T05:00:00Z', 30, '2024-12-31', '2025-01-30', '2025-01-31T08:00:00.000Z'],
    ['America/Los_Angeles', '2025-02-20T20:00:00Z', 30, '2025-02-20', '2025-03-22', '2025-03-23T07:00:00.000Z'],
    // Tokyo: local midnight is 15:00 UTC the day before; one second earlier is still January.
    ['Asia/Tokyo', '2025-01-31T15:00:00Z', 30, '2025-02-01', '2025-03-03', '2025-03-03T15:00:00.000Z'],
    ['Asia/Tokyo', '2025-01-31T14:59:59Z', 0, '2025-01-31', '2025-01-31', '2025-01-31T15:00:00.000Z'],
  ])('%s: finalized %s with net %i days is issued %s, due %s, overdue at %s', (zone, finalizedAt, net, issuing, due, overdue) => {
    expect(invoiceDueDates(new Date(finalizedAt), net, zone)).toEqual({ issuingDate: issuing, paymentDueDate: due });
    expect(overdueAt(due, zone)).toBe(overdue);
    // Overdue at the first instant of the next local date, not a millisecond before.
    expect(localDate(new Date(Date.parse(overdue) - 1), zone)).toBe(due);
    expect(localDate(new Date(overdue), zone)).not.toBe(due);
  });
});

describe('gracePeriodEnd', () => {
  it.each([
    // created at, grace period days, finalized at
    ['2025-01-15T10:00:00Z', 0, '2025-01-15T10:00:00.000Z'],
    ['2025-01-15T10:00:00Z', 3, '2025-01-18T10:00:00.000Z'],
    // Whole 24-hour days, not local dates: the Paris DST night inside does not move it.
    ['2025-03-29T12:00:00Z', 1, '2025-03-30T12:00:00.000Z'],
    ['2024-02-28T10:00:00Z', 2, '2024-03-01T10:00:00.000Z'],
  ])('a draft created %s with %i grace days is finalized at %s', (createdAt, days, end) => {
    expect(gracePeriodEnd(new Date(createdAt), days).toISOString()).toBe(end);
  });
});
