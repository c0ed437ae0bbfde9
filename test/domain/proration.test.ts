import { describe, expect, it } from 'vitest';
import { dec } from '../../src/domain/money';
import type { BillingInterval, BillingTime } from '../../src/domain/periods';
import { planChangeDay, prorateSegment, terminationBilledUntil, unusedCredit } from '../../src/domain/proration';

// Instants are written by hand in UTC from the zone's offset on that date, independently of luxon
// (Paris: +01:00, +02:00 from 2025-03-30 to 2025-10-26; Los Angeles: -08:00, -07:00 from
// 2025-03-09; Tokyo: +09:00).
const d = (iso: string) => new Date(iso);
const schedule = (interval: BillingInterval, billingTime: BillingTime, anchor: string, timezone: string) => ({
  interval,
  billingTime,
  anchor: d(anchor),
  timezone,
});

describe('prorateSegment', () => {
  it.each([
    // case, [interval, billing time, started at, zone], period from, segment from, to, trial end, amount -> billed from, used days, period days, base fee
    [
      'a full period',
      ['monthly', 'calendar', '2025-01-01T00:00:00Z', 'UTC'],
      '2025-05-01T00:00:00Z',
      '2025-05-01T00:00:00Z',
      '2025-06-01T00:00:00Z',
      null,
      3100,
      '2025-05-01T00:00:00.000Z',
      31,
      31,
      '3100.0000',
    ],
    // billing-rules.md: started May 15, 3100 * 17 / 31 = 1700; the denominator is the whole May.
    [
      'a partial first period',
      ['monthly', 'calendar', '2025-05-15T10:00:00Z', 'UTC'],
      '2025-05-15T10:00:00Z',
      '2025-05-15T10:00:00Z',
      '2025-06-01T00:00:00Z',
      null,
      3100,
      '2025-05-15T10:00:00.000Z',
      17,
      31,
      '1700.0000',
    ],
    [
      'a whole leap February',
      ['monthly', 'calendar', '2024-01-01T00:00:00Z', 'UTC'],
      '2024-02-01T00:00:00Z',
      '2024-02-01T00:00:00Z',
      '2024-03-01T00:00:00Z',
      null,
      2900,
      '2024-02-01T00:00:00.000Z',
      29,
      29,
      '2900.0000',
    ],
    [
      'a leap February started on the 10th',
      ['monthly', 'calendar', '2024-02-10T00:00:00Z', 'UTC'],
      '2024-02-10T00:00:00Z',
      '2024-02-10T00:00:00Z',
      '2024-03-01T00:00:00Z',
      null,
      2900,
      '2024-02-10T00:00:00.000Z',
      20,
      29,
      '2000.0000',
    ],
    // Paris, March 2025: the 30th has 23 hours and still counts as one day.
    [
      'Paris from the DST change day',
      ['monthly', 'calendar', '2024-12-31T23:00:00Z', 'Europe/Paris'],
      '2025-02-28T23:00:00Z',
      '2025-03-29T23:00:00Z',
      '2025-03-31T22:00:00Z',
      null,
      3100,
      '2025-03-29T23:00:00.000Z',
      2,
      31,
      '200.0000',
    ],
    [
      'Paris up to the DST change day',
      ['monthly', 'calendar', '2024-12-31T23:00:00Z', 'Europe/Paris'],
      '2025-02-28T23:00:00Z',
      '2025-02-28T23:00:00Z',
      '2025-03-29T23:00:00Z',
      null,
      3100,
      '2025-02-28T23:00:00.000Z',
      29,
      31,
      '2900.0000',
    ],
    // Anniversary on the 31st: Feb 28 to Mar 31, across the Los Angeles DST change.
    [
      'a Los Angeles month-end anniversary',
      ['monthly', 'anniversary', '2025-01-31T08:00:00Z', 'America/Los_Angeles'],
      '2025-02-28T08:00:00Z',
      '2025-02-28T08:00:00Z',
      '2025-03-31T07:00:00Z',
      null,
      3100,
      '2025-02-28T08:00:00.000Z',
      31,
      31,
      '3100.0000',
    ],
    // A Tokyo week (Monday Jan 6 to Monday Jan 13) from Thursday 05:00 local.
    [
      'a partial Tokyo week',
      ['weekly', 'calendar', '2024-12-31T15:00:00Z', 'Asia/Tokyo'],
      '2025-01-05T15:00:00Z',
      '2025-01-08T20:00:00Z',
      '2025-01-12T15:00:00Z',
      null,
      700,
      '2025-01-08T20:00:00.000Z',
      4,
      7,
      '400.0000',
    ],
    // The trial end day is billed: Jan 10 to Jan 31.
    [
      'the rest of a period after the trial',
      ['monthly', 'calendar', '2025-01-01T00:00:00Z', 'UTC'],
      '2025-01-01T00:00:00Z',
      '2025-01-01T00:00:00Z',
      '2025-02-01T00:00:00Z',
      '2025-01-10T12:00:00Z',
      3100,
      '2025-01-10T12:00:00.000Z',
      22,
      31,
      '2200.0000',
    ],
    [
      'a trial that ended before the segment',
      ['monthly', 'calendar', '2025-01-01T00:00:00Z', 'UTC'],
      '2025-02-01T00:00:00Z',
      '2025-02-01T00:00:00Z',
      '2025-03-01T00:00:00Z',
      '2025-01-10T12:00:00Z',
      2800,
      '2025-02-01T00:00:00.000Z',
      28,
      28,
      '2800.0000',
    ],
    [
      'a fee that does not divide evenly',
      ['monthly', 'calendar', '2025-01-01T00:00:00Z', 'UTC'],
      '2025-01-01T00:00:00Z',
      '2025-01-01T00:00:00Z',
      '2025-01-15T00:00:00Z',
      null,
      10000,
      '2025-01-01T00:00:00.000Z',
      14,
      31,
      '4516.1290',
    ],
  ] as const)(
    '%s',
    (
      _case,
      [interval, billingTime, anchor, zone],
      periodFrom,
      from,
      to,
      trialEndsAt,
      amount,
      billedFrom,
      usedDays,
      periodDays,
      baseFee,
    ) => {
      const segment = prorateSegment({
        schedule: schedule(interval, billingTime, anchor, zone),
        periodFrom: d(periodFrom),
        from: d(from),
        to: d(to),
        trialEndsAt: trialEndsAt ? d(trialEndsAt) : null,
        amountCents: amount,
      });
      expect(segment).not.toBeNull();
      expect({
        from: segment!.from.toISOString(),
        usedDays: segment!.usedDays,
        periodDays: segment!.periodDays,
        baseFee: segment!.baseFee.toFixed(4),
      }).toEqual({ from: billedFrom, usedDays, periodDays, baseFee });
      // Charges and commitments are prorated by the same ratio, unless the whole period is billed.
      expect(segment!.ratio).toEqual(usedDays >= periodDays ? undefined : { usedDays, periodDays });
    },
  );

  it.each([
    // case, segment from, to, trial end
    ['an empty segment (a plan change on the period start)', '2025-02-01T00:00:00Z', '2025-02-01T00:00:00Z', null],
    ['a segment inside the trial', '2025-01-01T00:00:00Z', '2025-01-20T00:00:00Z', '2025-01-25T00:00:00Z'],
    ['a segment that ends when the trial does', '2025-01-01T00:00:00Z', '2025-01-25T00:00:00Z', '2025-01-25T00:00:00Z'],
  ])('bills nothing for %s', (_case, from, to, trialEndsAt) => {
    const segment = prorateSegment({
      schedule: schedule('monthly', 'calendar', '2025-01-01T00:00:00Z', 'UTC'),
      periodFrom: d('2025-01-01T00:00:00Z'),
      from: d(from),
      to: d(to),
      trialEndsAt: trialEndsAt ? d(trialEndsAt) : null,
      amountCents: 3100,
    });
    expect(segment).toBeNull();
  });
});

describe('planChangeDay: the change day belongs to the new plan', () => {
  it.each([
    // case, zone, change at, segment from -> the old plan's segment ends at
    ['mid-period', 'UTC', '2025-01-15T10:00:00Z', '2025-01-01T00:00:00Z', '2025-01-15T00:00:00.000Z'],
    ['on the period start', 'UTC', '2025-02-01T10:00:00Z', '2025-02-01T00:00:00Z', '2025-02-01T00:00:00.000Z'],
    ['on the day the subscription started', 'UTC', '2025-05-15T18:00:00Z', '2025-05-15T10:00:00Z', '2025-05-15T10:00:00.000Z'],
    ['on the Paris DST change day', 'Europe/Paris', '2025-03-30T13:00:00Z', '2025-02-28T23:00:00Z', '2025-03-29T23:00:00.000Z'],
    [
      'late on the Los Angeles DST change day',
      'America/Los_Angeles',
      '2025-03-10T06:00:00Z',
      '2025-02-01T08:00:00Z',
      '2025-03-09T08:00:00.000Z',
    ],
    [
      'early in Tokyo, still the day before in UTC',
      'Asia/Tokyo',
      '2025-01-14T16:00:00Z',
      '2024-12-31T15:00:00Z',
      '2025-01-14T15:00:00.000Z',
    ],
  ])('%s', (_case, zone, at, segmentFrom, changeDay) => {
    expect(planChangeDay(d(at), d(segmentFrom), zone).toISOString()).toBe(changeDay);
  });
});

describe('terminationBilledUntil: the termination day is billed', () => {
  it.each([
    // case, zone, terminated at, period end -> billed until
    ['mid-period', 'UTC', '2025-01-10T15:00:00Z', '2025-02-01T00:00:00Z', '2025-01-11T00:00:00.000Z'],
    ['on the last day of the period', 'UTC', '2025-01-31T15:00:00Z', '2025-02-01T00:00:00Z', '2025-02-01T00:00:00.000Z'],
    ['on the Paris DST change day (autumn)', 'Europe/Paris', '2025-10-26T10:00:00Z', '2025-10-31T23:00:00Z', '2025-10-26T23:00:00.000Z'],
    ['after midnight in Tokyo', 'Asia/Tokyo', '2025-01-10T16:00:00Z', '2025-01-31T15:00:00Z', '2025-01-11T15:00:00.000Z'],
  ])('%s', (_case, zone, at, periodTo, billedUntil) => {
    expect(terminationBilledUntil(d(at), d(periodTo), zone).toISOString()).toBe(billedUntil);
  });
});

describe('a step split into segments', () => {
  const monthly = (amount: number, anchor = '2025-01-01T00:00:00Z', zone = 'UTC') => ({
    schedule: schedule('monthly', 'calendar', anchor, zone),
    amountCents: amount,
    trialEndsAt: null,
  });
  const fee = (s: ReturnType<typeof prorateSegment>) => (s ? `${s.usedDays}/${s.periodDays} ${s.baseFee.toFixed(4)}` : null);

  it.each([
    // case, zone, period, event at, old plan amount, new plan amount (upgrades) -> before, after
    // billing-rules.md: terminated Jan 10 on a 31-day period, 10 days used, 21 credited.
    [
      'termination mid-period',
      'UTC',
      ['2025-01-01T00:00:00Z', '2025-02-01T00:00:00Z'],
      '2025-01-10T15:00:00Z',
      3100,
      null,
      '10/31 1000.0000',
      '21/31 2100.0000',
    ],
    [
      'termination on the Paris DST change day',
      'Europe/Paris',
      ['2025-02-28T23:00:00Z', '2025-03-31T22:00:00Z'],
      '2025-03-30T13:00:00Z',
      3100,
      null,
      '30/31 3000.0000',
      '1/31 100.0000',
    ],
    [
      'termination on the last day',
      'UTC',
      ['2025-01-01T00:00:00Z', '2025-02-01T00:00:00Z'],
      '2025-01-31T15:00:00Z',
      3100,
      null,
      '31/31 3100.0000',
      null,
    ],
    // billing-rules.md: upgrade on Jan 15 of a 10000-cent monthly plan, 10000 * 14 / 31 = 4516.
    [
      'upgrade mid-period',
      'UTC',
      ['2025-01-01T00:00:00Z', '2025-02-01T00:00:00Z'],
      '2025-01-15T10:00:00Z',
      10000,
      20000,
      '14/31 4516.1290',
      '17/31 10967.7419',
    ],
    [
      'upgrade on the period start',
      'UTC',
      ['2025-02-01T00:00:00Z', '2025-03-01T00:00:00Z'],
      '2025-02-01T10:00:00Z',
      2000,
      2800,
      null,
      '28/28 2800.0000',
    ],
  ] as const)('%s', (_case, zone, [periodFrom, periodTo], at, oldAmount, newAmount, before, after) => {
    const anchor = zone === 'UTC' ? '2025-01-01T00:00:00Z' : '2024-12-31T23:00:00Z';
    const period = { periodFrom: d(periodFrom), to: d(periodTo) };
    const split = newAmount === null ? terminationBilledUntil(d(at), period.to, zone) : planChangeDay(d(at), period.periodFrom, zone);
    const used = prorateSegment({ ...monthly(oldAmount, anchor, zone), periodFrom: period.periodFrom, from: period.periodFrom, to: split });
    const rest = prorateSegment({
      ...monthly(newAmount ?? oldAmount, anchor, zone),
      periodFrom: period.periodFrom,
      from: split,
      to: period.to,
    });
    expect([fee(used), fee(rest)]).toEqual([before, after]);
  });
});

describe('unusedCredit', () => {
  it.each([
    // case, unused (prorated base fee), fee amount, fee total with taxes, already credited -> credit note
    ['no taxes', '2100.0000', '3100', '3100', '0', '2100'],
    ['with the taxes share (20 %)', '2100.0000', '3100', '3720', '0', '2520'],
    ['whole cents, half up', '1451.6129', '4500', '4500', '0', '1452'],
    ['never more than what is left', '2100.0000', '3100', '3100', '1500', '1600'],
    ['nothing left: no credit note', '2100.0000', '3100', '3100', '3100', null],
    ['a free fee: no credit note', '0', '0', '0', '0', null],
  ])('%s', (_case, unused, amount, total, credited, expected) => {
    const credit = unusedCredit(dec(unused), { amount: dec(amount), total: dec(total), credited: dec(credited) });
    expect(credit === null ? null : credit.toFixed(0)).toBe(expected);
  });
});
