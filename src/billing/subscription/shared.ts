// Shared by the steps of a subscriptionWorkflow (one file per rule of the lifecycle next to this
// one: activation.ts, boundary.ts, plan-change.ts, ending.ts, progressive.ts). Each step takes the
// workflow's state and the instant it acts for, writes through idempotency keys (invoices and
// credit notes `<subscription>/<start of what it bills>/<kind>/<plan>/v<state version>`, lifecycle
// events), projects the new state onto the subscription document, and returns that state. A
// retried step gets the same state, so it computes and finds the same things; two different bills
// never share a key, because every step moves the version (two upgrades in one day, an upgrade on
// the day a period started, both bill in advance from the same day).
//
// A "segment" is the current plan's part of the current period: the whole period, or from the day
// an upgrade took effect. Usage and arrear base fees are billed per segment, so an invoice never
// mixes two plans (plan-level taxes stay exact). Its days and base fee are src/domain/proration.ts's.
//
// Here: the steps' context, bill keys, fee building (base fee, segment lines, charge lines),
// issuing invoices and credit notes, and saving and announcing the new state.
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type Decimal from 'decimal.js';
import type { Db } from '../../db';
import type { InvoiceDoc } from '../../db/models/invoice';
import { fromDecimal128 } from '../../db/decimal';
import { FULL_PERIOD, type ProrationRatio } from '../../domain/charges';
import type { PricedFee } from '../../domain/invoice-assembly';
import { Dec, ZERO } from '../../domain/money';
import { prorateSegment, unusedCredit, type SegmentProration } from '../../domain/proration';
import { deterministicId } from '../../ids';
import { workflowIds } from '../../temporal/workflow-ids';
import { emitEvent } from '../../webhooks/emit-event';
import { CatalogView, type PlanView } from '../../usage/catalog-view';
import { billedPerEvent } from '../../domain/charge-rules';
import { carriesOver } from '../../domain/aggregation';
import { computeChargeUsage, readsWholeDaysOnly, type ChargeUsage } from '../../usage/period-usage';
import { iso } from '../../resources/format';
import { toSubscriptionResource, type SubscriptionResource } from '../../resources/subscription';
import { projectionOf } from '../../subscriptions/projection';
import { scheduleOf, type PeriodState, type PlanSnapshot, type SubscriptionState } from '../../subscriptions/state';
import { createCreditNote, finalizeCreditNote, type CreditNoteDeps } from '../credit-notes';
import { createInvoice, type InvoiceDeps, type NewInvoice } from '../invoices';
import { baseFeeBasis, chargeFeeBasis, type BaseFeeBasis } from '../fee-basis';
import { finalizeInvoiceUpdate } from '../../../workflows/invoice.messages';

export type SubscriptionBillingDeps = InvoiceDeps & CreditNoteDeps;

export interface SubscriptionStepResult {
  state: SubscriptionState;
  subscription: SubscriptionResource;
  invoiceIds: string[];
  creditNoteIds: string[];
}

/** What every step works with: the database, what creating invoices and credit notes needs, the catalog. */
export interface StepContext {
  db: Db;
  deps: SubscriptionBillingDeps;
  catalog: CatalogView;
  /**
   * Set by a preview (src/billing/preview.ts): the step computes everything it would bill with the
   * same reads, and hands its invoices and credit notes here instead of writing them; it saves no
   * state and announces nothing.
   */
  dryRun?: DryRun;
}

/** Where a dry run's bills go. Each returns what the step goes on with (the ids the real bill would have). */
export interface DryRun {
  invoice(input: NewInvoice): Promise<Pick<InvoiceDoc, '_id'>>;
  creditNote(input: {
    invoiceId: string;
    feeId: string;
    amountCents: Decimal;
    reason: 'order_change' | 'order_cancellation';
    at: Date;
  }): Promise<string>;
  subscription(state: SubscriptionState): Promise<SubscriptionResource>;
}

export function subscriptionBillingContext(db: Db, deps: SubscriptionBillingDeps): StepContext {
  return { db, deps, catalog: new CatalogView(db) };
}

const BASE_FEE_KEY = 'subscription';

/** One plan's lines over part of a period, before assembly. */
export interface Lines {
  plan: PlanSnapshot;
  fees: PricedFee[];
  /** Usage and commitment proration of the part billed (full period: undefined). */
  proration: ProrationRatio | undefined;
  commitment: boolean;
  /** The span its usage (and arrear base fee) measured: the fees' period unless a line names its own. */
  span: Span;
}

interface Span {
  from: Date;
  to: Date;
}

// ---- keys ---------------------------------------------------------------------------------

/**
 * The idempotency key of a bill: the subscription, the start of what it bills, its kind, the plan
 * and the version of the state the step started from (see the file's header).
 */
export function billKey(
  state: SubscriptionState,
  plan: PlanSnapshot,
  from: Date | string,
  kind: 'advance' | 'subscription' | 'upgrade_credit' | 'termination_credit' | 'carried',
): string {
  return `${state.subscriptionId}/${typeof from === 'string' ? from : iso(from)}/${kind}/${plan.id}/v${state.version}`;
}

/** A subscription bill's idempotency key (billKey, with the suffix pause and resume add), parsed. */
export interface BillKey {
  from: string;
  kind: string;
  planId: string;
  /** `paused`, `resume`: bills of pause and resume. */
  suffix: string | null;
}

const BILL_KEY = /^[^/]+\/([^/]+)\/(advance|subscription|carried)\/([^/]+)\/v\d+(?:\/([a-z_]+))?$/;

/** The key's parts, or null for a key of another kind (a credit's, an upgrade's). */
export function parseBillKey(key: string): BillKey | null {
  const m = BILL_KEY.exec(key);
  return m ? { from: m[1]!, kind: m[2]!, planId: m[3]!, suffix: m[4] ?? null } : null;
}

export function feeIdOf(invoiceId: string): string {
  return deterministicId(`fee/${invoiceId}/${BASE_FEE_KEY}`);
}

// ---- lines and invoices -------------------------------------------------------------------

export async function planView(ctx: StepContext, id: string): Promise<PlanView> {
  const plan = (await ctx.catalog.plansById([id])).get(id);
  if (!plan) throw new Error(`plan ${id} not found`);
  return plan;
}

/** `[from, to)` of `period` on `plan`: the days billed (after the trial unless `trial` is false) and its base fee. */
function segmentOf(
  state: SubscriptionState,
  plan: PlanSnapshot,
  period: PeriodState,
  from: Date,
  to: Date,
  trial = true,
): SegmentProration | null {
  return prorateSegment({
    schedule: scheduleOf(state, plan.interval),
    periodFrom: new Date(period.from),
    from,
    to,
    trialEndsAt: trial && state.trialEndsAt ? new Date(state.trialEndsAt) : null,
    amountCents: plan.amount_cents,
  });
}

function baseFee(amount: Decimal, days: number, period: Span, basis: BaseFeeBasis): PricedFee {
  return {
    key: BASE_FEE_KEY,
    fee_type: 'subscription',
    amount_cents: amount,
    units: new Dec(days),
    events_count: 0,
    unit_amount_cents: days > 0 ? amount.dividedBy(days).toDecimalPlaces(4) : ZERO,
    period,
    basis,
  };
}

/** The base fee of `period` from `from` (or the trial end) to its end, as a line. */
export async function baseFeeLine(state: SubscriptionState, period: PeriodState, from: Date): Promise<PricedFee | null> {
  const segment = segmentOf(state, state.plan, period, from, new Date(period.to));
  return segment
    ? baseFee(segment.baseFee, segment.usedDays, { from: segment.from, to: segment.to }, baseFeeBasis(state.plan, segment))
    : null;
}

/** An invoice holding only the base fee of `period` from `from`, billed in advance. */
export async function billAdvance(
  ctx: StepContext,
  state: SubscriptionState,
  period: PeriodState,
  from: Date,
  at: Date,
  key: string,
): Promise<Pick<InvoiceDoc, '_id'> | null> {
  const line = await baseFeeLine(state, period, from);
  if (!line) return null;
  const span = { from, to: new Date(period.to) };
  return issue(ctx, state, { plan: state.plan, fees: [line], proration: undefined, commitment: false, span }, span, at, key);
}

/**
 * The lines of one plan over `[from, to)` of a period: in arrear its prorated base fee, its
 * usage up to `usageTo` and its commitment true-up. Null when no day of it is billable (the
 * trial covers it), so nothing is invoiced.
 */
export async function segmentLines(
  ctx: StepContext,
  state: SubscriptionState,
  snapshot: PlanSnapshot,
  period: PeriodState,
  from: Date,
  to: Date,
  usageTo: Date,
  options: { baseFee: boolean; commitment?: boolean; now?: Date },
): Promise<Lines | null> {
  const segment = segmentOf(state, snapshot, period, from, to);
  if (!segment) return null;
  const { from: start, ratio: proration } = segment;
  const fees: PricedFee[] = [];
  const span = { from: start, to };
  if (options.baseFee) fees.push(baseFee(segment.baseFee, segment.usedDays, span, baseFeeBasis(snapshot, segment)));

  const plan = await planView(ctx, snapshot.id);
  const invoiceable = plan.charges.filter((c) => c.invoiceable !== false);
  const metrics = await ctx.catalog.metricsById(state.organizationId, [...new Set(invoiceable.map((c) => c.billable_metric_id))]);
  // Charges billed event by event as their events arrive are not billed again here.
  const charges = invoiceable.filter((c) => !billedPerEvent(c, metrics.get(c.billable_metric_id)!));
  // Recurring units present at the segment's start weigh on its billed days even when no event can
  // be read yet (a termination at the segment's first instant bills that day with the seats it had).
  const carried = charges.some((c) => carriesOver(metrics.get(c.billable_metric_id)!));
  const readable = start.getTime() < usageTo.getTime() || (carried && start.getTime() < to.getTime());
  if (charges.length > 0 && readable) {
    const billed = { ...plan, charges };
    const withEvents = readsWholeDaysOnly(billed, metrics, { from: start, to: usageTo, timezone: state.timezone })
      ? undefined
      : await metricsWithEvents(ctx, state, start, usageTo);
    const usage = await computeChargeUsage(ctx.db, billed, metrics, {
      subscriptionId: state.subscriptionId,
      organizationId: state.organizationId,
      from: start,
      to: usageTo,
      // Prorated units count their presence up to the segment's end, even when usage is read up to now (progressive billing).
      billedTo: to,
      subscriptionStartedAt: new Date(state.startedAt),
      timezone: state.timezone,
      ...(options.now ? { now: options.now } : {}),
      proration: proration ?? FULL_PERIOD,
      ...(withEvents ? { metricIdsWithEvents: withEvents } : {}),
    });
    fees.push(...usage.flatMap(chargeLines));
  }
  return { plan: snapshot, fees, proration, commitment: options.commitment ?? true, span };
}

/** Billing-day work is scoped: charges whose metric had no event in the range are priced at zero units without reading usage. */
async function metricsWithEvents(ctx: StepContext, state: SubscriptionState, from: Date, to: Date): Promise<Set<string>> {
  const ids = await ctx.db.models.Event.collection.distinct('billable_metric_id', {
    organization_id: state.organizationId,
    subscription_ids: state.subscriptionId,
    timestamp: { $gte: from, $lt: to },
  });
  return new Set(ids as string[]);
}

/** A charge's lines: one per bucket that has events or an amount, and the minimum's true-up. */
export function chargeLines(usage: ChargeUsage): PricedFee[] {
  const { charge, aggregations, fees } = usage;
  const lines: PricedFee[] = [];
  const push = (
    key: string,
    filterId: string | undefined,
    amount: Decimal,
    units: Decimal,
    events: number,
    unitAmount: Decimal,
    name: string | null | undefined,
    basis: () => PricedFee['basis'],
  ) => {
    if (events === 0 && amount.isZero()) return;
    lines.push({
      key,
      fee_type: 'charge',
      charge_id: charge._id,
      ...(filterId ? { charge_filter_id: filterId } : {}),
      ...(name ? { invoice_display_name: name } : {}),
      amount_cents: amount,
      units,
      events_count: events,
      unit_amount_cents: unitAmount,
      basis: basis(),
    });
  };
  push(
    `charge/${charge._id}`,
    undefined,
    fees.default.amount,
    // The priced units: a charge yielding negative units bills 0 units for 0 (billing-rules.md).
    fees.default.model.units,
    aggregations.default.eventsCount,
    fees.default.unitAmount,
    charge.invoice_display_name,
    () => chargeFeeBasis(usage, null),
  );
  charge.filters.forEach((filter, i) => {
    const bucket = fees.filters[i]!;
    const aggregation = aggregations.filters[i]!;
    push(
      `charge/${charge._id}/filter/${filter._id}`,
      filter._id,
      bucket.amount,
      bucket.model.units,
      aggregation.eventsCount,
      bucket.unitAmount,
      filter.invoice_display_name ?? charge.invoice_display_name,
      () => chargeFeeBasis(usage, i),
    );
  });
  if (fees.minTrueUp.greaterThan(0)) {
    push(`charge/${charge._id}/minimum`, undefined, fees.minTrueUp, ZERO, 0, ZERO, charge.invoice_display_name, () =>
      chargeFeeBasis(usage, null, 'minimum'),
    );
  }
  return lines;
}

/** An invoice of `lines`, labelled with `period` (what its base fee pays for, else what it measured). */
export async function issue(
  ctx: StepContext,
  state: SubscriptionState,
  lines: Lines,
  period: Span,
  at: Date,
  key: string,
): Promise<Pick<InvoiceDoc, '_id'>> {
  const commitment = lines.commitment ? (await ctx.catalog.planTerms(lines.plan.id)).commitmentCents : null;
  // Progressive invoices exist in a segment only when a threshold check ran in it (or may run: a
  // state from before checks were marked has no mark, and is looked up).
  const checked = state.progressive.enabled || state.progressive.checkedFrom !== null;
  const progressive =
    lines.commitment && checked ? await progressiveInvoices(ctx, state, new Date(state.segmentFrom ?? state.currentPeriod!.from)) : [];
  const input: NewInvoice = {
    organizationId: state.organizationId,
    customerId: state.customerId,
    subscriptionId: state.subscriptionId,
    invoiceType: 'subscription',
    currency: lines.plan.currency,
    idempotencyKey: key,
    fees: lines.fees,
    planId: lines.plan.id,
    // From the catalog view (memoized with its charges): no read of its own.
    plan: await planView(ctx, lines.plan.id),
    periodStartedAt: period.from,
    periodEndedAt: period.to,
    linesPeriod: lines.span,
    assembly: {
      ...(commitment ? { minimum_commitment: { amount_cents: commitment }, commitment_proration: lines.proration } : {}),
      ...(progressive.length > 0 ? { progressive_billing_credits: progressiveCredits(progressive) } : {}),
    },
    // Without a grace period the invoice is finalized before the step returns, so that periods
    // billed together (a subscription started in the past) take their numbers in period order.
    finalizeAtCreation: true,
    at,
  };
  return ctx.dryRun ? ctx.dryRun.invoice(input) : createInvoice(ctx.db, ctx.deps, input);
}

/** The segment's progressive invoices, oldest first (tenant-scoped: the invoices index by organization, subscription, period). */
export async function progressiveInvoices(
  ctx: Pick<StepContext, 'db'>,
  state: Pick<SubscriptionState, 'organizationId' | 'subscriptionId'>,
  segmentFrom: Date,
): Promise<InvoiceDoc[]> {
  return ctx.db.models.Invoice.find({
    organization_id: state.organizationId,
    subscription_id: state.subscriptionId,
    invoice_type: 'progressive_billing',
    period_started_at: segmentFrom,
    status: { $in: ['draft', 'finalized', 'paid'] },
    deleted_at: null,
  })
    .sort({ created_at: 1, _id: 1 })
    .lean();
}

/**
 * What each earlier progressive invoice of the segment billed net of the ones before it: its fees
 * and their taxes (the period's invoice taxes its full fees and takes this credit off after tax,
 * billing-rules.md: so the taxes already billed are credited too, or they would be paid twice),
 * less its own progressive credit. Its coupons stay the customer's discount: not taken off.
 */
export function progressiveCredits(invoices: InvoiceDoc[]) {
  return invoices.map((inv) => ({
    invoice_id: inv._id,
    amount_cents: (fromDecimal128(inv.fees_amount_cents) ?? ZERO)
      .plus(fromDecimal128(inv.tax_amount) ?? ZERO)
      .minus(fromDecimal128(inv.progressive_billing_credit_amount_cents) ?? ZERO),
  }));
}

// ---- credit notes -------------------------------------------------------------------------

/** The unused part of the in-advance base fee from `from` to the period end, as a credit note. */
export async function creditUnused(
  ctx: StepContext,
  state: SubscriptionState,
  from: Date,
  at: Date,
  reason: 'order_change' | 'order_cancellation',
  key: string,
): Promise<string | null> {
  const period = state.currentPeriod!;
  const advance = state.advanceFee!;
  // The advance fee was billed on the current plan: credits happen before any switch.
  const unused = segmentOf(state, state.plan, period, from, new Date(period.to), false);
  if (!unused) return null;
  const fee = await ctx.db.models.Fee.findById(advance.feeId).lean();
  if (!fee) return null;
  const feeAmount = fromDecimal128(fee.amount_cents)!;
  const amount = unusedCredit(unused.baseFee, {
    amount: feeAmount,
    total: fromDecimal128(fee.total_amount_cents) ?? feeAmount,
    credited: fromDecimal128(fee.credited_amount_cents) ?? ZERO,
  });
  if (!amount) return null;
  if (ctx.dryRun) return ctx.dryRun.creditNote({ invoiceId: advance.invoiceId, feeId: advance.feeId, amountCents: amount, reason, at });
  const invoice = await ctx.db.models.Invoice.findById(advance.invoiceId).lean();
  if (invoice?.status === 'draft') await finalizeNow(ctx, invoice._id);
  const note = await createCreditNote(ctx.db, ctx.deps, {
    organizationId: state.organizationId,
    invoiceId: advance.invoiceId,
    reason,
    items: [{ fee_id: advance.feeId, amount_cents: amount.toFixed(0) }],
    at,
    idempotencyKey: key,
  });
  // Issued at once: its balance goes to the customer's next invoices (the new plan's fee first).
  await finalizeCreditNote(ctx.db, ctx.deps, { organizationId: state.organizationId, creditNoteId: note._id, at, idempotent: true });
  return note._id;
}

/** A credit note needs a finalized invoice: a draft still in its grace period is finalized early. */
async function finalizeNow(ctx: StepContext, invoiceId: string): Promise<void> {
  try {
    await ctx.deps.temporal.client.workflow.getHandle(workflowIds.invoice(invoiceId)).executeUpdate(finalizeInvoiceUpdate);
  } catch (err) {
    if (!(err instanceof WorkflowUpdateFailedError)) throw err;
  }
}

// ---- state, projection and events ---------------------------------------------------------

/**
 * The progressive billing of a segment starting at `from`: checks every `checkMs` while the plan
 * has usage thresholds; no check has run in it yet (`checkedFrom`, see checkThresholds).
 */
export async function progressiveFor(
  ctx: StepContext,
  plan: PlanSnapshot,
  from: Date,
  checkMs: number,
  options: { fresh?: boolean } = {},
): Promise<SubscriptionState['progressive']> {
  const { thresholds } = await ctx.catalog.planTerms(plan.id, options);
  return thresholds > 0
    ? { enabled: true, nextCheckAt: iso(new Date(from.getTime() + checkMs)), checkedFrom: null }
    : { enabled: false, nextCheckAt: null, checkedFrom: null };
}

const WITHOUT_WORKFLOW_STATE = { workflow_state: 0 } as const;

/** Writes the state's projection unless a newer state is already there, and reads it back. */
export async function save(ctx: StepContext, state: SubscriptionState): Promise<SubscriptionResource> {
  if (ctx.dryRun) return ctx.dryRun.subscription(state);
  const { Subscription } = ctx.db.models;
  // Read back without the workflow state just written (the resource does not show it; it is most of the document).
  const doc =
    (await Subscription.findOneAndUpdate(
      { _id: state.subscriptionId, state_version: { $lt: state.version } },
      { $set: { ...projectionOf(state), updated_at: new Date() } },
      { returnDocument: 'after', projection: WITHOUT_WORKFLOW_STATE },
    ).lean()) ?? (await Subscription.findById(state.subscriptionId, WITHOUT_WORKFLOW_STATE).lean());
  if (!doc) throw new Error(`subscription ${state.subscriptionId} not found`);
  return toSubscriptionResource(doc);
}

export async function emit(
  ctx: StepContext,
  state: SubscriptionState,
  subscription: SubscriptionResource,
  type: Parameters<typeof emitEvent>[1]['type'],
  step: string,
  at: Date,
): Promise<void> {
  if (ctx.dryRun) return;
  await emitEvent(ctx.deps, {
    organizationId: state.organizationId,
    type,
    idempotencyKey: `subscription/${state.subscriptionId}/${step}`,
    object: subscription,
    occurredAt: at,
    customerId: state.customerId,
  });
}
