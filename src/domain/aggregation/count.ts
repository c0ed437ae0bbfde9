import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { eventsInWindow, result, type AggregationContext, type AggregationMetric } from './metric';

/**
 * Every event of the window counts, whatever its properties: the numeric rule and any expression do
 * not apply to `count` (billing-rules.md, Usage), so each event contributes 1.
 */
export function aggregateCount(metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext): AggregationResult {
  const counted = eventsInWindow(metric, events, context);
  return result(
    new Dec(counted.length),
    counted.map(() => new Dec(1)),
  );
}
