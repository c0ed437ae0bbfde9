// Charges paid in advance (api-contract.md, Invoices: in-advance charges; lago-reference.md 2.10):
// each event of such a charge's metric is billed when it arrives, on an invoice of its own (or as a
// fee without an invoice when the charge is not invoiceable), and never again at the period end.
//
// Exactly once per event, whatever the retries or the order of arrival: the fee is keyed by the
// event (its invoice's idempotency key, or the fee's own id), and an event's price is what the
// bucket's price over the events billed so far in its period, with it, exceeds what they were
// billed (Lago's running maximum: usage that goes down and up again is not billed twice).
//
// A recurring metric's in-advance charge (sum, unique_count with recurring: true): its units carry
// over, so an event's price is taken over the carried units and the period's events so far, and the
// units carried into each new period are billed at its start (carriedInAdvanceLines, on the invoice
// issued at the boundary). Prorated (standard only), an event's new units are priced for the part
// of the period left; the carried ones are billed in full.
import { isDuplicateKeyError } from '../../db';
import { fromDecimal128 } from '../../db/decimal';
import type { EventDoc } from '../../db/models/event';
import { aggregate, carriesOver, type MetricAggregation } from '../../domain/aggregation';
import { billedPerEvent } from '../../domain/charge-rules';
import { matchingFilterIndex } from '../../domain/charge-filters';
import { priceEventInAdvance, priceProratedEventInAdvance } from '../../domain/charges';
import { computeChargeModel } from '../../domain/charge-models';
import { assembleInvoice, type PricedFee } from '../../domain/invoice-assembly';
import { loadTaxSets } from '../../usage/tax-sets';
import { Dec, roundFee, sum, ZERO } from '../../domain/money';
import { countDays, fullPeriodDays, periodContaining, startOfLocalDay } from '../../domain/periods';
import type { UsageEvent } from '../../domain/usage-types';
import { deterministicId } from '../../ids';
import { iso } from '../../resources/format';
import { scheduleOf, type SubscriptionState } from '../../subscriptions/state';
import type { ChargeView, MetricView } from '../../usage/catalog-view';
import { createInvoice, feeRecord } from '../invoices';
import { planView, type StepContext } from './shared';

const usageEventOf = (event: Pick<EventDoc, 'transaction_id' | 'timestamp' | 'properties'>): UsageEvent => ({
  transactionId: event.transaction_id,
  timestamp: event.timestamp,
  properties: (event.properties ?? {}) as Record<string, unknown>,
});

/** The billing period (clipped to the subscription's start) an event falls in. */
function periodOf(state: SubscriptionState, at: Date): { from: Date; to: Date } {
  const period = periodContaining({ ...scheduleOf(state, state.plan.interval), at });
  const startedAt = new Date(state.startedAt);
  return { from: period.from < startedAt ? startedAt : period.from, to: period.to };
}

export interface InAdvanceResult {
  invoiceIds: string[];
  feeIds: string[];
}

/**
 * Bills the given events (of this subscription) in advance, in the order they happened; events
 * already billed, or of metrics no in-advance charge of the plan prices, are passed over.
 */
/** The plan's charges billed event by event, with their metrics (none: nothing to bill in advance). */
async function perEventCharges(
  ctx: StepContext,
  state: SubscriptionState,
): Promise<{ charges: ChargeView[]; metrics: Map<string, MetricView> }> {
  const plan = await planView(ctx, state.plan.id);
  const candidates = plan.charges.filter((c) => c.pay_in_advance);
  if (candidates.length === 0) return { charges: [], metrics: new Map() };
  const metrics = await ctx.catalog.metricsById(state.organizationId, [...new Set(candidates.map((c) => c.billable_metric_id))]);
  return { charges: candidates.filter((c) => billedPerEvent(c, metrics.get(c.billable_metric_id)!)), metrics };
}

export async function billEventsInAdvance(
  ctx: StepContext,
  state: SubscriptionState,
  eventIds: string[],
  at: Date,
): Promise<InAdvanceResult> {
  const result: InAdvanceResult = { invoiceIds: [], feeIds: [] };
  // A preview leaves them out: each is billed on an invoice of its own, not on the one previewed.
  if (eventIds.length === 0 || ctx.dryRun) return result;
  const { charges, metrics } = await perEventCharges(ctx, state);
  if (charges.length === 0) return result;
  const events = await ctx.db.models.Event.find({
    _id: { $in: eventIds },
    organization_id: state.organizationId,
    subscription_ids: state.subscriptionId,
    billable_metric_id: { $in: charges.map((c) => c.billable_metric_id) },
  }).lean();
  events.sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime() || (a._id < b._id ? -1 : 1));
  for (const event of events) {
    for (const charge of charges.filter((c) => c.billable_metric_id === event.billable_metric_id)) {
      const billed = await billEvent(ctx, state, charge, metrics.get(charge.billable_metric_id)!, event, at);
      if (billed?.invoiceId) result.invoiceIds.push(billed.invoiceId);
      if (billed) result.feeIds.push(billed.feeId);
    }
  }
  return result;
}

/**
 * The events of `[from, to)` that an in-advance charge prices and that have no fee of it yet (a
 * signal lost between the API and the workflow): billed before the period's invoice, so none is missed.
 */
export async function unbilledInAdvanceEvents(ctx: StepContext, state: SubscriptionState, from: Date, to: Date): Promise<string[]> {
  const { charges } = await perEventCharges(ctx, state);
  if (charges.length === 0) return [];
  const [events, fees] = await Promise.all([
    ctx.db.models.Event.find(
      {
        organization_id: state.organizationId,
        subscription_ids: state.subscriptionId,
        billable_metric_id: { $in: [...new Set(charges.map((c) => c.billable_metric_id))] },
        timestamp: { $gte: from, $lt: to },
      },
      { _id: 1, billable_metric_id: 1 },
    ).lean(),
    ctx.db.models.Fee.find(
      { subscription_id: state.subscriptionId, pay_in_advance: true, period_started_at: { $gte: from, $lt: to } },
      { event_id: 1, charge_id: 1 },
    ).lean(),
  ]);
  const billed = new Set(fees.map((f) => `${f.charge_id}/${f.event_id}`));
  return events
    .filter((e) => charges.some((c) => c.billable_metric_id === e.billable_metric_id && !billed.has(`${c._id}/${e._id}`)))
    .map((e) => e._id);
}

/**
 * The events a recurring metric's charge carries into a period starting at `before` (every event
 * since the subscription started), by bucket: a filter's index, or null for the default.
 */
async function carriedEventsByBucket(
  ctx: StepContext,
  state: SubscriptionState,
  charge: ChargeView,
  before: Date,
): Promise<Map<number | null, Pick<EventDoc, 'transaction_id' | 'timestamp' | 'properties'>[]>> {
  const events = await ctx.db.models.Event.find(
    {
      organization_id: state.organizationId,
      subscription_ids: state.subscriptionId,
      billable_metric_id: charge.billable_metric_id,
      timestamp: { $gte: new Date(state.startedAt), $lt: before },
    },
    { transaction_id: 1, timestamp: 1, properties: 1 },
  ).lean();
  const byBucket = new Map<number | null, typeof events>();
  for (const event of events) {
    const bucket = matchingFilterIndex(charge.filters, (event.properties ?? {}) as Record<string, unknown>);
    byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), event]);
  }
  return byBucket;
}

/** The fields a fee of a charge's bucket starts with; `of`: what it bills ("carried", "event/<id>"). */
function bucketLine(charge: ChargeView, filter: ChargeView['filters'][number] | null, of: string) {
  const name = filter?.invoice_display_name ?? charge.invoice_display_name;
  return {
    key: `charge/${charge._id}${filter ? `/filter/${filter._id}` : ''}/${of}`,
    fee_type: 'charge' as const,
    charge_id: charge._id,
    ...(filter ? { charge_filter_id: filter._id } : {}),
    ...(name ? { invoice_display_name: name } : {}),
  };
}

/** What carried units cost in full (no event: nothing). */
function carriedPrice(charge: ChargeView, properties: unknown, carried: MetricAggregation): Dec {
  if (carried.eventsCount === 0) return ZERO;
  return Dec.max(roundFee(computeChargeModel(charge.charge_model, properties, carried).amount), ZERO);
}

/**
 * The fees of the units the subscription's recurring in-advance charges carry into `period`
 * (api-contract.md, Invoices: billed at the period's start, with the base fee), in full, one per
 * bucket with units: the lines of the invoice issued at the boundary for the invoiceable charges;
 * the others' fees are written here without an invoice (idempotent by their ids).
 */
export async function carriedInAdvanceLines(
  ctx: StepContext,
  state: SubscriptionState,
  period: { from: Date; to: Date },
  at: Date,
): Promise<PricedFee[]> {
  const { charges, metrics } = await perEventCharges(ctx, state);
  const lines: PricedFee[] = [];
  for (const charge of charges) {
    const metric = metrics.get(charge.billable_metric_id)!;
    if (!carriesOver(metric)) continue;
    const unrounded = { ...metric, rounding_function: null, rounding_precision: null };
    const carriedByBucket = await carriedEventsByBucket(ctx, state, charge, period.from);
    const buckets: (number | null)[] = [null, ...charge.filters.map((_, i) => i)];
    for (const bucket of buckets) {
      const filter = bucket === null ? null : charge.filters[bucket]!;
      const carried = aggregate(unrounded, (carriedByBucket.get(bucket) ?? []).map(usageEventOf), period);
      if (!carried.units.greaterThan(0)) continue;
      const amount = carriedPrice(charge, filter ? filter.properties : charge.properties, carried);
      const line: PricedFee = {
        ...bucketLine(charge, filter, 'carried'),
        amount_cents: amount,
        units: carried.units,
        events_count: 0,
        unit_amount_cents: roundFee(amount.div(carried.units)),
        period,
        pay_in_advance: true,
      };
      if (charge.invoiceable !== false) lines.push(line);
      else await standaloneFee(ctx, state, line, period, `${state.subscriptionId}/in_advance/carried/${iso(period.from)}/${line.key}`, at);
    }
  }
  return lines;
}

async function billEvent(
  ctx: StepContext,
  state: SubscriptionState,
  charge: ChargeView,
  metric: MetricView,
  event: EventDoc,
  at: Date,
): Promise<{ feeId: string; invoiceId: string | null } | null> {
  const { Event, Fee } = ctx.db.models;
  const period = periodOf(state, event.timestamp);
  const bucket = matchingFilterIndex(charge.filters, (event.properties ?? {}) as Record<string, unknown>);
  const filter = bucket === null ? null : charge.filters[bucket]!;
  const invoiceable = charge.invoiceable !== false;
  const key = `${state.subscriptionId}/in_advance/${charge._id}/${event._id}`;

  // The bucket's fees so far in the period: their events are the usage billed before this one
  // (and, for a recurring metric, the fee of the units carried in, which has no event).
  const fees = await Fee.find(
    {
      subscription_id: state.subscriptionId,
      charge_id: charge._id,
      charge_filter_id: filter?._id ?? null,
      pay_in_advance: true,
      period_started_at: period.from,
    },
    { event_id: 1, amount_cents: 1, units: 1, invoice_id: 1 },
  ).lean();
  // Billed already: done when the fee stands alone; one on an invoice goes on below, since a retry
  // after a crash between the fee and its invoice must still issue the invoice (createInvoice finds
  // both by their keys). Its price is computed again without it, so it comes out the same.
  const own = fees.find((f) => f.event_id === event._id);
  if (own && own.invoice_id === null) return null;
  const earlier = fees.filter((f) => f.event_id !== null && f.event_id !== event._id);
  const earlierEvents = await Event.find(
    { _id: { $in: earlier.map((f) => f.event_id!) } },
    { transaction_id: 1, timestamp: 1, properties: 1 },
  ).lean();
  // Rounding does not apply to in-advance pricing (lago-reference.md 1.3).
  const unrounded = { ...metric, rounding_function: null, rounding_precision: null };
  const context = { from: period.from, to: period.to };
  const recurring = carriesOver(metric);
  const carried = recurring ? ((await carriedEventsByBucket(ctx, state, charge, period.from)).get(bucket) ?? []) : [];
  // The carried units count as billed (in units, or at their price) whether or not the period start
  // has billed them yet: the start bills exactly that.
  const carriedUsage = aggregate(unrounded, carried.map(usageEventOf), context);
  const before = aggregate(unrounded, [...carried, ...earlierEvents].map(usageEventOf), context);
  const after = aggregate(unrounded, [...carried, ...earlierEvents, event].map(usageEventOf), context);
  const properties = filter ? filter.properties : charge.properties;
  const eventsBilled = sum(earlier.map((f) => fromDecimal128(f.amount_cents) ?? ZERO));
  let amount: Dec;
  let units: Dec;
  if (recurring && charge.prorated) {
    const schedule = { ...scheduleOf(state, state.plan.interval), at: event.timestamp };
    const daysLeft = countDays(startOfLocalDay(event.timestamp, state.timezone), period.to, state.timezone);
    ({ units, amount } = priceProratedEventInAdvance({
      charge_model: charge.charge_model,
      properties,
      after,
      billedUnits: carriedUsage.units.plus(sum(earlier.map((f) => fromDecimal128(f.units) ?? ZERO))),
      ratio: new Dec(daysLeft).div(fullPeriodDays(schedule)),
    }));
  } else {
    const alreadyBilled = recurring ? carriedPrice(charge, properties, carriedUsage).plus(eventsBilled) : eventsBilled;
    amount = priceEventInAdvance({
      charge_model: charge.charge_model,
      properties,
      before,
      after,
      ...(recurring || earlier.length > 0 ? { alreadyBilled } : {}),
    });
    // No fee is ever negative (billing-rules.md): usage that went down is 0 units at 0.
    units = Dec.max(after.units.minus(before.units), ZERO);
  }
  const line = {
    ...bucketLine(charge, filter, `event/${event._id}`),
    amount_cents: amount,
    units,
    events_count: 1,
    unit_amount_cents: units.isZero() ? ZERO : roundFee(amount.div(units)),
    period,
    pay_in_advance: true,
    event_id: event._id,
    event_transaction_id: event.transaction_id,
  };

  if (invoiceable && amount.greaterThan(0)) {
    const invoice = await createInvoice(ctx.db, ctx.deps, {
      organizationId: state.organizationId,
      customerId: state.customerId,
      subscriptionId: state.subscriptionId,
      invoiceType: 'subscription',
      currency: state.plan.currency,
      idempotencyKey: key,
      fees: [line],
      planId: state.plan.id,
      periodStartedAt: period.from,
      periodEndedAt: period.to,
      gracePeriodDays: 0,
      finalizeAtCreation: true,
      at,
    });
    return { feeId: deterministicId(`fee/${invoice._id}/${line.key}`), invoiceId: invoice._id };
  }
  // Not invoiceable, or nothing to pay (an event that adds nothing issues no invoice): the fee
  // alone, so that the event counts as billed.
  return { feeId: await standaloneFee(ctx, state, line, period, key, at), invoiceId: null };
}

/**
 * A fee without an invoice (a charge that is not invoiceable, or an event that adds nothing), with
 * the id its key gives: written once whatever the retries. Taxed as it would be on an invoice (the
 * customer's, plan's and charge's taxes, else the organization's), fee by fee.
 */
async function standaloneFee(
  ctx: StepContext,
  state: SubscriptionState,
  line: PricedFee,
  period: { from: Date; to: Date },
  key: string,
  at: Date,
): Promise<string> {
  const feeId = deterministicId(`fee/${key}`);
  // A preview writes nothing, and the fee is on no invoice.
  if (ctx.dryRun) return feeId;
  if (await ctx.db.models.Fee.exists({ _id: feeId })) return feeId;
  const taxes = await loadTaxSets(ctx.db, {
    organizationId: state.organizationId,
    customerId: state.customerId,
    planId: state.plan.id,
    chargeIds: line.charge_id ? [line.charge_id] : [],
  });
  const taxed = assembleInvoice({ currency: state.plan.currency, fees: [line], taxes, applied_coupons: [] }).fees[0]!;
  try {
    await ctx.db.models.Fee.create(
      feeRecord(
        // The key is unique without an invoice: an event two subscriptions take is billed by each.
        { ...taxed, key: `${line.key}/subscription/${state.subscriptionId}` },
        {
          id: feeId,
          organizationId: state.organizationId,
          invoiceId: null,
          customerId: state.customerId,
          subscriptionId: state.subscriptionId,
          currency: state.plan.currency,
          periodStartedAt: period.from,
          periodEndedAt: period.to,
          at,
        },
      ),
    );
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
  }
  return feeId;
}
