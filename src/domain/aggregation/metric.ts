import Decimal from 'decimal.js';
import { Dec } from '../money';
import { evaluateExpression, numericValue, ownProperty, parseExpression, roundToDigits } from '../expression';
import type { AggregationResult, UsageEvent } from '../usage-types';

export const AGGREGATION_TYPES = ['count', 'sum', 'max', 'unique_count', 'weighted_sum', 'latest', 'custom'] as const;
export type AggregationType = (typeof AGGREGATION_TYPES)[number];

/** billing-rules.md, Usage: only these carry over from one period to the next. */
export const RECURRING_AGGREGATION_TYPES = ['sum', 'unique_count', 'weighted_sum'] as const satisfies readonly AggregationType[];

export const ROUNDING_FUNCTIONS = ['round', 'ceil', 'floor'] as const;
export type RoundingFunction = (typeof ROUNDING_FUNCTIONS)[number];

/** The aggregation settings of a billable metric; nulls are accepted as stored documents carry them. */
export interface AggregationMetric {
  aggregation_type: AggregationType;
  field_name?: string | null;
  expression?: string | null;
  rounding_function?: RoundingFunction | null;
  rounding_precision?: number | null;
  recurring: boolean;
}

/**
 * The period `[from, to)` being aggregated. `now` is set for current usage: events after it are
 * ignored and weighted_sum integrates only up to it. `initialLevel` is the running level a recurring
 * weighted_sum carries in from the previous period. `prorate` is set for a charge with
 * `prorated: true` billed in arrear (see ProrationContext).
 */
export interface AggregationContext {
  from: Date;
  to: Date;
  now?: Date;
  initialLevel?: Dec;
  prorate?: ProrationContext;
}

/**
 * What a prorated charge weighs its units by (lago-reference.md 2.10; src/domain/aggregation/prorated.ts):
 * each unit counts for the local dates of `[from, to)` it was present on, over `periodDays`.
 *
 * - `from`, `to`: the billed part of the period, the whole period or a segment of it (the
 *   subscription or the trial starting inside it, a plan change, a termination). Units carried in
 *   from before `from` count for all of its days.
 * - `periodDays`: the days of the whole period (src/domain/periods.ts fullPeriodDays), even when
 *   `[from, to)` is a part of it, as the base fee's proration (Lago PR #6194).
 * - `timezone`: the customer's; days are local calendar dates (billing-rules.md, Billing periods).
 *
 * Read by the recurring sum and unique_count, the only aggregations a prorated charge may have
 * (src/domain/charge-rules.ts proratedErrors); the other aggregations ignore it.
 */
export interface ProrationContext {
  from: Date;
  to: Date;
  periodDays: number;
  timezone: string;
}

/** One aggregation type; it returns unrounded units, `aggregate` applies the metric's rounding. */
export type Aggregator = (metric: AggregationMetric, events: readonly UsageEvent[], context: AggregationContext) => AggregationResult;

export type EventValueReader = (properties: Readonly<Record<string, unknown>>) => Dec | null;

export function isRecurringAggregation(type: AggregationType): boolean {
  return (RECURRING_AGGREGATION_TYPES as readonly AggregationType[]).includes(type);
}

/** `recurring` on a type that cannot carry over is ignored (the schema rejects it at creation). */
export function carriesOver(metric: AggregationMetric): boolean {
  return metric.recurring && isRecurringAggregation(metric.aggregation_type);
}

/**
 * Reads the value one event contributes: the expression's value when the metric has one, else the
 * numeric property `field_name`; null means the event is skipped. The expression is parsed once
 * here, not once per event.
 */
export function eventValueReader(metric: AggregationMetric): EventValueReader {
  if (hasExpression(metric)) {
    const parsed = parseExpression(metric.expression ?? '');
    if (!parsed.ok) {
      // Metrics are validated when created, so this is a corrupt stored metric, not a user error.
      throw new Error(`billable metric expression is invalid: ${parsed.message}`);
    }
    const expr = parsed.expr;
    return (properties) => evaluateExpression(expr, properties);
  }
  const field = metric.field_name;
  if (field === undefined || field === null) return () => null;
  return (properties) => numericValue(ownProperty(properties, field));
}

/** Whether `expression` is set; a blank string counts as unset, like an absent one. */
export function hasExpression(metric: Pick<AggregationMetric, 'expression'>): boolean {
  return typeof metric.expression === 'string' && metric.expression.trim() !== '';
}

/** The end of the window: the period end, or `now` for current usage when it comes first. */
function windowEnd(context: AggregationContext): number {
  const to = context.to.getTime();
  return context.now === undefined ? to : Math.min(to, context.now.getTime() + 1);
}

/**
 * The events an aggregation sees, sorted by timestamp (stable, so events with equal timestamps keep
 * the caller's order, which should be ingestion order). The period is half-open `[from, to)`; with
 * `now`, events up to and including `now`. Recurring sum and unique_count drop the lower bound: they
 * count every event since the subscription started (lago-reference.md 1.2).
 */
export function eventsInWindow(
  metric: AggregationMetric,
  events: readonly UsageEvent[],
  context: AggregationContext,
  options: { withoutLowerBound?: boolean } = {},
): UsageEvent[] {
  const from = context.from.getTime();
  const end = windowEnd(context);
  const withoutLowerBound = options.withoutLowerBound ?? carriesOver(metric);
  return sortByTimestamp(
    events.filter((event) => {
      const t = event.timestamp.getTime();
      return t < end && (withoutLowerBound || t >= from);
    }),
  );
}

export function sortByTimestamp<E extends { timestamp: Date }>(events: readonly E[]): E[] {
  return events
    .map((event, index) => ({ event, index }))
    .sort((a, b) => a.event.timestamp.getTime() - b.event.timestamp.getTime() || a.index - b.index)
    .map(({ event }) => event);
}

/** Each event's value, skipping those without one, in the order given. */
export function contributingValues(read: EventValueReader, events: readonly UsageEvent[]): { event: UsageEvent; value: Dec }[] {
  const out: { event: UsageEvent; value: Dec }[] = [];
  for (const event of events) {
    const value = read(event.properties);
    if (value !== null) out.push({ event, value });
  }
  return out;
}

/**
 * The metric's rounding_function at rounding_precision (default 0), on the aggregated value only
 * (billing-rules.md, Usage). `round` is half away from zero (2.5 -> 3, -2.5 -> -3, as Ruby's
 * BigDecimal#round); a negative precision rounds to tens, hundreds…
 */
export function applyRounding(metric: AggregationMetric, units: Dec): Dec {
  const precision = metric.rounding_precision ?? 0;
  switch (metric.rounding_function) {
    case 'round':
      return roundToDigits(units, precision, Decimal.ROUND_HALF_UP);
    case 'ceil':
      return roundToDigits(units, precision, Decimal.ROUND_CEIL);
    case 'floor':
      return roundToDigits(units, precision, Decimal.ROUND_FLOOR);
    case undefined:
    case null:
      return units;
  }
}

export function result(units: Dec, perEventValues: Dec[], eventsCount = perEventValues.length): AggregationResult {
  return { units, eventsCount, perEventValues };
}
