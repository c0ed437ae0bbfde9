// The reference model of finalization.model.test.ts: what a customer's invoices, wallets, credit
// notes and coupons must look like after each step, computed from the documents alone
// (billing-rules.md "Numbers" and "Invoice pipeline"; lago-reference.md §4.4, §5, §6 where
// billing-rules is silent; api-contract.md "Wallets" and "Invoices, fees, credit notes"). It imports
// nothing from src/: every amount here is plain decimal arithmetic on the documented rules.
//
// Wallets take granted, paid (a `credit` invoice whose payment brings the credits) and voided
// credits, and recurring transaction rules: threshold rules top up after a consumption that takes
// the credits balance from above their threshold to at or below it, monthly interval rules on the
// anniversaries of their started_at (UTC here: the customer's time zone is the organization's).
// The service makes rule top-ups asynchronously, in the wallet's workflow; the model makes them
// right after what caused them, and the test waits for them before going on.
//
// The customer has at most one subscription, monthly, calendar, started on the 1st at 00:00 UTC,
// so that every period is whole and its base fee is the plan's amount (proration belongs to the
// subscription-billing model). Usage is a count metric priced per event.
import Decimal from 'decimal.js';

/** A decimal.js clone of our own, so that nothing else configuring Decimal changes our rounding. */
export const Money = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_UP });
export type Money = Decimal;

const ZERO = new Money(0);
const sum = (values: readonly Money[]): Money => values.reduce((acc, v) => acc.plus(v), ZERO);
/** Fee-level amounts keep 4 fractional digits, half up (billing-rules.md, Numbers). */
const feeAmount = (value: Money): Money => value.toDecimalPlaces(4, Decimal.ROUND_HALF_UP);
/** Invoice-level amounts are whole cents, half up (billing-rules.md, Numbers). */
const wholeCents = (value: Money): Money => value.toDecimalPlaces(0, Decimal.ROUND_HALF_UP);
const atLeastZero = (value: Money): Money => (value.isNegative() ? ZERO : value);
const DAY_MS = 86_400_000;

export type Outcome = { ok: true } | { ok: false; status: number; code: string };
const OK: Outcome = { ok: true };
const refused = (status: number, code: string): Outcome => ({ ok: false, status, code });

/** Tax rates (fractions) applied at each level; the most specific level with a tax wins. */
export interface TaxSetup {
  organization: Money[];
  customer: Money[];
  plan: Money[];
}

export type FeeType = 'subscription' | 'charge' | 'add_on' | 'credit';

/**
 * billing-rules.md, Invoice pipeline 3: charge, then plan, then customer, then organization. An
 * add-on fee (a one-off line) belongs to no plan, so the plan's taxes do not reach it. A `credit`
 * fee (a purchase of wallet credits) is taxed at no level: the contract gives the credit invoice
 * one fee of exactly paid_credits x rate_amount x 100, and the credits pay taxed invoices later.
 */
function ratesFor(feeType: FeeType, taxes: TaxSetup): Money[] {
  if (feeType === 'credit') return [];
  const levels = feeType === 'add_on' ? [taxes.customer, taxes.organization] : [taxes.plan, taxes.customer, taxes.organization];
  return levels.find((rates) => rates.length > 0) ?? [];
}

export interface PlanSetup {
  payInAdvance: boolean;
  /** The monthly base fee, cents. */
  amountCents: number;
  /** Cents per event of the usage charge; null: the plan has no usage charge. */
  usagePrice: Money | null;
}

export interface ModelFee {
  /** `subscription`, `charge`, or `line-<i>` for the i-th line of a one-off invoice. */
  key: string;
  feeType: FeeType;
  amount: Money;
  tax: Money;
  /** amount + tax: what credit notes may credit on the fee in all (see `creditable`). */
  total: Money;
  /** What live credit notes hold of the fee's total. */
  credited: Money;
}

export interface ModelInvoice {
  key: string;
  invoiceType: 'subscription' | 'one_off' | 'credit';
  /** The instant it was generated. */
  createdAt: number;
  /** When its grace period ends: it is finalized then, unless it was finalized earlier. */
  finalizeAt: number;
  finalizedAt: number | null;
  /** Its place in the organization's number sequence, given at finalization. */
  sequence: number | null;
  fees: ModelFee[];
  feesAmount: Money;
  subtotal: Money;
  taxAmount: Money;
  couponsAmount: Money;
  creditNotesAmount: Money;
  prepaidCredit: Money;
  total: Money;
  status: 'draft' | 'finalized' | 'paid';
  coupons: { appliedCouponKey: string; amount: Money }[];
  /** What settled it, besides a total of zero: as its settlements must list them. */
  creditNotes: { creditNoteKey: string; amount: Money }[];
  wallets: { walletKey: string; amount: Money }[];
  /** What POST .../pay settled (the total), when it was paid that way. */
  payment: Money | null;
  /** A `credit` invoice: the wallet purchase whose credits its payment brings. */
  purchase: { wallet: ModelWallet; transaction: ModelWalletTransaction } | null;
}

export interface ModelWallet {
  key: string;
  /** Value of one credit in currency units. */
  rate: Money;
  /** Cents: credits x rate x 100. */
  balance: Money;
  priority: number;
  status: 'active' | 'terminated';
  expirationAt: number | null;
  /** Its expiration_at when it expired, else when it was terminated. */
  terminatedAt: number | null;
  createdAt: number;
  /** Its recurring transaction rules, in the order the API was given them. */
  rules: ModelRule[];
  /** Every change of the balance, as the wallet's transactions must list it (cents). */
  transactions: ModelWalletTransaction[];
}

export type TransactionSource = 'manual' | 'interval' | 'threshold';

export interface ModelWalletTransaction {
  status: 'granted' | 'purchased' | 'voided' | 'invoiced';
  source: TransactionSource;
  /** Cents. */
  amount: Money;
  /** The credits asked for (granted, purchased, voided); null for a consumption (derived from cents). */
  credits: Money | null;
  /** The consuming invoice of an `invoiced` transaction, the credit invoice of a `purchased` one. */
  invoiceKey: string | null;
  createdAt: number;
  /** When the credits moved: a purchase when its invoice was paid (null until then); else createdAt. */
  settledAt: number | null;
}

/** A recurring transaction rule as the API is given it (api-contract.md, Wallets). */
export interface RuleInput {
  trigger: 'interval' | 'threshold';
  /** interval rules: only monthly here. */
  interval: 'monthly' | null;
  thresholdCredits: Money | null;
  grantedCredits: Money;
  paidCredits: Money;
  /** interval rules: the anchor of the anniversaries; null: the wallet's creation. */
  startedAt: number | null;
}

export interface ModelRule extends RuleInput {
  key: string;
  createdAt: number;
  /** interval rules: the next run is the first anniversary strictly after this (its creation, then its last run). */
  after: number;
}

const sameRule = (a: RuleInput, b: RuleInput): boolean =>
  a.trigger === b.trigger &&
  a.interval === b.interval &&
  (a.thresholdCredits === null
    ? b.thresholdCredits === null
    : b.thresholdCredits !== null && a.thresholdCredits.equals(b.thresholdCredits)) &&
  a.grantedCredits.equals(b.grantedCredits) &&
  a.paidCredits.equals(b.paidCredits) &&
  a.startedAt === b.startedAt;

/**
 * The k-th monthly anniversary of `anchor` in UTC: the same day of the month k months later, the
 * month's last day when it has fewer days (January 31: February 28, March 31, April 30...), at the
 * same time of day; each computed from the anchor itself, never from the previous run.
 */
export function monthlyAnniversary(anchor: number, k: number): number {
  const d = new Date(anchor);
  const month = d.getUTCMonth() + k;
  const lastDay = new Date(Date.UTC(d.getUTCFullYear(), month + 1, 0)).getUTCDate();
  return Date.UTC(
    d.getUTCFullYear(),
    month,
    Math.min(d.getUTCDate(), lastDay),
    d.getUTCHours(),
    d.getUTCMinutes(),
    d.getUTCSeconds(),
    d.getUTCMilliseconds(),
  );
}

/** The first anniversary of `anchor` (one month after it at the earliest) strictly after `after`. */
export function nextAnniversary(anchor: number, after: number): number {
  let k = 1;
  while (monthlyAnniversary(anchor, k) <= after) k++;
  return monthlyAnniversary(anchor, k);
}

export interface CouponTerms {
  couponType: 'fixed_amount' | 'percentage';
  /** fixed_amount: whole cents per invoice. */
  amountCents: Money | null;
  /** percentage: 20 = 20 %. */
  percentageRate: Money | null;
  frequency: 'once' | 'recurring' | 'forever';
  frequencyDuration: number | null;
}

export interface ModelCoupon extends CouponTerms {
  key: string;
  reusable: boolean;
  status: 'active' | 'terminated';
}

export interface ModelAppliedCoupon {
  key: string;
  coupon: ModelCoupon;
  /** The coupon's terms when it was applied: a later edit of the coupon does not change them. */
  terms: CouponTerms;
  /** recurring: invoices left; null for once and forever. */
  remaining: number | null;
  status: 'active' | 'terminated';
}

export interface ModelCreditNote {
  key: string;
  invoice: ModelInvoice;
  items: { fee: ModelFee; amount: Money }[];
  credit: Money;
  balance: Money;
  status: 'draft' | 'finalized' | 'voided';
  applications: { invoiceKey: string; amount: Money }[];
}

/** The next calendar month boundary strictly after `t` (UTC midnight of a 1st). */
export function nextMonthStart(t: number): number {
  const d = new Date(t);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export class FinalizationModel {
  readonly invoices: ModelInvoice[] = [];
  readonly wallets: ModelWallet[] = [];
  readonly coupons: ModelCoupon[] = [];
  readonly appliedCoupons: ModelAppliedCoupon[] = [];
  readonly creditNotes: ModelCreditNote[] = [];
  private plan: PlanSetup | null = null;
  /** Start of the current billing period of the subscription. */
  private periodStart = 0;
  /** Instants of the usage events (count metric). */
  private readonly events: number[] = [];
  private finalized = 0;
  private rulesMade = 0;

  constructor(
    readonly taxes: TaxSetup,
    public now: number,
    /** The organization's invoice_grace_period: days an invoice stays a draft. */
    private readonly graceDays: number,
  ) {}

  // ---- subscription and time ------------------------------------------------------------------

  /** Subscribes now (a month start): in advance the first month is billed at once. */
  subscribe(plan: PlanSetup): void {
    this.plan = plan;
    this.periodStart = this.now;
    if (plan.payInAdvance)
      this.issue('subscription', [{ key: 'subscription', feeType: 'subscription', amount: new Money(plan.amountCents) }]);
  }

  hasUsageCharge(): boolean {
    return this.plan?.usagePrice != null;
  }

  recordUsage(count: number): void {
    for (let i = 0; i < count; i++) this.events.push(this.now);
  }

  /**
   * Moves time to `target`, instant by instant: each month boundary on the way bills its invoice,
   * each draft whose grace period ends is finalized, and each wallet whose expiration_at has come
   * is terminated then (billing-rules.md, Billing periods and Invoice life; spec, Wallet states).
   * Which of a boundary and a finalization at one instant goes first is unspecified, so the test
   * never lets two meet (`invoiceEventAt`).
   */
  advanceTo(target: number): void {
    if (target <= this.now) throw new Error(`the model only moves forward (${new Date(target).toISOString()})`);
    for (let next = this.nextEvent(); next <= target; next = this.nextEvent()) {
      this.now = next;
      this.expireWallets(next);
      // An interval rule's run never falls on an invoice event (the test sees to it).
      const run = this.nextRuleRun();
      if (run && run.at === next) {
        this.runIntervalRule(run.wallet, run.rule);
        continue;
      }
      const draft = this.drafts().find((i) => i.finalizeAt === next);
      if (draft) this.finalize(draft);
      else if (this.plan && nextMonthStart(this.periodStart) === next) {
        this.billPeriod(this.plan, this.periodStart, next);
        this.periodStart = next;
      }
      // Else the run of a wallet that expired at this very instant: it does not happen.
    }
    this.now = target;
    this.expireWallets(target);
  }

  /** The next instant anything happens by itself: an invoice event or an interval rule's run. */
  nextEvent(): number {
    return Math.min(this.nextInvoiceEvent(), this.nextRuleRun()?.at ?? Infinity);
  }

  /**
   * The earliest next run of an interval rule of an active wallet (the first in rule order on a
   * tie). A run at or after the wallet's expiration does not happen: the wallet is terminated by
   * then (advanceTo expires wallets first).
   */
  nextRuleRun(): { at: number; wallet: ModelWallet; rule: ModelRule } | null {
    let next: { at: number; wallet: ModelWallet; rule: ModelRule } | null = null;
    for (const wallet of this.wallets) {
      if (wallet.status !== 'active') continue;
      for (const rule of wallet.rules) {
        if (rule.trigger !== 'interval') continue;
        const at = nextAnniversary(rule.startedAt ?? wallet.createdAt, rule.after);
        if (next === null || at < next.at) next = { at, wallet, rule };
      }
    }
    return next;
  }

  /** True when an active wallet has a rule: its top-ups follow consumptions and anniversaries. */
  hasRules(): boolean {
    return this.wallets.some((w) => w.status === 'active' && w.rules.length > 0);
  }

  private runIntervalRule(wallet: ModelWallet, rule: ModelRule): void {
    rule.after = this.now;
    this.ruleTopUp(wallet, rule, 'interval');
  }

  /** A rule's top-up, now: its granted credits at once, its paid credits as a purchase. */
  private ruleTopUp(wallet: ModelWallet, rule: ModelRule, source: TransactionSource): void {
    if (wallet.status !== 'active') return;
    if (rule.grantedCredits.greaterThan(0)) this.grant(wallet, rule.grantedCredits, source);
    if (rule.paidCredits.greaterThan(0)) this.purchase(wallet, rule.paidCredits, source);
  }

  /** The next instant an invoice is generated (a boundary) or finalized (a grace period ends). */
  nextInvoiceEvent(): number {
    const boundary = this.plan ? nextMonthStart(this.periodStart) : Infinity;
    return Math.min(boundary, ...this.drafts().map((i) => i.finalizeAt));
  }

  /** True when an invoice is generated or finalized at instant `t` (as far as is known now). */
  invoiceEventAt(t: number): boolean {
    return nextMonthStart(t - 1) === t || this.drafts().some((i) => i.finalizeAt === t);
  }

  /** True when an interval rule of an active wallet runs at instant `t` (as far as is known now). */
  ruleRunAt(t: number): boolean {
    return this.wallets.some(
      (w) =>
        w.status === 'active' &&
        w.rules.some((r) => r.trigger === 'interval' && r.after < t && nextAnniversary(r.startedAt ?? w.createdAt, t - 1) === t),
    );
  }

  /** When an invoice generated now would be finalized. */
  finalizationOfNew(): number {
    return this.now + this.graceDays * DAY_MS;
  }

  private drafts(): ModelInvoice[] {
    return this.invoices.filter((i) => i.status === 'draft');
  }

  /**
   * The invoice of a boundary: in arrear the ended month's base fee, in advance the starting
   * month's; usage is always the ended month's (billing-rules.md, Subscription lifecycle).
   */
  private billPeriod(plan: PlanSetup, from: number, to: number): void {
    const fees: NewFee[] = [{ key: 'subscription', feeType: 'subscription', amount: new Money(plan.amountCents) }];
    if (plan.usagePrice) {
      const units = this.events.filter((t) => t >= from && t < to).length;
      fees.push({ key: 'charge', feeType: 'charge', amount: plan.usagePrice.times(units) });
    }
    this.issue('subscription', fees);
  }

  private expireWallets(at: number): void {
    for (const wallet of this.wallets) {
      if (wallet.status === 'active' && wallet.expirationAt !== null && wallet.expirationAt <= at) {
        wallet.status = 'terminated';
        wallet.terminatedAt = wallet.expirationAt;
      }
    }
  }

  // ---- invoices -------------------------------------------------------------------------------

  /** A one-off invoice of free lines (api-contract.md): each line is unit price x quantity. */
  oneOff(lines: readonly { unitPrice: Money; quantity: number }[]): ModelInvoice {
    return this.issue(
      'one_off',
      lines.map((line, i) => ({ key: `line-${i}`, feeType: 'add_on', amount: line.unitPrice.times(line.quantity) })),
    );
  }

  /** POST .../finalize: a draft is finalized now, before its grace period ends. */
  finalizeEarly(invoice: ModelInvoice): Outcome {
    if (invoice.status !== 'draft') return refused(400, 'invalid_state_transition');
    this.finalize(invoice);
    return OK;
  }

  payInvoice(invoice: ModelInvoice): Outcome {
    if (invoice.status !== 'finalized') return refused(400, 'invalid_state_transition');
    invoice.status = 'paid';
    invoice.payment = invoice.total;
    this.settlePurchase(invoice);
    return OK;
  }

  /**
   * A paid `credit` invoice brings its purchase's credits to the wallet, and settles the purchase
   * now (api-contract.md: the credits reach the balance when that invoice is paid). A wallet
   * terminated meanwhile gets them too; its balance is no longer consumed anyway.
   */
  private settlePurchase(invoice: ModelInvoice): void {
    if (!invoice.purchase) return;
    const { wallet, transaction } = invoice.purchase;
    wallet.balance = wallet.balance.plus(transaction.amount);
    transaction.settledAt = this.now;
  }

  /**
   * Generates an invoice now: its fees and their taxes; its coupons are only a preview until it is
   * finalized, at once without a grace period (billing-rules.md, Invoice life).
   */
  private issue(invoiceType: ModelInvoice['invoiceType'], newFees: readonly NewFee[]): ModelInvoice {
    const fees: ModelFee[] = newFees.map((f) => {
      const amount = feeAmount(f.amount);
      const tax = sum(ratesFor(f.feeType, this.taxes).map((rate) => feeAmount(amount.times(rate))));
      return { key: f.key, feeType: f.feeType, amount, tax, total: amount.plus(tax), credited: ZERO };
    });
    const feesAmount = sum(fees.map((f) => f.amount));
    const subtotal = wholeCents(feesAmount);
    const taxAmount = wholeCents(sum(fees.map((f) => f.tax)));
    const invoice: ModelInvoice = {
      key: `invoice-${this.invoices.length + 1}`,
      invoiceType,
      createdAt: this.now,
      finalizeAt: this.finalizationOfNew(),
      finalizedAt: null,
      sequence: null,
      fees,
      feesAmount,
      subtotal,
      taxAmount,
      couponsAmount: ZERO,
      creditNotesAmount: ZERO,
      prepaidCredit: ZERO,
      total: ZERO,
      status: 'draft',
      coupons: [],
      creditNotes: [],
      wallets: [],
      payment: null,
      purchase: null,
    };
    this.applyCoupons(invoice, false);
    invoice.total = this.due(invoice);
    this.invoices.push(invoice);
    if (this.graceDays === 0) this.finalize(invoice);
    return invoice;
  }

  /**
   * Finalizes a draft now, in the pipeline's order (billing-rules.md, Invoice pipeline): coupons on
   * the pre-tax subtotal, claimed now (so that drafts waiting side by side cannot both use a
   * `once` coupon: lago-reference.md §4.7, applied only at finalization), then credit notes and
   * wallets on what remains due, after tax; the next number of the organization's sequence.
   */
  private finalize(invoice: ModelInvoice): void {
    this.applyCoupons(invoice, true);
    const due = this.due(invoice);
    const afterNotes = due.minus(this.applyCreditNotes(invoice, due));
    const crossings: { wallet: ModelWallet; rule: ModelRule }[] = [];
    invoice.total = afterNotes.minus(this.applyWallets(invoice, afterNotes, crossings));
    invoice.finalizedAt = this.now;
    invoice.sequence = ++this.finalized;
    // billing-rules.md, Invoice pipeline: a total of zero is paid at finalization.
    invoice.status = invoice.total.isZero() ? 'paid' : 'finalized';
    // Threshold top-ups follow the consumption that crossed, for its instant, once per crossing.
    for (const { wallet, rule } of crossings) this.ruleTopUp(wallet, rule, 'threshold');
  }

  /**
   * A purchase of wallet credits (api-contract.md, Wallets): a `credit` invoice of one `credit` fee
   * of credits x rate x 100 cents, finalized (numbered) at once whatever the grace period, which
   * nothing discounts, credits or pays but money: no coupon, credit note or wallet (wallet credits
   * bought with wallet credits would be no purchase). A total of zero is paid at once, like any.
   */
  private issueCredit(cents: Money): ModelInvoice {
    const amount = feeAmount(cents);
    const subtotal = wholeCents(amount);
    const invoice: ModelInvoice = {
      key: `invoice-${this.invoices.length + 1}`,
      invoiceType: 'credit',
      createdAt: this.now,
      finalizeAt: this.now,
      finalizedAt: this.now,
      sequence: ++this.finalized,
      fees: [{ key: 'credit', feeType: 'credit', amount, tax: ZERO, total: amount, credited: ZERO }],
      feesAmount: amount,
      subtotal,
      taxAmount: ZERO,
      couponsAmount: ZERO,
      creditNotesAmount: ZERO,
      prepaidCredit: ZERO,
      total: subtotal,
      status: subtotal.isZero() ? 'paid' : 'finalized',
      coupons: [],
      creditNotes: [],
      wallets: [],
      payment: null,
      purchase: null,
    };
    this.invoices.push(invoice);
    return invoice;
  }

  private due(invoice: ModelInvoice): Money {
    return atLeastZero(invoice.subtotal.plus(invoice.taxAmount).minus(invoice.couponsAmount));
  }

  /**
   * Each active applied coupon, oldest application first, discounts what the previous ones left of
   * the pre-tax subtotal: a fixed amount min(amount, remaining), a percentage remaining x rate /
   * 100 (whole cents, half up, as every invoice-level amount). A coupon that finds nothing left to
   * discount is not used, so not consumed (lago-reference.md §4.4: application stops at zero).
   *
   * Every invoice of the pipeline takes them, one-off invoices included (the lead's decision, as a
   * customer discount in Stripe): a one-off invoice uses up a `once` coupon and counts a recurring
   * one down.
   */
  private applyCoupons(invoice: ModelInvoice, claim: boolean): void {
    invoice.coupons = [];
    let remaining = invoice.subtotal;
    for (const applied of this.appliedCoupons) {
      if (applied.status !== 'active') continue;
      const { terms } = applied;
      const discount =
        terms.couponType === 'fixed_amount'
          ? Money.min(terms.amountCents!, remaining)
          : Money.min(wholeCents(remaining.times(terms.percentageRate!).div(100)), remaining);
      if (!discount.greaterThan(0)) continue;
      remaining = remaining.minus(discount);
      invoice.coupons.push({ appliedCouponKey: applied.key, amount: discount });
      if (claim) this.consumeCoupon(applied);
    }
    invoice.couponsAmount = invoice.subtotal.minus(remaining);
  }

  /**
   * billing-rules.md, Invoice pipeline 4: once ends after its first invoice (even with part of a
   * fixed amount unused), recurring counts down and ends at zero, forever stays; a coupon that is
   * not reusable ends with its application.
   */
  private consumeCoupon(applied: ModelAppliedCoupon): void {
    const { coupon, terms } = applied;
    if (terms.frequency === 'forever') return;
    if (terms.frequency === 'recurring') applied.remaining = applied.remaining! - 1;
    if (terms.frequency === 'once' || applied.remaining! <= 0) {
      applied.status = 'terminated';
      if (!coupon.reusable) coupon.status = 'terminated';
    }
  }

  /**
   * The customer's finalized credit notes with a balance, oldest first, each giving min(balance,
   * what remains), never a note issued on this invoice (api-contract.md; lago-reference.md §6).
   */
  private applyCreditNotes(invoice: ModelInvoice, due: Money): Money {
    let left = due;
    for (const note of this.creditNotes) {
      if (!left.greaterThan(0)) break;
      if (note.status !== 'finalized' || !note.balance.greaterThan(0) || note.invoice === invoice) continue;
      const amount = Money.min(note.balance, left);
      note.balance = note.balance.minus(amount);
      note.applications.push({ invoiceKey: invoice.key, amount });
      invoice.creditNotes.push({ creditNoteKey: note.key, amount });
      left = left.minus(amount);
    }
    invoice.creditNotesAmount = due.minus(left);
    return invoice.creditNotesAmount;
  }

  /**
   * The customer's active wallets (expired ones were terminated at their expiration_at), priority
   * 1 first, then oldest first; each pays the smaller of its balance and what remains (spec,
   * "Credit consumption at invoice finalization"). A wallet pays whole cents only: the invoice's
   * prepaid_credit_amount is whole cents (billing-rules.md, Numbers) and a wallet never pays more
   * than it holds, so a fraction of a cent in a balance stays in the wallet.
   *
   * Each consumption that takes a wallet's credits from above a threshold rule's threshold_credits
   * to at or below it is a crossing of that rule (api-contract.md, Wallets): one top-up each.
   */
  private applyWallets(invoice: ModelInvoice, due: Money, crossings: { wallet: ModelWallet; rule: ModelRule }[]): Money {
    let left = due;
    const order = this.wallets
      .map((wallet, age) => ({ wallet, age }))
      .filter(({ wallet }) => wallet.status === 'active')
      .sort((a, b) => a.wallet.priority - b.wallet.priority || a.age - b.age);
    for (const { wallet } of order) {
      if (!left.greaterThan(0)) break;
      const amount = Money.min(wallet.balance.floor(), left);
      if (!amount.greaterThan(0)) continue;
      const before = wallet.balance;
      wallet.balance = wallet.balance.minus(amount);
      wallet.transactions.push(this.transaction('invoiced', 'manual', amount, null, invoice.key));
      // From above the threshold to at or below it, in credits (cents / (rate x 100), exactly).
      for (const rule of wallet.rules) {
        if (rule.trigger !== 'threshold') continue;
        const threshold = rule.thresholdCredits!.times(wallet.rate).times(100);
        if (before.greaterThan(threshold) && wallet.balance.lessThanOrEqualTo(threshold)) crossings.push({ wallet, rule });
      }
      invoice.wallets.push({ walletKey: wallet.key, amount });
      left = left.minus(amount);
    }
    invoice.prepaidCredit = due.minus(left);
    return invoice.prepaidCredit;
  }

  // ---- wallets --------------------------------------------------------------------------------

  createWallet(input: {
    rate: Money;
    credits: Money;
    /** Credits bought at creation (POST /v1/wallets paid_credits). */
    paidCredits?: Money;
    priority: number;
    expirationAt: number | null;
    rules?: readonly RuleInput[];
  }): ModelWallet {
    const wallet: ModelWallet = {
      key: `wallet-${this.wallets.length + 1}`,
      rate: input.rate,
      balance: ZERO,
      priority: input.priority,
      status: 'active',
      expirationAt: input.expirationAt,
      terminatedAt: null,
      createdAt: this.now,
      rules: [],
      transactions: [],
    };
    this.wallets.push(wallet);
    wallet.rules = (input.rules ?? []).map((rule) => this.newRule(rule));
    if (input.credits.greaterThan(0)) this.grant(wallet, input.credits, 'manual');
    if (input.paidCredits?.greaterThan(0)) this.purchase(wallet, input.paidCredits, 'manual');
    return wallet;
  }

  private newRule(input: RuleInput): ModelRule {
    return { ...input, key: `rule-${++this.rulesMade}`, createdAt: this.now, after: this.now };
  }

  /** A granted top-up: credits x rate x 100 cents more, on an active wallet only (api-contract.md). */
  topUp(wallet: ModelWallet, credits: Money): Outcome {
    return this.topUpMany(wallet, { granted: credits });
  }

  /** voided_credits: taken off the balance at once, never more than the balance (api-contract.md). */
  voidCredits(wallet: ModelWallet, credits: Money): Outcome {
    return this.topUpMany(wallet, { voided: credits });
  }

  /**
   * POST .../top_up with any of granted, paid and voided credits, all or nothing: a terminated
   * wallet takes none (400), a void of more than the balance (as it is before the request) is 422
   * and nothing of the request happens. Voids are not consumption: they cross no threshold.
   */
  topUpMany(wallet: ModelWallet, credits: { granted?: Money | null; paid?: Money | null; voided?: Money | null }): Outcome {
    if (wallet.status !== 'active') return refused(400, 'wallet_terminated');
    const voided = credits.voided?.greaterThan(0) ? credits.voided : null;
    if (voided) {
      const cents = voided.times(wallet.rate).times(100);
      if (cents.greaterThan(wallet.balance)) return refused(422, 'validation_error');
      wallet.balance = wallet.balance.minus(cents);
      wallet.transactions.push(this.transaction('voided', 'manual', cents, voided, null));
    }
    if (credits.granted?.greaterThan(0)) this.grant(wallet, credits.granted, 'manual');
    if (credits.paid?.greaterThan(0)) this.purchase(wallet, credits.paid, 'manual');
    return OK;
  }

  private grant(wallet: ModelWallet, credits: Money, source: TransactionSource): void {
    const cents = credits.times(wallet.rate).times(100);
    wallet.balance = wallet.balance.plus(cents);
    wallet.transactions.push(this.transaction('granted', source, cents, credits, null));
  }

  /** paid_credits: an unsettled purchase and its credit invoice; the balance waits for the payment. */
  private purchase(wallet: ModelWallet, credits: Money, source: TransactionSource): void {
    const cents = credits.times(wallet.rate).times(100);
    const invoice = this.issueCredit(cents);
    const transaction = this.transaction('purchased', source, cents, credits, invoice.key);
    transaction.settledAt = null;
    wallet.transactions.push(transaction);
    invoice.purchase = { wallet, transaction };
    if (invoice.status === 'paid') this.settlePurchase(invoice);
  }

  private transaction(
    status: ModelWalletTransaction['status'],
    source: TransactionSource,
    amount: Money,
    credits: Money | null,
    invoiceKey: string | null,
  ): ModelWalletTransaction {
    return { status, source, amount, credits, invoiceKey, createdAt: this.now, settledAt: this.now };
  }

  /**
   * PUT recurring_transaction_rules: the list replaces the rules ([] removes them). A rule sent back
   * as it is (every field equal) is the same rule: its id, its creation, its schedule go on; any
   * other is new, made now (docs/wallets.md, the service's choice where the contract is silent).
   */
  setRules(wallet: ModelWallet, rules: readonly RuleInput[]): Outcome {
    if (wallet.status !== 'active') return refused(400, 'wallet_terminated');
    const unused = [...wallet.rules];
    wallet.rules = rules.map((input) => {
      const same = unused.findIndex((old) => sameRule(old, input));
      return same < 0 ? this.newRule(input) : unused.splice(same, 1)[0]!;
    });
    return OK;
  }

  /** DELETE: the remaining balance is forfeited (spec, Wallet states). */
  terminateWallet(wallet: ModelWallet): Outcome {
    if (wallet.status !== 'active') return refused(400, 'wallet_terminated');
    wallet.status = 'terminated';
    wallet.terminatedAt = this.now;
    return OK;
  }

  setPriority(wallet: ModelWallet, priority: number): Outcome {
    if (wallet.status !== 'active') return refused(400, 'wallet_terminated');
    wallet.priority = priority;
    return OK;
  }

  /** PUT expiration_at (in the future, or null: no expiry) re-arms the wallet's expiry. */
  setExpiration(wallet: ModelWallet, expirationAt: number | null): Outcome {
    if (wallet.status !== 'active') return refused(400, 'wallet_terminated');
    wallet.expirationAt = expirationAt;
    return OK;
  }

  // ---- coupons --------------------------------------------------------------------------------

  createCoupon(input: Omit<ModelCoupon, 'key' | 'status'>): ModelCoupon {
    const coupon: ModelCoupon = { ...input, key: `coupon-${this.coupons.length + 1}`, status: 'active' };
    this.coupons.push(coupon);
    return coupon;
  }

  /**
   * A terminated coupon cannot be applied (400); one that is not reusable cannot be applied while
   * an application of it is active (409, api-contract.md).
   */
  applyCoupon(coupon: ModelCoupon): { outcome: Outcome; applied: ModelAppliedCoupon | null } {
    if (coupon.status !== 'active') return { outcome: refused(400, 'coupon_terminated'), applied: null };
    if (!coupon.reusable && this.appliedCoupons.some((a) => a.coupon === coupon && a.status === 'active')) {
      return { outcome: refused(409, 'already_exists'), applied: null };
    }
    const { couponType, amountCents, percentageRate, frequency, frequencyDuration } = coupon;
    const applied: ModelAppliedCoupon = {
      key: `applied-coupon-${this.appliedCoupons.length + 1}`,
      coupon,
      terms: { couponType, amountCents, percentageRate, frequency, frequencyDuration },
      remaining: frequency === 'recurring' ? frequencyDuration : null,
      status: 'active',
    };
    this.appliedCoupons.push(applied);
    return { outcome: OK, applied };
  }

  /**
   * PUT: new terms for the applications to come; the customers it was applied to keep the terms
   * they got (api-contract.md, Coupons). A terminated coupon no longer changes.
   */
  updateCoupon(coupon: ModelCoupon, terms: Pick<CouponTerms, 'amountCents' | 'percentageRate' | 'frequencyDuration'>): Outcome {
    if (coupon.status !== 'active') return refused(400, 'coupon_terminated');
    Object.assign(coupon, terms);
    return OK;
  }

  /**
   * DELETE: the coupon can no longer be applied; the customers who have it keep it (the contract
   * says nothing more; Lago's applied coupons outlive the coupon's termination).
   */
  terminateCoupon(coupon: ModelCoupon): Outcome {
    coupon.status = 'terminated';
    return OK;
  }

  /** DELETE /coupons/applied/{id}: the customer's use ends; the coupon itself stays as it is. */
  removeAppliedCoupon(applied: ModelAppliedCoupon): Outcome {
    applied.status = 'terminated';
    return OK;
  }

  // ---- credit notes ---------------------------------------------------------------------------

  /**
   * What whole-cent credit note items may still credit on a fee: its total (tax included) rounded
   * half up, as the invoice's total was, less what live notes hold of it. Credit notes are whole
   * cents, so a fee of 0.51 can be credited 1 cent, the cent its invoice charged for it.
   */
  static creditable(fee: ModelFee): Money {
    return wholeCents(fee.total).minus(fee.credited);
  }

  /**
   * A draft credit note on a finalized or paid invoice, of whole-cent items: each at most what
   * remains creditable on its fee (lago-reference.md §6); its credit and balance are their sum.
   */
  createCreditNote(
    invoice: ModelInvoice,
    items: readonly { fee: ModelFee; amount: Money }[],
  ): { outcome: Outcome; note: ModelCreditNote | null } {
    if (invoice.status === 'draft') return { outcome: refused(400, 'invalid_state_transition'), note: null };
    if (items.some((item) => !item.amount.greaterThan(0) || item.amount.greaterThan(FinalizationModel.creditable(item.fee)))) {
      return { outcome: refused(422, 'validation_error'), note: null };
    }
    for (const item of items) item.fee.credited = item.fee.credited.plus(item.amount);
    const credit = sum(items.map((i) => i.amount));
    const note: ModelCreditNote = {
      key: `credit-note-${this.creditNotes.length + 1}`,
      invoice,
      items: [...items],
      credit,
      balance: credit,
      status: 'draft',
      applications: [],
    };
    this.creditNotes.push(note);
    return { outcome: OK, note };
  }

  /** draft -> finalized: from now on its balance goes to the customer's later invoices. */
  finalizeCreditNote(note: ModelCreditNote): Outcome {
    if (note.status !== 'draft') return refused(400, 'invalid_state_transition');
    note.status = 'finalized';
    return OK;
  }

  /**
   * draft or finalized -> voided (spec, Credit note states): the balance becomes 0 and is never
   * applied; what was not applied yet no longer holds the fees' creditable amounts (item by item,
   * in order), while what was applied stays credited.
   */
  voidCreditNote(note: ModelCreditNote): Outcome {
    if (note.status === 'voided') return refused(400, 'invalid_state_transition');
    let release = note.balance;
    for (const item of note.items) {
      const give = Money.min(item.amount, release);
      item.fee.credited = item.fee.credited.minus(give);
      release = release.minus(give);
    }
    note.balance = ZERO;
    note.status = 'voided';
    return OK;
  }
}

interface NewFee {
  key: string;
  feeType: FeeType;
  amount: Money;
}
