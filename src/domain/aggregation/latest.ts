import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { contributingValues, eventValueReader, eventsInWindow, result, type AggregationContext, type AggregationMetric } from './metric';

/**
 * The value of the last contributing event by timestamp: an event whose value is missing or not
 * numeric is skipped, so the one before it wins. Negative is 0 and no event is 0
 * (lago-reference.md 1.1). Equal timestamps: the one given last wins (ingestion order).
 */
export function aggregateLatest(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): AggregationResult {
  const values = contributingValues(eventValueReader(metric), eventsInWindow(metric, events, context)).map(({ value }) => value);
  const last = values.at(-1);
  const units = last === undefined || last.isNegative() ? new Dec(0) : last;
  return result(units, values);
}
