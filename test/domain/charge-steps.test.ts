// The steps of a charge model's price (src/domain/charge-steps.ts): exact values, tier boundaries,
// and the invariant that the steps add up to what computeChargeModel prices.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { computeChargeModel } from '../../src/domain/charge-models';
import { chargeModelSteps } from '../../src/domain/charge-steps';
import { sum } from '../../src/domain/money';
import { units } from './charge-models/fixtures';

const adjacent = {
  graduated_ranges: [
    { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '0' },
    { from_value: 10, to_value: null, per_unit_amount: '5', flat_amount: '200' },
  ],
};

// lago-reference.md 2.2 in cents, classic tiers (each starts one unit after the previous one ends).
const classic = {
  graduated_ranges: [
    { from_value: 0, to_value: 10, per_unit_amount: '1000', flat_amount: '200' },
    { from_value: 11, to_value: 20, per_unit_amount: '500', flat_amount: '300' },
    { from_value: 21, to_value: null, per_unit_amount: '500', flat_amount: '300' },
  ],
};

const shape = (model: Parameters<typeof chargeModelSteps>[0], properties: unknown, u: string) =>
  chargeModelSteps(model, properties, units(u)).steps.map((s) => ({
    range: [s.from_value, s.to_value],
    units: s.units.toString(),
    amount: s.amount.toString(),
  }));

describe('graduated steps', () => {
  it.each([
    { u: '0', expected: [{ range: [0, 10], units: '0', amount: '0' }] },
    { u: '10', expected: [{ range: [0, 10], units: '10', amount: '100' }] },
    {
      u: '14',
      expected: [
        { range: [0, 10], units: '10', amount: '100' },
        { range: [10, null], units: '4', amount: '220' },
      ],
    },
  ])('adjacent tiers, $u units', ({ u, expected }) => {
    expect(shape('graduated', adjacent, u)).toEqual(expected);
  });

  it.each([
    { u: '0', expected: [{ range: [0, 10], units: '0', amount: '200' }] },
    {
      u: '10.5',
      expected: [
        { range: [0, 10], units: '10', amount: '10200' },
        { range: [11, 20], units: '0.5', amount: '550' },
      ],
    },
    {
      u: '25',
      expected: [
        { range: [0, 10], units: '10', amount: '10200' },
        { range: [11, 20], units: '10', amount: '5300' },
        { range: [21, null], units: '5', amount: '2800' },
      ],
    },
  ])('classic tiers, $u units (the first flat amount even at zero)', ({ u, expected }) => {
    expect(shape('graduated', classic, u)).toEqual(expected);
  });

  it('the steps always add up to the model price', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 4 }), (n, digits) => {
        const u = (n / 10 ** digits).toString();
        for (const properties of [adjacent, classic]) {
          const { steps, amount } = chargeModelSteps('graduated', properties, units(u));
          expect(sum(steps.map((s) => s.amount)).toString()).toBe(amount.toString());
          expect(amount.toString()).toBe(computeChargeModel('graduated', properties, units(u)).amount.toString());
        }
      }),
    );
  });
});

describe('other models', () => {
  it('graduated_percentage prices each tier at its rate', () => {
    const properties = {
      graduated_percentage_ranges: [
        { from_value: 0, to_value: 1000, rate: '2', flat_amount: '10' },
        { from_value: 1000, to_value: null, rate: '1', flat_amount: '0' },
      ],
    };
    expect(shape('graduated_percentage', properties, '1500')).toEqual([
      { range: [0, 1000], units: '1000', amount: '30' },
      { range: [1000, null], units: '500', amount: '5' },
    ]);
  });

  it('volume names the one tier the volume picked', () => {
    const properties = {
      volume_ranges: [
        { from_value: 0, to_value: 100, per_unit_amount: '2', flat_amount: '0' },
        { from_value: 100, to_value: null, per_unit_amount: '1', flat_amount: '50' },
      ],
    };
    expect(shape('volume', properties, '150')).toEqual([{ range: [100, null], units: '150', amount: '200' }]);
  });

  it.each([
    { model: 'standard' as const, properties: { amount: '2.5' }, u: '4', amount: '10' },
    { model: 'package' as const, properties: { amount: '100', package_size: 10, free_units: 5 }, u: '26', amount: '300' },
    { model: 'custom' as const, properties: { custom_amount: '999' }, u: '0', amount: '999' },
    { model: 'percentage' as const, properties: { rate: '1.5' }, u: '1000', amount: '15' },
  ])('$model is one step of its whole price', ({ model, properties, u, amount }) => {
    const { steps } = chargeModelSteps(model, properties, units(u));
    expect(steps).toHaveLength(1);
    expect(steps[0]!.amount.toString()).toBe(amount);
  });

  it('negative units are one step at zero', () => {
    expect(shape('graduated', adjacent, '-3')).toEqual([{ range: [null, null], units: '-3', amount: '0' }]);
  });
});
