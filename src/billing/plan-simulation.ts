// Plan simulation (issue 19, item 2; docs/simulation.md): what a plan would bill, priced by the code
// that bills and writing nothing.
//
// - Hypothetical units (simulatePlanUnits): one full billing period of the plan with the given
//   units per billable metric: the base fee line (baseFeeLine), each charge's lines from the charge
//   model (chargeFeesOf, chargeLines), the invoice through the subscription steps' own `issue`
//   (commitment true-up), taxed and discounted by the invoice engine.
// - Past usage (simulatePastUsage): for each invoiced billing step of a customer's subscriptions
//   (a period end, the activation or trial end in advance, a termination), the step itself is run
//   again, dry (StepContext.dryRun, as the previews do), on the subscription's state at that instant
//   with the simulated plan in place of the one billed: the same stored events (daily roll-ups and
//   raw events of the subscription), the same proration, caps, commitment and taxes. With the
//   plan the customer was billed on, it gives back the issued invoices' fees and taxes exactly.
//
// Each invoice a step hands the sink is assembled as draftInvoice assembles it (taxSetsQuery, the
// customer's applied coupons, assembleInvoice, feeRecordsOf) without an id, a number or a write.
// Coupons apply to hypothetical units when a customer is given and has some; never to past
// periods, whose coupons the issued invoices used: past periods compare amounts before coupons
// and credits. Wallets, credit notes and progressive billing credits pay an invoice, they do not
// price it: never applied.
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import type { CustomerDoc } from '../db/models/customer';
import type { FeeDoc } from '../db/models/fee';
import type { InvoiceDoc } from '../db/models/invoice';
import type { PlanDoc } from '../db/models/plan';
import type { SubscriptionDoc } from '../db/models/subscription';
import { fromDecimal128 } from '../db/decimal';
import { billedPerEvent } from '../domain/charge-rules';
import { FULL_PERIOD, priceEventInAdvance } from '../domain/charges';
import { assembleInvoice, type AssembledInvoice, type PricedFee } from '../domain/invoice-assembly';
import { Dec, roundFee, sum, toDecimal4String, ZERO } from '../domain/money';
import { periodContaining, periodStart, type BillingTime } from '../domain/periods';
import type { AggregationResult } from '../domain/usage-types';
import { iso } from '../resources/format';
import {
  toSimulatedFee,
  type CustomerPlanSimulation,
  type PlanUnitsSimulation,
  type SimulatedPeriod,
  type SimulatedStep,
  type SimulationAmounts,
  type SkippedPeriod,
} from '../resources/plan-simulation';
import { toSubscriptionResource, type SubscriptionResource } from '../resources/subscription';
import { projectionOf } from '../subscriptions/projection';
import { initialState, planSnapshot } from '../subscriptions/start';
import { scheduleOf, type PeriodState, type PlanSnapshot, type SubscriptionState } from '../subscriptions/state';
import type { ChargeView, MetricView } from '../usage/catalog-view';
import { chargeFeesOf, emptyAggregation, NO_SOURCE, type ChargeUsage } from '../usage/period-usage';
import { loadTaxSets } from '../usage/tax-sets';
import { appliedCouponsOf, feeRecordsOf, taxSetsQuery, type NewInvoice } from './invoices';
import { activate, endTrial } from './subscription/activation';
import { closePeriod } from './subscription/boundary';
import { terminate } from './subscription/ending';
import {
  baseFeeLine,
  billKey,
  parseBillKey,
  type BillKey,
  chargeLines,
  issue,
  planView,
  subscriptionBillingContext,
  type DryRun,
  type StepContext,
  type SubscriptionBillingDeps,
} from './subscription/shared';

/** One invoice a dry step issued: assembled by the engine, its fees as creation would store them. */
interface SimulatedInvoice {
  key: string;
  assembled: AssembledInvoice;
  fees: FeeDoc[];
}

/** The timing settings a state needs; no timer of a simulation ever runs. */
const TIMING = { jitterWindowMs: 0, progressiveCheckMs: 3_600_000 };

/** No progressive billing: its credits pay an invoice, and its checks never run here. */
const NO_PROGRESSIVE: SubscriptionState['progressive'] = { enabled: false, nextCheckAt: null, checkedFrom: null };

/**
 * The dry run's sink: each invoice a step would issue, priced and taxed (and, when asked, discounted
 * by the customer's coupons) by the invoice engine, as draftInvoice does; nothing is written.
 */
class SimulationBook implements DryRun {
  readonly invoices: SimulatedInvoice[] = [];

  constructor(
    private readonly db: Db,
    /** The subscription document the states project onto (a hypothetical one is never saved). */
    private readonly base: SubscriptionDoc,
    /** Whose customer-level taxes (and coupons) apply; null: the organization's taxes only. */
    private readonly customerId: string | null,
    private readonly withCoupons: boolean,
  ) {}

  async invoice(input: NewInvoice): Promise<Pick<InvoiceDoc, '_id'>> {
    const [taxes, coupons] = await Promise.all([
      // No customer: a customer level that matches no applied tax.
      loadTaxSets(this.db, taxSetsQuery(input, this.customerId ?? '')),
      this.withCoupons && this.customerId ? appliedCouponsOf(this.db, input.organizationId, this.customerId) : Promise.resolve([]),
    ]);
    const assembled = assembleInvoice({ currency: input.currency, fees: input.fees, taxes, applied_coupons: coupons, ...input.assembly });
    const id = `simulation/${this.invoices.length + 1}`;
    const fees = feeRecordsOf(assembled, input, id, (key) => `${id}/${key}`) as unknown as FeeDoc[];
    this.invoices.push({ key: input.idempotencyKey, assembled, fees });
    return { _id: id };
  }

  async creditNote(): Promise<string> {
    // Credit notes (an in-advance base fee's unused part) are not part of what a simulation prices.
    return `simulation-credit-note`;
  }

  async subscription(state: SubscriptionState): Promise<SubscriptionResource> {
    return toSubscriptionResource({ ...this.base, ...projectionOf(state) } as SubscriptionDoc);
  }
}

function dryContext(db: Db, deps: SubscriptionBillingDeps, book: SimulationBook): StepContext {
  return { ...subscriptionBillingContext(db, deps), dryRun: book };
}

const amountOf = (value: unknown): Decimal => fromDecimal128(value) ?? ZERO;

// ---- hypothetical units ---------------------------------------------------------------------

export interface UnitsSimulationInput {
  plan: PlanDoc;
  /** The customer whose taxes and coupons apply, if any. */
  customer: CustomerDoc | null;
  /** Units by billable metric id; a metric of the plan left out has none. */
  units: Map<string, Decimal>;
  billingTime: BillingTime;
  payInAdvance: boolean;
  /** An instant of the period simulated (the whole period containing it). */
  at: Date;
  timezone: string;
}

/**
 * A metric's hypothetical units as one event's aggregation: the charge models price them as the
 * period's total (a per-transaction rule sees one transaction; a dynamic charge, which prices each
 * event's own price and quantity, has no event to price).
 */
function unitsAggregation(units: Decimal): AggregationResult {
  return units.isZero()
    ? { units, eventsCount: 0, perEventValues: [], events: [] }
    : { units, eventsCount: 1, perEventValues: [units], events: [] };
}

/** The lines of a charge billed at the period end, priced from `units` in its default bucket. */
function periodEndLines(charge: ChargeView, metric: MetricView, units: Decimal, span: { from: Date; to: Date }): PricedFee[] {
  const aggregations = { default: unitsAggregation(units), filters: charge.filters.map(() => emptyAggregation()) };
  const fees = chargeFeesOf(charge, aggregations, FULL_PERIOD);
  const usage: ChargeUsage = {
    charge,
    metric,
    aggregations,
    fees,
    sources: { default: NO_SOURCE, filters: charge.filters.map(() => NO_SOURCE) },
    range: { ...span, proration: FULL_PERIOD },
  };
  return chargeLines(usage);
}

/**
 * A charge billed event by event: on its own invoices as the events arrive. Its line here is the
 * units priced as one event after none (price with them − nothing), so the invoice shows what the
 * period costs in all; flagged `pay_in_advance`.
 */
function perEventLine(charge: ChargeView, units: Decimal): PricedFee | null {
  const after = unitsAggregation(units);
  const amount = priceEventInAdvance({
    charge_model: charge.charge_model,
    properties: charge.properties,
    before: unitsAggregation(ZERO),
    after,
  });
  if (after.eventsCount === 0 && amount.isZero()) return null;
  const name = charge.invoice_display_name;
  return {
    key: `charge/${charge._id}/in_advance`,
    fee_type: 'charge',
    charge_id: charge._id,
    ...(name ? { invoice_display_name: name } : {}),
    amount_cents: amount,
    units,
    events_count: after.eventsCount,
    unit_amount_cents: units.isZero() ? ZERO : roundFee(amount.div(units)),
    pay_in_advance: true,
  };
}

/** The invoice a full period of `plan` would end with for the given units (see the file's header). */
export async function simulatePlanUnits(db: Db, deps: SubscriptionBillingDeps, input: UnitsSimulationInput): Promise<PlanUnitsSimulation> {
  const { plan, customer } = input;
  const snapshot = planSnapshot(plan);
  const schedule = {
    interval: snapshot.interval,
    billingTime: input.billingTime,
    anchor: input.at,
    timezone: input.timezone,
    at: input.at,
  };
  // The whole period containing `at`, as if the subscription had started at its start.
  const from = periodStart(schedule);
  const to = periodContaining(schedule).to;
  const doc = new db.models.Subscription({
    organization_id: plan.organization_id,
    customer_id: customer?._id ?? '',
    external_customer_id: customer?.external_id ?? '',
    external_id: `simulation-${plan._id}`,
    plan_id: plan._id,
    status: 'active',
    billing_time: input.billingTime,
    pay_in_advance: input.payInAdvance,
    trial_period_days: 0,
    started_at: from,
    on_termination_action: 'generate_invoice',
    state_version: 0,
  }).toObject();
  const period: PeriodState = { from: iso(from), to: iso(to) };
  const state: SubscriptionState = {
    ...initialState(doc, snapshot, input.timezone, TIMING),
    status: 'active',
    currentPeriod: period,
    segmentFrom: period.from,
    progressive: NO_PROGRESSIVE,
  };
  const book = new SimulationBook(db, doc, customer?._id ?? null, true);
  const ctx = dryContext(db, deps, book);
  const span = { from, to };

  const fees: PricedFee[] = [];
  const base = await baseFeeLine(state, period, from);
  if (base) fees.push(base);
  const view = await planView(ctx, plan._id);
  const charges = view.charges.filter((c) => c.invoiceable !== false);
  const metrics = await ctx.catalog.metricsById(plan.organization_id, [...new Set(charges.map((c) => c.billable_metric_id))]);
  for (const charge of charges) {
    const metric = metrics.get(charge.billable_metric_id);
    if (!metric) throw new Error(`billable metric ${charge.billable_metric_id} of charge ${charge._id} not found`);
    const units = input.units.get(metric._id) ?? ZERO;
    if (billedPerEvent(charge, metric)) {
      const line = perEventLine(charge, units);
      if (line) fees.push(line);
    } else {
      fees.push(...periodEndLines(charge, metric, units, span));
    }
  }
  await issue(
    ctx,
    state,
    { plan: snapshot, fees, proration: undefined, commitment: true, span },
    span,
    to,
    billKey(state, snapshot, from, 'subscription'),
  );
  const { assembled, fees: feeDocs } = book.invoices[0]!;
  return {
    plan_id: plan._id,
    plan_code: plan.code,
    currency: plan.currency,
    customer_id: customer?._id ?? null,
    billing_time: input.billingTime,
    pay_in_advance: input.payInAdvance,
    period_started_at: iso(from),
    period_ended_at: iso(to),
    fees: feeDocs.map(toSimulatedFee),
    fees_amount_cents: toDecimal4String(assembled.fees_amount_cents),
    subtotal: toDecimal4String(assembled.subtotal),
    tax_amount: toDecimal4String(assembled.tax_amount),
    coupons_amount_cents: toDecimal4String(assembled.coupons_amount_cents),
    total: toDecimal4String(assembled.total),
    applied_taxes: assembled.applied_taxes.map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: t.tax_rate.toString(),
      fees_amount_cents: toDecimal4String(t.fees_amount_cents),
      amount_cents: toDecimal4String(t.amount_cents),
    })),
    applied_coupons: assembled.coupons.map((c) => ({
      coupon_id: c.coupon_id,
      coupon_code: c.coupon_code,
      amount_cents: toDecimal4String(c.amount_cents),
    })),
  };
}

// ---- past usage -----------------------------------------------------------------------------

export interface PastSimulationInput {
  organizationId: string;
  planId: string;
  customerId: string;
  /** Billed spans starting at or after `from` and ending at or before `to` are re-priced. */
  from: Date;
  to: Date;
}

/** The invoices one step issued together (same subscription, same instant). */
interface BillGroup {
  at: number;
  invoices: { invoice: InvoiceDoc; key: BillKey | null }[];
}

function amounts(fees: Decimal, taxes: Decimal, total: Decimal): SimulationAmounts {
  return {
    fees_amount_cents: toDecimal4String(fees),
    taxes_amount_cents: toDecimal4String(taxes),
    total_amount_cents: toDecimal4String(total),
  };
}

function difference(a: SimulationAmounts, b: SimulationAmounts): SimulationAmounts {
  const d = (x: string, y: string) => new Dec(x).minus(y);
  return amounts(
    d(a.fees_amount_cents, b.fees_amount_cents),
    d(a.taxes_amount_cents, b.taxes_amount_cents),
    d(a.total_amount_cents, b.total_amount_cents),
  );
}

function addUp(list: SimulationAmounts[]): SimulationAmounts {
  const total = (field: keyof SimulationAmounts) => sum(list.map((a) => new Dec(a[field])));
  return amounts(total('fees_amount_cents'), total('taxes_amount_cents'), total('total_amount_cents'));
}

/**
 * The state a subscription's workflow had just before its steps at `at`, on `plan` instead of the
 * one it was on: its schedule, time zone and trial from its last state (or its document), the
 * billing period that `at` ends (a boundary) or falls in, and the segment its invoices started from.
 */
function baseState(sub: SubscriptionDoc, plan: PlanSnapshot, timezone: string): SubscriptionState {
  const last = sub.workflow_state as unknown as SubscriptionState | null;
  const first = initialState(sub, plan, timezone, TIMING);
  return {
    ...first,
    // What the subscription's whole life keeps: where its periods are anchored and in which zone.
    ...(last ? { timezone: last.timezone, startedAt: last.startedAt, trialEndsAt: last.trialEndsAt, billingTime: last.billingTime } : {}),
    plan,
    payInAdvance: last?.payInAdvance ?? sub.pay_in_advance,
    onTerminationAction: sub.on_termination_action,
    progressive: NO_PROGRESSIVE,
    unbilledSegments: [],
    pausedAt: null,
    version: 0,
  };
}

/** Which steps ran at `at` (in the workflow's order), from the subscription's dates and schedule. */
function stepsAt(state: SubscriptionState, sub: SubscriptionDoc, at: number): SimulatedStep[] {
  const schedule = scheduleOf(state, state.plan.interval);
  const startedAt = Date.parse(state.startedAt);
  const steps: SimulatedStep[] = [];
  if (at === startedAt) steps.push('activation');
  if (at > startedAt && periodContaining({ ...schedule, at: new Date(at - 1) }).to.getTime() === at) steps.push('boundary');
  if (state.trialEndsAt !== null && Date.parse(state.trialEndsAt) === at) steps.push('trial_end');
  if (sub.terminated_at && sub.terminated_at.getTime() === at) steps.push('termination');
  return steps;
}

/** The period containing `at` as the workflow holds it (the first one starts at `started_at`). */
function periodAt(state: SubscriptionState, at: number): PeriodState {
  const period = periodContaining({ ...scheduleOf(state, state.plan.interval), at: new Date(at) });
  return { from: iso(period.from), to: iso(period.to) };
}

/**
 * The steps of one group run dry on `plan`, from the state before the first of them; returns the
 * invoices they issued and the span they bill.
 */
async function rerunSteps(
  db: Db,
  deps: SubscriptionBillingDeps,
  sub: SubscriptionDoc,
  base: SubscriptionState,
  steps: SimulatedStep[],
  group: BillGroup,
): Promise<SimulatedInvoice[]> {
  const at = new Date(group.at);
  const book = new SimulationBook(db, sub, sub.customer_id, false);
  const ctx = dryContext(db, deps, book);
  // Where the segment the invoices bill started: the earliest segment bill's key (an upgrade's day, else the period start).
  const segmentStarts = group.invoices.flatMap((i) => (i.key?.kind === 'subscription' ? [Date.parse(i.key.from)] : []));
  const segmentFrom = (period: PeriodState) => {
    const earliest = segmentStarts.length > 0 ? Math.min(...segmentStarts) : Date.parse(period.from);
    return iso(new Date(Math.max(earliest, Date.parse(period.from))));
  };
  const trialEnded = (strictlyBefore: boolean) =>
    base.trialEndsAt === null || (strictlyBefore ? Date.parse(base.trialEndsAt) < group.at : Date.parse(base.trialEndsAt) <= group.at);
  let state: SubscriptionState | null = null;
  for (const step of steps) {
    switch (step) {
      case 'activation': {
        const pending = {
          ...base,
          status: 'pending' as const,
          currentPeriod: null,
          segmentFrom: null,
          trialEnded: base.trialEndsAt === null,
        };
        state = (await activate(ctx, pending, at)).state;
        break;
      }
      case 'boundary': {
        const ended = { ...periodAt(base, group.at - 1), to: iso(at) };
        const before: SubscriptionState = state ?? {
          ...base,
          status: 'active',
          currentPeriod: ended,
          segmentFrom: segmentFrom(ended),
          // The trial end at a boundary runs after it.
          trialEnded: trialEnded(true),
          // A cancellation ends the subscription at the end of its period.
          endingAt: sub.status === 'canceled' && sub.ending_at?.getTime() === group.at ? iso(at) : null,
        };
        state = (await closePeriod(ctx, before, at)).state;
        break;
      }
      case 'trial_end': {
        const period = periodAt(base, group.at);
        const before: SubscriptionState = state ?? {
          ...base,
          status: 'active',
          currentPeriod: period,
          segmentFrom: period.from,
          trialEnded: false,
        };
        state = (await endTrial(ctx, before, at)).state;
        break;
      }
      case 'termination': {
        const period = periodAt(base, group.at);
        const before: SubscriptionState = state ?? {
          ...base,
          status: 'active',
          currentPeriod: period,
          segmentFrom: segmentFrom(period),
          trialEnded: trialEnded(false),
        };
        state = (await terminate(ctx, before, at, sub.on_termination_action)).state;
        break;
      }
    }
  }
  return book.invoices;
}

/** The span a group's steps bill: the segment a boundary or termination closes, else the period an advance bills. */
function spanOf(base: SubscriptionState, steps: SimulatedStep[], group: BillGroup): { from: number; to: number } {
  const first = steps[0]!;
  const last = steps[steps.length - 1]!;
  let from: number;
  if (first === 'boundary' || first === 'termination') {
    const period = first === 'boundary' ? periodAt(base, group.at - 1) : periodAt(base, group.at);
    const starts = group.invoices.flatMap((i) => (i.key?.kind === 'subscription' ? [Date.parse(i.key.from)] : []));
    from = Math.max(starts.length > 0 ? Math.min(...starts) : Date.parse(period.from), Date.parse(period.from));
  } else {
    from = group.at;
  }
  const to = last === 'boundary' || last === 'termination' ? group.at : Date.parse(periodAt(base, group.at).to);
  return { from, to: Math.max(to, from) };
}

/** The invoices that billing steps of `sub` issued (not those of events billed in advance), grouped by instant. */
async function billGroups(db: Db, sub: SubscriptionDoc, to: Date): Promise<BillGroup[]> {
  const invoices = await db.models.Invoice.find({
    organization_id: sub.organization_id,
    subscription_id: sub._id,
    // An in-advance invoice at the range's last boundary is labelled with the period it opens.
    period_started_at: { $lte: to },
  }).lean();
  const groups = new Map<number, BillGroup>();
  for (const invoice of invoices) {
    if (invoice.invoice_type !== 'subscription' || invoice.deleted_at) continue;
    if (invoice.status !== 'finalized' && invoice.status !== 'paid') continue;
    // An event's own invoice (a charge billed in advance): `<subscription>/in_advance/...`.
    if (invoice.idempotency_key.startsWith(`${sub._id}/in_advance/`)) continue;
    const at = invoice.created_at.getTime();
    const group = groups.get(at) ?? { at, invoices: [] };
    group.invoices.push({ invoice, key: parseBillKey(invoice.idempotency_key) });
    groups.set(at, group);
  }
  return [...groups.values()].sort((a, b) => a.at - b.at);
}

function invoiceAmounts(invoices: InvoiceDoc[]): SimulationAmounts {
  return amounts(
    sum(invoices.map((i) => amountOf(i.fees_amount_cents))),
    sum(invoices.map((i) => amountOf(i.tax_amount))),
    sum(invoices.map((i) => amountOf(i.subtotal).plus(amountOf(i.tax_amount)))),
  );
}

function simulatedAmounts(invoices: SimulatedInvoice[]): SimulationAmounts {
  return amounts(
    sum(invoices.map((i) => i.assembled.fees_amount_cents)),
    sum(invoices.map((i) => i.assembled.tax_amount)),
    sum(invoices.map((i) => i.assembled.subtotal.plus(i.assembled.tax_amount))),
  );
}

/**
 * One customer's invoiced billing steps whose span falls in [from, to], re-priced under the plan
 * (see the file's header), with what was actually invoiced and the difference.
 */
export async function simulatePastUsage(
  db: Db,
  deps: SubscriptionBillingDeps,
  input: PastSimulationInput,
): Promise<CustomerPlanSimulation> {
  const { Customer, Fee, Organization, Plan, Subscription } = db.models;
  const [plan, customer, organization] = await Promise.all([
    Plan.findOne({ _id: input.planId, organization_id: input.organizationId }).lean(),
    Customer.findOne({ _id: input.customerId, organization_id: input.organizationId }).lean(),
    Organization.findById(input.organizationId, { timezone: 1 }).lean(),
  ]);
  if (!plan) throw new Error(`plan ${input.planId} not found`);
  if (!customer) throw new Error(`customer ${input.customerId} not found`);
  const snapshot = planSnapshot(plan);
  const timezone = customer.timezone ?? organization?.timezone ?? 'UTC';
  const subscriptions = await Subscription.find({ organization_id: input.organizationId, customer_id: customer._id })
    .sort({ created_at: 1, _id: 1 })
    .lean();

  const periods: SimulatedPeriod[] = [];
  const skipped: SkippedPeriod[] = [];
  const from = input.from.getTime();
  const to = input.to.getTime();
  for (const sub of subscriptions) {
    const base = baseState(sub, snapshot, timezone);
    for (const group of await billGroups(db, sub, input.to)) {
      const docs = group.invoices.map((i) => i.invoice);
      const skip = (reason: SkippedPeriod['reason'], message: string) => {
        const start = Math.min(...docs.map((d) => d.period_started_at?.getTime() ?? group.at));
        if (start >= from && group.at <= to) {
          skipped.push({
            subscription_id: sub._id,
            billed_at: iso(new Date(group.at)),
            invoice_ids: docs.map((d) => d._id),
            reason,
            message,
          });
        }
      };
      if (group.invoices.some((i) => i.key === null)) {
        skip('unknown_step', 'an invoice was not issued by a billing step this simulation re-runs');
        continue;
      }
      if (group.invoices.some((i) => i.key!.suffix !== null)) {
        skip('pause', 'a period with a pause: its active parts are not re-priced');
        continue;
      }
      const billedPlan = docs.find((d) => d.plan)?.plan ?? null;
      if (billedPlan && billedPlan.interval !== snapshot.interval) {
        skip('interval_mismatch', `billed on a ${billedPlan.interval} plan; the simulated plan is ${snapshot.interval}`);
        continue;
      }
      const steps = stepsAt(base, sub, group.at);
      if (steps.length === 0) {
        skip('plan_change', 'billed by a plan change: the old plan’s part of the period is not re-priced');
        continue;
      }
      const span = spanOf(base, steps, group);
      if (span.from < from || span.to > to) continue;

      const simulated = await rerunSteps(db, deps, sub, base, steps, group);
      const actualFees = await Fee.find({ invoice_id: { $in: docs.map((d) => d._id) } }).lean();
      const actualAmounts = invoiceAmounts(docs);
      const simulatedTotals = simulatedAmounts(simulated);
      const byTime = (a: InvoiceDoc, b: InvoiceDoc) => (a.sequential_id ?? 0) - (b.sequential_id ?? 0) || (a._id < b._id ? -1 : 1);
      periods.push({
        subscription_id: sub._id,
        external_subscription_id: sub.external_id,
        steps,
        billed_at: iso(new Date(group.at)),
        from: iso(new Date(span.from)),
        to: iso(new Date(span.to)),
        billed_plan: { id: billedPlan?.id ?? group.invoices[0]!.key!.planId, code: billedPlan?.code ?? '' },
        actual: {
          ...actualAmounts,
          invoices: [...docs].sort(byTime).map((d) => ({
            id: d._id,
            number: d.number,
            status: d.status === 'paid' ? ('paid' as const) : ('finalized' as const),
            total: toDecimal4String(amountOf(d.total)),
          })),
          fees: actualFees
            .sort((a, b) => (a.invoice_id ?? '').localeCompare(b.invoice_id ?? '') || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
            .map(toSimulatedFee),
        },
        simulated: { ...simulatedTotals, invoices_count: simulated.length, fees: simulated.flatMap((i) => i.fees.map(toSimulatedFee)) },
        difference: difference(simulatedTotals, actualAmounts),
      });
    }
  }
  periods.sort((a, b) => a.billed_at.localeCompare(b.billed_at) || a.subscription_id.localeCompare(b.subscription_id));
  const actual = addUp(periods.map((p) => p.actual));
  const simulatedTotal = addUp(periods.map((p) => p.simulated));
  return {
    customer_id: customer._id,
    external_customer_id: customer.external_id,
    currency: customer.currency,
    periods,
    totals: { actual, simulated: simulatedTotal, difference: difference(simulatedTotal, actual) },
    skipped,
  };
}
