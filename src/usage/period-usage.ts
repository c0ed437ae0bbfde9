// A subscription's usage of its plan's charges over a range of time, priced by the engine. Used
// by current usage now, and by invoice generation at period ends.
//
// Where it reads: for metrics whose daily roll-up is exact (count, sum, max, custom sums) and
// charge models that need only the units, the daily_usage rows of the whole local days in the
// range, plus raw events for a partial first day (a subscription or trial starting mid-day).
// Everything else reads the range's raw events, prorated charges too (their units weigh each
// event's date).
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { fromDecimal128 } from '../db/decimal';
import { aggregate, aggregateDailyRows, carriesOver, dailyRollUpSupport, prorationFor, type ProrationContext } from '../domain/aggregation';
import { matchingFilterIndex } from '../domain/charge-filters';
import { type ChargeFees, computeChargeFees, FULL_PERIOD, type ProrationRatio } from '../domain/charges';
import { Dec } from '../domain/money';
import { localDate, startOfLocalDay, startOfNextLocalDay } from '../domain/periods';
import type { AggregationResult, UsageEvent } from '../domain/usage-types';
import type { ChargeView, MetricView, PlanView } from './catalog-view';

export interface ChargeUsage {
  charge: ChargeView;
  metric: MetricView;
  aggregations: { default: AggregationResult; filters: AggregationResult[] };
  fees: ChargeFees;
  /** What each bucket's aggregation was read from (kept on the fees it bills, for explanations). */
  sources: { default: UsageSource; filters: UsageSource[] };
  /** The range this charge's usage was read over (a recurring metric's starts at the subscription's start). */
  range: { from: Date; to: Date; proration: ProrationRatio };
}

/** The daily rows and raw events one bucket's aggregation read. */
export interface UsageSource {
  /** Daily pre-aggregate rows of whole local days, the events they count, their first and last dates. */
  dailyRows: number;
  dailyRowsEvents: number;
  firstUsageDate: string | null;
  lastUsageDate: string | null;
  /** Raw events read one by one (partial days, or charges that price events), and their time range. */
  rawEvents: number;
  firstEventAt: Date | null;
  lastEventAt: Date | null;
}

/** A charge's usage that read nothing. */
export const NO_SOURCE: UsageSource = {
  dailyRows: 0,
  dailyRowsEvents: 0,
  firstUsageDate: null,
  lastUsageDate: null,
  rawEvents: 0,
  firstEventAt: null,
  lastEventAt: null,
};

function sourceOf(rows: readonly { usage_date: string; events_count: number }[], events: readonly UsageEvent[]): UsageSource {
  const source: UsageSource = { ...NO_SOURCE, dailyRows: rows.length, rawEvents: events.length };
  for (const row of rows) {
    source.dailyRowsEvents += row.events_count;
    if (source.firstUsageDate === null || row.usage_date < source.firstUsageDate) source.firstUsageDate = row.usage_date;
    if (source.lastUsageDate === null || row.usage_date > source.lastUsageDate) source.lastUsageDate = row.usage_date;
  }
  for (const { timestamp } of events) {
    if (source.firstEventAt === null || timestamp < source.firstEventAt) source.firstEventAt = timestamp;
    if (source.lastEventAt === null || timestamp > source.lastEventAt) source.lastEventAt = timestamp;
  }
  return source;
}

export interface UsageRange {
  subscriptionId: string;
  organizationId: string;
  /** Inclusive start (the period start, or the trial end). */
  from: Date;
  /** Exclusive end (the period end). */
  to: Date;
  /** The subscription's start: recurring metrics count every event since then. */
  subscriptionStartedAt: Date;
  timezone: string;
  /**
   * For weighted_sum of the current period: integrate up to now. Every other aggregation counts
   * every event stamped inside the range (current usage is what has been reported for the period).
   */
  now?: Date;
  /**
   * The part of the period billed, `usedDays` of its `periodDays`, when it is not the whole period
   * (FULL_PERIOD or undefined: the whole period). It prorates caps, and prorated charges.
   */
  proration?: ProrationRatio;
  /**
   * The end of the billed part when `to` stops earlier (progressive billing reads usage up to now
   * but bills the segment to its end): prorated charges weigh units present up to it. Default: for
   * a part of the period, the midnight after its `proration.usedDays` dates; else `to`.
   */
  billedTo?: Date;
  /**
   * Billing-day scoping: when given, a charge whose metric is not in the set (no event in the
   * range) is priced at zero units without reading usage. Recurring metrics are always read.
   */
  metricIdsWithEvents?: Set<string>;
}

/**
 * A charge with `prorated: true` billed in arrear: its units weigh each recurring unit by the part of
 * the period it was present (lago-reference.md 2.10). Prorated in advance is not implemented: such a
 * charge is billed unprorated, in full at the period start as Lago bills it on the billing date.
 */
function proratedInArrear(charge: ChargeView): boolean {
  return charge.prorated === true && !charge.pay_in_advance;
}

/** Charge models that price from per-event values or event properties, not units alone; prorated charges. */
function needsEvents(charge: ChargeView): boolean {
  if (proratedInArrear(charge)) return true;
  if (charge.charge_model === 'dynamic') return true;
  if (charge.charge_model === 'percentage') {
    const p = charge.properties;
    return [
      'fixed_amount',
      'free_units_per_events',
      'free_units_per_total_aggregation',
      'per_transaction_min_amount',
      'per_transaction_max_amount',
    ].some((key) => p[key] !== undefined && p[key] !== null);
  }
  return false;
}

export function emptyAggregation(): AggregationResult {
  return { units: new Dec(0), eventsCount: 0, perEventValues: [], events: [] };
}

export async function computeChargeUsage(
  db: Db,
  plan: PlanView,
  metrics: Map<string, MetricView>,
  range: UsageRange,
): Promise<ChargeUsage[]> {
  const metricOf = (charge: ChargeView) => {
    const metric = metrics.get(charge.billable_metric_id);
    if (!metric) throw new Error(`billable metric ${charge.billable_metric_id} of charge ${charge._id} not found`);
    return metric;
  };
  const skipped = (metric: MetricView) =>
    range.metricIdsWithEvents !== undefined && !carriesOver(metric) && !range.metricIdsWithEvents.has(metric._id);
  const readsDaily = (charge: ChargeView, metric: MetricView) => dailyRollUpSupport(metric).exact && !needsEvents(charge);
  // The daily rows of every charge read over the range itself (not from the subscription's start)
  // come from one query.
  const shared = [
    ...new Set(
      plan.charges.flatMap((charge) => {
        const metric = metricOf(charge);
        return readsDaily(charge, metric) && !skipped(metric) && !carriesOver(metric) ? [metric._id] : [];
      }),
    ),
  ];
  const sharedRows = shared.length > 0 ? await dailyRows(db, range.subscriptionId, shared, range) : null;
  return Promise.all(
    plan.charges.map(async (charge) => {
      const metric = metricOf(charge);
      const from = carriesOver(metric) ? range.subscriptionStartedAt : range.from;
      // Taken before `from` is moved back to the subscription start for a recurring metric.
      const prorate = proratedInArrear(charge)
        ? prorationFor({ from: range.from, to: range.to, timezone: range.timezone, ratio: range.proration, billedTo: range.billedTo })
        : undefined;
      const { sources, ...aggregations } = skipped(metric)
        ? {
            default: emptyAggregation(),
            filters: charge.filters.map(() => emptyAggregation()),
            sources: { default: NO_SOURCE, filters: charge.filters.map(() => NO_SOURCE) },
          }
        : readsDaily(charge, metric)
          ? await fromDailyRows(db, charge, metric, { ...range, from }, shared.includes(metric._id) ? sharedRows : null)
          : await fromEvents(db, charge, metric, { ...range, from }, prorate);
      const fees = chargeFeesOf(charge, aggregations, range.proration ?? FULL_PERIOD);
      return { charge, metric, aggregations, fees, sources, range: { from, to: range.to, proration: range.proration ?? FULL_PERIOD } };
    }),
  );
}

/** A charge's fees from its aggregations (default bucket, then one per filter), by the charge model. */
export function chargeFeesOf(
  charge: ChargeView,
  aggregations: { default: AggregationResult; filters: AggregationResult[] },
  proration: ProrationRatio,
): ReturnType<typeof computeChargeFees> {
  return computeChargeFees(
    {
      charge_model: charge.charge_model,
      properties: charge.properties,
      min_amount_cents: fromDecimal128(charge.min_amount_cents)?.toString() ?? null,
      max_amount_cents: fromDecimal128(charge.max_amount_cents)?.toString() ?? null,
    },
    {
      default: aggregations.default,
      filters: charge.filters.map((f, i) => ({ properties: f.properties, aggregation: aggregations.filters[i]! })),
    },
    proration,
  );
}

function bucketOf(charge: ChargeView, properties: Record<string, unknown>): number | null {
  return matchingFilterIndex(charge.filters, properties);
}

async function loadEvents(db: Db, range: UsageRange, metric: MetricView, from: Date, to: Date): Promise<UsageEvent[]> {
  const docs = await db.models.Event.collection
    .find(
      {
        organization_id: range.organizationId,
        subscription_ids: range.subscriptionId,
        billable_metric_id: metric._id,
        timestamp: { $gte: from, $lt: to },
      },
      { projection: { transaction_id: 1, timestamp: 1, properties: 1 } },
    )
    .toArray();
  return docs.map((d) => ({
    transactionId: d.transaction_id as string,
    timestamp: d.timestamp as Date,
    properties: (d.properties ?? {}) as Record<string, unknown>,
  }));
}

async function fromEvents(db: Db, charge: ChargeView, metric: MetricView, range: UsageRange, prorate: ProrationContext | undefined) {
  const events = await loadEvents(db, range, metric, range.from, range.to);
  const buckets: UsageEvent[][] = charge.filters.map(() => []);
  const fallback: UsageEvent[] = [];
  for (const event of events) {
    const index = bucketOf(charge, event.properties);
    (index === null ? fallback : buckets[index]!).push(event);
  }
  const context = {
    from: range.from,
    to: range.to,
    ...(range.now && metric.aggregation_type === 'weighted_sum' ? { now: range.now } : {}),
    ...(prorate ? { prorate } : {}),
  };
  return {
    default: aggregate(metric, fallback, context),
    filters: buckets.map((list) => aggregate(metric, list, context)),
    sources: { default: sourceOf([], fallback), filters: buckets.map((list) => sourceOf([], list)) },
  };
}

/**
 * Whether every charge's usage over `range` comes from the daily rows of whole days alone (metrics
 * that do not carry over, daily-exact, a range from midnight to midnight): then one read of the
 * rows tells which charges had usage, and scoping by metricIdsWithEvents saves nothing.
 */
export function readsWholeDaysOnly(plan: PlanView, metrics: Map<string, MetricView>, range: Pick<UsageRange, 'from' | 'to' | 'timezone'>) {
  const { firstMidnight, lastMidnight } = wholeDaysOf(range);
  if (firstMidnight.getTime() !== range.from.getTime() || lastMidnight.getTime() !== range.to.getTime()) return false;
  return plan.charges.every((charge) => {
    const metric = metrics.get(charge.billable_metric_id);
    return metric !== undefined && !carriesOver(metric) && dailyRollUpSupport(metric).exact && !needsEvents(charge);
  });
}

/** The whole local days of a range: from its first midnight at or after `from` to its last at or before `to`. */
function wholeDaysOf(range: Pick<UsageRange, 'from' | 'to' | 'timezone'>) {
  const firstMidnight =
    startOfLocalDay(range.from, range.timezone).getTime() === range.from.getTime()
      ? range.from
      : startOfNextLocalDay(range.from, range.timezone);
  const lastMidnight = startOfLocalDay(range.to, range.timezone);
  return { firstMidnight, lastMidnight, any: firstMidnight < lastMidnight };
}

interface DailyRow {
  billable_metric_id: string;
  usage_value: Parameters<typeof fromDecimal128>[0];
  events_count: number;
  dimensions_key: string;
  usage_date: string;
}

/** The daily rows of a subscription's `metricIds` over the whole days of `range` (none: empty). */
async function dailyRows(db: Db, subscriptionId: string, metricIds: string[], range: UsageRange): Promise<DailyRow[]> {
  const { firstMidnight, lastMidnight, any } = wholeDaysOf(range);
  if (!any) return [];
  // The driver directly, without the _id (the row's whole key, longer than the rest of it): a
  // current_usage reads a row per day, metric and dimension set.
  return db.models.DailyUsage.collection
    .find<DailyRow>(
      {
        subscription_id: subscriptionId,
        billable_metric_id: metricIds.length === 1 ? metricIds[0]! : { $in: metricIds },
        usage_date: { $gte: localDate(firstMidnight, range.timezone), $lt: localDate(lastMidnight, range.timezone) },
      },
      { projection: { _id: 0, billable_metric_id: 1, usage_value: 1, events_count: 1, dimensions_key: 1, usage_date: 1 } },
    )
    .toArray();
}

async function fromDailyRows(db: Db, charge: ChargeView, metric: MetricView, range: UsageRange, preloaded: DailyRow[] | null) {
  // Whole local days between the first midnight at or after `from` and the last midnight at or
  // before `to` come from the daily rows (`preloaded`: already read with other metrics' rows); a
  // partial first or last day (a subscription or trial starting mid-day, a termination mid-day)
  // is read raw.
  const { firstMidnight, lastMidnight, any: wholeDays } = wholeDaysOf(range);
  const partialRanges: [Date, Date][] = wholeDays
    ? [
        ...(firstMidnight > range.from ? [[range.from, firstMidnight] as [Date, Date]] : []),
        ...(lastMidnight < range.to ? [[lastMidnight, range.to] as [Date, Date]] : []),
      ]
    : [[range.from, range.to]];
  const partialEvents = (await Promise.all(partialRanges.map(([from, to]) => loadEvents(db, range, metric, from, to)))).flat();
  const rows = (preloaded ?? (await dailyRows(db, range.subscriptionId, [metric._id], range))).filter(
    (row) => row.billable_metric_id === metric._id,
  );

  const rowBuckets: { usage_date: string; usage_value: Decimal; events_count: number }[][] = charge.filters.map(() => []);
  const rowFallback: (typeof rowBuckets)[number] = [];
  // A few dimension sets recur on every day: each is parsed and matched once.
  const bucketByKey = new Map<string, number | null>();
  for (const row of rows) {
    const key = row.dimensions_key || '{}';
    let index = bucketByKey.get(key);
    if (index === undefined) {
      index = bucketOf(charge, JSON.parse(key) as Record<string, string>);
      bucketByKey.set(key, index);
    }
    (index === null ? rowFallback : rowBuckets[index]!).push({
      usage_date: row.usage_date,
      usage_value: fromDecimal128(row.usage_value) ?? new Dec(0),
      events_count: row.events_count,
    });
  }
  // The partial days' raw events become one more daily row per bucket, so both parts combine
  // exactly as the roll-up would (add for count/sum, max for max).
  const partialBuckets: UsageEvent[][] = charge.filters.map(() => []);
  const partialFallback: UsageEvent[] = [];
  for (const event of partialEvents) {
    const index = bucketOf(charge, event.properties);
    (index === null ? partialFallback : partialBuckets[index]!).push(event);
  }
  const combine = (rowsOfBucket: (typeof rowBuckets)[number], events: UsageEvent[]): AggregationResult => {
    const extra =
      events.length > 0
        ? aggregate({ ...metric, rounding_function: null, rounding_precision: null }, events, { from: range.from, to: range.to })
        : null;
    const all =
      extra && extra.eventsCount > 0
        ? [...rowsOfBucket, { usage_date: 'partial', usage_value: extra.units, events_count: extra.eventsCount }]
        : rowsOfBucket;
    if (all.length === 0) return emptyAggregation();
    return { ...aggregateDailyRows(metric, all), perEventValues: [] };
  };
  return {
    default: combine(rowFallback, partialFallback),
    filters: rowBuckets.map((bucket, i) => combine(bucket, partialBuckets[i]!)),
    sources: {
      default: sourceOf(rowFallback, partialFallback),
      filters: rowBuckets.map((bucket, i) => sourceOf(bucket, partialBuckets[i]!)),
    },
  };
}
