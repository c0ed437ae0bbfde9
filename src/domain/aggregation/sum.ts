import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { contributingValues, eventValueReader, eventsInWindow, result, type AggregationContext, type AggregationMetric } from './metric';

/**
 * Σ of the per-event values. The total may be negative (refund-like events); the charge model's
 * "no negative fee" clamp deals with that, not the aggregation. A recurring sum has no lower bound:
 * January +5 +3 then February −2 gives 8 then 6 (lago-reference.md 1.2).
 */
export function aggregateSum(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): AggregationResult {
  const values = contributingValues(eventValueReader(metric), eventsInWindow(metric, events, context)).map(({ value }) => value);
  return result(
    values.reduce((acc, v) => acc.plus(v), new Dec(0)),
    values,
  );
}
