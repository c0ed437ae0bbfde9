// What each step of a subscriptionWorkflow does to money and records (billing-rules.md,
// Subscription lifecycle): activation, trial end, period boundaries, plan changes, cancellation,
// termination and progressive billing. Each step takes the workflow's state and the instant it
// acts for, writes through idempotency keys (invoices and credit notes
// `<subscription>/<start of what it bills>/<kind>/<plan>/v<state version>`, lifecycle events),
// projects the new state onto the subscription document, and returns that state. A retried step
// gets the same state, so it computes and finds the same things; two different bills never share a
// key, because every step moves the version (two upgrades in one day, an upgrade on the day a
// period started, both bill in advance from the same day).
//
// A "segment" is the current plan's part of the current period: the whole period, or from the day
// an upgrade took effect. Usage and arrear base fees are billed per segment, so an invoice never
// mixes two plans (plan-level taxes stay exact).
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import type { InvoiceDoc } from '../db/models/invoice';
import { fromDecimal128 } from '../db/decimal';
import { FULL_PERIOD, type ProrationRatio } from '../domain/charges';
import type { PricedFee } from '../domain/invoice-assembly';
import { Dec, ZERO, sum } from '../domain/money';
import { classifyPlanChange } from '../domain/plan-change';
import { planChangeDay, prorateSegment, terminationBilledUntil, unusedCredit, type SegmentProration } from '../domain/proration';
import { deterministicId } from '../ids';
import { workflowIds } from '../temporal/workflow-ids';
import { emitEvent } from '../webhooks/emit-event';
import { CatalogView, type PlanView } from '../usage/catalog-view';
import { computeChargeUsage, type ChargeUsage } from '../usage/period-usage';
import { projectionOf, toSubscriptionResource, type SubscriptionResource } from '../subscriptions/resource';
import {
  periodFrom,
  scheduleOf,
  type OnTerminationAction,
  type PeriodState,
  type PlanSnapshot,
  type SubscriptionState,
} from '../subscriptions/state';
import { createCreditNote, finalizeCreditNote, type CreditNoteDeps } from './credit-notes';
import { createInvoice, type InvoiceDeps } from './invoices';
import { finalizeInvoiceUpdate } from '../../workflows/invoice.messages';

export type SubscriptionBillingDeps = InvoiceDeps & CreditNoteDeps;

export interface SubscriptionStepResult {
  state: SubscriptionState;
  subscription: SubscriptionResource;
  invoiceIds: string[];
  creditNoteIds: string[];
}

const BASE_FEE_KEY = 'subscription';

const iso = (d: Date) => d.toISOString();

/** One plan's lines over part of a period, before assembly. */
interface Lines {
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

export class SubscriptionBilling {
  private readonly catalog: CatalogView;

  constructor(
    private readonly db: Db,
    private readonly deps: SubscriptionBillingDeps,
  ) {
    this.catalog = new CatalogView(db);
  }

  // ---- steps ------------------------------------------------------------------------------

  /** A future start: only `subscription.created` now; activation comes at `started_at`. */
  async announce(state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
    const next = { ...state, announced: true, version: state.version + 1 };
    const subscription = await this.save(next);
    await this.emit(next, subscription, 'subscription.created', 'created', at);
    return { state: next, subscription, invoiceIds: [], creditNoteIds: [] };
  }

  /** `started_at` reached: active, the first period opens, in advance its base fee is billed. */
  async activate(state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
    const startedAt = new Date(state.startedAt);
    const period = periodFrom(state, startedAt);
    const next: SubscriptionState = {
      ...state,
      status: 'active',
      announced: true,
      currentPeriod: period,
      segmentFrom: period.from,
      trialEnded: state.trialEndsAt === null,
      progressive: await this.progressiveFor(state.plan, startedAt, state.progressiveCheckMs),
      version: state.version + 1,
    };
    const invoiceIds: string[] = [];
    if (next.payInAdvance && next.trialEndsAt === null) {
      const invoice = await this.billAdvance(next, period, startedAt, at, billKey(state, next.plan, period.from, 'advance'));
      if (invoice) {
        invoiceIds.push(invoice._id);
        next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: next.plan.id };
      }
    }
    const subscription = await this.save(next);
    if (!state.announced) await this.emit(next, subscription, 'subscription.created', 'created', at);
    await this.emit(next, subscription, 'subscription.started', 'started', at);
    return { state: next, subscription, invoiceIds, creditNoteIds: [] };
  }

  /** The trial is over: in advance, the rest of the period is billed now (the trial end day counts). */
  async endTrial(state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
    const next: SubscriptionState = {
      ...state,
      trialEnded: true,
      progressive: state.progressive.enabled ? { enabled: true, nextCheckAt: iso(new Date(at.getTime() + state.progressiveCheckMs)) } : state.progressive,
      version: state.version + 1,
    };
    const invoiceIds: string[] = [];
    if (next.payInAdvance && next.currentPeriod && at.getTime() < Date.parse(next.currentPeriod.to)) {
      const invoice = await this.billAdvance(next, next.currentPeriod, at, at, billKey(state, next.plan, at, 'advance'));
      if (invoice) {
        invoiceIds.push(invoice._id);
        next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: next.plan.id };
      }
    }
    const subscription = await this.save(next);
    await this.emit(next, subscription, 'subscription.trial_ended', 'trial_ended', at);
    return { state: next, subscription, invoiceIds, creditNoteIds: [] };
  }

  /**
   * A period boundary: the ended segment is billed (in arrear its base fee, always its usage); a
   * cancellation reaching its `ending_at` ends here; otherwise a scheduled downgrade switches, the
   * next period opens and, in advance, its base fee is billed.
   */
  async closePeriod(state: SubscriptionState, boundary: Date): Promise<SubscriptionStepResult> {
    const ended = state.currentPeriod!;
    const final = state.endingAt !== null && Date.parse(state.endingAt) <= boundary.getTime();
    const action: OnTerminationAction = final ? state.onTerminationAction : 'generate_invoice';
    const segmentFrom = new Date(state.segmentFrom ?? ended.from);
    const invoiceIds: string[] = [];

    const segment =
      action === 'skip'
        ? null
        : await this.segmentLines(state, state.plan, ended, segmentFrom, boundary, boundary, { baseFee: !state.payInAdvance });

    if (final) {
      if (segment) {
        const invoice = await this.issue(state, segment, { from: segmentFrom, to: boundary }, boundary, billKey(state, state.plan, segmentFrom, 'subscription'));
        invoiceIds.push(invoice._id);
      }
      const next: SubscriptionState = { ...state, status: 'canceled', pendingPlan: null, downgradedAt: null, progressive: { enabled: false, nextCheckAt: null }, version: state.version + 1 };
      return { state: next, subscription: await this.save(next), invoiceIds, creditNoteIds: [] };
    }

    const switched = state.pendingPlan;
    const plan = switched ?? state.plan;
    let next: SubscriptionState = {
      ...state,
      plan,
      pendingPlan: null,
      downgradedAt: null,
      segmentFrom: iso(boundary),
      advanceFee: null,
      progressive: await this.progressiveFor(plan, boundary, state.progressiveCheckMs),
      version: state.version + 1,
    };
    const period = periodFrom(next, boundary);
    next = { ...next, currentPeriod: period };

    // In advance the next period's base fee is billed now, unless a trial still covers its start
    // (the trial end bills it then).
    const trialOver = state.trialEndsAt === null || Date.parse(state.trialEndsAt) < boundary.getTime();
    const advance = state.payInAdvance && trialOver ? await this.baseFeeLine(next, period, boundary) : null;
    if (segment && advance && !switched) segment.fees.unshift(advance);
    if (segment) {
      // With the next period's base fee on it, the invoice is labelled with the period that fee
      // pays for; its usage lines keep the segment they measured.
      const span = advance && !switched ? { from: boundary, to: new Date(period.to) } : { from: segmentFrom, to: boundary };
      const invoice = await this.issue(state, segment, span, boundary, billKey(state, state.plan, segmentFrom, 'subscription'));
      invoiceIds.push(invoice._id);
      if (advance && !switched) next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: plan.id };
    }
    if (advance && (switched || !segment)) {
      const invoice = await this.billAdvance(next, period, boundary, boundary, billKey(state, plan, period.from, 'advance'));
      if (invoice) {
        invoiceIds.push(invoice._id);
        next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: plan.id };
      }
    }
    const subscription = await this.save(next);
    if (switched) await this.emit(next, subscription, 'subscription.plan_changed', `plan_changed/${iso(boundary)}/${switched.id}/v${state.version}`, boundary);
    return { state: next, subscription, invoiceIds, creditNoteIds: [] };
  }

  /**
   * PUT with a plan: on a pending subscription the plan is replaced; the current plan removes a
   * pending downgrade; a higher or equal yearly amount upgrades at once (the old segment is
   * billed, in advance its unused base fee is credited and the new plan's prorated fee billed); a
   * lower one is scheduled for the next boundary. The workflow's validator refused the rest.
   */
  async changePlan(state: SubscriptionState, target: PlanSnapshot, at: Date): Promise<SubscriptionStepResult> {
    const bump = (s: SubscriptionState): SubscriptionState => ({ ...s, version: state.version + 1 });
    if (state.status === 'pending') {
      const next = bump({ ...state, plan: target, pendingPlan: null, downgradedAt: null });
      return { state: next, subscription: await this.save(next), invoiceIds: [], creditNoteIds: [] };
    }
    if (target.id === state.plan.id) {
      const next = bump({ ...state, pendingPlan: null, downgradedAt: null });
      return { state: next, subscription: await this.save(next), invoiceIds: [], creditNoteIds: [] };
    }
    if (classifyPlanChange(state.plan, target) === 'downgrade') {
      const next = bump({ ...state, pendingPlan: target, downgradedAt: iso(at) });
      return { state: next, subscription: await this.save(next), invoiceIds: [], creditNoteIds: [] };
    }

    const period = state.currentPeriod!;
    const segmentFrom = new Date(state.segmentFrom ?? period.from);
    // The change day belongs to the new plan; the old plan's part closes at its midnight.
    const changeDay = planChangeDay(at, segmentFrom, state.timezone);
    const invoiceIds: string[] = [];
    const creditNoteIds: string[] = [];

    if (changeDay.getTime() > segmentFrom.getTime()) {
      const old = await this.segmentLines(state, state.plan, period, segmentFrom, changeDay, changeDay, { baseFee: !state.payInAdvance });
      // Outside period boundaries an invoice is only issued when it has something to bill.
      if (old && old.fees.length > 0) {
        const invoice = await this.issue(state, old, { from: segmentFrom, to: changeDay }, at, billKey(state, state.plan, segmentFrom, 'subscription'));
        invoiceIds.push(invoice._id);
      }
    }
    if (state.payInAdvance && state.advanceFee) {
      const credited = await this.creditUnused(state, changeDay, at, 'order_change', billKey(state, state.plan, changeDay, 'upgrade_credit'));
      if (credited) creditNoteIds.push(credited);
    }
    const next: SubscriptionState = bump({
      ...state,
      plan: target,
      pendingPlan: null,
      downgradedAt: null,
      segmentFrom: iso(changeDay),
      advanceFee: null,
      progressive: await this.progressiveFor(target, at, state.progressiveCheckMs),
    });
    const inTrial = state.trialEndsAt !== null && Date.parse(state.trialEndsAt) > at.getTime();
    if (state.payInAdvance && !inTrial) {
      const invoice = await this.billAdvance(next, period, changeDay, at, billKey(state, target, changeDay, 'advance'));
      if (invoice) {
        invoiceIds.push(invoice._id);
        next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: target.id };
      }
    }
    const subscription = await this.save(next);
    await this.emit(next, subscription, 'subscription.plan_changed', `plan_changed/${iso(at)}/${target.id}/v${state.version}`, at);
    return { state: next, subscription, invoiceIds, creditNoteIds };
  }

  /** POST .../cancel: active until the current period ends, then `canceled` (closePeriod). */
  async cancel(state: SubscriptionState, at: Date, action: OnTerminationAction | undefined): Promise<SubscriptionStepResult> {
    const next: SubscriptionState = {
      ...state,
      endingAt: state.currentPeriod!.to,
      canceledAt: iso(at),
      onTerminationAction: action ?? state.onTerminationAction,
      pendingPlan: null,
      downgradedAt: null,
      version: state.version + 1,
    };
    const subscription = await this.save(next);
    await this.emit(next, subscription, 'subscription.canceled', 'canceled', at);
    return { state: next, subscription, invoiceIds: [], creditNoteIds: [] };
  }

  /**
   * DELETE: terminated now. Unless `skip`, what was not billed up to now is invoiced (in arrear
   * the base fee through the termination day); `generate_credit_note` also credits, in advance,
   * the days after the termination day.
   */
  async terminate(state: SubscriptionState, at: Date, action: OnTerminationAction | undefined): Promise<SubscriptionStepResult> {
    const chosen = action ?? state.onTerminationAction;
    const invoiceIds: string[] = [];
    const creditNoteIds: string[] = [];
    if (state.status === 'active' && state.currentPeriod) {
      const period = state.currentPeriod;
      const segmentFrom = new Date(state.segmentFrom ?? period.from);
      const billedUntil = terminationBilledUntil(at, new Date(period.to), state.timezone);
      // Ended inside its trial: nothing was ever billable, not even the day the trial would have ended.
      const inTrial = state.trialEndsAt !== null && Date.parse(state.trialEndsAt) > at.getTime();
      if (chosen !== 'skip' && !inTrial) {
        const lines = await this.segmentLines(state, state.plan, period, segmentFrom, billedUntil, at, { baseFee: !state.payInAdvance });
        if (lines && lines.fees.length > 0) {
          const invoice = await this.issue(state, lines, { from: segmentFrom, to: billedUntil }, at, billKey(state, state.plan, segmentFrom, 'subscription'));
          invoiceIds.push(invoice._id);
        }
      }
      if (chosen === 'generate_credit_note' && state.payInAdvance && state.advanceFee) {
        const credited = await this.creditUnused(state, billedUntil, at, 'order_cancellation', billKey(state, state.plan, billedUntil, 'termination_credit'));
        if (credited) creditNoteIds.push(credited);
      }
    }
    const next: SubscriptionState = {
      ...state,
      status: 'terminated',
      terminatedAt: iso(at),
      endingAt: iso(at),
      onTerminationAction: chosen,
      pendingPlan: null,
      downgradedAt: null,
      progressive: { enabled: false, nextCheckAt: null },
      version: state.version + 1,
    };
    const subscription = await this.save(next);
    await this.emit(next, subscription, 'subscription.terminated', 'terminated', at);
    return { state: next, subscription, invoiceIds, creditNoteIds };
  }

  /**
   * Progressive billing: when the segment's usage so far crosses a usage threshold of the plan
   * beyond what earlier progressive invoices of the segment billed, a `progressive_billing`
   * invoice bills the usage so far, less those invoices, finalized at once (no grace period).
   * Fixed thresholds pass once per segment; a recurring one every `amount` above the largest
   * fixed one (lago-reference.md 7.1, applied to the period's usage as the issue says).
   */
  async checkThresholds(state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
    const period = state.currentPeriod!;
    const segmentFrom = new Date(state.segmentFrom ?? period.from);
    const next: SubscriptionState = {
      ...state,
      progressive: await this.progressiveFor(state.plan, at, state.progressiveCheckMs),
      version: state.version + 1,
    };
    const invoiceIds: string[] = [];
    const lines = await this.segmentLines(state, state.plan, period, segmentFrom, new Date(period.to), at, { baseFee: false, commitment: false, now: at });
    if (lines) {
      const usage = sum(lines.fees.map((f) => f.amount_cents));
      const earlierInvoices = await this.progressiveInvoices(state.subscriptionId, segmentFrom);
      const billed = earlierInvoices.length > 0 ? fromDecimal128(earlierInvoices[earlierInvoices.length - 1]!.fees_amount_cents)! : ZERO;
      const thresholds = await this.db.models.UsageThreshold.find({ plan_id: state.plan.id }).lean();
      if (thresholdCrossed(thresholds.map((t) => ({ amount: fromDecimal128(t.amount_cents)!, recurring: t.recurring })), billed, usage)) {
        const invoice = await createInvoice(this.db, this.deps, {
          organizationId: state.organizationId,
          customerId: state.customerId,
          subscriptionId: state.subscriptionId,
          invoiceType: 'progressive_billing',
          currency: state.plan.currency,
          idempotencyKey: `${state.subscriptionId}/${iso(segmentFrom)}/progressive_billing/${iso(at)}`,
          fees: lines.fees,
          planId: state.plan.id,
          periodStartedAt: segmentFrom,
          periodEndedAt: new Date(period.to),
          assembly: { progressive_billing_credits: progressiveCredits(earlierInvoices) },
          gracePeriodDays: 0,
          finalizeAtCreation: true,
          at,
        });
        invoiceIds.push(invoice._id);
      }
    }
    const subscription = await this.save(next);
    if (invoiceIds.length > 0) {
      await this.emit(next, subscription, 'subscription.usage_threshold_reached', `usage_threshold_reached/${iso(at)}`, at);
    }
    return { state: next, subscription, invoiceIds, creditNoteIds: [] };
  }

  // ---- lines and invoices -----------------------------------------------------------------

  private async plan(id: string): Promise<PlanView> {
    const plan = (await this.catalog.plansById([id])).get(id);
    if (!plan) throw new Error(`plan ${id} not found`);
    return plan;
  }

  /** `[from, to)` of `period` on `plan`: the days billed (after the trial unless `trial` is false) and its base fee. */
  private segment(state: SubscriptionState, plan: PlanSnapshot, period: PeriodState, from: Date, to: Date, trial = true): SegmentProration | null {
    return prorateSegment({
      schedule: scheduleOf(state, plan.interval),
      periodFrom: new Date(period.from),
      from,
      to,
      trialEndsAt: trial && state.trialEndsAt ? new Date(state.trialEndsAt) : null,
      amountCents: plan.amount_cents,
    });
  }

  /** The base fee of `period` from `from` (or the trial end) to its end, as a line. */
  private async baseFeeLine(state: SubscriptionState, period: PeriodState, from: Date): Promise<PricedFee | null> {
    const segment = this.segment(state, state.plan, period, from, new Date(period.to));
    return segment ? baseFee(segment.baseFee, segment.usedDays, { from: segment.from, to: segment.to }) : null;
  }

  /** An invoice holding only the base fee of `period` from `from`, billed in advance. */
  private async billAdvance(state: SubscriptionState, period: PeriodState, from: Date, at: Date, key: string): Promise<InvoiceDoc | null> {
    const line = await this.baseFeeLine(state, period, from);
    if (!line) return null;
    const span = { from, to: new Date(period.to) };
    return this.issue(state, { plan: state.plan, fees: [line], proration: undefined, commitment: false, span }, span, at, key);
  }

  /**
   * The lines of one plan over `[from, to)` of a period: in arrear its prorated base fee, its
   * usage up to `usageTo` and its commitment true-up. Null when no day of it is billable (the
   * trial covers it), so nothing is invoiced.
   */
  private async segmentLines(
    state: SubscriptionState,
    snapshot: PlanSnapshot,
    period: PeriodState,
    from: Date,
    to: Date,
    usageTo: Date,
    options: { baseFee: boolean; commitment?: boolean; now?: Date },
  ): Promise<Lines | null> {
    const segment = this.segment(state, snapshot, period, from, to);
    if (!segment) return null;
    const { from: start, ratio: proration } = segment;
    const fees: PricedFee[] = [];
    const span = { from: start, to };
    if (options.baseFee) fees.push(baseFee(segment.baseFee, segment.usedDays, span));

    const plan = await this.plan(snapshot.id);
    const charges = plan.charges.filter((c) => c.invoiceable !== false);
    if (charges.length > 0 && start.getTime() < usageTo.getTime()) {
      const metrics = await this.catalog.metricsById(state.organizationId, [...new Set(charges.map((c) => c.billable_metric_id))]);
      const withEvents = await this.metricsWithEvents(state, start, usageTo);
      const usage = await computeChargeUsage(this.db, { ...plan, charges }, metrics, {
        subscriptionId: state.subscriptionId,
        organizationId: state.organizationId,
        from: start,
        to: usageTo,
        subscriptionStartedAt: new Date(state.startedAt),
        timezone: state.timezone,
        ...(options.now ? { now: options.now } : {}),
        proration: proration ?? FULL_PERIOD,
        metricIdsWithEvents: withEvents,
      });
      fees.push(...usage.flatMap(chargeLines));
    }
    return { plan: snapshot, fees, proration, commitment: options.commitment ?? true, span };
  }

  /** Billing-day work is scoped: charges whose metric had no event in the range are priced at zero units without reading usage. */
  private async metricsWithEvents(state: SubscriptionState, from: Date, to: Date): Promise<Set<string>> {
    const ids = await this.db.models.Event.collection.distinct('billable_metric_id', {
      organization_id: state.organizationId,
      subscription_ids: state.subscriptionId,
      timestamp: { $gte: from, $lt: to },
    });
    return new Set(ids as string[]);
  }

  /** An invoice of `lines`, labelled with `period` (what its base fee pays for, else what it measured). */
  private async issue(state: SubscriptionState, lines: Lines, period: Span, at: Date, key: string): Promise<InvoiceDoc> {
    const commitment = lines.commitment ? await this.db.models.Commitment.findOne({ plan_id: lines.plan.id }).lean() : null;
    const progressive = lines.commitment ? await this.progressiveInvoices(state.subscriptionId, new Date(state.segmentFrom ?? state.currentPeriod!.from)) : [];
    return createInvoice(this.db, this.deps, {
      organizationId: state.organizationId,
      customerId: state.customerId,
      subscriptionId: state.subscriptionId,
      invoiceType: 'subscription',
      currency: lines.plan.currency,
      idempotencyKey: key,
      fees: lines.fees,
      planId: lines.plan.id,
      periodStartedAt: period.from,
      periodEndedAt: period.to,
      linesPeriod: lines.span,
      assembly: {
        ...(commitment ? { minimum_commitment: { amount_cents: fromDecimal128(commitment.amount_cents)! }, commitment_proration: lines.proration } : {}),
        ...(progressive.length > 0 ? { progressive_billing_credits: progressiveCredits(progressive) } : {}),
      },
      // Without a grace period the invoice is finalized before the step returns, so that periods
      // billed together (a subscription started in the past) take their numbers in period order.
      finalizeAtCreation: true,
      at,
    });
  }

  private async progressiveInvoices(subscriptionId: string, segmentFrom: Date): Promise<InvoiceDoc[]> {
    return this.db.models.Invoice.find({
      subscription_id: subscriptionId,
      invoice_type: 'progressive_billing',
      period_started_at: segmentFrom,
      status: { $in: ['draft', 'finalized', 'paid'] },
      deleted_at: null,
    })
      .sort({ created_at: 1, _id: 1 })
      .lean();
  }

  /** The unused part of the in-advance base fee from `from` to the period end, as a credit note. */
  private async creditUnused(state: SubscriptionState, from: Date, at: Date, reason: 'order_change' | 'order_cancellation', key: string): Promise<string | null> {
    const period = state.currentPeriod!;
    const advance = state.advanceFee!;
    // The advance fee was billed on the current plan: credits happen before any switch.
    const unused = this.segment(state, state.plan, period, from, new Date(period.to), false);
    if (!unused) return null;
    const fee = await this.db.models.Fee.findById(advance.feeId).lean();
    if (!fee) return null;
    const feeAmount = fromDecimal128(fee.amount_cents)!;
    const amount = unusedCredit(unused.baseFee, {
      amount: feeAmount,
      total: fromDecimal128(fee.total_amount_cents) ?? feeAmount,
      credited: fromDecimal128(fee.credited_amount_cents) ?? ZERO,
    });
    if (!amount) return null;
    const invoice = await this.db.models.Invoice.findById(advance.invoiceId).lean();
    if (invoice?.status === 'draft') await this.finalizeNow(invoice._id);
    const note = await createCreditNote(this.db, this.deps, {
      organizationId: state.organizationId,
      invoiceId: advance.invoiceId,
      reason,
      items: [{ fee_id: advance.feeId, amount_cents: amount.toFixed(0) }],
      at,
      idempotencyKey: key,
    });
    // Issued at once: its balance goes to the customer's next invoices (the new plan's fee first).
    await finalizeCreditNote(this.db, this.deps, { organizationId: state.organizationId, creditNoteId: note._id, at, idempotent: true });
    return note._id;
  }

  /** A credit note needs a finalized invoice: a draft still in its grace period is finalized early. */
  private async finalizeNow(invoiceId: string): Promise<void> {
    try {
      await this.deps.temporal.client.workflow.getHandle(workflowIds.invoice(invoiceId)).executeUpdate(finalizeInvoiceUpdate);
    } catch (err) {
      if (!(err instanceof WorkflowUpdateFailedError)) throw err;
    }
  }

  private async progressiveFor(plan: PlanSnapshot, from: Date, checkMs: number): Promise<SubscriptionState['progressive']> {
    const count = await this.db.models.UsageThreshold.countDocuments({ plan_id: plan.id });
    return count > 0 ? { enabled: true, nextCheckAt: iso(new Date(from.getTime() + checkMs)) } : { enabled: false, nextCheckAt: null };
  }

  // ---- projection and events --------------------------------------------------------------

  /** Writes the state's projection unless a newer state is already there, and reads it back. */
  private async save(state: SubscriptionState): Promise<SubscriptionResource> {
    const { Subscription } = this.db.models;
    await Subscription.updateOne(
      { _id: state.subscriptionId, state_version: { $lt: state.version } },
      { $set: { ...projectionOf(state), updated_at: new Date() } },
    );
    const doc = await Subscription.findById(state.subscriptionId).lean();
    if (!doc) throw new Error(`subscription ${state.subscriptionId} not found`);
    return toSubscriptionResource(doc);
  }

  private async emit(
    state: SubscriptionState,
    subscription: SubscriptionResource,
    type: Parameters<typeof emitEvent>[1]['type'],
    step: string,
    at: Date,
  ): Promise<void> {
    await emitEvent(this.deps, {
      organizationId: state.organizationId,
      type,
      idempotencyKey: `subscription/${state.subscriptionId}/${step}`,
      object: subscription as unknown as Record<string, unknown>,
      occurredAt: at,
      customerId: state.customerId,
    });
  }
}

function feeIdOf(invoiceId: string): string {
  return deterministicId(`fee/${invoiceId}/${BASE_FEE_KEY}`);
}

function baseFee(amount: Decimal, days: number, period: Span): PricedFee {
  return {
    key: BASE_FEE_KEY,
    fee_type: 'subscription',
    amount_cents: amount,
    units: new Dec(days),
    events_count: 0,
    unit_amount_cents: days > 0 ? amount.dividedBy(days).toDecimalPlaces(4) : ZERO,
    period,
  };
}

/**
 * The idempotency key of a bill: the subscription, the start of what it bills, its kind, the plan
 * and the version of the state the step started from (see the file's header).
 */
function billKey(state: SubscriptionState, plan: PlanSnapshot, from: Date | string, kind: 'advance' | 'subscription' | 'upgrade_credit' | 'termination_credit'): string {
  return `${state.subscriptionId}/${typeof from === 'string' ? from : iso(from)}/${kind}/${plan.id}/v${state.version}`;
}

/** A charge's lines: one per bucket that has events or an amount, and the minimum's true-up. */
function chargeLines({ charge, aggregations, fees }: ChargeUsage): PricedFee[] {
  const lines: PricedFee[] = [];
  const push = (key: string, filterId: string | undefined, amount: Decimal, units: Decimal, events: number, unitAmount: Decimal, name?: string | null) => {
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
    });
  };
  push(`charge/${charge._id}`, undefined, fees.default.amount, aggregations.default.units, aggregations.default.eventsCount, fees.default.unitAmount, charge.invoice_display_name);
  charge.filters.forEach((filter, i) => {
    const bucket = fees.filters[i]!;
    const aggregation = aggregations.filters[i]!;
    push(`charge/${charge._id}/filter/${filter._id}`, filter._id, bucket.amount, aggregation.units, aggregation.eventsCount, bucket.unitAmount, filter.invoice_display_name ?? charge.invoice_display_name);
  });
  if (fees.minTrueUp.greaterThan(0)) {
    push(`charge/${charge._id}/minimum`, undefined, fees.minTrueUp, ZERO, 0, ZERO, charge.invoice_display_name);
  }
  return lines;
}

/** What each earlier progressive invoice of the segment billed net of the ones before it. */
function progressiveCredits(invoices: InvoiceDoc[]) {
  return invoices.map((inv) => ({
    invoice_id: inv._id,
    amount_cents: (fromDecimal128(inv.fees_amount_cents) ?? ZERO).minus(fromDecimal128(inv.progressive_billing_credit_amount_cents) ?? ZERO),
  }));
}

/**
 * Whether usage moved past a threshold since `billed` (what progressive invoices of the segment
 * already billed): a fixed threshold in (billed, usage], or another multiple of the recurring
 * amount above the largest fixed threshold.
 */
export function thresholdCrossed(thresholds: { amount: Decimal; recurring: boolean }[], billed: Decimal, usage: Decimal): boolean {
  if (usage.lessThanOrEqualTo(billed)) return false;
  const fixed = thresholds.filter((t) => !t.recurring).map((t) => t.amount);
  if (fixed.some((a) => a.greaterThan(billed) && a.lessThanOrEqualTo(usage))) return true;
  const recurring = thresholds.find((t) => t.recurring)?.amount;
  if (!recurring || recurring.lessThanOrEqualTo(0)) return false;
  const base = fixed.reduce((max, a) => (a.greaterThan(max) ? a : max), ZERO);
  if (usage.lessThan(base.plus(recurring))) return false;
  const steps = (value: Decimal) => (value.lessThan(base) ? 0 : value.minus(base).dividedToIntegerBy(recurring).toNumber());
  return steps(usage) > steps(billed);
}
