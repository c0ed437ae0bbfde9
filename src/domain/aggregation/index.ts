import type { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { aggregateCount } from './count';
import { aggregateCustom } from './custom';
import { aggregateLatest } from './latest';
import { aggregateMax } from './max';
import { applyRounding, eventsInWindow, type AggregationContext, type AggregationMetric } from './metric';
import { aggregateSum } from './sum';
import { aggregateUniqueCount } from './unique-count';
import { aggregateWeightedSum } from './weighted-sum';

export * from './metric';
export * from './prorated';
export * from './daily';
export * from './schema';
export { aggregateCount, aggregateCustom, aggregateLatest, aggregateMax, aggregateSum, aggregateUniqueCount, aggregateWeightedSum };

/**
 * An aggregation as `aggregate` returns it: the shared result, plus the weighted_sum closing level a
 * recurring metric carries into the next period, plus the bucket's events of the period (contributing
 * or not) for the dynamic charge model.
 */
export type MetricAggregation = AggregationResult & {
  closingLevel?: Dec;
  events?: readonly UsageEvent[];
};

/**
 * Aggregates one bucket of events (a charge filter's, or the default bucket) over the period, then
 * applies the metric's rounding. The caller may pass more events than the period's: the window is
 * applied here (recurring sum and unique_count reach back to the subscription start).
 */
export function aggregate(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): MetricAggregation {
  const raw = aggregateRaw(metric, events, context);
  return {
    ...raw,
    units: applyRounding(metric, raw.units),
    events: eventsInWindow(metric, events, context, { withoutLowerBound: false }),
  };
}

function aggregateRaw(
  metric: AggregationMetric,
  events: readonly UsageEvent[],
  context: AggregationContext,
): AggregationResult & { closingLevel?: Dec } {
  const type = metric.aggregation_type;
  switch (type) {
    case 'count':
      return aggregateCount(metric, events, context);
    case 'sum':
      return aggregateSum(metric, events, context);
    case 'max':
      return aggregateMax(metric, events, context);
    case 'unique_count':
      return aggregateUniqueCount(metric, events, context);
    case 'weighted_sum':
      return aggregateWeightedSum(metric, events, context);
    case 'latest':
      return aggregateLatest(metric, events, context);
    case 'custom':
      return aggregateCustom(metric, events, context);
    default: {
      const unknown: never = type;
      throw new Error(`unknown aggregation_type ${String(unknown)}`);
    }
  }
}
