import { describe, expect, it } from 'vitest';
import { aggregate, aggregateCount } from '../../../src/domain/aggregation';
import { ev, march, metric, strings } from './helpers';

const count = metric({ aggregation_type: 'count', field_name: null });

describe('count aggregation', () => {
  it.each([
    ['no events', [], 0],
    ['three events (Lago: 3 events -> 3)', [ev('2024-03-02T00:00:00Z'), ev('2024-03-03T00:00:00Z'), ev('2024-03-04T00:00:00Z')], 3],
    [
      'events without numeric properties still count',
      [ev('2024-03-02T00:00:00Z', { value: 'abc' }), ev('2024-03-02T00:00:00Z', {}), ev('2024-03-02T00:00:00Z', { value: null })],
      3,
    ],
    ['an event exactly at the period start counts', [ev('2024-03-01T00:00:00Z')], 1],
    ['an event exactly at the period end belongs to the next period', [ev('2024-04-01T00:00:00Z')], 0],
    ['an event one millisecond before the end counts', [ev('2024-03-31T23:59:59.999Z')], 1],
    ['an event before the period does not count', [ev('2024-02-29T23:59:59.999Z')], 0],
  ])('%s -> %i', (_label, events, expected) => {
    const result = aggregate(count, events, march);
    expect(result.units.toFixed()).toBe(String(expected));
    expect(result.eventsCount).toBe(expected);
    expect(strings(result.perEventValues)).toEqual(Array(expected).fill('1'));
  });

  it('ignores an expression and a field name: every event is one unit', () => {
    const events = [ev('2024-03-02T00:00:00Z', { value: 5 }), ev('2024-03-03T00:00:00Z', {})];
    const result = aggregateCount({ ...count, field_name: 'value', expression: 'value * 10' }, events, march);
    expect(result.units.toFixed()).toBe('2');
    expect(result.eventsCount).toBe(2);
  });

  it('is never recurring: events before the period do not count even if the flag is set', () => {
    const events = [ev('2024-02-10T00:00:00Z'), ev('2024-03-10T00:00:00Z')];
    expect(aggregate({ ...count, recurring: true }, events, march).units.toFixed()).toBe('1');
  });

  it('for current usage counts only events up to now (inclusive)', () => {
    const events = [ev('2024-03-02T00:00:00Z'), ev('2024-03-10T00:00:00Z'), ev('2024-03-10T00:00:00.001Z')];
    const result = aggregate(count, events, { ...march, now: new Date('2024-03-10T00:00:00Z') });
    expect(result.units.toFixed()).toBe('2');
  });

  it('applies rounding to the count (a negative precision rounds to hundreds)', () => {
    const events = Array.from({ length: 151 }, () => ev('2024-03-05T00:00:00Z'));
    expect(aggregate({ ...count, rounding_function: 'round', rounding_precision: -2 }, events, march).units.toFixed()).toBe('200');
    expect(aggregate({ ...count, rounding_function: 'floor', rounding_precision: -2 }, events, march).units.toFixed()).toBe('100');
    expect(aggregate(count, events, march).eventsCount).toBe(151);
  });

  it('returns the period events for the dynamic model, sorted by timestamp', () => {
    const late = ev('2024-03-20T00:00:00Z');
    const early = ev('2024-03-02T00:00:00Z');
    const outside = ev('2024-04-02T00:00:00Z');
    expect(aggregate(count, [late, outside, early], march).events).toEqual([early, late]);
  });
});
