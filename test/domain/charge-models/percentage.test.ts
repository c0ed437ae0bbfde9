import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/percentage';
import { issuePaths, summed, units } from './fixtures';

const price = (properties: Record<string, unknown>, values: string[]) =>
  compute(propertiesSchema.parse(properties), summed(values)).amount.toString();

// lago-reference.md 2.5 examples in cents: transactions of 100, 200, 300, 400 (major units).
const transactions = ['10000', '20000', '30000', '40000'];

describe('percentage charge model', () => {
  it.each([
    { name: 'rate only', properties: { rate: '1.5' }, values: ['1000'], expected: '15' },
    {
      name: 'rate plus a fixed amount per event',
      properties: { rate: '1.5', fixed_amount: '10' },
      values: ['400', '600', '0'],
      expected: '45',
    },
    { name: 'fractional rate', properties: { rate: '0.125' }, values: ['10000'], expected: '12.5' },
    // Ex A: the first 2 events are free → (100000 - 30000) x 1 % + 2 x 50.
    {
      name: 'free events (Ex A)',
      properties: { rate: '1', fixed_amount: '50', free_units_per_events: 2 },
      values: transactions,
      expected: '800',
    },
    // Ex B: 25000 free → 75000 x 1 %; only the first event stays under it → 3 x 50.
    {
      name: 'free amount (Ex B)',
      properties: { rate: '1', fixed_amount: '50', free_units_per_total_aggregation: '25000' },
      values: transactions,
      expected: '900',
    },
    {
      name: 'both free rules: the first one exhausted wins',
      properties: { rate: '1', fixed_amount: '50', free_units_per_events: 2, free_units_per_total_aggregation: '25000' },
      values: transactions,
      expected: '900',
    },
    {
      name: 'free events exhausted before the free amount',
      properties: { rate: '1', fixed_amount: '50', free_units_per_events: 1, free_units_per_total_aggregation: '25000' },
      values: transactions,
      expected: '1050', // free value 10000 → 900 + 3 x 50
    },
    // A running total equal to the free amount is not "below" it: that event pays its fixed amount.
    {
      name: 'free amount reached exactly',
      properties: { rate: '1', fixed_amount: '50', free_units_per_total_aggregation: '30000' },
      values: ['10000', '20000', '40000'],
      expected: '500', // (70000 - 30000) x 1 % + 2 x 50
    },
    // The reference's "smallest non-zero" rule: no running total is below 5000, so the count of
    // free events falls back to free_units_per_events (2) although the free amount ran out at the
    // first event. Event-by-event pricing (with caps) would charge the second fixed amount.
    {
      name: 'both free rules, first event past the free amount',
      properties: { rate: '1', fixed_amount: '50', free_units_per_events: 2, free_units_per_total_aggregation: '5000' },
      values: transactions,
      expected: '1050', // (100000 - 5000) x 1 % + (4 - 2) x 50
    },
    {
      name: 'more free events than events',
      properties: { rate: '10', fixed_amount: '50', free_units_per_events: 5 },
      values: ['100', '200'],
      expected: '0',
    },
    {
      name: 'free amount above the total',
      properties: { rate: '10', free_units_per_total_aggregation: '1000' },
      values: ['100', '200'],
      expected: '0',
    },
    { name: 'no events', properties: { rate: '1', fixed_amount: '50' }, values: [], expected: '0' },
    // No fixed amount without units, even when events were received (Lago).
    { name: 'zero-valued events', properties: { rate: '1', fixed_amount: '50' }, values: ['0', '0'], expected: '0' },
    { name: 'rounding half up', properties: { rate: '0.5' }, values: ['0.0001'], expected: '0' },
    { name: 'rounding half up at 5', properties: { rate: '50' }, values: ['0.0001'], expected: '0.0001' },
  ])('$name → $expected', ({ properties, values, expected }) => {
    expect(price(properties, values)).toBe(expected);
  });

  describe('per-transaction minimum and maximum', () => {
    it.each([
      // lago-reference.md 2.5: 10 → 0.30 (min), 50 → 0.50, 500 → 2.00 (max), in cents.
      {
        name: 'min and max',
        properties: { rate: '1', per_transaction_min_amount: '30', per_transaction_max_amount: '200' },
        values: ['1000', '5000', '50000'],
        expected: '280',
      },
      { name: 'min only', properties: { rate: '0.5', per_transaction_min_amount: '25' }, values: ['1000', '10000'], expected: '75' },
      {
        name: 'max only, fixed amount inside the cap',
        properties: { rate: '1', fixed_amount: '5', per_transaction_max_amount: '100' },
        values: ['1000', '20000'],
        expected: '115',
      },
      // A free event costs nothing, minimum included.
      {
        name: 'free events skip the minimum',
        properties: { rate: '1', free_units_per_events: 1, per_transaction_min_amount: '30', per_transaction_max_amount: '200' },
        values: ['1000', '5000', '50000'],
        expected: '250',
      },
      // 1000 stays free; 4000 crosses the 3000 allowance → 2000 x 1 % = 20 → min 30; 50000 → max 200.
      {
        name: 'free amount consumed event by event',
        properties: {
          rate: '1',
          free_units_per_total_aggregation: '3000',
          per_transaction_min_amount: '30',
          per_transaction_max_amount: '200',
        },
        values: ['1000', '4000', '50000'],
        expected: '230',
      },
      // 1000 + 2000 reaches the 3000 allowance exactly: like the aggregate rule, that event is not
      // "below" it and pays its fixed amount (0 x 1 % + 5); 4000 → 40 + 5.
      {
        name: 'free amount reached exactly',
        properties: { rate: '1', fixed_amount: '5', free_units_per_total_aggregation: '3000', per_transaction_max_amount: '1000' },
        values: ['1000', '2000', '4000'],
        expected: '50',
      },
      { name: 'no events', properties: { rate: '1', per_transaction_min_amount: '30' }, values: [], expected: '0' },
    ])('$name → $expected', ({ properties, values, expected }) => {
      expect(price(properties, values)).toBe(expected);
    });

    it('prices each event value, not the aggregated units', () => {
      // A max metric: units 50000, but the transactions were 1000 and 50000.
      const properties = propertiesSchema.parse({ rate: '1', per_transaction_min_amount: '30' });
      expect(compute(properties, units('50000', 2, ['1000', '50000'])).amount.toString()).toBe('530');
    });
  });

  it('reports the unit amount and the events', () => {
    const result = compute(propertiesSchema.parse({ rate: '1', fixed_amount: '50' }), summed(transactions));
    expect(result.amount.toString()).toBe('1200');
    expect(result.eventsCount).toBe(4);
    expect(result.unitAmount.toString()).toBe('0.012');
  });

  it('gives 0 for both amount and units when the aggregated amount is negative', () => {
    const result = compute(propertiesSchema.parse({ rate: '1', fixed_amount: '50' }), summed(['100', '-300']));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
  });

  describe('properties', () => {
    it('accepts nulls for the optional fields, as Lago clients send them', () => {
      const parsed = propertiesSchema.safeParse({
        rate: '1',
        fixed_amount: null,
        free_units_per_events: null,
        free_units_per_total_aggregation: null,
        per_transaction_min_amount: null,
        per_transaction_max_amount: null,
      });
      expect(parsed.success).toBe(true);
    });

    it.each([
      { value: {}, path: 'rate' },
      { value: { rate: '-1' }, path: 'rate' },
      { value: { rate: '1.123456789' }, path: 'rate' },
      { value: { rate: '1', fixed_amount: 'x' }, path: 'fixed_amount' },
      { value: { rate: '1', free_units_per_events: 1.5 }, path: 'free_units_per_events' },
      { value: { rate: '1', free_units_per_events: '2' }, path: 'free_units_per_events' },
      { value: { rate: '1', free_units_per_total_aggregation: '-5' }, path: 'free_units_per_total_aggregation' },
      { value: { rate: '1', per_transaction_min_amount: '0.00001' }, path: 'per_transaction_min_amount' },
      { value: { rate: '1', per_transaction_min_amount: '300', per_transaction_max_amount: '200' }, path: 'per_transaction_max_amount' },
    ])('rejects $value at "$path"', ({ value, path }) => {
      expect(issuePaths(propertiesSchema, value)).toEqual([path]);
    });
  });
});
