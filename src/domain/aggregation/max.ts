import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { contributingValues, eventValueReader, eventsInWindow, result, type AggregationContext, type AggregationMetric } from './metric';

/**
 * The largest per-event value, 0 without any. A negative maximum is kept as it is: the charge
 * model's clamp decides what a negative quantity costs (nothing), not the aggregation.
 */
export function aggregateMax(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): AggregationResult {
  const values = contributingValues(eventValueReader(metric), eventsInWindow(metric, events, context)).map(({ value }) => value);
  // A fold, not Dec.max(...values): spreading a busy period's values as arguments overflows the
  // call stack (a RangeError from roughly 125,000 events on, depending on the stack size).
  const units = values.reduce((acc, value) => (value.greaterThan(acc) ? value : acc), values[0] ?? new Dec(0));
  return result(units, values);
}
