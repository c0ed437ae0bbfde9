import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/volume';
import { issuePaths, summed, units } from './fixtures';

// lago-reference.md 2.3 in cents: [0-100 @2 +1], [101-200 @1 +0], [201-∞ @0.5 +50] (major units).
const classic = propertiesSchema.parse({
  volume_ranges: [
    { from_value: 0, to_value: 100, per_unit_amount: '200', flat_amount: '100' },
    { from_value: 101, to_value: 200, per_unit_amount: '100', flat_amount: '0' },
    { from_value: 201, to_value: null, per_unit_amount: '50', flat_amount: '5000' },
  ],
});

const adjacent = propertiesSchema.parse({
  volume_ranges: [
    { from_value: 0, to_value: 100, per_unit_amount: '200', flat_amount: '100' },
    { from_value: 100, to_value: 200, per_unit_amount: '100', flat_amount: '0' },
    { from_value: 200, to_value: null, per_unit_amount: '50', flat_amount: '5000' },
  ],
});

describe('volume charge model', () => {
  it.each([
    { units: '0', expected: '100' }, // first tier's flat amount at zero units
    { units: '1', expected: '300' },
    { units: '100', expected: '20100' }, // the boundary volume stays in the first tier
    { units: '100.5', expected: '10050' }, // past 100: every unit at the second tier's price
    { units: '101', expected: '10100' },
    { units: '150', expected: '15000' }, // lago-reference.md: 150.00
    { units: '200', expected: '20000' },
    { units: '200.5', expected: '15025' }, // 200.5 x 50 + 5000
    { units: '1000', expected: '55000' },
  ])('$units units → $expected (classic and adjacent tiers)', ({ units: u, expected }) => {
    expect(compute(classic, units(u)).amount.toString()).toBe(expected);
    expect(compute(adjacent, units(u)).amount.toString()).toBe(expected);
  });

  it('reports the unit amount of the whole volume', () => {
    const result = compute(classic, units('150', 3));
    expect(result.unitAmount.toString()).toBe('100');
    expect(result.eventsCount).toBe(3);
  });

  it('gives 0 for both amount and units when units are negative', () => {
    const result = compute(classic, summed(['-4']));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
  });

  describe('properties', () => {
    const tier = (from: number, to: number | null) => ({ from_value: from, to_value: to, per_unit_amount: '1', flat_amount: '0' });

    it.each([
      { name: 'first tier not at 0', value: { volume_ranges: [tier(5, null)] }, paths: ['volume_ranges.0.from_value'] },
      { name: 'gap', value: { volume_ranges: [tier(0, 100), tier(150, null)] }, paths: ['volume_ranges.1.from_value'] },
      { name: 'closed last tier', value: { volume_ranges: [tier(0, 100)] }, paths: ['volume_ranges.0.to_value'] },
      {
        name: 'negative flat amount',
        value: { volume_ranges: [{ ...tier(0, null), flat_amount: -5 }] },
        paths: ['volume_ranges.0.flat_amount'],
      },
      { name: 'graduated key', value: { graduated_ranges: [tier(0, null)] }, paths: ['volume_ranges', ''] },
    ])('rejects $name', ({ value, paths }) => {
      expect(issuePaths(propertiesSchema, value)).toEqual(paths);
    });
  });
});
