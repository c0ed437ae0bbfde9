// What a fee was priced from, written on the fee when it is billed (`basis`), so that an invoice can
// be explained later (src/billing/explain.ts) from the plan and charge as they were then, not as
// they are now: plans are edited in place. Plain JSON (decimals as strings, instants as ISO), read
// back as it was written; fees billed before this existed have none (null).
import type Decimal from 'decimal.js';
import type { ChargeModel } from '../domain/charge-models';
import type { ProrationRatio } from '../domain/charges';
import type { CommitmentTrueUp } from '../domain/commitment';
import type { SegmentProration } from '../domain/proration';
import { fromDecimal128 } from '../db/decimal';
import type { ChargeUsage, UsageSource } from '../usage/period-usage';
import type { PlanSnapshot } from '../subscriptions/state';

/**
 * A charge as billed. Only the properties that priced the fee's bucket are kept (on the basis), and
 * of the other filters only their values, which decide the bucket an event falls in: a charge with
 * many filters has as many fees, and each need not carry them all.
 */
export type ChargeSnapshot = {
  id: string;
  billable_metric_id: string;
  charge_model: ChargeModel;
  pay_in_advance: boolean;
  prorated: boolean;
  invoiceable: boolean;
  min_amount_cents: string | null;
  max_amount_cents: string | null;
  invoice_display_name: string | null;
  filters: { id: string; values: Record<string, string[]> }[];
};

export type MetricSnapshot = {
  id: string;
  code: string;
  name: string | null;
  aggregation_type: string;
  field_name: string | null;
  expression: string | null;
  recurring: boolean;
  rounding_function: string | null;
  rounding_precision: number | null;
};

export type UsageSourceRecord = {
  daily_rows: number;
  daily_rows_events: number;
  first_usage_date: string | null;
  last_usage_date: string | null;
  raw_events: number;
  first_event_at: string | null;
  last_event_at: string | null;
};

/** A usage line: one bucket of a charge (its default bucket or one filter's), or its minimum's true-up. */
export type ChargeFeeBasis = {
  kind: 'charge';
  /** `bucket`: usage priced by the charge model; `minimum`: what the charge's minimum added. */
  line: 'bucket' | 'minimum';
  charge: ChargeSnapshot;
  metric: MetricSnapshot;
  /** The filter whose bucket this is; null for the default bucket (events matching no filter). */
  filter_id: string | null;
  /** The properties that priced the bucket: the filter's, else the charge's own. */
  properties: Record<string, unknown>;
  usage: {
    from: string;
    to: string;
    units: string;
    events_count: number;
    sources: UsageSourceRecord;
  };
  /** What the charge model priced for this bucket, before the charge's caps. */
  model: { units: string; amount_cents: string };
  /** The charge's caps over all its buckets (prorated like the base fee). */
  caps: {
    used_days: number;
    period_days: number;
    amount_before_caps_cents: string;
    min_amount_cents: string | null;
    max_amount_cents: string | null;
    /** This bucket's share of what the maximum took off. */
    reduction_cents: string;
    min_true_up_cents: string;
    charge_amount_cents: string;
  };
};

export type BaseFeeBasis = {
  kind: 'base_fee';
  plan: { id: string; amount_cents: string; interval: string; currency: string };
  from: string;
  to: string;
  used_days: number;
  period_days: number;
};

export type CommitmentFeeBasis = {
  kind: 'commitment';
  commitment_amount_cents: string;
  charges_amount_cents: string;
  true_up_amount_cents: string;
  used_days: number | null;
  period_days: number | null;
};

export type FeeBasis = ChargeFeeBasis | BaseFeeBasis | CommitmentFeeBasis;

const s = (value: Decimal) => value.toString();

function sourceRecord(source: UsageSource): UsageSourceRecord {
  return {
    daily_rows: source.dailyRows,
    daily_rows_events: source.dailyRowsEvents,
    first_usage_date: source.firstUsageDate,
    last_usage_date: source.lastUsageDate,
    raw_events: source.rawEvents,
    first_event_at: source.firstEventAt?.toISOString() ?? null,
    last_event_at: source.lastEventAt?.toISOString() ?? null,
  };
}

function chargeSnapshot(usage: ChargeUsage): ChargeSnapshot {
  const { charge } = usage;
  return {
    id: charge._id,
    billable_metric_id: charge.billable_metric_id,
    charge_model: charge.charge_model,
    pay_in_advance: charge.pay_in_advance,
    prorated: charge.prorated ?? false,
    invoiceable: charge.invoiceable ?? true,
    min_amount_cents: fromDecimal128(charge.min_amount_cents)?.toString() ?? null,
    max_amount_cents: fromDecimal128(charge.max_amount_cents)?.toString() ?? null,
    invoice_display_name: charge.invoice_display_name ?? null,
    filters: charge.filters.map((f) => ({ id: f._id, values: f.values })),
  };
}

function metricSnapshot(usage: ChargeUsage): MetricSnapshot {
  const { metric } = usage;
  return {
    id: metric._id,
    code: metric.code,
    name: (metric as { name?: string | null }).name ?? null,
    aggregation_type: metric.aggregation_type,
    field_name: metric.field_name ?? null,
    expression: metric.expression ?? null,
    recurring: metric.recurring,
    rounding_function: metric.rounding_function ?? null,
    rounding_precision: metric.rounding_precision ?? null,
  };
}

/**
 * The basis of one line of a charge: `filterIndex` names the bucket (null: the default one);
 * `minimum` is the minimum's true-up line.
 */
export function chargeFeeBasis(usage: ChargeUsage, filterIndex: number | null, line: 'bucket' | 'minimum' = 'bucket'): ChargeFeeBasis {
  const { fees, range } = usage;
  const bucket = filterIndex === null ? fees.default : fees.filters[filterIndex]!;
  const aggregation = filterIndex === null ? usage.aggregations.default : usage.aggregations.filters[filterIndex]!;
  const source = filterIndex === null ? usage.sources.default : usage.sources.filters[filterIndex]!;
  const proration: ProrationRatio = range.proration;
  return {
    kind: 'charge',
    line,
    charge: chargeSnapshot(usage),
    metric: metricSnapshot(usage),
    filter_id: filterIndex === null ? null : usage.charge.filters[filterIndex]!._id,
    properties: filterIndex === null ? usage.charge.properties : usage.charge.filters[filterIndex]!.properties,
    usage: {
      from: range.from.toISOString(),
      to: range.to.toISOString(),
      units: s(aggregation.units),
      events_count: aggregation.eventsCount,
      sources: sourceRecord(source),
    },
    model: { units: s(bucket.model.units), amount_cents: s(bucket.model.amount) },
    caps: {
      used_days: proration.usedDays,
      period_days: proration.periodDays,
      amount_before_caps_cents: s(fees.amountBeforeCaps),
      min_amount_cents: fees.minAmount ? s(fees.minAmount) : null,
      max_amount_cents: fees.maxAmount ? s(fees.maxAmount) : null,
      reduction_cents: s(bucket.model.amount.minus(bucket.amount)),
      min_true_up_cents: s(fees.minTrueUp),
      charge_amount_cents: s(fees.amount),
    },
  };
}

/** The basis of a base fee: the plan's amount for `usedDays` of the period's `periodDays`. */
export function baseFeeBasis(plan: PlanSnapshot, segment: Pick<SegmentProration, 'from' | 'to' | 'usedDays' | 'periodDays'>): BaseFeeBasis {
  return {
    kind: 'base_fee',
    plan: { id: plan.id, amount_cents: plan.amount_cents, interval: plan.interval, currency: plan.currency },
    from: segment.from.toISOString(),
    to: segment.to.toISOString(),
    used_days: segment.usedDays,
    period_days: segment.periodDays,
  };
}

export function commitmentFeeBasis(trueUp: CommitmentTrueUp, proration: ProrationRatio | undefined): CommitmentFeeBasis {
  return {
    kind: 'commitment',
    commitment_amount_cents: s(trueUp.commitment_amount_cents),
    charges_amount_cents: s(trueUp.charges_amount_cents),
    true_up_amount_cents: s(trueUp.true_up_amount_cents),
    used_days: proration?.usedDays ?? null,
    period_days: proration?.periodDays ?? null,
  };
}
