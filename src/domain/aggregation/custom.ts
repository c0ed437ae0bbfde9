import type { AggregationResult, UsageEvent } from '../usage-types';
import type { AggregationContext, AggregationMetric } from './metric';
import { aggregateSum } from './sum';

/**
 * Σ of the per-event expression (billing-rules.md, Usage), which is a sum whose per-event value
 * comes from the expression; without an expression it is the sum of `field_name`. Lago's deprecated
 * per-event Ruby aggregator has no equivalent here. A custom metric is never recurring (only sum,
 * unique_count and weighted_sum may be), so the window always has its lower bound.
 */
export function aggregateCustom(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): AggregationResult {
  return aggregateSum({ ...metric, recurring: false }, events, context);
}
