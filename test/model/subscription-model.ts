// The reference model of subscription billing that subscription-billing.model.test.ts holds the
// service to. Written from billing-rules.md (and lago-reference.md §0 and §3 where it is silent),
// independently of src/: plain local-calendar day counting with luxon, money with decimal.js.
// Usage charges paid in advance and prorated charges follow api-contract.md (Invoices),
// docs/usage-charges.md and lago-reference.md §2.10 (see "usage in advance" below).
//
// It follows one subscription created at the clock's present, steps through time (period
// boundaries, the trial end) and applies commands (plan changes, cancel, terminate) at the instant
// they are sent, recording every invoice and credit note the service should issue, in issue order.
// Instants are epoch milliseconds; local dates are `yyyy-MM-dd` strings in the customer's zone.
import Decimal from 'decimal.js';
import { DateTime } from 'luxon';

const Dec = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_UP });
type Dec = Decimal;
const ZERO = new Dec(0);
/** Fee amounts: 4 fractional digits, half up. */
const round4 = (value: Dec) => value.toDecimalPlaces(4, Decimal.ROUND_HALF_UP);
/** Invoice-level amounts and credit notes: whole cents, half up. */
const round0 = (value: Dec) => value.toDecimalPlaces(0, Decimal.ROUND_HALF_UP);

export type Interval = 'weekly' | 'monthly' | 'quarterly' | 'yearly';
export type BillingTime = 'calendar' | 'anniversary';
export type TerminationAction = 'generate_invoice' | 'generate_credit_note' | 'skip';
/** `calls`: a count; `gb`: a sum; `seats`: a recurring sum (its units carry over from period to period). */
export type MetricCode = 'calls' | 'gb' | 'seats';

/** Whether a metric's units carry over (lago-reference.md §1.2): every event since the start counts. */
export const isRecurring = (metric: MetricCode): boolean => metric === 'seats';

/**
 * A `standard` charge: `amount` cents (a decimal string) per unit of the metric. `payInAdvance`:
 * billed event by event as the events arrive; `prorated` (a recurring metric only): each unit
 * weighted by the part of the period it is present (in arrear), or billed for the days left (in advance).
 */
export interface ModelCharge {
  metric: MetricCode;
  amount: string;
  payInAdvance?: boolean;
  prorated?: boolean;
}

export interface ModelPlan {
  key: string;
  interval: Interval;
  amountCents: number;
  currency: 'USD' | 'EUR';
  trialDays: number;
  charges: ModelCharge[];
  /**
   * Plans change only to plans of their family: `classic` (usage in arrear), `usage` (charges in
   * advance, prorated charges, seats).
   */
  family: 'classic' | 'usage';
}

/** A charge billed event by event when its events arrive (all of this catalog's metrics can be). */
export const billedPerEvent = (charge: ModelCharge): boolean => charge.payInAdvance === true;

/** Whether a plan has a charge the classic model does not know: in advance, prorated, or on a recurring metric. */
export const hasUsageCharges = (plan: ModelPlan): boolean =>
  plan.charges.some((c) => c.payInAdvance === true || c.prorated === true || isRecurring(c.metric));

// ---- the local calendar ---------------------------------------------------------------------

const utcDate = (date: string) => DateTime.fromISO(date, { zone: 'utc' });

export function localDate(at: number, zone: string): string {
  return DateTime.fromMillis(at, { zone }).toISODate()!;
}

/** The first instant of a local date (a midnight that does not exist starts the day at 01:00). */
export function dayStart(date: string, zone: string): number {
  return DateTime.fromISO(date, { zone }).toMillis();
}

export function addDays(date: string, days: number): string {
  return utcDate(date).plus({ days }).toISODate()!;
}

function daysBetween(from: string, to: string): number {
  return Math.round(utcDate(to).diff(utcDate(from), 'days').days);
}

/**
 * The local dates `[from, to)` touches: both ends count, so a partial day is a whole day
 * (billing-rules.md, Billing periods). `to` at a local midnight does not touch that date.
 */
export function countDays(from: number, to: number, zone: string): number {
  if (to <= from) return 0;
  const last = localDate(to, zone);
  const endExclusive = dayStart(last, zone) === to ? last : addDays(last, 1);
  return daysBetween(localDate(from, zone), endExclusive);
}

const STEP: Record<Interval, { weeks: number } | { months: number }> = {
  weekly: { weeks: 1 },
  monthly: { months: 1 },
  quarterly: { months: 3 },
  yearly: { months: 12 },
};

/**
 * Period boundaries as local dates: `anchor + k steps`, each computed from the anchor so that a
 * day clamped to a short month does not drift (Jan 31 -> Feb 28 -> Mar 31). Calendar periods are
 * the same with a fixed anchor: a Monday for weeks, a January 1st for months, quarters and years.
 */
export class Schedule {
  constructor(
    readonly interval: Interval,
    readonly anchor: string,
  ) {}

  static of(interval: Interval, billingTime: BillingTime, startDate: string): Schedule {
    if (billingTime === 'anniversary') return new Schedule(interval, startDate);
    return new Schedule(interval, interval === 'weekly' ? '2000-01-03' : '2000-01-01');
  }

  boundary(k: number): string {
    const step = STEP[this.interval];
    const base = utcDate(this.anchor);
    return ('weeks' in step ? base.plus({ weeks: k * step.weeks }) : base.plus({ months: k * step.months })).toISODate()!;
  }

  /** The whole period containing `date`: its first date and the first date of the next one. */
  periodOf(date: string): { start: string; end: string } {
    const step = STEP[this.interval];
    const anchor = utcDate(this.anchor);
    const at = utcDate(date);
    let k =
      'weeks' in step
        ? Math.floor(daysBetween(this.anchor, date) / (7 * step.weeks))
        : Math.floor(((at.year - anchor.year) * 12 + at.month - anchor.month) / step.months);
    while (this.boundary(k) > date) k--;
    while (this.boundary(k + 1) <= date) k++;
    return { start: this.boundary(k), end: this.boundary(k + 1) };
  }
}

// ---- documents ----------------------------------------------------------------------------

export interface ModelFee {
  type: 'subscription' | 'charge';
  metric: MetricCode | null;
  units: Dec;
  eventsCount: number;
  amount: Dec;
  from: number;
  to: number;
  /** What credit notes took from it. */
  credited: Dec;
  /** A charge's fee billed in advance: one event's, or the units carried into a period. */
  payInAdvance: boolean;
  /** The event an in-advance event fee bills. */
  transactionId: string | null;
}

export interface ModelInvoice {
  at: number;
  from: number;
  to: number;
  fees: ModelFee[];
  feesAmount: Dec;
  subtotal: Dec;
  creditNotesAmount: Dec;
  total: Dec;
  status: 'finalized' | 'paid';
}

export interface ModelCreditNote {
  at: number;
  invoice: number;
  fee: number;
  reason: 'order_change' | 'order_cancellation';
  amount: Dec;
  balance: Dec;
  applications: { invoice: number; amount: Dec }[];
}

export interface ModelEvent {
  metric: MetricCode;
  at: number;
  /** The property of a `sum` event (`gb`, `seats`), a decimal string; unused for `calls`. */
  value: string;
  transactionId: string;
}

/** A billing period `[from, to)`: from a start or a boundary to the next boundary. */
interface Period {
  from: number;
  to: number;
}

export interface ModelSetup {
  plan: ModelPlan;
  billingTime: BillingTime;
  payInAdvance: boolean;
  trialDays: number;
  zone: string;
  startedAt: number;
  onTerminationAction: TerminationAction;
}

/** What a command answered: the HTTP status the API must give. */
export type CommandOutcome = 200 | 400 | 422;

const YEARLY_FACTOR: Record<Interval, number> = { weekly: 52, monthly: 12, quarterly: 4, yearly: 1 };
const yearly = (plan: ModelPlan) => plan.amountCents * YEARLY_FACTOR[plan.interval];

export class SubscriptionModel {
  status: 'pending' | 'active' | 'canceled' | 'terminated';
  plan: ModelPlan;
  pending: ModelPlan | null = null;
  /** When the pending downgrade was asked for. */
  downgradedAt: number | null = null;
  /** The period being served; set at activation. */
  period: Period = { from: NaN, to: NaN };
  /** Where the current plan's part of the period starts (the period start, or an upgrade's day). */
  segmentFrom = NaN;
  readonly trialEnd: number | null;
  trialEnded: boolean;
  /** The in-advance base fee that paid for the current period: what a credit note refunds. */
  private advanceFee: { invoice: number; fee: number } | null = null;
  endingAt: number | null = null;
  canceledAt: number | null = null;
  terminatedAt: number | null = null;
  onTerminationAction: TerminationAction;
  readonly events: ModelEvent[] = [];
  readonly invoices: ModelInvoice[] = [];
  /** In-advance fees with nothing to pay (an event that adds nothing): no invoice (GET /v1/fees lists them). */
  readonly feesWithoutInvoice: ModelFee[] = [];
  readonly creditNotes: ModelCreditNote[] = [];
  /** What the model did, for the failure report. */
  readonly log: string[] = [];
  /** The situations the scenario went through, for the run's summary of what was covered. */
  readonly situations = new Set<string>();
  private lastUpgradeDate: string | null = null;
  /**
   * Per in-advance charge (its plan and metric) and period: the units so far in arrival order (a
   * recurring metric's start with the carried ones), the most units and the most money billed.
   */
  private readonly advanceTallies = new Map<string, { units: Dec; maxUnits: Dec; maxBilled: Dec }>();
  private readonly zone: string;
  private readonly startDate: string;

  /** Created at `createdAt`: active from `startedAt` (a past start bills its ended periods at once), pending until then. */
  constructor(
    readonly setup: ModelSetup,
    private readonly createdAt: number,
  ) {
    this.zone = setup.zone;
    this.startDate = localDate(setup.startedAt, setup.zone);
    this.plan = setup.plan;
    this.onTerminationAction = setup.onTerminationAction;
    this.trialEnd = setup.trialDays > 0 ? setup.startedAt + setup.trialDays * 86_400_000 : null;
    this.trialEnded = this.trialEnd === null;
    // Left out (the contract does not say whether a trial holds usage billed in advance back).
    if (this.trialEnd !== null && hasUsageCharges(setup.plan)) throw new Error('the model does not cover trials on the usage plans');
    this.status = 'pending';
    this.advanceTo(createdAt);
  }

  /** Canceled or terminated: nothing happens any more. */
  get isOver(): boolean {
    return this.status === 'canceled' || this.status === 'terminated';
  }

  private activate(at: number): void {
    if (at < this.createdAt) this.situations.add('start in the past');
    if (at > this.createdAt) this.situations.add('start in the future');
    this.status = 'active';
    this.period = this.periodFrom(at, this.plan);
    this.segmentFrom = at;
    this.note(at, `start on ${this.plan.key}, period ${this.span(this.period.from, this.period.to)}`);
    // In a trial nothing is billed; the trial end bills the rest of its period.
    if (this.setup.payInAdvance && this.trialEnd === null) this.billAdvance(at, at);
  }

  // ---- time ---------------------------------------------------------------------------------

  /** Runs every step due up to `now`, in order; at one instant a boundary before a trial end. */
  advanceTo(now: number): void {
    for (;;) {
      if (this.isOver) return;
      if (this.status === 'pending') {
        if (this.setup.startedAt > now) return;
        this.activate(this.setup.startedAt);
        continue;
      }
      const boundary = this.period.to;
      const trialEnd = !this.trialEnded && this.trialEnd !== null ? this.trialEnd : Infinity;
      if (Math.min(boundary, trialEnd) > now) return;
      if (boundary <= trialEnd) this.closePeriod(boundary);
      else this.endTrial(trialEnd);
    }
  }

  /** The next instant the subscription changes by itself (its start, its period's end); null once over. */
  get nextChange(): number | null {
    if (this.isOver) return null;
    return this.status === 'pending' ? this.setup.startedAt : this.period.to;
  }

  /** The end of the `n`-th period from now (1: the current one's); null unless active. */
  boundaryAfter(n: number): number | null {
    if (this.status !== 'active') return null;
    let at = this.period.to;
    for (let i = 1; i < n; i++) at = this.periodFrom(at, this.pending ?? this.plan).to;
    return at;
  }

  /** The earliest timestamp an event may carry and still be billed in the open segment; null when none is open. */
  get eventFloor(): number | null {
    return this.status === 'active' ? this.segmentFrom : null;
  }

  private endTrial(at: number): void {
    this.trialEnded = true;
    this.note(at, 'trial ends');
    this.situations.add(at === this.period.from ? 'trial ends on a boundary' : 'trial ends');
    // The trial end day is billed: from the trial end to the period end, in advance now.
    if (this.setup.payInAdvance && at < this.period.to) this.billAdvance(at, at);
  }

  /**
   * A period boundary: the ended segment is billed (in arrear with its base fee, always its
   * usage); a cancellation ends here; otherwise a scheduled downgrade switches, the next period
   * opens and, in advance, its base fee is billed, on one invoice with the ended usage when the
   * plan stays (the service keeps one plan per invoice). The units the plan's recurring in-advance
   * charges carry into the new period are billed in full for it, on that invoice too; after a
   * switch (another plan) on one of their own, issued first.
   */
  private closePeriod(boundary: number): void {
    const final = this.endingAt !== null && this.endingAt <= boundary;
    const action = final ? this.onTerminationAction : 'generate_invoice';
    const endedFrom = this.segmentFrom;
    const ended = action === 'skip' ? null : this.segmentLines(this.plan, endedFrom, boundary, boundary, !this.setup.payInAdvance);
    if (final) {
      this.situations.add(`cancellation ends (${action})`);
      this.note(boundary, `canceled at the period end (${action})`);
      if (ended) this.issue(boundary, endedFrom, boundary, ended);
      this.status = 'canceled';
      this.schedule(null);
      return;
    }
    const switched = this.pending;
    if (switched) {
      this.situations.add('downgrade takes effect');
      this.note(boundary, `downgrade to ${switched.key} takes effect`);
    }
    this.plan = switched ?? this.plan;
    this.schedule(null);
    this.segmentFrom = boundary;
    this.advanceFee = null;
    this.period = this.periodFrom(boundary, this.plan);
    this.note(boundary, `period ${this.span(this.period.from, this.period.to)} on ${this.plan.key}`);

    // A trial still running at the boundary bills the new period at its end instead.
    const trialOver = this.trialEnd === null || this.trialEnd < boundary;
    const advance = this.setup.payInAdvance && trialOver ? this.baseFeeLine(this.plan, boundary) : null;
    const carried = this.carriedLines();
    if (carried.length > 0)
      this.situations.add(`in advance: carried units billed at a boundary${ended && !switched ? '' : ' (own invoice)'}`);
    if (ended && !switched) ended.push(...carried);
    else if (carried.length > 0) this.issue(boundary, boundary, this.period.to, carried);
    if (ended && advance && !switched) {
      this.advanceFee = { invoice: this.issue(boundary, boundary, this.period.to, [advance, ...ended]), fee: 0 };
      return;
    }
    if (ended) this.issue(boundary, endedFrom, boundary, ended);
    if (advance) this.advanceFee = { invoice: this.issue(boundary, boundary, this.period.to, [advance]), fee: 0 };
  }

  // ---- commands -----------------------------------------------------------------------------

  /**
   * PUT with a plan. A higher or equal yearly amount upgrades at once: the change day belongs to
   * the new plan, the old segment closes at its midnight and is billed now (in arrear with its
   * prorated base fee), in advance the old base fee's unused days are credited and the new plan's
   * fee for the same days invoiced. A lower one is scheduled for the next boundary; the current
   * plan removes a pending downgrade.
   */
  changePlan(target: ModelPlan, now: number): CommandOutcome {
    this.advanceTo(now);
    // A canceled subscription keeps its plan to the end: the service refuses, as for one that is over.
    if (this.isOver || this.endingAt !== null) return this.refused(400);
    if (target.currency !== this.plan.currency) return this.refused(422);
    if (this.status === 'pending') {
      if (target.key === this.plan.key) return this.refused(400);
      this.situations.add('plan replaced before the start');
      // Nothing was billed yet: the plan it will start on is simply replaced.
      this.note(now, `plan replaced by ${target.key} before the start`);
      this.plan = target;
      return 200;
    }
    if (target.key === this.plan.key) {
      if (this.pending === null) return this.refused(400);
      this.situations.add('pending downgrade removed');
      this.note(now, `pending downgrade to ${this.pending.key} removed`);
      this.schedule(null);
      return 200;
    }
    if (yearly(target) < yearly(this.plan)) {
      this.situations.add(this.pending ? 'pending downgrade replaced' : 'downgrade scheduled');
      this.note(now, `downgrade to ${target.key} scheduled`);
      this.schedule(target, now);
      return 200;
    }

    const changeDay = Math.max(dayStart(localDate(now, this.zone), this.zone), this.segmentFrom);
    this.note(now, `upgrade ${this.plan.key} -> ${target.key} from ${new Date(changeDay).toISOString()}`);
    const today = localDate(now, this.zone);
    this.situations.add(
      `upgrade ${this.setup.payInAdvance ? 'in advance' : 'in arrear'}${yearly(target) === yearly(this.plan) ? ' to an equal amount' : ''}`,
    );
    if (changeDay === this.segmentFrom) this.situations.add("upgrade on its segment's first day");
    if (this.lastUpgradeDate === today) this.situations.add('two upgrades in one day');
    if (this.trialEnd !== null && this.trialEnd > now) this.situations.add('upgrade in the trial');
    this.lastUpgradeDate = today;
    // No zero-day lines: a change on the segment's first day bills nothing for the old plan.
    if (changeDay > this.segmentFrom) {
      const old = this.segmentLines(this.plan, this.segmentFrom, changeDay, changeDay, !this.setup.payInAdvance);
      // Outside a boundary an invoice is issued only when it has something to bill.
      if (old && old.length > 0) this.issue(now, this.segmentFrom, changeDay, old);
    }
    if (this.setup.payInAdvance && this.advanceFee) this.creditUnused(changeDay, now, 'order_change');
    this.plan = target;
    this.schedule(null);
    this.segmentFrom = changeDay;
    this.advanceFee = null;
    const inTrial = this.trialEnd !== null && this.trialEnd > now;
    if (this.setup.payInAdvance && !inTrial) this.billAdvance(changeDay, now);
    return 200;
  }

  /** Whether changing to `target` now would be an upgrade, taking effect at once (in the period). */
  isUpgrade(target: ModelPlan): boolean {
    return (
      this.status === 'active' &&
      this.endingAt === null &&
      target.currency === this.plan.currency &&
      target.key !== this.plan.key &&
      yearly(target) >= yearly(this.plan)
    );
  }

  /** POST .../cancel: active until the current period's end, then `on_termination_action`. */
  cancel(action: TerminationAction | undefined, now: number): CommandOutcome {
    this.advanceTo(now);
    // Before its start a subscription has no period to end with.
    if (this.status !== 'active' || this.endingAt !== null) return this.refused(400);
    this.endingAt = this.period.to;
    this.canceledAt = now;
    this.onTerminationAction = action ?? this.onTerminationAction;
    // The plan no longer changes: a pending downgrade would never take effect.
    this.schedule(null);
    this.note(now, `cancel (${this.onTerminationAction}), ending ${new Date(this.endingAt).toISOString()}`);
    return 200;
  }

  /**
   * DELETE: terminated now. Unless `skip`, what was not billed is invoiced: the usage up to now
   * and, in arrear, the base fee through the termination day (a used day). `generate_credit_note`
   * also credits, in advance, the base fee of the days after the termination day.
   */
  terminate(action: TerminationAction | undefined, now: number): CommandOutcome {
    this.advanceTo(now);
    if (this.isOver) return this.refused(400);
    const chosen = action ?? this.onTerminationAction;
    this.note(now, `terminate (${chosen})`);
    this.situations.add(
      `termination (${chosen}, ${this.status === 'pending' ? 'pending' : this.setup.payInAdvance ? 'in advance' : 'in arrear'})`,
    );
    if (this.status === 'pending') {
      this.end(now, chosen);
      return 200;
    }
    const billedUntil = Math.min(dayStart(addDays(localDate(now, this.zone), 1), this.zone), this.period.to);
    // Ended inside its trial: nothing of it was ever billable, not even the day the trial would have ended.
    const inTrial = this.trialEnd !== null && this.trialEnd > now;
    if (inTrial) this.situations.add('termination in the trial');
    if (billedUntil === this.period.to) this.situations.add("termination on its period's last day");
    if (chosen !== 'skip' && !inTrial) {
      const lines = this.segmentLines(this.plan, this.segmentFrom, billedUntil, now, !this.setup.payInAdvance);
      if (lines && lines.length > 0) this.issue(now, this.segmentFrom, billedUntil, lines);
    }
    if (chosen === 'generate_credit_note' && this.setup.payInAdvance && this.advanceFee)
      this.creditUnused(billedUntil, now, 'order_cancellation');
    this.end(now, chosen);
    return 200;
  }

  private end(now: number, action: TerminationAction): void {
    this.status = 'terminated';
    this.terminatedAt = now;
    this.endingAt = now;
    this.onTerminationAction = action;
    this.schedule(null);
  }

  /** Whether an event of `metric` arriving now is billed at once (the current plan charges it in advance). */
  billsInAdvance(metric: MetricCode): boolean {
    return this.status === 'active' && this.plan.charges.some((c) => billedPerEvent(c) && c.metric === metric);
  }

  /** An event arriving at `now` (in the open segment): in-advance charges bill it at once. */
  addEvent(event: ModelEvent, now: number): void {
    this.events.push(event);
    if (this.status !== 'active') return;
    for (const charge of this.plan.charges)
      if (billedPerEvent(charge) && charge.metric === event.metric) this.billEvent(charge, event, now);
  }

  // ---- usage in advance ---------------------------------------------------------------------

  /** A standard price, never negative (billing-rules.md: no negative fee), as a fee: 4 decimals. */
  private price(charge: ModelCharge, units: Dec): Dec {
    return units.lessThanOrEqualTo(0) ? ZERO : round4(units.times(charge.amount));
  }

  /** What one event adds to its metric's units: a count 1, a sum its value. */
  private unitsOf(event: ModelEvent): Dec {
    return event.metric === 'calls' ? new Dec(1) : new Dec(event.value);
  }

  /** A recurring metric's units before `at`: every event since the start (all the model has). */
  private unitsBefore(metric: MetricCode, at: number): Dec {
    return this.events.filter((e) => e.metric === metric && e.at < at).reduce((acc, e) => acc.plus(this.unitsOf(e)), ZERO);
  }

  /**
   * One event of an in-advance charge, when it arrives (api-contract.md, Invoices; usage-charges.md):
   * the period's units in arrival order with it (a recurring metric's from the units carried in)
   * are priced, and only what exceeds the most ever billed in the period is billed (the carried
   * units count as billed: the period start bills them), never negative. Prorated (standard): the
   * units beyond the most ever billed, for the days from the event's local day to the period end
   * over the period's days. Above 0: an invoice of its own, else a fee without invoice.
   */
  private billEvent(charge: ModelCharge, event: ModelEvent, now: number): void {
    const key = `${this.plan.key}/${charge.metric}/${this.period.from}`;
    let tally = this.advanceTallies.get(key);
    if (!tally) {
      const carried = isRecurring(charge.metric) ? this.unitsBefore(charge.metric, this.period.from) : ZERO;
      tally = { units: carried, maxUnits: carried, maxBilled: this.price(charge, carried) };
      this.advanceTallies.set(key, tally);
    }
    const added = this.unitsOf(event);
    tally.units = tally.units.plus(added);
    let units: Dec;
    let amount: Dec;
    if (charge.prorated) {
      units = Dec.max(tally.units.minus(tally.maxUnits), ZERO);
      const days = countDays(event.at, this.period.to, this.zone);
      amount = round4(units.times(charge.amount).times(days).dividedBy(this.fullDays(this.plan)));
      if (units.greaterThan(0) && days < this.fullDays(this.plan)) this.situations.add('prorated in advance: billed for the days left');
    } else {
      const price = this.price(charge, tally.units);
      amount = Dec.max(price.minus(tally.maxBilled), ZERO);
      tally.maxBilled = Dec.max(tally.maxBilled, price);
      units = Dec.max(added, ZERO);
    }
    if (added.greaterThan(0) && tally.units.lessThanOrEqualTo(tally.maxUnits) && isRecurring(charge.metric))
      this.situations.add('in advance: seats added again, not billed twice');
    tally.maxUnits = Dec.max(tally.maxUnits, tally.units);
    const fee: ModelFee = {
      type: 'charge',
      metric: charge.metric,
      units,
      eventsCount: 1,
      amount,
      from: this.period.from,
      to: this.period.to,
      credited: ZERO,
      payInAdvance: true,
      transactionId: event.transactionId,
    };
    if (amount.greaterThan(0)) {
      this.situations.add(`in advance: ${charge.metric} event invoiced`);
      this.issue(now, this.period.from, this.period.to, [fee]);
      return;
    }
    this.situations.add('in advance: fee without invoice');
    this.feesWithoutInvoice.push(fee);
    this.note(now, `${charge.metric} fee ${units.toFixed(4)} units, 0 (no invoice)`);
  }

  /** The units the plan's recurring in-advance charges carry into the new period, billed in full for it. */
  private carriedLines(): ModelFee[] {
    const fees: ModelFee[] = [];
    for (const charge of this.plan.charges) {
      if (!billedPerEvent(charge) || !isRecurring(charge.metric)) continue;
      const units = this.unitsBefore(charge.metric, this.period.from);
      if (units.lessThanOrEqualTo(0)) continue;
      fees.push({
        type: 'charge',
        metric: charge.metric,
        units,
        eventsCount: 0,
        amount: this.price(charge, units),
        from: this.period.from,
        to: this.period.to,
        credited: ZERO,
        payInAdvance: true,
        transactionId: null,
      });
    }
    return fees;
  }

  // ---- lines --------------------------------------------------------------------------------

  private periodFrom(from: number, plan: ModelPlan): Period {
    const whole = this.wholePeriod(plan, from);
    return { from, to: dayStart(whole.end, this.zone) };
  }

  private wholePeriod(plan: ModelPlan, at: number) {
    return Schedule.of(plan.interval, this.setup.billingTime, this.startDate).periodOf(localDate(at, this.zone));
  }

  /**
   * The proration denominator of `plan` in the current period: the days of its schedule's whole
   * period containing the period's start (a first calendar period that starts mid-month still
   * divides by the month's days).
   */
  private fullDays(plan: ModelPlan): number {
    const whole = this.wholePeriod(plan, this.period.from);
    return daysBetween(whole.start, whole.end);
  }

  /** Billing never starts before the trial ends. */
  private billableFrom(from: number): number {
    return this.trialEnd === null ? from : Math.max(from, this.trialEnd);
  }

  private baseFee(plan: ModelPlan, from: number, to: number): ModelFee | null {
    const days = countDays(from, to, this.zone);
    if (days === 0) return null;
    const amount = round4(new Dec(plan.amountCents).times(days).dividedBy(this.fullDays(plan)));
    return {
      type: 'subscription',
      metric: null,
      units: new Dec(days),
      eventsCount: 0,
      amount,
      from,
      to,
      credited: ZERO,
      payInAdvance: false,
      transactionId: null,
    };
  }

  /** The base fee of the current period from `from` (or the trial end) to its end. */
  private baseFeeLine(plan: ModelPlan, from: number): ModelFee | null {
    return this.baseFee(plan, this.billableFrom(from), this.period.to);
  }

  private billAdvance(from: number, at: number): void {
    const line = this.baseFeeLine(this.plan, from);
    if (line) this.advanceFee = { invoice: this.issue(at, from, this.period.to, [line]), fee: 0 };
  }

  /**
   * One plan's lines over `[from, to)` of the current period: in arrear its prorated base fee,
   * and its usage up to `usageTo` (not the charges billed as their events arrived). A recurring
   * metric counts every event since the start; prorated, each value weighs the local days from its
   * event (or from `from` for one before it) to `to`, over the period's days, exactly: only the fee
   * is rounded. Null when the trial covers it all.
   */
  private segmentLines(plan: ModelPlan, from: number, to: number, usageTo: number, withBaseFee: boolean): ModelFee[] | null {
    const start = this.billableFrom(from);
    if (start >= to) return null;
    const fees: ModelFee[] = [];
    if (withBaseFee) {
      const base = this.baseFee(plan, start, to);
      if (base) fees.push(base);
    }
    for (const charge of plan.charges) {
      if (billedPerEvent(charge)) continue;
      const recurring = isRecurring(charge.metric);
      const events = this.events.filter((e) => e.metric === charge.metric && (recurring || e.at >= start) && e.at < usageTo);
      let units = charge.prorated
        ? events
            .reduce((acc, e) => acc.plus(this.unitsOf(e).times(countDays(Math.max(e.at, start), to, this.zone))), ZERO)
            .dividedBy(this.fullDays(plan))
        : events.reduce((acc, e) => acc.plus(this.unitsOf(e)), ZERO);
      // No negative fee: units and amount both 0 (a removal dated before its add weighs more days).
      if (units.isNegative()) units = ZERO;
      const amount = round4(units.times(charge.amount));
      // A charge without events bills no line.
      if (events.length === 0 && amount.isZero()) continue;
      if (charge.prorated && amount.greaterThan(0)) this.situations.add('prorated in arrear billed');
      fees.push({
        type: 'charge',
        metric: charge.metric,
        units,
        eventsCount: events.length,
        amount,
        from: start,
        to,
        credited: ZERO,
        payInAdvance: false,
        transactionId: null,
      });
    }
    return fees;
  }

  /**
   * Credits the unused part of the in-advance base fee, `from` to the period end, in whole cents
   * and never more than what is left of the fee (rounded as its invoice's total was).
   */
  private creditUnused(from: number, at: number, reason: ModelCreditNote['reason']): void {
    const days = countDays(from, this.period.to, this.zone);
    if (days === 0 || !this.advanceFee) return;
    const fee = this.invoices[this.advanceFee.invoice]!.fees[this.advanceFee.fee]!;
    const unused = new Dec(this.plan.amountCents).times(days).dividedBy(this.fullDays(this.plan));
    const amount = round0(Dec.min(unused, fee.amount.minus(fee.credited)));
    if (amount.lessThanOrEqualTo(0)) return;
    this.situations.add(`credit note (${reason})`);
    fee.credited = fee.credited.plus(amount);
    this.creditNotes.push({
      at,
      invoice: this.advanceFee.invoice,
      fee: this.advanceFee.fee,
      reason,
      amount,
      balance: amount,
      applications: [],
    });
    this.note(at, `credit note ${amount.toFixed(0)} (${reason}, ${days} days) on invoice #${this.advanceFee.invoice}`);
  }

  /**
   * Issues and finalizes an invoice: the subtotal in whole cents, then the customer's credit note
   * balances, oldest first (never a note on this very invoice); a total of zero is paid.
   */
  private issue(at: number, from: number, to: number, fees: ModelFee[]): number {
    const index = this.invoices.length;
    const feesAmount = fees.reduce((acc, f) => acc.plus(f.amount), ZERO);
    const subtotal = round0(feesAmount);
    let credits = ZERO;
    for (const note of this.creditNotes) {
      const remaining = subtotal.minus(credits);
      if (remaining.lessThanOrEqualTo(0)) break;
      if (note.invoice === index || note.balance.lessThanOrEqualTo(0)) continue;
      const applied = Dec.min(note.balance, remaining);
      note.balance = note.balance.minus(applied);
      note.applications.push({ invoice: index, amount: applied });
      credits = credits.plus(applied);
      this.situations.add('credit note applied to a later invoice');
    }
    const total = subtotal.minus(credits);
    if (fees.some((f) => f.type === 'charge')) this.situations.add('usage billed');
    if (total.isZero()) this.situations.add('invoice of zero');
    this.invoices.push({
      at,
      from,
      to,
      fees,
      feesAmount,
      subtotal,
      creditNotesAmount: credits,
      total,
      status: total.lessThanOrEqualTo(0) ? 'paid' : 'finalized',
    });
    this.note(
      at,
      `invoice #${index} ${this.span(from, to)}: ${fees.map((f) => `${f.metric ?? f.type} ${f.amount.toFixed(4)}`).join(', ') || 'no fee'}; total ${total.toFixed(0)}`,
    );
    return index;
  }

  /** Sets (or clears) the pending downgrade and when it was asked for. */
  private schedule(target: ModelPlan | null, at: number | null = null): void {
    this.pending = target;
    this.downgradedAt = target ? at : null;
  }

  private refused(status: 400 | 422): CommandOutcome {
    this.situations.add(`command refused (${status})`);
    return status;
  }

  private span(from: number, to: number): string {
    return `[${new Date(from).toISOString()}, ${new Date(to).toISOString()})`;
  }

  private note(at: number, what: string): void {
    this.log.push(`${new Date(at).toISOString()} (${localDate(at, this.zone)} local) ${what}`);
  }
}
