import { describe, expect, it } from 'vitest';
import { aggregate } from '../../../src/domain/aggregation';
import type { RoundingFunction } from '../../../src/domain/aggregation';
import { ev, march, metric, strings } from './helpers';

const sum = metric({ aggregation_type: 'sum', field_name: 'gb' });

describe('sum aggregation', () => {
  it.each([
    ['no events', [], '0', 0],
    ['Lago docs: 20 + 10', [ev('2024-03-02T00:00:00Z', { gb: 20 }), ev('2024-03-03T00:00:00Z', { gb: 10 })], '30', 2],
    ['numeric strings', [ev('2024-03-02T00:00:00Z', { gb: '20.5' }), ev('2024-03-03T00:00:00Z', { gb: '-0.5' })], '20', 2],
    ['exact decimals: 0.1 + 0.2', [ev('2024-03-02T00:00:00Z', { gb: 0.1 }), ev('2024-03-03T00:00:00Z', { gb: '0.2' })], '0.3', 2],
    ['a negative total is kept', [ev('2024-03-02T00:00:00Z', { gb: 3 }), ev('2024-03-03T00:00:00Z', { gb: -5 })], '-2', 2],
    [
      'non-numeric and missing values are ignored and not counted',
      [
        ev('2024-03-02T00:00:00Z', { gb: 7 }),
        ev('2024-03-02T00:00:00Z', { gb: '1e3' }),
        ev('2024-03-02T00:00:00Z', { gb: '+5' }),
        ev('2024-03-02T00:00:00Z', { gb: '.5' }),
        ev('2024-03-02T00:00:00Z', { gb: null }),
        ev('2024-03-02T00:00:00Z', { gb: true }),
        ev('2024-03-02T00:00:00Z', { other: 4 }),
      ],
      '7',
      1,
    ],
    [
      'events outside the period are ignored',
      [ev('2024-02-29T12:00:00Z', { gb: 100 }), ev('2024-03-15T00:00:00Z', { gb: 1 }), ev('2024-04-01T00:00:00Z', { gb: 100 })],
      '1',
      1,
    ],
  ])('%s -> %s units, %i events', (_label, events, units, eventsCount) => {
    const result = aggregate(sum, events, march);
    expect(result.units.toFixed()).toBe(units);
    expect(result.eventsCount).toBe(eventsCount);
  });

  it('lists per-event values in timestamp order whatever the input order', () => {
    const events = [ev('2024-03-20T00:00:00Z', { gb: 3 }), ev('2024-03-02T00:00:00Z', { gb: 1 }), ev('2024-03-10T00:00:00Z', { gb: 2 })];
    expect(strings(aggregate(sum, events, march).perEventValues)).toEqual(['1', '2', '3']);
  });

  it('recurring carries over (Lago: Jan +5 +3, Feb -2 -> 8 then 6)', () => {
    const recurring = { ...sum, recurring: true };
    const events = [
      ev('2024-01-05T00:00:00Z', { gb: 5 }),
      ev('2024-01-20T00:00:00Z', { gb: 3 }),
      ev('2024-02-10T00:00:00Z', { gb: -2 }),
      ev('2024-03-01T00:00:00Z', { gb: 100 }),
    ];
    const jan = { from: new Date('2024-01-01T00:00:00Z'), to: new Date('2024-02-01T00:00:00Z') };
    const feb = { from: new Date('2024-02-01T00:00:00Z'), to: new Date('2024-03-01T00:00:00Z') };
    expect(aggregate(recurring, events, jan).units.toFixed()).toBe('8');
    expect(aggregate(recurring, events, feb).units.toFixed()).toBe('6');
    expect(aggregate(sum, events, feb).units.toFixed()).toBe('-2');
  });

  it('uses the expression for the per-event value, skipping events it cannot compute', () => {
    const withExpression = { ...sum, expression: 'cpu_seconds * 2 + memory_mb / 1024' };
    const events = [
      ev('2024-03-02T00:00:00Z', { cpu_seconds: 10, memory_mb: 2048 }),
      ev('2024-03-03T00:00:00Z', { cpu_seconds: '0.5', memory_mb: '512' }),
      ev('2024-03-04T00:00:00Z', { cpu_seconds: 10 }),
      ev('2024-03-05T00:00:00Z', { gb: 1000 }),
    ];
    const result = aggregate(withExpression, events, march);
    expect(result.units.toFixed()).toBe('23.5');
    expect(result.eventsCount).toBe(2);
    expect(strings(result.perEventValues)).toEqual(['22', '1.5']);
  });

  it.each<[string, RoundingFunction, number | null, string]>([
    ['10.234', 'round', 2, '10.23'],
    ['10.234', 'ceil', 0, '11'],
    ['10.234', 'floor', 1, '10.2'],
    ['10.234', 'ceil', null, '11'],
    ['2.5', 'round', 0, '3'],
    ['-2.5', 'round', 0, '-3'],
    ['-2.4', 'ceil', 0, '-2'],
    ['-2.4', 'floor', 0, '-3'],
    ['1.005', 'round', 2, '1.01'],
    ['1250', 'round', -2, '1300'],
    ['1201', 'ceil', -1, '1210'],
    ['1299', 'floor', -2, '1200'],
  ])('Lago rounding: %s %s(%s) = %s', (value, rounding_function, rounding_precision, expected) => {
    const events = [ev('2024-03-02T00:00:00Z', { gb: value })];
    const result = aggregate({ ...sum, rounding_function, rounding_precision }, events, march);
    expect(result.units.toFixed()).toBe(expected);
    // Rounding is applied to the aggregate only, never to the per-event values.
    expect(strings(result.perEventValues)).toEqual([value]);
  });

  it('rounds the total, not each event: 0.4 + 0.4 rounds to 1', () => {
    const events = [ev('2024-03-02T00:00:00Z', { gb: '0.4' }), ev('2024-03-03T00:00:00Z', { gb: '0.4' })];
    expect(aggregate({ ...sum, rounding_function: 'round' }, events, march).units.toFixed()).toBe('1');
  });

  it('without rounding_function leaves the value alone even with a precision', () => {
    const events = [ev('2024-03-02T00:00:00Z', { gb: '10.234' })];
    expect(aggregate({ ...sum, rounding_precision: 1 }, events, march).units.toFixed()).toBe('10.234');
  });
});
