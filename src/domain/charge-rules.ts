// What makes a charge of a plan valid beyond the shape of its fields: the rules of its charge model
// (billed in advance, prorated), the rules between its own fields, and the rules between it and its
// billable metric (filters, aggregation, recurring). Pure: the plan API resolves the metric and
// turns the errors into its 422.
import { filterKey, type FilterValues } from './charge-filters';
import type { ChargeModel } from './charge-models';
import type { Dec } from './money';
import { carriesOver, type AggregationMetric } from './aggregation/metric';

/** One broken rule, at the path of the field that breaks it (`charges.0.pay_in_advance`). */
export interface ChargeRuleError {
  path: string;
  message: string;
}

/** What the rules read of a charge. */
export interface ChargeRuleInput {
  charge_model: ChargeModel;
  pay_in_advance: boolean;
  prorated: boolean;
  invoiceable: boolean;
  min_amount_cents?: Dec | null | undefined;
  max_amount_cents?: Dec | null | undefined;
  filters: readonly { values: FilterValues }[];
}

/** What the rules read of the charge's billable metric. */
export interface ChargeRuleMetric {
  code: string;
  aggregation_type: string;
  recurring?: boolean | undefined;
  filters?: readonly { key: string; values: readonly string[] }[] | undefined;
}

/** What each charge model allows. */
export interface ChargeModelRules {
  /** Billed event by event as "price with it − price without it". */
  payInAdvance: boolean;
  /** Prorated when paid in advance. */
  proratedInAdvance: boolean;
  /** Prorated when paid in arrear. */
  proratedInArrear: boolean;
}

/**
 * lago-reference.md 2.10. NOTE: a volume charge prices every unit at the tier of the period's total,
 * so one more event can reprice all the others: it has no in-advance price. Prorated charges are
 * standard when paid in advance, and standard, volume or graduated in arrear.
 */
export const CHARGE_MODEL_RULES: { readonly [M in ChargeModel]: ChargeModelRules } = {
  standard: { payInAdvance: true, proratedInAdvance: true, proratedInArrear: true },
  graduated: { payInAdvance: true, proratedInAdvance: false, proratedInArrear: true },
  volume: { payInAdvance: false, proratedInAdvance: false, proratedInArrear: true },
  package: { payInAdvance: true, proratedInAdvance: false, proratedInArrear: false },
  percentage: { payInAdvance: true, proratedInAdvance: false, proratedInArrear: false },
  graduated_percentage: { payInAdvance: true, proratedInAdvance: false, proratedInArrear: false },
  dynamic: { payInAdvance: true, proratedInAdvance: false, proratedInArrear: false },
  custom: { payInAdvance: true, proratedInAdvance: false, proratedInArrear: false },
};

/**
 * Lago bills an event in advance as "price with it − price without it"; that needs an aggregation
 * that grows event by event. max, latest and weighted_sum do not (lago-reference.md 2.10).
 */
export const IN_ADVANCE_AGGREGATIONS: ReadonlySet<string> = new Set(['count', 'sum', 'unique_count', 'custom']);

/**
 * Every rule the charge breaks, each named at its path (prefixed by `path`), in a fixed order:
 * filters, amounts, billing in advance, invoiceable, proration.
 */
export function chargeRuleErrors(charge: ChargeRuleInput, metric: ChargeRuleMetric, path: string): ChargeRuleError[] {
  return [
    ...filterErrors(charge, metric, path),
    ...amountBoundErrors(charge, path),
    ...payInAdvanceErrors(charge, metric, path),
    ...invoiceableErrors(charge, path),
    ...proratedErrors(charge, metric, path),
  ];
}

/** A filter names keys and values the metric declares, and no two filters have the same values. */
export function filterErrors(charge: Pick<ChargeRuleInput, 'filters'>, metric: ChargeRuleMetric, path: string): ChargeRuleError[] {
  const errors: ChargeRuleError[] = [];
  const declared = new Map((metric.filters ?? []).map((f) => [f.key, new Set(f.values)]));
  const seen = new Map<string, number>();
  charge.filters.forEach((filter, j) => {
    for (const [key, values] of Object.entries(filter.values)) {
      const accepted = declared.get(key);
      if (!accepted) {
        const keys = [...declared.keys()].map((k) => `"${k}"`).join(', ');
        errors.push({
          path: `${path}.filters.${j}.values.${key}`,
          message: `"${key}" is not a filter key of billable metric "${metric.code}" (${keys ? `its keys: ${keys}` : 'it declares no filters'})`,
        });
        continue;
      }
      values.forEach((value, k) => {
        if (!accepted.has(value)) {
          errors.push({
            path: `${path}.filters.${j}.values.${key}.${k}`,
            message: `"${value}" is not a value of filter "${key}" of billable metric "${metric.code}"`,
          });
        }
      });
    }
    // Usage and fees are keyed by the filter's values: two filters with the same values would
    // price the same events twice (or one of them never).
    const key = filterKey(filter.values);
    const first = seen.get(key);
    if (first === undefined) seen.set(key, j);
    else errors.push({ path: `${path}.filters.${j}.values`, message: `the same values as filters.${first}` });
  });
  return errors;
}

/** The minimum of the period's total is not above its maximum. */
export function amountBoundErrors(charge: Pick<ChargeRuleInput, 'min_amount_cents' | 'max_amount_cents'>, path: string): ChargeRuleError[] {
  const min = charge.min_amount_cents ?? null;
  const max = charge.max_amount_cents ?? null;
  if (min !== null && max !== null && min.gt(max)) {
    return [{ path: `${path}.max_amount_cents`, message: 'must not be lower than min_amount_cents' }];
  }
  return [];
}

/** In advance: an aggregation that grows event by event, a model that prices one event, no minimum or maximum. */
export function payInAdvanceErrors(charge: ChargeRuleInput, metric: ChargeRuleMetric, path: string): ChargeRuleError[] {
  if (!charge.pay_in_advance) return [];
  const errors: ChargeRuleError[] = [];
  if (!IN_ADVANCE_AGGREGATIONS.has(metric.aggregation_type)) {
    errors.push({
      path: `${path}.pay_in_advance`,
      message: `a ${metric.aggregation_type} metric cannot be billed in advance (only count, sum, unique_count and custom)`,
    });
  }
  if (!CHARGE_MODEL_RULES[charge.charge_model].payInAdvance) {
    errors.push({ path: `${path}.pay_in_advance`, message: `a ${charge.charge_model} charge cannot be billed in advance` });
  }
  // Each event is priced on its own; a cap of the period's total has nothing to apply to.
  if ((charge.min_amount_cents ?? null) !== null) {
    errors.push({ path: `${path}.min_amount_cents`, message: 'a pay-in-advance charge cannot have a minimum' });
  }
  if ((charge.max_amount_cents ?? null) !== null) {
    errors.push({ path: `${path}.max_amount_cents`, message: 'a pay-in-advance charge cannot have a maximum' });
  }
  return errors;
}

/** Only a charge billed in advance (its fees are already settled) can be left out of invoices. */
export function invoiceableErrors(charge: Pick<ChargeRuleInput, 'invoiceable' | 'pay_in_advance'>, path: string): ChargeRuleError[] {
  if (!charge.invoiceable && !charge.pay_in_advance) {
    return [{ path: `${path}.invoiceable`, message: 'only a pay-in-advance charge can be left out of invoices' }];
  }
  return [];
}

/** Prorated: a recurring metric that is not weighted_sum, and a model that prorates (CHARGE_MODEL_RULES). */
export function proratedErrors(charge: ChargeRuleInput, metric: ChargeRuleMetric, path: string): ChargeRuleError[] {
  if (!charge.prorated) return [];
  const rules = CHARGE_MODEL_RULES[charge.charge_model];
  if (metric.recurring !== true) {
    return [
      { path: `${path}.prorated`, message: `only a charge of a recurring metric can be prorated ("${metric.code}" is not recurring)` },
    ];
  }
  if (metric.aggregation_type === 'weighted_sum') {
    return [{ path: `${path}.prorated`, message: 'a weighted_sum charge cannot be prorated' }];
  }
  if (!(charge.pay_in_advance ? rules.proratedInAdvance : rules.proratedInArrear)) {
    return [
      {
        path: `${path}.prorated`,
        message: 'a prorated charge must be standard when paid in advance, and standard, volume or graduated in arrear',
      },
    ];
  }
  return [];
}

/**
 * A charge billed event by event when its events arrive (src/billing/subscription/in-advance.ts):
 * paid in advance on an aggregation that grows event by event. On a recurring metric the units
 * carried into each new period are billed again at its start (carriedInAdvance).
 */
export function billedPerEvent(charge: { pay_in_advance: boolean }, metric: AggregationMetric): boolean {
  return charge.pay_in_advance && IN_ADVANCE_AGGREGATIONS.has(metric.aggregation_type);
}

/** An in-advance charge of a recurring metric: its carried units are billed at each period start. */
export function carriedInAdvance(charge: { pay_in_advance: boolean }, metric: AggregationMetric): boolean {
  return billedPerEvent(charge, metric) && carriesOver(metric);
}
