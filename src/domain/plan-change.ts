import { dec, Dec, type DecimalInput } from './money';
import { countDays, fullPeriodDays, periodContaining, prorate, type BillingInterval, type BillingTime, type Period } from './periods';
import { billableFrom, planChangeDay, terminationBilledUntil } from './proration';

/**
 * Base-fee amounts when a subscription changes plan or ends (billing-rules.md, "Subscription
 * lifecycle"). Day attribution is src/domain/proration.ts's: the day of a plan change belongs to
 * the new plan; the day of a termination and the day a trial ends are billed days. No zero-day
 * line is ever produced, and a credit note amount is `null` rather than zero, because a zero
 * credit note is never created.
 */

export interface PlanPrice {
  amount_cents: DecimalInput;
  interval: BillingInterval;
}

export interface PricedPlan extends PlanPrice {
  currency: string;
}

export type PlanChangeKind = 'upgrade' | 'downgrade';

/** A plan change across currencies cannot be compared, let alone prorated (HTTP 422). */
export class PlanCurrencyMismatch extends Error {
  override readonly name = 'PlanCurrencyMismatch';
  constructor(
    readonly oldCurrency: string,
    readonly newCurrency: string,
  ) {
    super(`the target plan is in ${newCurrency}, the current plan in ${oldCurrency}`);
  }
}

/** Upgrade amounts were asked for a change that compares as a downgrade (scheduled, not immediate). */
export class NotAnUpgrade extends Error {
  override readonly name = 'NotAnUpgrade';
  constructor() {
    super('the target plan has a lower yearly amount: a downgrade is scheduled, not prorated');
  }
}

const PERIODS_PER_YEAR: Record<BillingInterval, number> = {
  weekly: 52,
  monthly: 12,
  quarterly: 4,
  yearly: 1,
};

/** Only the base fee counts (charges are ignored), normalised to a year so intervals compare. */
export function yearlyAmount(plan: PlanPrice): Dec {
  return dec(plan.amount_cents).times(PERIODS_PER_YEAR[plan.interval]);
}

/**
 * Equal yearly amounts count as an upgrade, so a same-price switch (e.g. to another interval or
 * other charges) takes effect at once. Throws `PlanCurrencyMismatch` across currencies.
 */
export function classifyPlanChange(oldPlan: PricedPlan, newPlan: PricedPlan): PlanChangeKind {
  if (oldPlan.currency.toUpperCase() !== newPlan.currency.toUpperCase()) {
    throw new PlanCurrencyMismatch(oldPlan.currency, newPlan.currency);
  }
  return yearlyAmount(newPlan).greaterThanOrEqualTo(yearlyAmount(oldPlan)) ? 'upgrade' : 'downgrade';
}

export interface SubscriptionTiming {
  billingTime: BillingTime;
  /** The subscription's `started_at`. */
  anchor: Date;
  timezone: string;
  payInAdvance: boolean;
  /**
   * When the trial ends (`started_at + trial_period_days`), if there is one. Days before the trial
   * end date are free; the trial end date itself is billed.
   */
  trialEndsAt?: Date | null;
  /**
   * The base fee actually invoiced in advance for the current period. A credit never refunds more
   * than was charged (the first calendar period was prorated, a trial charged nothing). Omitted:
   * the plan's day price times the credited days is trusted as is.
   */
  invoicedBaseFee?: DecimalInput | null;
}

/** Days of `[from, toExclusive)` that are billable, i.e. on or after the trial end date. */
function billableDays(from: Date, toExclusive: Date, timing: SubscriptionTiming): number {
  return countDays(billableFrom(from, timing.trialEndsAt ?? null), toExclusive, timing.timezone);
}

/** In-advance base fees are only invoiced once the trial is over, so before that nothing is refundable. */
function wasBaseFeeInvoiced(at: Date, timing: SubscriptionTiming): boolean {
  return !timing.trialEndsAt || at.getTime() >= timing.trialEndsAt.getTime();
}

/** A credit-note amount, capped by what was invoiced; `null` instead of zero. */
function creditAmount(amountCents: DecimalInput, creditedDays: number, periodDays: number, timing: SubscriptionTiming): Dec | null {
  if (creditedDays === 0) return null;
  let amount = prorate(amountCents, creditedDays, periodDays);
  if (timing.invoicedBaseFee !== undefined && timing.invoicedBaseFee !== null) {
    amount = Dec.min(amount, dec(timing.invoicedBaseFee));
  }
  return amount.greaterThan(0) ? amount : null;
}

export interface UpgradeInput extends SubscriptionTiming {
  oldPlan: PricedPlan;
  newPlan: PricedPlan;
  changedAt: Date;
}

export interface UpgradeAmounts {
  /** The current period of the old plan; an upgrade does not move the boundaries. */
  period: Period;
  /** Days of the whole period: the proration denominator for the old plan. */
  periodDays: number;
  /** The old plan's share, closing at the end of the day before the change. */
  oldPlanPeriod: Period;
  /** The new plan's share, from the change day's midnight to the period end. */
  newPlanPeriod: Period;
  oldPlanDays: number;
  newPlanDays: number;
  /** Pay in arrear: the old plan's prorated base fee, invoiced now. `null` in advance or for 0 days. */
  oldPlanFee: Dec | null;
  /** Pay in advance: refund of the unused part of the old plan's base fee. `null` when nothing to credit. */
  creditNoteAmount: Dec | null;
  /**
   * The new plan's base fee for the same days: invoiced now when pay in advance, at the period
   * end when pay in arrear. `null` when no day is billable (a trial that outlasts the period).
   */
  newPlanFee: Dec | null;
}

/**
 * Amounts of an immediate upgrade. Upgrade on Jan 15 of a 10000-cent monthly plan in arrear:
 * 14 days of 31 for the old plan (4516.1290); in advance: 17 days credited and 17 days of the
 * new plan charged.
 */
export function computeUpgradeAmounts(input: UpgradeInput): UpgradeAmounts {
  if (classifyPlanChange(input.oldPlan, input.newPlan) !== 'upgrade') throw new NotAnUpgrade();
  const schedule = {
    interval: input.oldPlan.interval,
    billingTime: input.billingTime,
    anchor: input.anchor,
    timezone: input.timezone,
    at: input.changedAt,
  };
  const period = periodContaining(schedule);
  const periodDays = fullPeriodDays(schedule);
  // The change day belongs to the new plan; on the first (possibly partial) day of a period the
  // old plan gets nothing.
  const changeDay = planChangeDay(input.changedAt, period.from, input.timezone);
  const oldPlanPeriod = { from: period.from, to: changeDay };
  const newPlanPeriod = { from: changeDay, to: period.to };
  const oldPlanDays = billableDays(period.from, changeDay, input);
  const newPlanDays = billableDays(changeDay, period.to, input);

  const oldPlanFee = !input.payInAdvance && oldPlanDays > 0 ? prorate(input.oldPlan.amount_cents, oldPlanDays, periodDays) : null;
  const creditNoteAmount =
    input.payInAdvance && wasBaseFeeInvoiced(input.changedAt, input)
      ? creditAmount(input.oldPlan.amount_cents, newPlanDays, periodDays, input)
      : null;
  // A new plan with another interval has another day price: its own whole period is the
  // denominator, over the same remaining days of the unmoved current period.
  const newPeriodDays = fullPeriodDays({ ...schedule, interval: input.newPlan.interval });
  const newPlanFee = newPlanDays > 0 ? prorate(input.newPlan.amount_cents, newPlanDays, newPeriodDays) : null;

  return {
    period,
    periodDays,
    oldPlanPeriod,
    newPlanPeriod,
    oldPlanDays,
    newPlanDays,
    oldPlanFee,
    creditNoteAmount,
    newPlanFee,
  };
}

export type TerminationAction = 'generate_invoice' | 'generate_credit_note' | 'skip';

export interface TerminationInput extends SubscriptionTiming {
  plan: PlanPrice;
  terminatedAt: Date;
  action: TerminationAction;
}

export interface TerminationAmounts {
  /** The period the termination ends. */
  period: Period;
  periodDays: number;
  /** End of the billed part: the midnight after the termination day, or the period end. */
  billedUntil: Date;
  /** From the period start through the termination day, inclusive (trial days excluded). */
  usedDays: number;
  /** From the day after the termination day through the period end. */
  unusedDays: number;
  /** Pay in arrear, unless `skip`: the prorated base fee. `null` otherwise. */
  baseFee: Dec | null;
  /** Pay in advance with `generate_credit_note`: the unused part. `null` when nothing to credit. */
  creditNoteAmount: Dec | null;
}

/**
 * Base-fee amounts of a termination. Terminated Jan 10 on a 31-day period: 10 days used, 21
 * credited. A termination exactly on a period boundary (a cancellation reaching `ending_at`) ends
 * the period that closes there: the whole period is used and nothing of the next one is billed.
 */
export function computeTerminationAmounts(input: TerminationInput): TerminationAmounts {
  const schedule = {
    interval: input.plan.interval,
    billingTime: input.billingTime,
    anchor: input.anchor,
    timezone: input.timezone,
  };
  const at = input.terminatedAt;
  let period = periodContaining({ ...schedule, at });
  let billedUntil: Date;
  if (at.getTime() === period.from.getTime() && at.getTime() > input.anchor.getTime()) {
    period = periodContaining({ ...schedule, at: new Date(at.getTime() - 1) });
    billedUntil = period.to;
  } else {
    billedUntil = terminationBilledUntil(at, period.to, input.timezone);
  }
  const periodDays = fullPeriodDays({ ...schedule, at: period.from });
  const usedDays = billableDays(period.from, billedUntil, input);
  const unusedDays = countDays(billedUntil, period.to, input.timezone);

  const baseFee =
    !input.payInAdvance && input.action !== 'skip' && usedDays > 0 ? prorate(input.plan.amount_cents, usedDays, periodDays) : null;
  const creditNoteAmount =
    input.payInAdvance && input.action === 'generate_credit_note' && wasBaseFeeInvoiced(at, input)
      ? creditAmount(input.plan.amount_cents, unusedDays, periodDays, input)
      : null;

  return { period, periodDays, billedUntil, usedDays, unusedDays, baseFee, creditNoteAmount };
}
