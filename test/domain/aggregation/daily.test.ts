import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  aggregate,
  aggregateDailyRows,
  canAggregateFromDaily,
  dailyContributionReader,
  dailyRollUpSupport,
  rollUpDaily,
  type AggregationMetric,
  type AggregationType,
} from '../../../src/domain/aggregation';
import { Dec } from '../../../src/domain/money';
import type { UsageEvent } from '../../../src/domain/usage-types';
import { ev, march, metric } from './helpers';

const utcDay = (t: Date) => t.toISOString().slice(0, 10);

describe('dailyRollUpSupport', () => {
  it.each<[AggregationType, string | null, boolean]>([
    ['count', null, true],
    ['sum', null, true],
    ['sum', 'a * 2 + b', true],
    ['sum', 'a / 3', false],
    ['custom', 'round(a * 1.5, 2) - min(b, 4)', true],
    ['custom', 'a / b', false],
    ['max', null, true],
    ['max', 'a / 3', true],
    ['unique_count', null, false],
    ['weighted_sum', null, false],
    ['latest', null, false],
  ])('%s with expression %j -> exact: %s', (aggregation_type, expression, exact) => {
    const m = metric({ aggregation_type, expression });
    expect(dailyRollUpSupport(m).exact).toBe(exact);
    expect(canAggregateFromDaily(m)).toBe(exact);
  });

  it('says how each exact type combines at ingestion, and why the others are not exact', () => {
    expect(dailyRollUpSupport(metric({ aggregation_type: 'max' }))).toEqual({ exact: true, combine: 'max' });
    expect(dailyRollUpSupport(metric({ aggregation_type: 'custom', expression: 'a' }))).toEqual({ exact: true, combine: 'add' });
    expect(dailyRollUpSupport(metric({ aggregation_type: 'weighted_sum' }))).toMatchObject({
      exact: false,
      reason: expect.stringContaining('time'),
    });
  });
});

describe('daily rows', () => {
  const events = [
    ev('2024-03-02T01:00:00Z', { value: 5 }),
    ev('2024-03-02T23:00:00Z', { value: '2.5' }),
    ev('2024-03-02T12:00:00Z', { value: 'x' }),
    ev('2024-03-05T00:00:00Z', { value: 1 }),
    ev('2024-03-07T00:00:00Z', {}),
  ];

  it.each<[AggregationType, string[], number[], string, number]>([
    ['count', ['3', '1', '1'], [3, 1, 1], '5', 5],
    ['sum', ['7.5', '1'], [2, 1], '8.5', 3],
    ['max', ['5', '1'], [2, 1], '5', 3],
  ])('%s: rows %j, total %s', (aggregation_type, values, counts, units, eventsCount) => {
    const m = metric({ aggregation_type });
    const rows = rollUpDaily(m, events, utcDay);
    expect(rows.map((r) => r.usage_value.toFixed())).toEqual(values);
    expect(rows.map((r) => r.events_count)).toEqual(counts);
    const fromRows = aggregateDailyRows(m, rows);
    expect(fromRows.units.toFixed()).toBe(units);
    expect(fromRows.eventsCount).toBe(eventsCount);
  });

  it('skips rows without events and gives 0 without rows', () => {
    const max = metric({ aggregation_type: 'max' });
    expect(aggregateDailyRows(max, []).units.toFixed()).toBe('0');
    const rows = [
      { usage_date: '2024-03-01', usage_value: new Dec(-3), events_count: 1 },
      { usage_date: '2024-03-02', usage_value: new Dec(0), events_count: 0 },
    ];
    expect(aggregateDailyRows(max, rows).units.toFixed()).toBe('-3');
  });

  it('applies the rounding to the rolled-up total, not per day', () => {
    const m = metric({ aggregation_type: 'sum', rounding_function: 'round' });
    const rows = [
      { usage_date: '2024-03-01', usage_value: new Dec('0.4'), events_count: 1 },
      { usage_date: '2024-03-02', usage_value: new Dec('0.4'), events_count: 1 },
    ];
    expect(aggregateDailyRows(m, rows).units.toFixed()).toBe('1');
  });

  it('refuses the aggregations a daily row cannot compute exactly', () => {
    for (const aggregation_type of ['unique_count', 'weighted_sum', 'latest'] as const) {
      expect(() => aggregateDailyRows(metric({ aggregation_type }), [])).toThrow(/cannot be aggregated from daily rows/);
      expect(() => rollUpDaily(metric({ aggregation_type }), events, utcDay)).toThrow();
    }
    expect(() => aggregateDailyRows(metric({ aggregation_type: 'custom', expression: 'value / 3' }), [])).toThrow();
  });

  it('tells ingestion what one event adds: $inc for sums and counts, $max for max, nothing when skipped', () => {
    const sum = dailyContributionReader(metric({ aggregation_type: 'sum' }));
    expect(sum(ev('2024-03-02T00:00:00Z', { value: '1.5' }))).toEqual({ combine: 'add', value: new Dec('1.5') });
    expect(sum(ev('2024-03-02T00:00:00Z', { value: 'x' }))).toBeNull();
    const count = dailyContributionReader(metric({ aggregation_type: 'count' }));
    expect(count(ev('2024-03-02T00:00:00Z', {}))?.value.toFixed()).toBe('1');
    const max = dailyContributionReader(metric({ aggregation_type: 'max', expression: 'value * 2' }));
    expect(max(ev('2024-03-02T00:00:00Z', { value: 4 }))).toEqual({ combine: 'max', value: new Dec(8) });
  });
});

const DAY = 86_400_000;
const propertyValue = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000 }),
  fc
    .tuple(fc.integer({ min: -99_999, max: 99_999 }), fc.integer({ min: 0, max: 9999 }))
    .map(([i, f]) => `${i}.${String(f).padStart(4, '0')}`),
  fc.constantFrom('abc', '1e3', '', null),
);
const randomEvent: fc.Arbitrary<UsageEvent> = fc
  .record({
    offset: fc.integer({ min: 0, max: 31 * DAY - 1 }),
    value: fc.option(propertyValue, { nil: undefined }),
    b: fc.option(fc.integer({ min: -50, max: 50 }), { nil: undefined }),
  })
  .map(({ offset, value, b }) => ({
    transactionId: `p-${offset}`,
    timestamp: new Date(march.from.getTime() + offset),
    properties: { ...(value === undefined ? {} : { value }), ...(b === undefined ? {} : { b }) },
  }));
const rollUpMetric: fc.Arbitrary<AggregationMetric> = fc
  .record({
    aggregation_type: fc.constantFrom<AggregationType>('count', 'sum', 'max', 'custom'),
    expression: fc.constantFrom(null, 'value * 3 - b', 'round(value * 1.5, 1) + abs(b)', 'max(value, b)'),
    recurring: fc.boolean(),
    rounding_function: fc.constantFrom(null, 'round', 'ceil', 'floor'),
    rounding_precision: fc.integer({ min: -2, max: 3 }),
  })
  .map((m) => ({ ...m, field_name: 'value', recurring: m.recurring && m.aggregation_type === 'sum' }));

describe('daily roll-up properties', () => {
  it('the roll-up of the period rows equals the raw aggregation (count, sum, max, custom without division)', () => {
    fc.assert(
      fc.property(rollUpMetric, fc.array(randomEvent, { maxLength: 60 }), (m, events) => {
        expect(canAggregateFromDaily(m)).toBe(true);
        const raw = aggregate(m, events, march);
        const fromRows = aggregateDailyRows(m, rollUpDaily(m, events, utcDay));
        expect(fromRows.units.toFixed()).toBe(raw.units.toFixed());
        expect(fromRows.eventsCount).toBe(raw.eventsCount);
      }),
      { numRuns: 500 },
    );
  });

  it('rows do not depend on the order events arrive in', () => {
    fc.assert(
      fc.property(rollUpMetric, fc.array(randomEvent, { maxLength: 30 }), fc.infiniteStream(fc.nat()), (m, events, seeds) => {
        const shuffled = [...events].sort(() => (seeds.next().value % 3) - 1);
        const key = (rows: ReturnType<typeof rollUpDaily>) =>
          rows.map((r) => `${String(r.usage_date)}=${r.usage_value.toFixed()}/${r.events_count}`);
        expect(key(rollUpDaily(m, shuffled, utcDay))).toEqual(key(rollUpDaily(m, events, utcDay)));
      }),
      { numRuns: 200 },
    );
  });
});
