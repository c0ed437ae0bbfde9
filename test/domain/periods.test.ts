import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { roundCents } from '../../src/domain/money';
import {
  countDays,
  fullPeriodContaining,
  fullPeriodDays,
  InvalidTimezone,
  listEndedPeriods,
  listPeriods,
  nextBoundary,
  PeriodBeforeStart,
  periodContaining,
  periodStart,
  prorate,
  startOfLocalDay,
  startOfLocalDayAfter,
  startOfNextLocalDay,
  type BillingInterval,
  type BillingSchedule,
  type BillingTime,
} from '../../src/domain/periods';

// Expected instants are written with explicit offsets, independently of luxon, so a wrong zone
// rule in the code cannot also be in the expectation.
const d = (iso: string): Date => new Date(iso);
const iso = (date: Date): string => date.toISOString();

function schedule(interval: BillingInterval, billingTime: BillingTime, anchor: string, timezone = 'UTC'): BillingSchedule {
  return { interval, billingTime, anchor: d(anchor), timezone };
}

describe('periodContaining', () => {
  const cases: Array<{
    name: string;
    schedule: BillingSchedule;
    at: string;
    from: string;
    to: string;
    days: number;
  }> = [
    {
      name: 'calendar monthly: the first period starts at started_at',
      schedule: schedule('monthly', 'calendar', '2024-05-15T10:00:00Z'),
      at: '2024-05-20T00:00:00Z',
      from: '2024-05-15T10:00:00Z',
      to: '2024-06-01T00:00:00Z',
      days: 31,
    },
    {
      name: 'calendar monthly: a later full month',
      schedule: schedule('monthly', 'calendar', '2024-05-15T10:00:00Z'),
      at: '2024-06-30T23:59:59.999Z',
      from: '2024-06-01T00:00:00Z',
      to: '2024-07-01T00:00:00Z',
      days: 30,
    },
    {
      name: 'calendar monthly: an instant on a boundary opens the next period (half-open)',
      schedule: schedule('monthly', 'calendar', '2024-05-15T10:00:00Z'),
      at: '2024-07-01T00:00:00Z',
      from: '2024-07-01T00:00:00Z',
      to: '2024-08-01T00:00:00Z',
      days: 31,
    },
    {
      name: 'calendar monthly: February of a leap year',
      schedule: schedule('monthly', 'calendar', '2024-01-01T00:00:00Z'),
      at: '2024-02-29T12:00:00Z',
      from: '2024-02-01T00:00:00Z',
      to: '2024-03-01T00:00:00Z',
      days: 29,
    },
    {
      name: 'calendar weekly: first period from a Wednesday to Monday',
      schedule: schedule('weekly', 'calendar', '2026-03-04T12:00:00Z'),
      at: '2026-03-05T00:00:00Z',
      from: '2026-03-04T12:00:00Z',
      to: '2026-03-09T00:00:00Z',
      days: 7,
    },
    {
      name: 'calendar weekly: Monday to Monday',
      schedule: schedule('weekly', 'calendar', '2026-03-04T12:00:00Z'),
      at: '2026-03-15T23:00:00Z',
      from: '2026-03-09T00:00:00Z',
      to: '2026-03-16T00:00:00Z',
      days: 7,
    },
    {
      name: 'calendar quarterly: April to July',
      schedule: schedule('quarterly', 'calendar', '2026-01-10T00:00:00Z'),
      at: '2026-05-20T00:00:00Z',
      from: '2026-04-01T00:00:00Z',
      to: '2026-07-01T00:00:00Z',
      days: 91,
    },
    {
      name: 'calendar quarterly: first quarter of a leap year has 91 days',
      schedule: schedule('quarterly', 'calendar', '2023-12-10T00:00:00Z'),
      at: '2024-03-31T00:00:00Z',
      from: '2024-01-01T00:00:00Z',
      to: '2024-04-01T00:00:00Z',
      days: 91,
    },
    {
      name: 'calendar yearly: a leap year has 366 days',
      schedule: schedule('yearly', 'calendar', '2023-06-01T00:00:00Z'),
      at: '2024-07-01T00:00:00Z',
      from: '2024-01-01T00:00:00Z',
      to: '2025-01-01T00:00:00Z',
      days: 366,
    },
    {
      name: 'anniversary monthly on Jan 31: first period ends on Feb 29 (leap)',
      schedule: schedule('monthly', 'anniversary', '2024-01-31T09:00:00Z'),
      at: '2024-02-15T00:00:00Z',
      from: '2024-01-31T09:00:00Z',
      to: '2024-02-29T00:00:00Z',
      days: 29,
    },
    {
      name: 'anniversary monthly on Jan 31: Feb 29 to Mar 31, the day is not lost',
      schedule: schedule('monthly', 'anniversary', '2024-01-31T09:00:00Z'),
      at: '2024-03-01T00:00:00Z',
      from: '2024-02-29T00:00:00Z',
      to: '2024-03-31T00:00:00Z',
      days: 31,
    },
    {
      name: 'anniversary monthly on Jan 31: Mar 31 to Apr 30',
      schedule: schedule('monthly', 'anniversary', '2024-01-31T09:00:00Z'),
      at: '2024-04-29T23:59:59.999Z',
      from: '2024-03-31T00:00:00Z',
      to: '2024-04-30T00:00:00Z',
      days: 30,
    },
    {
      name: 'anniversary monthly on Jan 31: Apr 30 to May 31',
      schedule: schedule('monthly', 'anniversary', '2024-01-31T09:00:00Z'),
      at: '2024-04-30T00:00:00Z',
      from: '2024-04-30T00:00:00Z',
      to: '2024-05-31T00:00:00Z',
      days: 31,
    },
    {
      name: 'anniversary monthly on Jan 31 of a common year: Feb 28 to Mar 31',
      schedule: schedule('monthly', 'anniversary', '2023-01-31T00:00:00Z'),
      at: '2023-03-15T00:00:00Z',
      from: '2023-02-28T00:00:00Z',
      to: '2023-03-31T00:00:00Z',
      days: 31,
    },
    {
      name: 'anniversary weekly: Wednesday to Wednesday',
      schedule: schedule('weekly', 'anniversary', '2026-03-04T12:00:00Z'),
      at: '2026-03-17T08:00:00Z',
      from: '2026-03-11T00:00:00Z',
      to: '2026-03-18T00:00:00Z',
      days: 7,
    },
    {
      name: 'anniversary quarterly on Nov 30: Feb 28 to May 30, not May 28',
      schedule: schedule('quarterly', 'anniversary', '2025-11-30T00:00:00Z'),
      at: '2026-03-15T00:00:00Z',
      from: '2026-02-28T00:00:00Z',
      to: '2026-05-30T00:00:00Z',
      days: 91,
    },
    {
      name: 'anniversary yearly on Feb 29: a common year starts on Feb 28',
      schedule: schedule('yearly', 'anniversary', '2024-02-29T00:00:00Z'),
      at: '2025-03-01T00:00:00Z',
      from: '2025-02-28T00:00:00Z',
      to: '2026-02-28T00:00:00Z',
      days: 365,
    },
    {
      name: 'anniversary yearly on Feb 29: back on Feb 29 in the next leap year',
      schedule: schedule('yearly', 'anniversary', '2024-02-29T00:00:00Z'),
      at: '2027-06-01T00:00:00Z',
      from: '2027-02-28T00:00:00Z',
      to: '2028-02-29T00:00:00Z',
      days: 366,
    },
    {
      name: 'Europe/Paris: the month of the 23-hour day keeps local midnights',
      schedule: schedule('monthly', 'calendar', '2026-01-01T00:00:00+01:00', 'Europe/Paris'),
      at: '2026-03-29T12:00:00+02:00',
      from: '2026-03-01T00:00:00+01:00',
      to: '2026-04-01T00:00:00+02:00',
      days: 31,
    },
    {
      name: 'Europe/Paris: a week of 167 hours is still 7 days',
      schedule: schedule('weekly', 'calendar', '2026-01-01T00:00:00+01:00', 'Europe/Paris'),
      at: '2026-03-29T01:30:00+01:00',
      from: '2026-03-23T00:00:00+01:00',
      to: '2026-03-30T00:00:00+02:00',
      days: 7,
    },
    {
      name: 'Europe/Paris: a week of 169 hours (25-hour day on Oct 25) is still 7 days',
      schedule: schedule('weekly', 'anniversary', '2026-10-19T10:00:00+02:00', 'Europe/Paris'),
      at: '2026-10-25T23:59:00+01:00',
      from: '2026-10-19T10:00:00+02:00',
      to: '2026-10-26T00:00:00+01:00',
      days: 7,
    },
    {
      name: 'America/New_York: weekly anniversary across the spring change',
      schedule: schedule('weekly', 'anniversary', '2026-03-01T10:00:00-05:00', 'America/New_York'),
      at: '2026-03-08T12:00:00-04:00',
      from: '2026-03-08T00:00:00-05:00',
      to: '2026-03-15T00:00:00-04:00',
      days: 7,
    },
    {
      name: 'America/New_York: November (fall change) has 30 days',
      schedule: schedule('monthly', 'calendar', '2026-01-15T00:00:00-05:00', 'America/New_York'),
      at: '2026-11-01T01:30:00-05:00',
      from: '2026-11-01T00:00:00-04:00',
      to: '2026-12-01T00:00:00-05:00',
      days: 30,
    },
    {
      name: 'Pacific/Auckland: a January UTC instant already belongs to February',
      schedule: schedule('monthly', 'calendar', '2025-06-01T00:00:00+12:00', 'Pacific/Auckland'),
      at: '2026-01-31T12:00:00Z',
      from: '2026-02-01T00:00:00+13:00',
      to: '2026-03-01T00:00:00+13:00',
      days: 28,
    },
    {
      name: 'Pacific/Auckland: April, when daylight saving ends',
      schedule: schedule('monthly', 'calendar', '2025-06-01T00:00:00+12:00', 'Pacific/Auckland'),
      at: '2026-04-05T12:00:00+12:00',
      from: '2026-04-01T00:00:00+13:00',
      to: '2026-05-01T00:00:00+12:00',
      days: 30,
    },
    {
      name: 'America/Los_Angeles: a March UTC instant still belongs to February',
      schedule: schedule('monthly', 'calendar', '2025-06-01T00:00:00-07:00', 'America/Los_Angeles'),
      at: '2026-03-01T05:00:00Z',
      from: '2026-02-01T00:00:00-08:00',
      to: '2026-03-01T00:00:00-08:00',
      days: 28,
    },
    {
      name: 'Asia/Kolkata (+05:30): 00:30 local on Jul 1 opens the third quarter',
      schedule: schedule('quarterly', 'calendar', '2026-01-01T00:00:00+05:30', 'Asia/Kolkata'),
      at: '2026-06-30T19:00:00Z',
      from: '2026-07-01T00:00:00+05:30',
      to: '2026-10-01T00:00:00+05:30',
      days: 92,
    },
    {
      name: 'Asia/Kolkata (+05:30): one millisecond earlier is still the second quarter',
      schedule: schedule('quarterly', 'calendar', '2026-01-01T00:00:00+05:30', 'Asia/Kolkata'),
      at: '2026-06-30T18:29:59.999Z',
      from: '2026-04-01T00:00:00+05:30',
      to: '2026-07-01T00:00:00+05:30',
      days: 91,
    },
    {
      name: 'America/Santiago: a boundary on a day without midnight starts at 01:00',
      schedule: schedule('monthly', 'anniversary', '2024-08-08T12:00:00-04:00', 'America/Santiago'),
      at: '2024-09-08T12:00:00-03:00',
      from: '2024-09-08T01:00:00-03:00',
      to: '2024-10-08T00:00:00-03:00',
      days: 30,
    },
  ];

  it.each(cases)('$name', ({ schedule: s, at, from, to, days }) => {
    const period = periodContaining({ ...s, at: d(at) });
    expect(iso(period.from)).toBe(iso(d(from)));
    expect(iso(period.to)).toBe(iso(d(to)));
    expect(fullPeriodDays({ ...s, at: d(at) })).toBe(days);
  });

  it('refuses an instant before the subscription started', () => {
    const s = schedule('monthly', 'calendar', '2024-05-15T10:00:00Z');
    expect(() => periodContaining({ ...s, at: d('2024-05-15T09:59:59.999Z') })).toThrow(PeriodBeforeStart);
  });

  it('refuses an unknown time zone', () => {
    const s = schedule('monthly', 'calendar', '2024-05-15T10:00:00Z', 'Mars/Olympus_Mons');
    expect(() => periodContaining({ ...s, at: d('2024-06-01T00:00:00Z') })).toThrow(InvalidTimezone);
  });
});

describe('periodStart and fullPeriodContaining', () => {
  it('give the whole calendar period, before started_at, as the proration base', () => {
    const s = schedule('monthly', 'calendar', '2024-05-15T10:00:00Z');
    const at = d('2024-05-20T00:00:00Z');
    expect(iso(periodStart({ ...s, at }))).toBe('2024-05-01T00:00:00.000Z');
    expect(iso(fullPeriodContaining({ ...s, at }).to)).toBe('2024-06-01T00:00:00.000Z');
  });

  it('give the anchor local date midnight for an anniversary first period', () => {
    const s = schedule('monthly', 'anniversary', '2026-03-10T15:00:00+05:30', 'Asia/Kolkata');
    expect(iso(periodStart({ ...s, at: d('2026-03-20T00:00:00Z') }))).toBe(iso(d('2026-03-10T00:00:00+05:30')));
  });
});

describe('nextBoundary', () => {
  const s = schedule('monthly', 'calendar', '2024-05-15T10:00:00Z');
  it.each([
    { at: '2024-05-15T10:00:00Z', next: '2024-06-01T00:00:00Z' },
    { at: '2024-05-31T23:59:59.999Z', next: '2024-06-01T00:00:00Z' },
    // strictly after: an instant on a boundary gets the following one
    { at: '2024-06-01T00:00:00Z', next: '2024-07-01T00:00:00Z' },
    // a pending subscription's first boundary is its start
    { at: '2024-05-01T00:00:00Z', next: '2024-05-15T10:00:00Z' },
  ])('after $at is $next', ({ at, next }) => {
    expect(iso(nextBoundary({ ...s, at: d(at) }))).toBe(iso(d(next)));
  });
});

describe('countDays', () => {
  it.each([
    { name: 'May 15 10:00 to Jun 1', from: '2024-05-15T10:00:00Z', to: '2024-06-01T00:00:00Z', tz: 'UTC', days: 17 },
    { name: 'a partial end day counts (Jan 10 12:00)', from: '2024-01-01T00:00:00Z', to: '2024-01-10T12:00:00Z', tz: 'UTC', days: 10 },
    { name: 'an end on midnight does not touch that date', from: '2024-01-01T00:00:00Z', to: '2024-01-10T00:00:00Z', tz: 'UTC', days: 9 },
    { name: 'two minutes across midnight touch two dates', from: '2024-01-01T23:59:00Z', to: '2024-01-02T00:01:00Z', tz: 'UTC', days: 2 },
    { name: 'one millisecond is one day', from: '2024-01-01T12:00:00Z', to: '2024-01-01T12:00:00.001Z', tz: 'UTC', days: 1 },
    { name: 'empty range', from: '2024-01-01T12:00:00Z', to: '2024-01-01T12:00:00Z', tz: 'UTC', days: 0 },
    { name: 'inverted range', from: '2024-01-02T00:00:00Z', to: '2024-01-01T00:00:00Z', tz: 'UTC', days: 0 },
    { name: 'leap February', from: '2024-02-01T00:00:00Z', to: '2024-03-01T00:00:00Z', tz: 'UTC', days: 29 },
    { name: 'leap year', from: '2024-01-01T00:00:00Z', to: '2025-01-01T00:00:00Z', tz: 'UTC', days: 366 },
    { name: 'Paris 23-hour day', from: '2026-03-29T00:00:00+01:00', to: '2026-03-30T00:00:00+02:00', tz: 'Europe/Paris', days: 1 },
    { name: 'Paris 25-hour day', from: '2026-10-25T00:00:00+02:00', to: '2026-10-26T00:00:00+01:00', tz: 'Europe/Paris', days: 1 },
    { name: 'New York 23-hour day', from: '2026-03-08T00:00:00-05:00', to: '2026-03-09T00:00:00-04:00', tz: 'America/New_York', days: 1 },
    { name: 'New York 25-hour day', from: '2026-11-01T00:00:00-04:00', to: '2026-11-02T00:00:00-05:00', tz: 'America/New_York', days: 1 },
    // The same UTC range is 2 local dates in Auckland but 1 in UTC.
    { name: 'Auckland sees two dates', from: '2026-01-31T10:00:00Z', to: '2026-01-31T12:00:00Z', tz: 'Pacific/Auckland', days: 2 },
    { name: 'the same range in UTC is one date', from: '2026-01-31T10:00:00Z', to: '2026-01-31T12:00:00Z', tz: 'UTC', days: 1 },
    { name: 'Kolkata half-hour offset', from: '2026-06-30T18:00:00Z', to: '2026-06-30T18:45:00Z', tz: 'Asia/Kolkata', days: 2 },
    {
      name: 'Los Angeles evening is still the same date',
      from: '2026-03-01T01:00:00Z',
      to: '2026-03-01T07:59:00Z',
      tz: 'America/Los_Angeles',
      days: 1,
    },
  ])('$name: $days', ({ from, to, tz, days }) => {
    expect(countDays(d(from), d(to), tz)).toBe(days);
  });
});

describe('local day helpers', () => {
  it('find the local midnights around an instant', () => {
    const at = d('2026-03-29T12:00:00+02:00');
    expect(iso(startOfLocalDay(at, 'Europe/Paris'))).toBe(iso(d('2026-03-29T00:00:00+01:00')));
    expect(iso(startOfNextLocalDay(at, 'Europe/Paris'))).toBe(iso(d('2026-03-30T00:00:00+02:00')));
  });

  it('startOfLocalDayAfter: the local midnight n dates after, across a DST change (the end of n billed dates)', () => {
    // From March 20 (CET) 10 dates: March 20..29, ending at March 30 00:00 CEST.
    const at = d('2026-03-20T15:00:00+01:00');
    expect(iso(startOfLocalDayAfter(at, 10, 'Europe/Paris'))).toBe(iso(d('2026-03-30T00:00:00+02:00')));
    expect(iso(startOfLocalDayAfter(at, 0, 'Europe/Paris'))).toBe(iso(d('2026-03-20T00:00:00+01:00')));
    expect(countDays(at, startOfLocalDayAfter(at, 10, 'Europe/Paris'), 'Europe/Paris')).toBe(10);
    expect(() => startOfLocalDayAfter(at, 1.5, 'Europe/Paris')).toThrow(RangeError);
  });
});

describe('prorate', () => {
  it.each([
    { amount: '3100', used: 17, period: 31, expected: '1700' },
    { amount: '10000', used: 14, period: 31, expected: '4516.129' },
    { amount: '10000', used: 1, period: 3, expected: '3333.3333' },
    { amount: '2', used: 1, period: 3, expected: '0.6667' },
    // 0.03125: half up gives 0.0313 where banker's rounding would give 0.0312
    { amount: '1', used: 1, period: 32, expected: '0.0313' },
    { amount: '3100', used: 0, period: 31, expected: '0' },
    { amount: '3100', used: 31, period: 31, expected: '3100' },
    { amount: '0.05', used: 1, period: 2, expected: '0.025' },
  ])('$amount * $used / $period = $expected', ({ amount, used, period, expected }) => {
    expect(prorate(amount, used, period).toString()).toBe(expected);
  });

  it('gives the invoice example in whole cents: 10000 * 14 / 31 = 4516', () => {
    expect(roundCents(prorate(10000, 14, 31)).toString()).toBe('4516');
  });

  it('rejects impossible day counts', () => {
    expect(() => prorate(100, 1, 0)).toThrow(RangeError);
    expect(() => prorate(100, -1, 31)).toThrow(RangeError);
    expect(() => prorate(100, 1.5, 31)).toThrow(RangeError);
  });

  it('reproduces the billing-rules example end to end (May 15 start, 3100 monthly)', () => {
    const s = schedule('monthly', 'calendar', '2024-05-15T18:30:00-07:00', 'America/Los_Angeles');
    const at = s.anchor;
    const period = periodContaining({ ...s, at });
    const used = countDays(period.from, period.to, s.timezone);
    expect(used).toBe(17);
    expect(prorate(3100, used, fullPeriodDays({ ...s, at })).toString()).toBe('1700');
  });
});

describe('listPeriods', () => {
  const s = schedule('monthly', 'anniversary', '2024-01-31T09:00:00Z');

  it('enumerates the Jan 31 anniversary periods in order', () => {
    const periods = listPeriods({ ...s, from: d('2023-12-01T00:00:00Z'), until: d('2024-06-15T00:00:00Z') });
    expect(periods.map((p) => [iso(p.from), iso(p.to)])).toEqual([
      ['2024-01-31T09:00:00.000Z', '2024-02-29T00:00:00.000Z'],
      ['2024-02-29T00:00:00.000Z', '2024-03-31T00:00:00.000Z'],
      ['2024-03-31T00:00:00.000Z', '2024-04-30T00:00:00.000Z'],
      ['2024-04-30T00:00:00.000Z', '2024-05-31T00:00:00.000Z'],
      ['2024-05-31T00:00:00.000Z', '2024-06-30T00:00:00.000Z'],
    ]);
  });

  it('starts with the period containing `from` and is empty for an empty range', () => {
    const periods = listPeriods({ ...s, from: d('2024-04-10T00:00:00Z'), until: d('2024-04-30T00:00:00.001Z') });
    expect(periods.map((p) => iso(p.from))).toEqual(['2024-03-31T00:00:00.000Z', '2024-04-30T00:00:00.000Z']);
    expect(listPeriods({ ...s, from: d('2024-04-10T00:00:00Z'), until: d('2024-04-10T00:00:00Z') })).toEqual([]);
  });

  it('lists only the ended periods of a subscription started in the past', () => {
    const ended = listEndedPeriods({ ...s, until: d('2024-05-31T00:00:00Z') });
    expect(ended.map((p) => iso(p.to))).toEqual([
      '2024-02-29T00:00:00.000Z',
      '2024-03-31T00:00:00.000Z',
      '2024-04-30T00:00:00.000Z',
      '2024-05-31T00:00:00.000Z',
    ]);
    expect(listEndedPeriods({ ...s, until: d('2024-02-28T23:59:59.999Z') })).toEqual([]);
  });
});

describe('period invariants (property-based)', () => {
  const zones = [
    'UTC',
    'Europe/Paris',
    'America/New_York',
    'America/Los_Angeles',
    'Pacific/Auckland',
    'Asia/Kolkata',
    'America/Santiago',
    'Australia/Lord_Howe',
  ];
  const scheduleArb = fc.record({
    interval: fc.constantFrom<BillingInterval>('weekly', 'monthly', 'quarterly', 'yearly'),
    billingTime: fc.constantFrom<BillingTime>('calendar', 'anniversary'),
    anchor: fc.date({ min: d('2000-01-01T00:00:00Z'), max: d('2040-01-01T00:00:00Z'), noInvalidDate: true }),
    timezone: fc.constantFrom(...zones),
  });
  const withOffset = fc.tuple(scheduleArb, fc.integer({ min: 0, max: 3 * 366 * 86_400_000 }));
  const dayBounds: Record<BillingInterval, [number, number]> = {
    weekly: [7, 7],
    monthly: [28, 31],
    quarterly: [89, 92],
    yearly: [365, 366],
  };

  it('the period containing `at` contains it, and the next one starts where it ends', () => {
    fc.assert(
      fc.property(withOffset, ([s, offset]) => {
        const at = new Date(s.anchor.getTime() + offset);
        const period = periodContaining({ ...s, at });
        expect(period.from.getTime()).toBeLessThanOrEqual(at.getTime());
        expect(period.to.getTime()).toBeGreaterThan(at.getTime());
        expect(period.from.getTime()).toBeGreaterThanOrEqual(s.anchor.getTime());
        expect(nextBoundary({ ...s, at }).getTime()).toBe(period.to.getTime());
        const next = periodContaining({ ...s, at: period.to });
        expect(next.from.getTime()).toBe(period.to.getTime());
        // every boundary after the start is a local midnight
        expect(startOfLocalDay(period.to, s.timezone).getTime()).toBe(period.to.getTime());
        const [min, max] = dayBounds[s.interval];
        const days = fullPeriodDays({ ...s, at });
        expect(days).toBeGreaterThanOrEqual(min);
        expect(days).toBeLessThanOrEqual(max);
        expect(countDays(period.from, period.to, s.timezone)).toBeLessThanOrEqual(days);
      }),
      { numRuns: 300 },
    );
  });

  it('listed periods tile [from, until) without gap or overlap', () => {
    fc.assert(
      fc.property(withOffset, fc.integer({ min: 1, max: 400 * 86_400_000 }), ([s, offset], length) => {
        const from = new Date(s.anchor.getTime() + offset);
        const until = new Date(from.getTime() + length);
        const periods = listPeriods({ ...s, from, until });
        expect(periods.length).toBeGreaterThan(0);
        const first = periods[0]!;
        const last = periods[periods.length - 1]!;
        expect(first.from.getTime()).toBeLessThanOrEqual(from.getTime());
        expect(first.to.getTime()).toBeGreaterThan(from.getTime());
        expect(last.to.getTime()).toBeGreaterThanOrEqual(until.getTime());
        expect(last.from.getTime()).toBeLessThan(until.getTime());
        for (let i = 1; i < periods.length; i += 1) {
          expect(periods[i]!.from.getTime()).toBe(periods[i - 1]!.to.getTime());
          expect(periods[i]!.to.getTime()).toBeGreaterThan(periods[i]!.from.getTime());
        }
      }),
      { numRuns: 150 },
    );
  });

  it('monthly anniversary periods start on the anchor day, or the month end when shorter', () => {
    fc.assert(
      fc.property(
        fc.date({ min: d('2000-01-01T00:00:00Z'), max: d('2040-01-01T00:00:00Z'), noInvalidDate: true }),
        fc.integer({ min: 0, max: 5 * 366 * 86_400_000 }),
        (anchor, offset) => {
          const s = { interval: 'monthly' as const, billingTime: 'anniversary' as const, anchor, timezone: 'UTC' };
          const start = periodStart({ ...s, at: new Date(anchor.getTime() + offset) });
          const lastDayOfMonth = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 0)).getUTCDate();
          expect(start.getUTCDate()).toBe(Math.min(anchor.getUTCDate(), lastDayOfMonth));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('day counts add up across a split, minus the shared date when split mid-day', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...zones),
        fc.date({ min: d('2000-01-01T00:00:00Z'), max: d('2040-01-01T00:00:00Z'), noInvalidDate: true }),
        fc.integer({ min: 1, max: 60 * 86_400_000 }),
        fc.integer({ min: 1, max: 60 * 86_400_000 }),
        (tz, a, first, second) => {
          const b = new Date(a.getTime() + first);
          const c = new Date(b.getTime() + second);
          const shared = startOfLocalDay(b, tz).getTime() === b.getTime() ? 0 : 1;
          expect(countDays(a, c, tz)).toBe(countDays(a, b, tz) + countDays(b, c, tz) - shared);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a prorated amount stays between zero and the full amount', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 1, max: 366 }),
        fc.integer({ min: 0, max: 366 }),
        (amount, period, usedRaw) => {
          const used = usedRaw % (period + 1);
          const fee = prorate(amount, used, period);
          expect(fee.greaterThanOrEqualTo(0)).toBe(true);
          expect(fee.lessThanOrEqualTo(amount)).toBe(true);
          expect(fee.decimalPlaces()).toBeLessThanOrEqual(4);
          if (used === period) expect(fee.toNumber()).toBe(amount);
        },
      ),
    );
  });
});
