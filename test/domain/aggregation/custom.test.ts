import { describe, expect, it } from 'vitest';
import { aggregate } from '../../../src/domain/aggregation';
import { ev, march, metric, strings } from './helpers';

const custom = metric({ aggregation_type: 'custom', field_name: null, expression: 'cpu_seconds * 2 + memory_mb / 1024' });

describe('custom aggregation', () => {
  it.each([
    ['no events', [], '0', []],
    ['billing-rules example formula', [ev('2024-03-02T00:00:00Z', { cpu_seconds: 10, memory_mb: 2048 })], '22', ['22']],
    [
      'sum over events, skipping those lacking an identifier',
      [
        ev('2024-03-02T00:00:00Z', { cpu_seconds: 10, memory_mb: 2048 }),
        ev('2024-03-03T00:00:00Z', { cpu_seconds: '1.25', memory_mb: '256' }),
        ev('2024-03-04T00:00:00Z', { cpu_seconds: 10 }),
        ev('2024-03-05T00:00:00Z', { cpu_seconds: 'ten', memory_mb: 1 }),
      ],
      '24.75',
      ['22', '2.75'],
    ],
    [
      'negative contributions subtract',
      [ev('2024-03-02T00:00:00Z', { cpu_seconds: -3, memory_mb: 0 }), ev('2024-03-03T00:00:00Z', { cpu_seconds: 1, memory_mb: 0 })],
      '-4',
      ['-6', '2'],
    ],
  ])('%s -> %s', (_label, events, units, values) => {
    const result = aggregate(custom, events, march);
    expect(result.units.toFixed()).toBe(units);
    expect(strings(result.perEventValues)).toEqual(values);
    expect(result.eventsCount).toBe(values.length);
  });

  it('skips events whose expression divides by zero', () => {
    const m = { ...custom, expression: 'amount / quantity' };
    const events = [ev('2024-03-02T00:00:00Z', { amount: 10, quantity: 4 }), ev('2024-03-03T00:00:00Z', { amount: 10, quantity: 0 })];
    const result = aggregate(m, events, march);
    expect(result.units.toFixed()).toBe('2.5');
    expect(result.eventsCount).toBe(1);
  });

  it('without an expression sums field_name', () => {
    const m = metric({ aggregation_type: 'custom', field_name: 'value' });
    expect(
      aggregate(m, [ev('2024-03-02T00:00:00Z', { value: 2 }), ev('2024-03-03T00:00:00Z', { value: '3.5' })], march).units.toFixed(),
    ).toBe('5.5');
  });

  it('rounds the sum, not the events', () => {
    const m = { ...custom, expression: 'x / 3', rounding_function: 'round' as const, rounding_precision: 2 };
    const events = [ev('2024-03-02T00:00:00Z', { x: 1 }), ev('2024-03-03T00:00:00Z', { x: 1 })];
    expect(aggregate(m, events, march).units.toFixed()).toBe('0.67');
  });

  it('is never recurring: events before the period are not summed', () => {
    const events = [
      ev('2024-02-02T00:00:00Z', { cpu_seconds: 1, memory_mb: 0 }),
      ev('2024-03-02T00:00:00Z', { cpu_seconds: 1, memory_mb: 0 }),
    ];
    expect(aggregate({ ...custom, recurring: true }, events, march).units.toFixed()).toBe('2');
  });

  it('refuses to aggregate with a stored expression that does not parse', () => {
    expect(() => aggregate({ ...custom, expression: 'cpu_seconds +' }, [], march)).toThrow(/expression is invalid/);
  });
});
