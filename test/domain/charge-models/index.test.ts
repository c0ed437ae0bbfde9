import { describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import {
  CHARGE_MODELS,
  type ChargeModel,
  chargeModelCalculators,
  chargePropertiesSchema,
  chargePropertiesSchemas,
  computeChargeModel,
  isChargeModel,
} from '../../../src/domain/charge-models';
import { issuePaths, summed, withEvents } from './fixtures';

// One valid properties object per model, all priced on the same usage: events of 10 and 30.
const cases: Record<ChargeModel, { properties: unknown; amount: string }> = {
  standard: { properties: { amount: '2' }, amount: '80' },
  graduated: {
    properties: {
      graduated_ranges: [
        { from_value: 0, to_value: 20, per_unit_amount: '2', flat_amount: '5' },
        { from_value: 20, to_value: null, per_unit_amount: '1', flat_amount: '0' },
      ],
    },
    amount: '65', // 20 x 2 + 5 + 20 x 1
  },
  volume: {
    properties: {
      volume_ranges: [
        { from_value: 0, to_value: 20, per_unit_amount: '2', flat_amount: '5' },
        { from_value: 20, to_value: null, per_unit_amount: '1', flat_amount: '0' },
      ],
    },
    amount: '40',
  },
  package: { properties: { amount: '100', package_size: 15 }, amount: '300' },
  percentage: { properties: { rate: '10', fixed_amount: '1' }, amount: '6' },
  graduated_percentage: {
    properties: { graduated_percentage_ranges: [{ from_value: 0, to_value: null, rate: '50', flat_amount: '1' }] },
    amount: '21',
  },
  dynamic: { properties: {}, amount: '140' }, // 10 x 2 + 30 x 4
  custom: { properties: { custom_amount: '123' }, amount: '123' },
};

const usage = withEvents(summed(['10', '30']), [
  { value: 10, unit_price: '2', quantity: 10 },
  { value: 30, unit_price: '4', quantity: 30 },
]);

describe('charge model dispatch', () => {
  it('knows the eight models of the specification, each with a schema and a calculator', () => {
    expect([...CHARGE_MODELS].sort()).toEqual([
      'custom',
      'dynamic',
      'graduated',
      'graduated_percentage',
      'package',
      'percentage',
      'standard',
      'volume',
    ]);
    for (const model of CHARGE_MODELS) {
      expect(chargePropertiesSchema(model)).toBe(chargePropertiesSchemas[model]);
      expect(chargeModelCalculators[model].propertiesSchema).toBe(chargePropertiesSchemas[model]);
    }
  });

  it.each(CHARGE_MODELS.map((model) => ({ model, ...cases[model] })))(
    '$model prices the shared usage at $amount',
    ({ model, properties, amount }) => {
      const result = computeChargeModel(model, properties, usage);
      expect(result.amount.toString()).toBe(amount);
    },
  );

  it.each(CHARGE_MODELS)('%s refuses properties meant for another model', (model) => {
    const other: ChargeModel = model === 'standard' ? 'package' : 'standard';
    expect(() => computeChargeModel(model, cases[other].properties, usage)).toThrow(ZodError);
    expect(chargePropertiesSchema(model).safeParse(cases[other].properties).success).toBe(false);
  });

  it('rejects an unknown model name at runtime too', () => {
    expect(() => computeChargeModel('tiered' as ChargeModel, {}, usage)).toThrow(/unknown charge model/);
    expect(isChargeModel('graduated_percentage')).toBe(true);
    expect(isChargeModel('tiered')).toBe(false);
  });

  // Each model, one wrong field: the issue path must point at it so the API can answer 422 with it.
  it.each([
    { model: 'standard', properties: { amount: '-2' }, path: 'amount' },
    {
      model: 'graduated',
      properties: { graduated_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '1', flat_amount: 'free' }] },
      path: 'graduated_ranges.0.flat_amount',
    },
    {
      model: 'volume',
      properties: {
        volume_ranges: [
          { from_value: 0, to_value: 10, per_unit_amount: '1', flat_amount: '0' },
          { from_value: 10, to_value: 10, per_unit_amount: '1', flat_amount: '0' },
          { from_value: 10, to_value: null, per_unit_amount: '1', flat_amount: '0' },
        ],
      },
      path: 'volume_ranges.1.to_value',
    },
    { model: 'package', properties: { amount: '1', package_size: -10 }, path: 'package_size' },
    { model: 'percentage', properties: { rate: 1, fixed_amount: '1.00001' }, path: 'fixed_amount' },
    {
      model: 'graduated_percentage',
      properties: { graduated_percentage_ranges: [{ from_value: 3, to_value: null, rate: '1', flat_amount: '0' }] },
      path: 'graduated_percentage_ranges.0.from_value',
    },
    { model: 'dynamic', properties: { quantity_field: ['q'] }, path: 'quantity_field' },
    { model: 'custom', properties: { unit_price: 'one' }, path: 'unit_price' },
  ] satisfies { model: ChargeModel; properties: unknown; path: string }[])(
    '$model rejects a wrong $path',
    ({ model, properties, path }) => {
      expect(issuePaths(chargePropertiesSchema(model), properties)).toEqual([path]);
    },
  );

  it.each(CHARGE_MODELS)('%s rejects properties that are not an object', (model) => {
    expect(issuePaths(chargePropertiesSchema(model), ['amount', '1'])).toEqual(['']);
    expect(issuePaths(chargePropertiesSchema(model), null)).toEqual(['']);
  });
});
