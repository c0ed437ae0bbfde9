import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/graduated-percentage';
import { issuePaths, units } from './fixtures';

// lago-reference.md 2.6 in cents: [0-1000 rate 2 flat 0], [1001-∞ rate 1 flat 5] (major units).
const classic = propertiesSchema.parse({
  graduated_percentage_ranges: [
    { from_value: 0, to_value: 100000, rate: '2', flat_amount: '0' },
    { from_value: 100001, to_value: null, rate: '1', flat_amount: '500' },
  ],
});

const adjacentWithFirstFlat = propertiesSchema.parse({
  graduated_percentage_ranges: [
    { from_value: 0, to_value: 1000, rate: '10', flat_amount: '25' },
    { from_value: 1000, to_value: 5000, rate: '5', flat_amount: '10' },
    { from_value: 5000, to_value: null, rate: '2.5', flat_amount: '0' },
  ],
});

describe('graduated_percentage charge model', () => {
  it.each([
    { units: '0', expected: '0' },
    { units: '50000', expected: '1000' },
    { units: '100000', expected: '2000' },
    { units: '100001', expected: '2500.01' }, // 2000 + 1 x 1 % + 500
    { units: '150000', expected: '3000' }, // lago-reference.md: 30.00
  ])('classic tiers: $units → $expected', ({ units: u, expected }) => {
    expect(compute(classic, units(u)).amount.toString()).toBe(expected);
  });

  it.each([
    { units: '0', expected: '25' }, // the first flat amount is due at zero usage
    { units: '1000', expected: '125' },
    { units: '1001', expected: '135.05' }, // 125 + 1 x 5 % + 10
    { units: '6000', expected: '360' }, // 125 + 200 + 10 + 25
  ])('adjacent tiers: $units → $expected', ({ units: u, expected }) => {
    expect(compute(adjacentWithFirstFlat, units(u)).amount.toString()).toBe(expected);
  });

  it('gives 0 for both amount and units when units are negative', () => {
    const result = compute(adjacentWithFirstFlat, units('-10'));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
  });

  it.each([
    {
      value: { graduated_percentage_ranges: [{ from_value: 0, to_value: null, rate: 'two', flat_amount: '0' }] },
      path: 'graduated_percentage_ranges.0.rate',
    },
    {
      value: { graduated_percentage_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '1', flat_amount: '0' }] },
      path: 'graduated_percentage_ranges.0.rate',
    },
    {
      value: {
        graduated_percentage_ranges: [
          { from_value: 0, to_value: 10, rate: '1', flat_amount: '0' },
          { from_value: 20, to_value: null, rate: '1', flat_amount: '0' },
        ],
      },
      path: 'graduated_percentage_ranges.1.from_value',
    },
  ])('rejects at "$path"', ({ value, path }) => {
    expect(issuePaths(propertiesSchema, value)).toContain(path);
  });
});
