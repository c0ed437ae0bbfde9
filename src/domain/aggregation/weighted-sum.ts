import Decimal from 'decimal.js';
import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import {
  carriesOver,
  contributingValues,
  eventValueReader,
  eventsInWindow,
  type AggregationContext,
  type AggregationMetric,
} from './metric';

/**
 * Time-weighted average of a running level (lago-reference.md 1.1, Lago's WeightedSumQuery). Event
 * values are deltas to the level, not readings. The level, starting at the initial level at `from`,
 * is integrated over time and divided by the period's length:
 *
 *   units = Σ level_i × (t_{i+1} − t_i) / (to − from)
 *
 * March (31 days), +20 on the 16th, +10 on the 18th: (0×15 + 20×2 + 30×14) / 31 = 460/31.
 *
 * Current usage (`now` inside the period) integrates only up to `now` but still divides by the whole
 * period (billing-rules.md, Usage), so the value grows towards the invoiced one and equals it at the
 * period end if nothing changes.
 *
 * The length is the elapsed time `to − from`, not Lago's `days × 86 400 s`: on a DST day the two
 * differ, and only the elapsed time makes a constant level L average to exactly L.
 *
 * Initial level: 0 for a metered metric (`initialLevel` is ignored). A recurring metric starts at
 * `initialLevel` (the previous period's `closingLevel`); without it, at the sum of the deltas before
 * `from`, which is how Lago rebuilds it after a plan change. The integral is summed in milliseconds
 * and divided once, then rounded up at 20 decimals, as Lago does.
 */
export function aggregateWeightedSum(
  metric: AggregationMetric,
  events: readonly UsageEvent[],
  context: AggregationContext,
): AggregationResult & { closingLevel: Dec } {
  const read = eventValueReader(metric);
  const from = context.from.getTime();
  const to = context.to.getTime();
  const end = context.now === undefined ? to : Math.min(Math.max(context.now.getTime(), from), to);

  const initialLevel = initialLevelOf(metric, events, context, read);
  const deltas = contributingValues(read, eventsInWindow(metric, events, context, { withoutLowerBound: false }));

  let level = initialLevel;
  let since = from;
  let integral = new Dec(0);
  for (const { event, value } of deltas) {
    const t = event.timestamp.getTime();
    integral = integral.plus(level.times(t - since));
    level = level.plus(value);
    since = t;
  }
  integral = integral.plus(level.times(end - since));

  const length = to - from;
  const units = length > 0 ? integral.div(length).toDecimalPlaces(20, Decimal.ROUND_CEIL) : new Dec(0);
  const perEventValues = deltas.map(({ value }) => value);
  return { units, eventsCount: perEventValues.length, perEventValues, closingLevel: level };
}

function initialLevelOf(
  metric: AggregationMetric,
  events: readonly UsageEvent[],
  context: AggregationContext,
  read: ReturnType<typeof eventValueReader>,
): Dec {
  if (!carriesOver(metric)) return new Dec(0);
  if (context.initialLevel !== undefined) return new Dec(context.initialLevel);
  const from = context.from.getTime();
  const before = events.filter((event) => event.timestamp.getTime() < from);
  return contributingValues(read, before).reduce((acc, { value }) => acc.plus(value), new Dec(0));
}
