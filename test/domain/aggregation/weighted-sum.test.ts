import { describe, expect, it } from 'vitest';
import { aggregate, aggregateWeightedSum } from '../../../src/domain/aggregation';
import { Dec } from '../../../src/domain/money';
import { ev, march, metric, strings } from './helpers';

const metered = metric({ aggregation_type: 'weighted_sum', field_name: 'gb' });
const recurring = { ...metered, recurring: true };

/** Lago's worked example: +20 on March 16, +10 on March 18. */
const lagoEvents = [ev('2024-03-16T00:00:00Z', { gb: 20 }), ev('2024-03-18T00:00:00Z', { gb: 10 })];

describe('weighted_sum aggregation', () => {
  it('Lago: (0x15d + 20x2d + 30x14d) / 31d = 460/31, rounded up at 20 decimals', () => {
    const result = aggregateWeightedSum(metered, lagoEvents, march);
    expect(result.units.toFixed()).toBe('14.83870967741935483871');
    expect(result.units.toFixed().startsWith('14.8387096774')).toBe(true);
    expect(result.eventsCount).toBe(2);
    expect(strings(result.perEventValues)).toEqual(['20', '10']);
    expect(result.closingLevel.toFixed()).toBe('30');
  });

  it.each([
    ['no events, metered -> 0', metered, [], {}, '0', '0'],
    ['no events, recurring level 10 carried in -> 10', recurring, [], { initialLevel: new Dec(10) }, '10', '10'],
    ['an event at the period start weighs the whole period', metered, [ev('2024-03-01T00:00:00Z', { gb: 7 })], {}, '7', '7'],
    ['an event one day before the end weighs 1/31', metered, [ev('2024-03-31T00:00:00Z', { gb: 31 })], {}, '1', '31'],
    [
      'up and back down: +10 on the 1st, -10 on the 11th -> 10x10/31',
      metered,
      [ev('2024-03-01T00:00:00Z', { gb: 10 }), ev('2024-03-11T00:00:00Z', { gb: -10 })],
      {},
      '3.22580645161290322581',
      '0',
    ],
    [
      'deltas at the same instant: only the resulting level has weight',
      metered,
      [ev('2024-03-16T00:00:00Z', { gb: 100 }), ev('2024-03-16T00:00:00Z', { gb: -80 }), ev('2024-03-18T00:00:00Z', { gb: 10 })],
      {},
      '14.83870967741935483871',
      '30',
    ],
    [
      'non-numeric deltas are ignored',
      metered,
      [...lagoEvents, ev('2024-03-17T00:00:00Z', { gb: 'lots' }), ev('2024-03-17T00:00:00Z', {})],
      {},
      '14.83870967741935483871',
      '30',
    ],
    ['metered ignores an initial level', metered, lagoEvents, { initialLevel: new Dec(1000) }, '14.83870967741935483871', '30'],
    [
      'recurring adds the initial level over the whole period: 460/31 + 5',
      recurring,
      lagoEvents,
      { initialLevel: new Dec(5) },
      '19.83870967741935483871',
      '35',
    ],
  ])('%s', (_label, m, events, extra, units, closing) => {
    const result = aggregateWeightedSum(m, events, { ...march, ...extra });
    expect(result.units.toFixed()).toBe(units);
    expect(result.closingLevel.toFixed()).toBe(closing);
  });

  it('recurring without an initial level rebuilds it from the deltas before the period', () => {
    const events = [ev('2024-01-10T00:00:00Z', { gb: 3 }), ev('2024-02-10T00:00:00Z', { gb: 2 }), ...lagoEvents];
    const result = aggregateWeightedSum(recurring, events, march);
    expect(result.units.toFixed()).toBe('19.83870967741935483871');
    expect(result.eventsCount).toBe(2);
    expect(result.closingLevel.toFixed()).toBe('35');
    // A given initial level wins over the earlier events (they are what it summarises).
    expect(aggregateWeightedSum(recurring, events, { ...march, initialLevel: new Dec(0) }).units.toFixed()).toBe('14.83870967741935483871');
    // Metered: earlier events are another period's.
    expect(aggregateWeightedSum(metered, events, march).units.toFixed()).toBe('14.83870967741935483871');
  });

  it('current usage integrates up to now and divides by the whole period', () => {
    const at = (iso: string) => aggregateWeightedSum(metered, lagoEvents, { ...march, now: new Date(iso) });
    // 20 x 2 days so far, over 31 days.
    expect(at('2024-03-18T00:00:00Z').units.toFixed()).toBe('1.29032258064516129033');
    expect(at('2024-03-17T00:00:00Z').units.toFixed()).toBe('0.64516129032258064517');
    // Before the first event nothing has accumulated; the future event is not yet known.
    const early = at('2024-03-10T00:00:00Z');
    expect(early.units.toFixed()).toBe('0');
    expect(early.eventsCount).toBe(0);
    expect(early.closingLevel.toFixed()).toBe('0');
    // At (or after) the period end it is the invoiced value.
    expect(at('2024-04-01T00:00:00Z').units.toFixed()).toBe('14.83870967741935483871');
    expect(at('2024-05-01T00:00:00Z').units.toFixed()).toBe('14.83870967741935483871');
  });

  it('current usage of a constant recurring level grows linearly to the level', () => {
    const result = aggregateWeightedSum(recurring, [], { ...march, initialLevel: new Dec(31), now: new Date('2024-03-11T00:00:00Z') });
    expect(result.units.toFixed()).toBe('10');
  });

  it('divides by the elapsed period length, so a DST month averages a constant level exactly', () => {
    // March 2024 in Europe/Paris: local midnights, 30 days and 23 hours long.
    const paris = { from: new Date('2024-02-29T23:00:00Z'), to: new Date('2024-03-31T22:00:00Z') };
    const result = aggregateWeightedSum(metered, [ev('2024-02-29T23:00:00Z', { gb: 7 })], paris);
    expect(result.units.toFixed()).toBe('7');
    const half = aggregateWeightedSum(metered, [ev('2024-03-16T10:30:00Z', { gb: 2 })], paris);
    expect(half.units.toFixed()).toBe('1');
  });

  it("weights expression values and applies the metric rounding after Lago's 20-decimal ceiling", () => {
    const events = [ev('2024-03-16T00:00:00Z', { mb: 20480 }), ev('2024-03-18T00:00:00Z', { mb: 10240 })];
    const m = { ...metered, expression: 'mb / 1024', rounding_function: 'round' as const, rounding_precision: 3 };
    expect(aggregate(m, events, march).units.toFixed()).toBe('14.839');
  });
});
