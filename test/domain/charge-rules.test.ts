import { describe, expect, it } from 'vitest';
import { CHARGE_MODELS, type ChargeModel } from '../../src/domain/charge-models';
import {
  CHARGE_MODEL_RULES,
  chargeRuleErrors,
  type ChargeRuleError,
  type ChargeRuleInput,
  type ChargeRuleMetric,
} from '../../src/domain/charge-rules';
import { dec } from '../../src/domain/money';

const PATH = 'charges.0';

/** A sum metric, not recurring, with one filter key. */
const calls: ChargeRuleMetric = {
  code: 'calls',
  aggregation_type: 'sum',
  recurring: false,
  filters: [{ key: 'region', values: ['us', 'eu'] }],
};
/** A recurring metric (seats), which proration needs. */
const seats: ChargeRuleMetric = { code: 'seats', aggregation_type: 'unique_count', recurring: true };

interface Row {
  name: string;
  model: ChargeModel;
  /** The charge's fields besides its model; absent ones are an in-arrear, invoiceable charge without filters or bounds. */
  properties: Partial<Omit<ChargeRuleInput, 'charge_model'>>;
  metric?: ChargeRuleMetric;
  errors: ChargeRuleError[];
}

const err = (field: string, message: string): ChargeRuleError => ({ path: `${PATH}.${field}`, message });

const inAdvanceOnly = (model: ChargeModel) => err('pay_in_advance', `a ${model} charge cannot be billed in advance`);
const proratedModel = err(
  'prorated',
  'a prorated charge must be standard when paid in advance, and standard, volume or graduated in arrear',
);

// Each charge model's own rules: which can be billed in advance, which can be prorated how.
const modelRows: Row[] = [
  { name: 'standard in advance', model: 'standard', properties: { pay_in_advance: true }, errors: [] },
  { name: 'graduated in advance', model: 'graduated', properties: { pay_in_advance: true }, errors: [] },
  { name: 'volume in advance', model: 'volume', properties: { pay_in_advance: true }, errors: [inAdvanceOnly('volume')] },
  { name: 'volume in arrear', model: 'volume', properties: {}, errors: [] },
  { name: 'package in advance', model: 'package', properties: { pay_in_advance: true }, errors: [] },
  { name: 'percentage in advance', model: 'percentage', properties: { pay_in_advance: true }, errors: [] },
  { name: 'graduated_percentage in advance', model: 'graduated_percentage', properties: { pay_in_advance: true }, errors: [] },
  { name: 'dynamic in advance', model: 'dynamic', properties: { pay_in_advance: true }, errors: [] },
  { name: 'custom in advance', model: 'custom', properties: { pay_in_advance: true }, errors: [] },

  { name: 'standard prorated in arrear', model: 'standard', properties: { prorated: true }, metric: seats, errors: [] },
  { name: 'volume prorated in arrear', model: 'volume', properties: { prorated: true }, metric: seats, errors: [] },
  { name: 'graduated prorated in arrear', model: 'graduated', properties: { prorated: true }, metric: seats, errors: [] },
  { name: 'package prorated in arrear', model: 'package', properties: { prorated: true }, metric: seats, errors: [proratedModel] },
  { name: 'percentage prorated in arrear', model: 'percentage', properties: { prorated: true }, metric: seats, errors: [proratedModel] },
  {
    name: 'graduated_percentage prorated in arrear',
    model: 'graduated_percentage',
    properties: { prorated: true },
    metric: seats,
    errors: [proratedModel],
  },
  { name: 'dynamic prorated in arrear', model: 'dynamic', properties: { prorated: true }, metric: seats, errors: [proratedModel] },
  { name: 'custom prorated in arrear', model: 'custom', properties: { prorated: true }, metric: seats, errors: [proratedModel] },

  {
    name: 'standard prorated in advance',
    model: 'standard',
    properties: { prorated: true, pay_in_advance: true },
    metric: seats,
    errors: [],
  },
  {
    name: 'graduated prorated in advance',
    model: 'graduated',
    properties: { prorated: true, pay_in_advance: true },
    metric: seats,
    errors: [proratedModel],
  },
  {
    name: 'volume prorated in advance: neither rule holds',
    model: 'volume',
    properties: { prorated: true, pay_in_advance: true },
    metric: seats,
    errors: [inAdvanceOnly('volume'), proratedModel],
  },
];

// The rules between a charge's own fields, and between the charge and its metric.
const crossFieldRows: Row[] = [
  // min_amount_cents <= max_amount_cents
  {
    name: 'minimum below maximum',
    model: 'standard',
    properties: { min_amount_cents: dec('10'), max_amount_cents: dec('20') },
    errors: [],
  },
  {
    name: 'minimum equal to maximum',
    model: 'standard',
    properties: { min_amount_cents: dec('20'), max_amount_cents: dec('20') },
    errors: [],
  },
  { name: 'a minimum alone', model: 'standard', properties: { min_amount_cents: dec('20'), max_amount_cents: null }, errors: [] },
  {
    name: 'minimum above maximum',
    model: 'standard',
    properties: { min_amount_cents: dec('20.0001'), max_amount_cents: dec('20') },
    errors: [err('max_amount_cents', 'must not be lower than min_amount_cents')],
  },

  // pay_in_advance needs an aggregation that grows event by event
  ...(['count', 'sum', 'unique_count', 'custom'] as const).map((aggregation): Row => ({
    name: `${aggregation} metric in advance`,
    model: 'standard',
    properties: { pay_in_advance: true },
    metric: { code: 'm', aggregation_type: aggregation },
    errors: [],
  })),
  ...(['max', 'latest', 'weighted_sum'] as const).map((aggregation): Row => ({
    name: `${aggregation} metric in advance`,
    model: 'standard',
    properties: { pay_in_advance: true },
    metric: { code: 'm', aggregation_type: aggregation },
    errors: [err('pay_in_advance', `a ${aggregation} metric cannot be billed in advance (only count, sum, unique_count and custom)`)],
  })),
  { name: 'max metric in arrear', model: 'standard', properties: {}, metric: { code: 'm', aggregation_type: 'max' }, errors: [] },

  // pay_in_advance has no period total to bound
  {
    name: 'minimum in advance',
    model: 'standard',
    properties: { pay_in_advance: true, min_amount_cents: dec('1') },
    errors: [err('min_amount_cents', 'a pay-in-advance charge cannot have a minimum')],
  },
  {
    name: 'maximum in advance',
    model: 'standard',
    properties: { pay_in_advance: true, max_amount_cents: dec('1') },
    errors: [err('max_amount_cents', 'a pay-in-advance charge cannot have a maximum')],
  },
  {
    name: 'null bounds in advance',
    model: 'standard',
    properties: { pay_in_advance: true, min_amount_cents: null, max_amount_cents: null },
    errors: [],
  },

  // invoiceable: false only in advance
  { name: 'left out of invoices in advance', model: 'standard', properties: { pay_in_advance: true, invoiceable: false }, errors: [] },
  {
    name: 'left out of invoices in arrear',
    model: 'standard',
    properties: { invoiceable: false },
    errors: [err('invoiceable', 'only a pay-in-advance charge can be left out of invoices')],
  },

  // prorated needs a recurring metric that is not weighted_sum
  { name: 'prorated, recurring metric', model: 'standard', properties: { prorated: true }, metric: seats, errors: [] },
  {
    name: 'prorated, metric not recurring',
    model: 'standard',
    properties: { prorated: true },
    metric: calls,
    errors: [err('prorated', 'only a charge of a recurring metric can be prorated ("calls" is not recurring)')],
  },
  {
    name: 'prorated, recurring left out',
    model: 'standard',
    properties: { prorated: true },
    metric: { code: 'm', aggregation_type: 'sum' },
    errors: [err('prorated', 'only a charge of a recurring metric can be prorated ("m" is not recurring)')],
  },
  {
    name: 'prorated, recurring weighted_sum metric',
    model: 'standard',
    properties: { prorated: true },
    metric: { code: 'w', aggregation_type: 'weighted_sum', recurring: true },
    errors: [err('prorated', 'a weighted_sum charge cannot be prorated')],
  },
  {
    name: 'prorated package, metric not recurring: the metric is named, not the model',
    model: 'package',
    properties: { prorated: true },
    metric: calls,
    errors: [err('prorated', 'only a charge of a recurring metric can be prorated ("calls" is not recurring)')],
  },

  // filters name the metric's keys and values, each set of values once
  {
    name: 'filters with declared keys and values',
    model: 'standard',
    properties: { filters: [{ values: { region: ['us'] } }, { values: { region: ['eu'] } }, { values: { region: ['us', 'eu'] } }] },
    errors: [],
  },
  {
    name: 'a filter key the metric does not declare',
    model: 'standard',
    properties: { filters: [{ values: { tier: ['gold'] } }] },
    errors: [err('filters.0.values.tier', '"tier" is not a filter key of billable metric "calls" (its keys: "region")')],
  },
  {
    name: 'a filter on a metric without filters',
    model: 'standard',
    properties: { filters: [{ values: { region: ['us'] } }] },
    metric: { code: 'plain', aggregation_type: 'count' },
    errors: [err('filters.0.values.region', '"region" is not a filter key of billable metric "plain" (it declares no filters)')],
  },
  {
    name: 'a filter value the metric does not declare',
    model: 'standard',
    properties: { filters: [{ values: { region: ['us', 'asia'] } }] },
    errors: [err('filters.0.values.region.1', '"asia" is not a value of filter "region" of billable metric "calls"')],
  },
  {
    name: 'two filters with the same values, in another order',
    model: 'standard',
    properties: { filters: [{ values: { region: ['us', 'eu'] } }, { values: { region: ['eu'] } }, { values: { region: ['eu', 'us'] } }] },
    errors: [err('filters.2.values', 'the same values as filters.0')],
  },

  // every broken rule is named, in order: filters, amounts, in advance, invoiceable, proration
  {
    name: 'every rule broken at once',
    model: 'volume',
    properties: {
      pay_in_advance: true,
      prorated: true,
      min_amount_cents: dec('5'),
      max_amount_cents: dec('1'),
      filters: [{ values: { tier: ['gold'] } }],
    },
    metric: { code: 'peak', aggregation_type: 'max', recurring: true, filters: [{ key: 'region', values: ['us'] }] },
    errors: [
      err('filters.0.values.tier', '"tier" is not a filter key of billable metric "peak" (its keys: "region")'),
      err('max_amount_cents', 'must not be lower than min_amount_cents'),
      err('pay_in_advance', 'a max metric cannot be billed in advance (only count, sum, unique_count and custom)'),
      inAdvanceOnly('volume'),
      err('min_amount_cents', 'a pay-in-advance charge cannot have a minimum'),
      err('max_amount_cents', 'a pay-in-advance charge cannot have a maximum'),
      proratedModel,
    ],
  },
];

function charge(model: ChargeModel, properties: Row['properties']): ChargeRuleInput {
  return { charge_model: model, pay_in_advance: false, prorated: false, invoiceable: true, filters: [], ...properties };
}

describe('chargeRuleErrors', () => {
  describe("each charge model's rules", () => {
    it.each(modelRows)('$name', ({ model, properties, metric, errors }) => {
      expect(chargeRuleErrors(charge(model, properties), metric ?? calls, PATH)).toEqual(errors);
    });
  });

  describe('cross-field rules', () => {
    it.each(crossFieldRows)('$name', ({ model, properties, metric, errors }) => {
      expect(chargeRuleErrors(charge(model, properties), metric ?? calls, PATH)).toEqual(errors);
    });
  });

  it('names each error under the path it is given', () => {
    expect(chargeRuleErrors(charge('standard', { invoiceable: false }), calls, 'charges.7')).toEqual([
      { path: 'charges.7.invoiceable', message: 'only a pay-in-advance charge can be left out of invoices' },
    ]);
  });

  it('every model has its rules; only volume cannot be billed in advance', () => {
    expect(Object.keys(CHARGE_MODEL_RULES).sort()).toEqual([...CHARGE_MODELS].sort());
    expect(CHARGE_MODELS.filter((model) => !CHARGE_MODEL_RULES[model].payInAdvance)).toEqual(['volume']);
  });
});
