import { describe, expect, it } from 'vitest';
import { aggregate } from '../../../src/domain/aggregation';
import { ev, march, metric, strings } from './helpers';

const unique = metric({ aggregation_type: 'unique_count', field_name: 'user_id' });

const add = (t: string, user: unknown) => ev(t, { user_id: user });
const remove = (t: string, user: unknown) => ev(t, { user_id: user, operation_type: 'remove' });

describe('unique_count aggregation', () => {
  it.each([
    ['no events', [], '0', []],
    [
      'Lago: a, b, a -> 2',
      [add('2024-03-02T00:00:00Z', 'a'), add('2024-03-03T00:00:00Z', 'b'), add('2024-03-04T00:00:00Z', 'a')],
      '2',
      ['1', '1', '0'],
    ],
    [
      'Lago: then remove a -> 1',
      [
        add('2024-03-02T00:00:00Z', 'a'),
        add('2024-03-03T00:00:00Z', 'b'),
        add('2024-03-04T00:00:00Z', 'a'),
        remove('2024-03-05T00:00:00Z', 'a'),
      ],
      '1',
      ['1', '1', '0', '-1'],
    ],
    [
      'removing a value never added changes nothing',
      [remove('2024-03-02T00:00:00Z', 'a'), add('2024-03-03T00:00:00Z', 'b')],
      '1',
      ['0', '1'],
    ],
    [
      'a double remove counts once',
      [add('2024-03-02T00:00:00Z', 'a'), remove('2024-03-03T00:00:00Z', 'a'), remove('2024-03-04T00:00:00Z', 'a')],
      '0',
      ['1', '-1', '0'],
    ],
    [
      'add, remove, add again -> present',
      [add('2024-03-02T00:00:00Z', 'a'), remove('2024-03-03T00:00:00Z', 'a'), add('2024-03-04T00:00:00Z', 'a')],
      '1',
      ['1', '-1', '1'],
    ],
    [
      'operations apply in timestamp order, not input order',
      [remove('2024-03-05T00:00:00Z', 'a'), add('2024-03-02T00:00:00Z', 'a')],
      '0',
      ['1', '-1'],
    ],
    [
      'the number 7 and the string "7" are the same value',
      [add('2024-03-02T00:00:00Z', 7), add('2024-03-03T00:00:00Z', '7')],
      '1',
      ['1', '0'],
    ],
    ['"7" and "7.0" are different values', [add('2024-03-02T00:00:00Z', '7'), add('2024-03-03T00:00:00Z', '7.0')], '2', ['1', '1']],
    [
      'missing, null and object values are skipped',
      [
        add('2024-03-02T00:00:00Z', 'a'),
        ev('2024-03-02T00:00:00Z', {}),
        add('2024-03-02T00:00:00Z', null),
        add('2024-03-02T00:00:00Z', { id: 1 }),
      ],
      '1',
      ['1'],
    ],
    [
      'an explicit add counts; an unknown operation_type is skipped',
      [
        ev('2024-03-02T00:00:00Z', { user_id: 'a', operation_type: 'add' }),
        ev('2024-03-03T00:00:00Z', { user_id: 'b', operation_type: 'delete' }),
      ],
      '1',
      ['1'],
    ],
  ])('%s -> %s', (_label, events, units, steps) => {
    const result = aggregate(unique, events, march);
    expect(result.units.toFixed()).toBe(units);
    expect(strings(result.perEventValues)).toEqual(steps);
    expect(result.eventsCount).toBe(steps.length);
  });

  it('non-recurring counts the period only; recurring reaches back to the subscription start', () => {
    const events = [
      add('2024-02-10T00:00:00Z', 'a'),
      add('2024-02-11T00:00:00Z', 'b'),
      remove('2024-03-02T00:00:00Z', 'b'),
      add('2024-03-05T00:00:00Z', 'c'),
    ];
    expect(aggregate(unique, events, march).units.toFixed()).toBe('1');
    // a (Feb) and c (Mar); b removed in March.
    expect(aggregate({ ...unique, recurring: true }, events, march).units.toFixed()).toBe('2');
  });

  it('counts distinct expression values', () => {
    const events = [
      ev('2024-03-02T00:00:00Z', { gb: '1.50' }),
      ev('2024-03-03T00:00:00Z', { gb: 1.5 }),
      ev('2024-03-04T00:00:00Z', { gb: 2 }),
    ];
    expect(aggregate({ ...unique, expression: 'ceil(gb)' }, events, march).units.toFixed()).toBe('1');
    expect(aggregate({ ...unique, expression: 'gb * 1' }, events, march).units.toFixed()).toBe('2');
  });

  it('applies the metric rounding to the count', () => {
    const events = Array.from({ length: 12 }, (_, i) => add('2024-03-02T00:00:00Z', `u${i}`));
    expect(aggregate({ ...unique, rounding_function: 'ceil', rounding_precision: -1 }, events, march).units.toFixed()).toBe('20');
  });
});
