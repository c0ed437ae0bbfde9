import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { contributingValues, eventValueReader, eventsInWindow, result, type AggregationContext, type AggregationMetric } from './metric';
import { proratedSum } from './prorated';

/**
 * Σ of the per-event values. The total may be negative (refund-like events); the charge model's
 * "no negative fee" clamp deals with that, not the aggregation. A recurring sum has no lower bound:
 * January +5 +3 then February −2 gives 8 then 6 (lago-reference.md 1.2). With `context.prorate` (a
 * prorated charge) each value is weighted by the days it was present in the billed part
 * (src/domain/aggregation/prorated.ts); the per-event values stay the unweighted ones.
 */
export function aggregateSum(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): AggregationResult {
  const contributing = contributingValues(eventValueReader(metric), eventsInWindow(metric, events, context));
  const values = contributing.map(({ value }) => value);
  return result(context.prorate ? proratedSum(contributing, context.prorate) : values.reduce((acc, v) => acc.plus(v), new Dec(0)), values);
}
