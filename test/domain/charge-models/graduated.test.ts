import { describe, expect, it } from 'vitest';
import { compute, type GraduatedProperties, propertiesSchema } from '../../../src/domain/charge-models/graduated';
import { issuePaths, summed, units, unknownKeys } from './fixtures';

// lago-reference.md 2.2 in cents: [0-10 @10 +2], [11-20 @5 +3], [21-∞ @5 +3] (major units).
const classic = propertiesSchema.parse({
  graduated_ranges: [
    { from_value: 0, to_value: 10, per_unit_amount: '1000', flat_amount: '200' },
    { from_value: 11, to_value: 20, per_unit_amount: '500', flat_amount: '300' },
    { from_value: 21, to_value: null, per_unit_amount: '500', flat_amount: '300' },
  ],
});

const adjacent = propertiesSchema.parse({
  graduated_ranges: [
    { from_value: 0, to_value: 10, per_unit_amount: '1000', flat_amount: '200' },
    { from_value: 10, to_value: 20, per_unit_amount: '500', flat_amount: '300' },
    { from_value: 20, per_unit_amount: '500', flat_amount: '300' },
  ],
});

describe('graduated charge model', () => {
  it.each([
    // Both styles price the same tiers: 0-10, then 10-20, then 20 and beyond.
    { units: '0', expected: '200' }, // first tier's flat amount, even without usage
    { units: '1', expected: '1200' },
    { units: '10', expected: '10200' }, // the boundary unit stays in the first tier
    { units: '10.5', expected: '10750' }, // 10200 + 0.5 x 500 + 300
    { units: '11', expected: '11000' }, // 10200 + 1 x 500 + 300: second flat amount reached
    { units: '15', expected: '13000' }, // lago-reference.md: 130.00
    { units: '20', expected: '15500' },
    { units: '21', expected: '16300' }, // third flat amount reached
    { units: '25', expected: '18300' },
  ])('$units units → $expected (classic and adjacent tiers)', ({ units: u, expected }) => {
    expect(compute(classic, units(u)).amount.toString()).toBe(expected);
    expect(compute(adjacent, units(u)).amount.toString()).toBe(expected);
  });

  it('reports units, events and a unit amount rounded to 4 digits', () => {
    const result = compute(classic, units('15', 4));
    expect(result.units.toString()).toBe('15');
    expect(result.eventsCount).toBe(4);
    expect(result.unitAmount.toString()).toBe('866.6667');
  });

  it('reports a zero unit amount for the flat fee at zero units', () => {
    const result = compute(classic, units('0'));
    expect(result.amount.toString()).toBe('200');
    expect(result.unitAmount.toString()).toBe('0');
  });

  it('prices a single open tier as standard pricing plus its flat amount', () => {
    const single = propertiesSchema.parse({
      graduated_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '2', flat_amount: '0.5' }],
    });
    expect(compute(single, units('7')).amount.toString()).toBe('14.5');
  });

  it('rounds the amount half up to 4 digits', () => {
    const tiny = propertiesSchema.parse({
      graduated_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '0.0001', flat_amount: '0' }],
    });
    expect(compute(tiny, units('0.5')).amount.toString()).toBe('0.0001');
    expect(compute(tiny, units('0.4')).amount.toString()).toBe('0');
  });

  it('gives 0 for both amount and units when units are negative, flat amount included', () => {
    const result = compute(classic, summed(['3', '-5']));
    expect(result.amount.toString()).toBe('0');
    expect(result.units.toString()).toBe('0');
  });

  describe('properties', () => {
    const tier = (from: number, to: number | null, extra: Partial<Record<string, unknown>> = {}) => ({
      from_value: from,
      to_value: to,
      per_unit_amount: '1',
      flat_amount: '0',
      ...extra,
    });
    const ranges = (...graduated_ranges: unknown[]) => ({ graduated_ranges });

    it('fills an omitted last to_value with null', () => {
      const parsed: GraduatedProperties = propertiesSchema.parse(ranges({ from_value: 0, per_unit_amount: '1', flat_amount: '0' }));
      expect(parsed.graduated_ranges[0]?.to_value).toBeNull();
    });

    it.each([
      { name: 'no tiers', value: ranges(), paths: ['graduated_ranges'] },
      { name: 'missing ranges', value: {}, paths: ['graduated_ranges'] },
      { name: 'first tier not at 0', value: ranges(tier(1, null)), paths: ['graduated_ranges.0.from_value'] },
      { name: 'closed last tier', value: ranges(tier(0, 10), tier(11, 20)), paths: ['graduated_ranges.1.to_value'] },
      { name: 'open middle tier', value: ranges(tier(0, null), tier(11, null)), paths: ['graduated_ranges.0.to_value'] },
      { name: 'gap', value: ranges(tier(0, 10), tier(12, null)), paths: ['graduated_ranges.1.from_value'] },
      { name: 'overlap', value: ranges(tier(0, 10), tier(5, null)), paths: ['graduated_ranges.1.from_value'] },
      {
        name: 'mixed styles',
        value: ranges(tier(0, 10), tier(10, 20), tier(21, null)),
        paths: ['graduated_ranges.2.from_value'],
      },
      { name: 'empty tier', value: ranges(tier(0, 0), tier(1, null)), paths: ['graduated_ranges.0.to_value'] },
      { name: 'fractional bound', value: ranges(tier(0, 10.5), tier(11, null)), paths: ['graduated_ranges.0.to_value'] },
      {
        name: 'negative per-unit amount',
        value: ranges(tier(0, null, { per_unit_amount: '-1' })),
        paths: ['graduated_ranges.0.per_unit_amount'],
      },
      {
        name: 'flat amount with 5 digits',
        value: ranges(tier(0, 10), tier(11, null, { flat_amount: '0.00001' })),
        paths: ['graduated_ranges.1.flat_amount'],
      },
      {
        name: 'missing flat amount',
        value: ranges({ from_value: 0, to_value: null, per_unit_amount: '1' }),
        paths: ['graduated_ranges.0.flat_amount'],
      },
    ])('rejects $name', ({ value, paths }) => {
      expect(issuePaths(propertiesSchema, value)).toEqual(paths);
    });

    it('rejects unknown keys in a tier and at the top', () => {
      expect(unknownKeys(propertiesSchema, ranges(tier(0, null, { amount: '1' })))).toEqual(['amount']);
      expect(unknownKeys(propertiesSchema, { ...ranges(tier(0, null)), volume_ranges: [] })).toEqual(['volume_ranges']);
    });
  });
});
