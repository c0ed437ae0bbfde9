import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/standard';
import { issuePaths, summed, units, unknownKeys } from './fixtures';

describe('standard charge model', () => {
  it.each([
    // amount (cents per unit), units, expected amount, expected unit amount
    { amount: '1', units: '1234', expected: '1234', unitAmount: '1' },
    { amount: '0.05', units: '3', expected: '0.15', unitAmount: '0.05' },
    { amount: '2.5', units: '1.5', expected: '3.75', unitAmount: '2.5' },
    { amount: 12.5, units: '2', expected: '25', unitAmount: '12.5' },
    { amount: '100', units: '0', expected: '0', unitAmount: '0' },
    { amount: '0', units: '1000', expected: '0', unitAmount: '0' },
    // 0.00005 rounds half up to the 4th digit.
    { amount: '0.0001', units: '0.5', expected: '0.0001', unitAmount: '0.0001' },
    { amount: '0.3333', units: '0.0001', expected: '0', unitAmount: '0.3333' },
  ])('$units units at $amount → $expected', ({ amount, units: u, expected, unitAmount }) => {
    const result = compute(propertiesSchema.parse({ amount }), units(u, 7));
    expect(result.amount.toString()).toBe(expected);
    expect(result.units.toString()).toBe(u);
    expect(result.unitAmount.toString()).toBe(unitAmount);
    expect(result.eventsCount).toBe(7);
  });

  it('zeroes both amount and units when the aggregation is negative', () => {
    const result = compute({ amount: '10' }, summed(['5', '-8']));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
    expect(result.eventsCount).toBe(2);
  });

  describe('properties', () => {
    it.each([{ amount: '0' }, { amount: 0 }, { amount: '12.3456' }, { amount: 12.3456 }, { amount: '1000000' }])('accepts %j', (value) => {
      expect(propertiesSchema.safeParse(value).success).toBe(true);
    });

    it.each([
      { value: {}, path: 'amount' },
      { value: { amount: '-1' }, path: 'amount' },
      { value: { amount: -1 }, path: 'amount' },
      { value: { amount: '1.23456' }, path: 'amount' },
      { value: { amount: 0.1 + 0.2 }, path: 'amount' },
      { value: { amount: 'ten' }, path: 'amount' },
      { value: { amount: '1e3' }, path: 'amount' },
      { value: { amount: true }, path: 'amount' },
      { value: { amount: null }, path: 'amount' },
    ])('rejects $value at "$path"', ({ value, path }) => {
      expect(issuePaths(propertiesSchema, value)).toEqual([path]);
    });

    it('rejects an unknown key and names it', () => {
      expect(unknownKeys(propertiesSchema, { amount: '1', per_unit_amount: '1' })).toEqual(['per_unit_amount']);
    });
  });
});
