import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/custom';
import { issuePaths, units, unknownKeys } from './fixtures';

describe('custom charge model', () => {
  it.each([
    { properties: { custom_amount: '1000' }, units: '5', amount: '1000', unitAmount: '200' },
    // A fixed amount for the period is due without usage.
    { properties: { custom_amount: '1000' }, units: '0', amount: '1000', unitAmount: '0' },
    { properties: { custom_amount: 0 }, units: '3', amount: '0', unitAmount: '0' },
    { properties: { unit_price: '2.5' }, units: '4', amount: '10', unitAmount: '2.5' },
    { properties: { unit_price: '2.5' }, units: '0', amount: '0', unitAmount: '0' },
    { properties: { unit_price: '0.0003' }, units: '0.5', amount: '0.0002', unitAmount: '0.0003' },
  ])('$properties with $units units → $amount', ({ properties, units: u, amount, unitAmount }) => {
    const result = compute(propertiesSchema.parse(properties), units(u, 2));
    expect(result.amount.toString()).toBe(amount);
    expect(result.unitAmount.toString()).toBe(unitAmount);
    expect(result.units.toString()).toBe(u);
    expect(result.eventsCount).toBe(2);
  });

  it('gives 0 for both amount and units when units are negative, fixed amount included', () => {
    const result = compute(propertiesSchema.parse({ custom_amount: '1000' }), units('-1'));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
  });

  it.each([
    { value: {}, path: 'custom_amount' },
    { value: { custom_amount: '10', unit_price: '1' }, path: 'unit_price' },
    { value: { custom_amount: '-10' }, path: 'custom_amount' },
    { value: { unit_price: '0.12345' }, path: 'unit_price' },
  ])('rejects $value at "$path"', ({ value, path }) => {
    expect(issuePaths(propertiesSchema, value)).toEqual([path]);
  });

  it("rejects Lago's custom_properties", () => {
    expect(unknownKeys(propertiesSchema, { custom_amount: '1', custom_properties: {} })).toEqual(['custom_properties']);
  });
});
