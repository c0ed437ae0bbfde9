import { Dec } from '../money';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { hasExpression, eventValueReader, applyRounding, type AggregationMetric } from './metric';

/**
 * A pre-aggregated day of one metric for one subscription and filter bucket (the `daily_usage`
 * collection). `usage_date` is the local date in the customer's time zone, so a period, which starts
 * and ends at local midnights, is a whole number of rows. `usage_value` must be stored unrounded
 * (Decimal128), not at the 4 digits of the specification's Decimal(12,4): Σ of rounded days is not
 * the rounded Σ.
 */
export interface DailyUsageRow {
  usage_date: string | Date;
  usage_value: Dec;
  events_count: number;
}

/** How an event's value folds into its day's row: `$inc` or `$max` at ingestion. */
export type DailyCombine = 'add' | 'max';

export type DailyRollUpSupport =
  { readonly exact: true; readonly combine: DailyCombine } | { readonly exact: false; readonly reason: string };

/**
 * Whether a daily pre-aggregate gives exactly what the raw events give, and why not when it does not.
 *
 * - count: Σ of daily counts; always exact.
 * - sum, and custom (a sum of the per-event expression): Σ of daily sums is the Σ of the events, as
 *   long as every per-event value is a finite decimal. Numeric properties always are; an expression
 *   is exact when it has no `/`. A division can give a non-terminating value (1/3) that is rounded to
 *   the working precision, and Σ of rounded day sums can then differ from Σ of rounded event values
 *   in the last digit, so such metrics are read from the raw events. (Both paths add at
 *   decimal.js's 40 significant digits, which no realistic usage value comes near.)
 * - max: max of daily maxima; exact with or without an expression, since each event's value is
 *   computed the same way in both paths and max never rounds.
 * - unique_count: not exact. A value seen on two days counts once, and add/remove state spans days;
 *   a count per day loses which values they were.
 * - weighted_sum: not exact. The integral depends on when within the day each delta happened.
 * - latest: not exact. The row keeps no timestamp, so the last day's last event cannot be told apart.
 *
 * `recurring` does not matter: a recurring sum reads every row since the subscription started.
 */
type RollUpMetric = Pick<AggregationMetric, 'aggregation_type' | 'expression'>;

export function dailyRollUpSupport(metric: RollUpMetric): DailyRollUpSupport {
  const divides = hasExpression(metric) && (metric.expression ?? '').includes('/');
  switch (metric.aggregation_type) {
    case 'count':
      return { exact: true, combine: 'add' };
    case 'sum':
    case 'custom':
      return divides
        ? {
            exact: false,
            reason: 'an expression with a division gives rounded per-event values whose sum depends on grouping',
          }
        : { exact: true, combine: 'add' };
    case 'max':
      return { exact: true, combine: 'max' };
    case 'unique_count':
      return { exact: false, reason: 'distinct values and add/remove state span days' };
    case 'weighted_sum':
      return { exact: false, reason: 'the time-weighted integral needs each event time' };
    case 'latest':
      return { exact: false, reason: 'the latest event needs each event time' };
  }
}

export function canAggregateFromDaily(metric: RollUpMetric): boolean {
  return dailyRollUpSupport(metric).exact;
}

function combineOf(metric: AggregationMetric): DailyCombine {
  const support = dailyRollUpSupport(metric);
  if (!support.exact) {
    throw new Error(`${metric.aggregation_type} cannot be aggregated from daily rows: ${support.reason}`);
  }
  return support.combine;
}

/**
 * What one event adds to its day's row, or null when it contributes nothing (a numeric aggregation
 * skips an event without a numeric value, and no row should be created for it). `count` counts 1
 * for every event, like the raw aggregation.
 */
export function dailyContributionReader(metric: AggregationMetric): (event: UsageEvent) => { combine: DailyCombine; value: Dec } | null {
  const combine = combineOf(metric);
  if (metric.aggregation_type === 'count') return () => ({ combine, value: new Dec(1) });
  const read = eventValueReader(metric);
  return (event) => {
    const value = read(event.properties);
    return value === null ? null : { combine, value };
  };
}

/**
 * Folds events into daily rows, the same way ingestion maintains them one event at a time (a backfill,
 * and the reference the tests compare ingestion against). `dayOf` maps a timestamp to its local date
 * key; time zones are the caller's business. Rows come out sorted by that key.
 */
export function rollUpDaily(metric: AggregationMetric, events: readonly UsageEvent[], dayOf: (timestamp: Date) => string): DailyUsageRow[] {
  const contribution = dailyContributionReader(metric);
  const rows = new Map<string, DailyUsageRow>();
  for (const event of events) {
    const c = contribution(event);
    if (c === null) continue;
    const day = dayOf(event.timestamp);
    const row = rows.get(day);
    if (row === undefined) {
      rows.set(day, { usage_date: day, usage_value: c.value, events_count: 1 });
    } else {
      row.usage_value = c.combine === 'add' ? row.usage_value.plus(c.value) : Dec.max(row.usage_value, c.value);
      row.events_count += 1;
    }
  }
  return [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row);
}

/**
 * The aggregation from the period's daily rows (the caller selects the rows of the period, or every
 * row since the start for a recurring sum), rounded like the raw aggregation. Per-event values and
 * events are not in the rows, so the result has neither: charge models that need them (percentage
 * with per-transaction rules or free events, dynamic, pay in advance) must aggregate raw events.
 * Throws for an aggregation that `dailyRollUpSupport` says is not exact.
 */
export function aggregateDailyRows(
  metric: AggregationMetric,
  rows: readonly DailyUsageRow[],
): Omit<AggregationResult, 'perEventValues' | 'events'> {
  const combine = combineOf(metric);
  // A row without events (a stale row) has no maximum to offer, and no count to add.
  const live = rows.filter((row) => row.events_count > 0);
  const eventsCount = live.reduce((acc, row) => acc + row.events_count, 0);
  let units: Dec;
  if (metric.aggregation_type === 'count') {
    units = new Dec(eventsCount);
  } else if (combine === 'add') {
    units = live.reduce((acc, row) => acc.plus(row.usage_value), new Dec(0));
  } else {
    units = live.length === 0 ? new Dec(0) : Dec.max(...live.map((row) => new Dec(row.usage_value)));
  }
  return { units: applyRounding(metric, units), eventsCount };
}
