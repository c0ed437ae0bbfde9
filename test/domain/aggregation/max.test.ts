import { describe, expect, it } from 'vitest';
import { aggregate } from '../../../src/domain/aggregation';
import { ev, march, metric, strings } from './helpers';

const max = metric({ aggregation_type: 'max', field_name: 'seats' });

describe('max aggregation', () => {
  it.each([
    ['no events', [], '0', 0],
    [
      'Lago: 5, 7, 6 -> 7',
      [ev('2024-03-02T00:00:00Z', { seats: 5 }), ev('2024-03-03T00:00:00Z', { seats: 7 }), ev('2024-03-04T00:00:00Z', { seats: 6 })],
      '7',
      3,
    ],
    [
      'decimals compare exactly',
      [ev('2024-03-02T00:00:00Z', { seats: '7.0000000000000000001' }), ev('2024-03-03T00:00:00Z', { seats: 7 })],
      '7.0000000000000000001',
      2,
    ],
    [
      'all negative keeps the negative maximum',
      [ev('2024-03-02T00:00:00Z', { seats: -3 }), ev('2024-03-03T00:00:00Z', { seats: '-1.5' })],
      '-1.5',
      2,
    ],
    [
      'non-numeric values are ignored, even when "larger" as text',
      [
        ev('2024-03-02T00:00:00Z', { seats: 4 }),
        ev('2024-03-03T00:00:00Z', { seats: '99x' }),
        ev('2024-03-04T00:00:00Z', { seats: '1e9' }),
      ],
      '4',
      1,
    ],
    ['only non-numeric values -> 0', [ev('2024-03-02T00:00:00Z', { seats: 'many' })], '0', 0],
    [
      'a larger value outside the period does not count',
      [ev('2024-02-28T00:00:00Z', { seats: 50 }), ev('2024-03-02T00:00:00Z', { seats: 5 })],
      '5',
      1,
    ],
  ])('%s -> %s', (_label, events, units, eventsCount) => {
    const result = aggregate(max, events, march);
    expect(result.units.toFixed()).toBe(units);
    expect(result.eventsCount).toBe(eventsCount);
  });

  it('takes the maximum of the expression values', () => {
    const events = [
      ev('2024-03-02T00:00:00Z', { a: 2, b: 3 }),
      ev('2024-03-03T00:00:00Z', { a: 4, b: 1 }),
      ev('2024-03-04T00:00:00Z', { a: 100 }),
    ];
    const result = aggregate({ ...max, expression: 'a * b' }, events, march);
    expect(result.units.toFixed()).toBe('6');
    expect(strings(result.perEventValues)).toEqual(['6', '4']);
  });

  it('takes the maximum of a busy period: 200,000 events do not overflow the call stack', () => {
    const from = march.from.getTime();
    const events = Array.from({ length: 200_000 }, (_, i) => ({
      transactionId: `busy-${i}`,
      timestamp: new Date(from + i * 10_000),
      properties: { seats: i === 123_456 ? 5000 : i % 1000 },
    }));
    const result = aggregate(max, events, march);
    expect(result.units.toFixed()).toBe('5000');
    expect(result.eventsCount).toBe(200_000);
  });

  it('rounds the maximum', () => {
    const events = [ev('2024-03-02T00:00:00Z', { seats: '7.25' })];
    expect(aggregate({ ...max, rounding_function: 'ceil' }, events, march).units.toFixed()).toBe('8');
  });
});
