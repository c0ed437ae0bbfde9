import { describe, expect, it } from 'vitest';
import { AGGREGATION_TYPES, aggregate, type AggregationType } from '../../../src/domain/aggregation';
import { ev, march, metric } from './helpers';

/** One event set, every aggregation: the dispatch must reach the right module for each type. */
const events = [
  ev('2024-03-16T00:00:00Z', { value: 20, user_id: 'a' }),
  ev('2024-03-18T00:00:00Z', { value: 10, user_id: 'b' }),
  ev('2024-03-20T00:00:00Z', { value: 'n/a', user_id: 'a' }),
];

describe('aggregate', () => {
  it.each<[AggregationType, string, number]>([
    ['count', '3', 3],
    ['sum', '30', 2],
    ['max', '20', 2],
    ['unique_count', '2', 3],
    ['weighted_sum', '14.83870967741935483871', 2],
    ['latest', '10', 2],
    ['custom', '30', 2],
  ])('%s -> %s units from %i events', (aggregation_type, units, eventsCount) => {
    const field_name = aggregation_type === 'unique_count' ? 'user_id' : 'value';
    const result = aggregate(metric({ aggregation_type, field_name }), events, march);
    expect(result.units.toFixed()).toBe(units);
    expect(result.eventsCount).toBe(eventsCount);
  });

  it('covers every aggregation type', () => {
    expect([...AGGREGATION_TYPES].sort()).toEqual(['count', 'custom', 'latest', 'max', 'sum', 'unique_count', 'weighted_sum']);
  });

  it('returns the closing level of a weighted sum only', () => {
    expect(aggregate(metric({ aggregation_type: 'weighted_sum' }), events, march).closingLevel?.toFixed()).toBe('30');
    expect(aggregate(metric({ aggregation_type: 'sum' }), events, march).closingLevel).toBeUndefined();
  });

  it('gives the dynamic model the period events even when the metric carries over', () => {
    const all = [ev('2024-02-10T00:00:00Z', { value: 1 }), ...events];
    const result = aggregate(metric({ aggregation_type: 'sum', recurring: true }), all, march);
    expect(result.units.toFixed()).toBe('31');
    expect(result.events).toHaveLength(3);
  });

  it('throws on an unknown type that slipped past validation', () => {
    expect(() => aggregate(metric({ aggregation_type: 'sum_agg' as AggregationType }), events, march)).toThrow(
      /unknown aggregation_type sum_agg/,
    );
  });
});
