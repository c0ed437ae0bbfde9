import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/package';
import { issuePaths, units } from './fixtures';

describe('package charge model', () => {
  // lago-reference.md 2.4 in cents: amount 5.00, package_size 10, free_units 100.
  const withFreeUnits = propertiesSchema.parse({ amount: '500', package_size: 10, free_units: 100 });
  const noFreeUnits = propertiesSchema.parse({ amount: '500', package_size: 10 });

  it.each([
    { units: '0', expected: '0' },
    { units: '100', expected: '0' }, // all free
    { units: '100.5', expected: '500' }, // half a unit past the free ones opens a package
    { units: '101', expected: '500' },
    { units: '110', expected: '500' }, // a full package
    { units: '111', expected: '1000' }, // the next package is due from its first unit
    { units: '215', expected: '6000' }, // lago-reference.md: 115 paid units → 12 packages → 60.00
  ])('with 100 free units, $units units → $expected', ({ units: u, expected }) => {
    expect(compute(withFreeUnits, units(u)).amount.toString()).toBe(expected);
  });

  it.each([
    { units: '1', expected: '500' },
    { units: '10', expected: '500' },
    { units: '10.0001', expected: '1000' },
    { units: '20', expected: '1000' },
  ])('without free units, $units units → $expected', ({ units: u, expected }) => {
    expect(compute(noFreeUnits, units(u)).amount.toString()).toBe(expected);
  });

  it('defaults free_units to 0 and reports the aggregated units, not the paid ones', () => {
    expect(noFreeUnits.free_units).toBe(0);
    const result = compute(withFreeUnits, units('215', 9));
    expect(result.units.toString()).toBe('215');
    expect(result.eventsCount).toBe(9);
    expect(result.unitAmount.toString()).toBe('27.907'); // 6000 / 215 = 27.90697...
  });

  it('gives 0 for both amount and units when units are negative', () => {
    const result = compute(noFreeUnits, units('-3'));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
  });

  it.each([
    { value: { amount: '500', package_size: 0 }, path: 'package_size' },
    { value: { amount: '500', package_size: 2.5 }, path: 'package_size' },
    { value: { amount: '500', package_size: '10' }, path: 'package_size' },
    { value: { amount: '500' }, path: 'package_size' },
    { value: { amount: '500', package_size: 10, free_units: -1 }, path: 'free_units' },
    { value: { amount: '500', package_size: 10, free_units: 0.5 }, path: 'free_units' },
    { value: { amount: '5.00001', package_size: 10 }, path: 'amount' },
    { value: { package_size: 10 }, path: 'amount' },
  ])('rejects $value at "$path"', ({ value, path }) => {
    expect(issuePaths(propertiesSchema, value)).toEqual([path]);
  });
});
