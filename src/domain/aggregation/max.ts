import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import {
  contributingValues,
  eventValueReader,
  eventsInWindow,
  result,
  type AggregationContext,
  type AggregationMetric,
} from './metric';

/**
 * The largest per-event value, 0 without any. A negative maximum is kept as it is: the charge
 * model's clamp decides what a negative quantity costs (nothing), not the aggregation.
 */
export function aggregateMax(
  metric: AggregationMetric,
  events: readonly UsageEvent[],
  context: AggregationContext,
): AggregationResult {
  const values = contributingValues(eventValueReader(metric), eventsInWindow(metric, events, context)).map(
    ({ value }) => value,
  );
  const units = values.length === 0 ? new Dec(0) : Dec.max(...values);
  return result(units, values);
}
