import { describe, expect, it } from 'vitest';
import { aggregate, prorationFor, type AggregationContext, type ProrationContext } from '../../../src/domain/aggregation';
import { FULL_PERIOD } from '../../../src/domain/charges';
import { dec } from '../../../src/domain/money';
import { ev, metric, strings } from './helpers';

// Prorated charges (lago-reference.md 2.10, api-contract.md Invoices): each recurring unit weighs
// the local dates of the billed part it was present on, over the whole period's days. Units are
// exact (a single division by the period's days), so they are compared to the exact fraction.

const seats = metric({ aggregation_type: 'sum', field_name: 'seats', recurring: true });
const users = metric({ aggregation_type: 'unique_count', field_name: 'user_id', recurring: true });

const d = (iso: string) => new Date(iso);
const frac = (numerator: number, denominator: number) => dec(numerator).div(denominator);

/** A whole period `[from, to)` of `days` days, in `timezone`, prorated. */
function prorated(from: string, to: string, days: number, timezone = 'UTC'): AggregationContext {
  return { from: d(from), to: d(to), prorate: { from: d(from), to: d(to), periodDays: days, timezone } };
}

/** April 2025 in UTC: 30 days. */
const april = prorated('2025-04-01T00:00:00Z', '2025-05-01T00:00:00Z', 30);
/** May 2025 in UTC: 31 days. */
const may = prorated('2025-05-01T00:00:00Z', '2025-06-01T00:00:00Z', 31);

const seat = (t: string, n: number | string) => ev(t, { seats: n });
const add = (t: string, user: string) => ev(t, { user_id: user });
const remove = (t: string, user: string) => ev(t, { user_id: user, operation_type: 'remove' });

describe('prorated recurring sum', () => {
  it('lago-reference 2.10: +1 seat on day 11 of a 30-day month -> 20/30 (days 11..30), then 1 the next month', () => {
    const events = [seat('2025-04-11T09:00:00Z', 1)];
    const result = aggregate(seats, events, april);
    // Days from April 11 to April 30, inclusive: 20. 20/30 = 0.6666…
    expect(result.units.eq(frac(20, 30))).toBe(true);
    expect(result.units.toFixed(4)).toBe('0.6667');
    expect(result.eventsCount).toBe(1);
    expect(strings(result.perEventValues)).toEqual(['1']);
    // May: the seat was there all month, carried over -> 31/31 = 1.
    expect(aggregate(seats, events, may).units.toFixed()).toBe('1');
  });

  it('a removal subtracts for its remaining days: +2 on day 1, -1 on day 16 -> 2 x 30/30 - 1 x 15/30 = 1.5', () => {
    const events = [seat('2025-04-01T08:00:00Z', 2), seat('2025-04-16T17:00:00Z', -1)];
    // +2 from April 1: 30 days; -1 from April 16: 16..30 = 15 days. (60 - 15) / 30 = 1.5.
    expect(aggregate(seats, events, april).units.toFixed()).toBe('1.5');
    // Unprorated, the same events give the level at the end: 2 - 1 = 1.
    expect(aggregate(seats, events, { from: april.from, to: april.to }).units.toFixed()).toBe('1');
  });

  it('values carried over from the previous period count for the whole period: +3 in March -> 3', () => {
    const events = [seat('2025-03-20T10:00:00Z', 3)];
    // Carried in: 30 of 30 days. 3 x 30/30 = 3.
    expect(aggregate(seats, events, april).units.toFixed()).toBe('3');
  });

  it('a 31-day month: +1 on May 11 -> 21/31 (days 11..31); with 2 carried over -> 2 + 21/31 = 83/31', () => {
    expect(aggregate(seats, [seat('2025-05-11T00:00:00Z', 1)], may).units.eq(frac(21, 31))).toBe(true);
    const events = [seat('2025-04-05T00:00:00Z', 2), seat('2025-05-11T23:59:59Z', 1)];
    // 2 x 31 + 1 x 21 = 83 unit-days over 31.
    const units = aggregate(seats, events, may).units;
    expect(units.eq(frac(83, 31))).toBe(true);
    expect(units.toFixed(4)).toBe('2.6774');
  });

  it("counts the event's local date in the customer's time zone, not its UTC date", () => {
    // 2025-04-10 23:30 UTC is April 11 01:30 in Paris (CEST, UTC+2). Paris April 2025:
    // [Mar 31 22:00Z, Apr 30 22:00Z), 30 days. Local day 11 -> 20/30; in UTC (day 10) it would be 21/30.
    const event = seat('2025-04-10T23:30:00Z', 1);
    const paris = prorated('2025-03-31T22:00:00Z', '2025-04-30T22:00:00Z', 30, 'Europe/Paris');
    expect(aggregate(seats, [event], paris).units.eq(frac(20, 30))).toBe(true);
    expect(aggregate(seats, [event], april).units.eq(frac(21, 30))).toBe(true);
    // 2025-04-11 02:00 UTC is April 10 22:00 in New York (EDT, UTC-4): local day 10 -> 21/30.
    const newYork = prorated('2025-04-01T04:00:00Z', '2025-05-01T04:00:00Z', 30, 'America/New_York');
    expect(aggregate(seats, [seat('2025-04-11T02:00:00Z', 1)], newYork).units.eq(frac(21, 30))).toBe(true);
  });

  it('a part of the period (subscription started April 16) keeps the whole period as denominator: +1 on the 16th -> 15/30 = 0.5', () => {
    const prorate: ProrationContext = { from: d('2025-04-16T00:00:00Z'), to: d('2025-05-01T00:00:00Z'), periodDays: 30, timezone: 'UTC' };
    const context = { from: prorate.from, to: prorate.to, prorate };
    expect(aggregate(seats, [seat('2025-04-16T10:00:00Z', 1)], context).units.toFixed()).toBe('0.5');
  });

  it('a termination on April 20 bills carried units for the 20 billed days: 3 x 20/30 = 2; an event on the 11th for 10 days', () => {
    const prorate: ProrationContext = { from: d('2025-04-01T00:00:00Z'), to: d('2025-04-21T00:00:00Z'), periodDays: 30, timezone: 'UTC' };
    const context = { from: prorate.from, to: d('2025-04-20T15:00:00Z'), prorate };
    const events = [seat('2025-03-02T00:00:00Z', 3), seat('2025-04-11T00:00:00Z', 3)];
    // 3 x 20 (carried) + 3 x 10 (April 11..20) = 90 unit-days / 30 = 3.
    expect(aggregate(seats, events, context).units.toFixed()).toBe('3');
  });

  it("applies the metric's rounding to the prorated units, after proration: 20/30 rounded to 2 digits -> 0.67", () => {
    const rounded = { ...seats, rounding_function: 'round' as const, rounding_precision: 2 };
    expect(aggregate(rounded, [seat('2025-04-11T09:00:00Z', 1)], april).units.toFixed()).toBe('0.67');
  });

  it('an event at or after the billed end adds nothing; non-numeric values are skipped as unprorated', () => {
    const events = [seat('2025-04-30T23:00:00Z', 1), seat('2025-05-01T00:00:00Z', 100), seat('2025-04-05T00:00:00Z', 'x')];
    // April 30 counts one day: 1/30. The May event is outside the window.
    expect(aggregate(seats, events, april).units.eq(frac(1, 30))).toBe(true);
    expect(aggregate(seats, events, april).eventsCount).toBe(1);
  });
});

describe('prorated recurring unique_count', () => {
  it('a user added on day 11 of a 30-day month counts 20/30; a user from the previous period 30/30', () => {
    const events = [add('2025-03-15T00:00:00Z', 'old'), add('2025-04-11T12:00:00Z', 'new')];
    // old: 30 days, new: 11..30 = 20 days -> 50/30.
    expect(aggregate(users, events, april).units.eq(frac(50, 30))).toBe(true);
    // Unprorated: 2 users present at the end.
    expect(aggregate(users, events, { from: april.from, to: april.to }).units.toFixed()).toBe('2');
  });

  it("a removal's date is billed (Lago's prorated unique count): added day 1, removed day 16 -> 16/30", () => {
    const events = [add('2025-04-01T09:00:00Z', 'u1'), remove('2025-04-16T10:00:00Z', 'u1')];
    // Present April 1..16 = 16 dates (the prorated sum would bill 15: its -1 counts from the 16th).
    expect(aggregate(users, events, april).units.eq(frac(16, 30))).toBe(true);
  });

  it('counts a date once when a user leaves and comes back the same day (Lago: 27 add, remove, add; 28 remove; 30 add -> 3 days)', () => {
    const events = [
      add('2025-04-27T08:00:00Z', 'u1'),
      remove('2025-04-27T09:00:00Z', 'u1'),
      add('2025-04-27T10:00:00Z', 'u1'),
      remove('2025-04-28T10:00:00Z', 'u1'),
      add('2025-04-30T10:00:00Z', 'u1'),
    ];
    // Dates 27, 28 and 30: 3/30 = 0.1.
    expect(aggregate(users, events, april).units.toFixed()).toBe('0.1');
  });

  it('a user removed before the period counts nothing; one removed on its first day counts that day', () => {
    const events = [
      add('2025-03-01T00:00:00Z', 'gone'),
      remove('2025-03-31T12:00:00Z', 'gone'),
      add('2025-03-01T00:00:00Z', 'leaves'),
      remove('2025-04-01T00:00:00Z', 'leaves'),
    ];
    // gone: 0; leaves: April 1 only -> 1/30.
    expect(aggregate(users, events, april).units.eq(frac(1, 30))).toBe(true);
  });
});

describe('prorationFor: the billed part and the period days of a usage range', () => {
  const utc = 'UTC';

  it('a whole period: [from, to) and its own days', () => {
    expect(prorationFor({ from: d('2025-04-01T00:00:00Z'), to: d('2025-05-01T00:00:00Z'), timezone: utc, ratio: FULL_PERIOD })).toEqual({
      from: d('2025-04-01T00:00:00Z'),
      to: d('2025-05-01T00:00:00Z'),
      periodDays: 30,
      timezone: utc,
    });
  });

  it('a part of the period: the ratio gives the period days and the billed end (a termination mid-day bills its day)', () => {
    // Terminated April 20 15:00: 20 used days of 30, billed until April 21 00:00.
    expect(
      prorationFor({
        from: d('2025-04-01T00:00:00Z'),
        to: d('2025-04-20T15:00:00Z'),
        timezone: utc,
        ratio: { usedDays: 20, periodDays: 30 },
      }),
    ).toMatchObject({ to: d('2025-04-21T00:00:00Z'), periodDays: 30 });
    // Started April 16 10:00: 15 used days of 30, billed until the period end.
    expect(
      prorationFor({
        from: d('2025-04-16T10:00:00Z'),
        to: d('2025-05-01T00:00:00Z'),
        timezone: utc,
        ratio: { usedDays: 15, periodDays: 30 },
      }),
    ).toMatchObject({ from: d('2025-04-16T10:00:00Z'), to: d('2025-05-01T00:00:00Z'), periodDays: 30 });
  });

  it('billedTo extends a range read up to now to the end of its billed part', () => {
    expect(
      prorationFor({ from: d('2025-04-01T00:00:00Z'), to: d('2025-04-18T12:00:00Z'), timezone: utc, billedTo: d('2025-05-01T00:00:00Z') }),
    ).toMatchObject({ to: d('2025-05-01T00:00:00Z'), periodDays: 30 });
  });

  it('local midnights in the time zone: Paris April has 30 days', () => {
    expect(prorationFor({ from: d('2025-03-31T22:00:00Z'), to: d('2025-04-30T22:00:00Z'), timezone: 'Europe/Paris' })).toMatchObject({
      periodDays: 30,
    });
  });

  it('an empty range (a period the trial covers) bills no day', () => {
    const at = d('2025-05-01T00:00:00Z');
    const prorate = prorationFor({ from: at, to: at, timezone: utc, ratio: { usedDays: 1, periodDays: 30 } });
    expect(prorate).toMatchObject({ from: at, to: at, periodDays: 30 });
    expect(aggregate(seats, [seat('2025-04-03T00:00:00Z', 5)], { from: at, to: at, prorate }).units.toFixed()).toBe('0');
  });
});
