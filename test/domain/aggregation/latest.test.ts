import { describe, expect, it } from 'vitest';
import { aggregate } from '../../../src/domain/aggregation';
import { ev, march, metric, strings } from './helpers';

const latest = metric({ aggregation_type: 'latest', field_name: 'storage' });

describe('latest aggregation', () => {
  it.each([
    ['no events -> 0', [], '0', 0],
    [
      'Lago: 5, 7, 6 in time order -> 6',
      [ev('2024-03-02T00:00:00Z', { storage: 5 }), ev('2024-03-03T00:00:00Z', { storage: 7 }), ev('2024-03-04T00:00:00Z', { storage: 6 })],
      '6',
      3,
    ],
    [
      'by timestamp, not input order',
      [
        ev('2024-03-04T00:00:00Z', { storage: 6 }),
        ev('2024-03-09T00:00:00Z', { storage: '8.5' }),
        ev('2024-03-03T00:00:00Z', { storage: 7 }),
      ],
      '8.5',
      3,
    ],
    ['a negative latest value is 0', [ev('2024-03-02T00:00:00Z', { storage: 5 }), ev('2024-03-03T00:00:00Z', { storage: -2 })], '0', 2],
    [
      'a latest non-numeric event is skipped: the one before wins',
      [ev('2024-03-02T00:00:00Z', { storage: 5 }), ev('2024-03-03T00:00:00Z', { storage: 'n/a' })],
      '5',
      1,
    ],
    [
      'a later event outside the period does not count',
      [ev('2024-03-02T00:00:00Z', { storage: 5 }), ev('2024-04-01T00:00:00Z', { storage: 9 })],
      '5',
      1,
    ],
    ['an earlier event outside the period does not count', [ev('2024-02-20T00:00:00Z', { storage: 5 })], '0', 0],
  ])('%s', (_label, events, units, eventsCount) => {
    const result = aggregate(latest, events, march);
    expect(result.units.toFixed()).toBe(units);
    expect(result.eventsCount).toBe(eventsCount);
  });

  it('breaks timestamp ties by input (ingestion) order: the last given wins', () => {
    const t = '2024-03-05T10:00:00Z';
    expect(aggregate(latest, [ev(t, { storage: 1 }), ev(t, { storage: 2 })], march).units.toFixed()).toBe('2');
    expect(aggregate(latest, [ev(t, { storage: 2 }), ev(t, { storage: 1 })], march).units.toFixed()).toBe('1');
  });

  it('uses the expression and rounds the latest value', () => {
    const events = [ev('2024-03-02T00:00:00Z', { bytes: 3_000_000_000 }), ev('2024-03-03T00:00:00Z', { bytes: 1_610_612_736 })];
    const result = aggregate(
      { ...latest, expression: 'bytes / 1073741824', rounding_function: 'round', rounding_precision: 2 },
      events,
      march,
    );
    expect(result.units.toFixed()).toBe('1.5');
    expect(strings(result.perEventValues)[1]).toBe('1.5');
  });

  it('for current usage ignores events after now', () => {
    const events = [ev('2024-03-02T00:00:00Z', { storage: 5 }), ev('2024-03-20T00:00:00Z', { storage: 9 })];
    expect(aggregate(latest, events, { ...march, now: new Date('2024-03-10T00:00:00Z') }).units.toFixed()).toBe('5');
  });
});
