// Previews (issue 19, docs/previews.md): the invoice a subscription's current period would end
// with, the first invoice of a new subscription on a plan, and what a plan change would invoice and
// credit. Nothing here prices anything: the subscription's own billing steps run dry
// (StepContext.dryRun, src/billing/subscription/shared.ts), each invoice they would issue is
// createInvoice's draft (draftInvoice) settled as its finalization would settle it (settleDraft,
// src/billing/invoices.ts), with the same reads and no write: no invoice, fee, document number,
// credit note, wallet transaction, coupon use, lifecycle event or workflow change.
//
// The bills of one preview see each other as the real step's would: a coupon used by its first
// invoice is used up for the next, a credit note it issues pays the next invoice, a wallet pays
// what it has left.
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { toDecimal128, fromDecimal128 } from '../db/decimal';
import type { FeeDoc } from '../db/models/fee';
import type { InvoiceDoc } from '../db/models/invoice';
import type { SubscriptionDoc } from '../db/models/subscription';
import { applyCoupons, type AppliedCoupon } from '../domain/coupons';
import { invoiceDueDates } from '../domain/invoice-due';
import { Dec, ZERO } from '../domain/money';
import { classifyPlanChange, type PlanChangeKind } from '../domain/plan-change';
import { planChangeDay } from '../domain/proration';
import { allocateWallets } from '../domain/wallet-allocation';
import { toSubscriptionResource, type SubscriptionResource } from '../resources/subscription';
import { projectionOf } from '../subscriptions/projection';
import type { PlanSnapshot, SubscriptionState } from '../subscriptions/state';
import { couponUse, draftInvoice, settleDraft, settlementFields, type NewInvoice } from './invoices';
import { activate, endTrial } from './subscription/activation';
import { closePeriod } from './subscription/boundary';
import { billPeriodEnd } from './subscription/pause';
import { changePlan } from './subscription/plan-change';
import { billKey, subscriptionBillingContext, type DryRun, type StepContext, type SubscriptionBillingDeps } from './subscription/shared';

/** An invoice a preview would issue: its document and fees as they would be once finalized, never written. */
export interface PreviewedInvoice {
  /** The idempotency key the real bill would have (what it bills: advance, subscription, carried). */
  key: string;
  invoice: InvoiceDoc;
  fees: FeeDoc[];
}

/** A credit note a preview would issue (the unused part of a base fee paid in advance). */
export interface PreviewedCreditNote {
  invoiceId: string;
  feeId: string;
  reason: 'order_change' | 'order_cancellation';
  amountCents: Decimal;
  at: Date;
}

/** What a dry run of billing steps issued, in issue order. */
export interface PreviewResult {
  invoices: PreviewedInvoice[];
  creditNotes: PreviewedCreditNote[];
}

const amountOf = (value: Parameters<typeof fromDecimal128>[0]) => fromDecimal128(value) ?? ZERO;

/**
 * The dry run's sink: drafts and settles each invoice a step hands it, keeping what the preview's
 * earlier bills took (coupon uses, credit note balances, wallet credits) so that later ones see it.
 */
class PreviewBook implements DryRun {
  readonly invoices: PreviewedInvoice[] = [];
  readonly creditNotes: PreviewedCreditNote[] = [];
  private readonly couponUses = new Map<string, number>();
  private readonly creditNotesTaken = new Map<string, Decimal>();
  private readonly walletsTaken = new Map<string, Decimal>();

  constructor(
    private readonly db: Db,
    /** The subscription document the states project onto (a new subscription's is never saved). */
    private readonly base: SubscriptionDoc,
    /** Coupons the request adds, applied after the customer's own. */
    private readonly extraCoupons: AppliedCoupon[],
  ) {}

  async invoice(input: NewInvoice): Promise<Pick<InvoiceDoc, '_id'>> {
    const draft = await draftInvoice(this.db, input);
    const invoice = draft.invoice as unknown as InvoiceDoc;
    const settled = await settleDraft(invoice, {
      coupons: async () => this.useCoupons(invoice, [...draft.coupons, ...this.extraCoupons]),
      creditNotes: async (due) => this.takeCreditNotes(invoice, due),
      wallets: async (due) => this.takeWallets(invoice, due, input.at),
    });
    const timezone = draft.customer.timezone ?? draft.organization.timezone ?? 'UTC';
    const { issuingDate, paymentDueDate } = invoiceDueDates(input.at, invoice.net_payment_term, timezone);
    this.invoices.push({
      key: input.idempotencyKey,
      invoice: {
        ...invoice,
        ...settlementFields(settled),
        issuing_date: issuingDate,
        payment_due_date: paymentDueDate,
        payment_status: settled.paid ? 'succeeded' : 'pending',
        payment_overdue: false,
        metadata: {},
        finalized_at: input.at,
        paid_at: settled.paid ? input.at : null,
        voided_at: null,
      } as InvoiceDoc,
      fees: draft.fees as unknown as FeeDoc[],
    });
    return { _id: invoice._id };
  }

  async creditNote(input: PreviewedCreditNote): Promise<string> {
    this.creditNotes.push(input);
    return `preview-credit-note-${this.creditNotes.length}`;
  }

  async subscription(state: SubscriptionState): Promise<SubscriptionResource> {
    return toSubscriptionResource({ ...this.base, ...projectionOf(state) } as SubscriptionDoc);
  }

  /** The coupons finalization would claim (claimCoupons), less the uses the preview's earlier invoices made. */
  private useCoupons(invoice: InvoiceDoc, coupons: AppliedCoupon[]) {
    const available = coupons.flatMap((coupon) => {
      let current = coupon;
      for (let used = this.couponUses.get(coupon.id) ?? 0; used > 0; used--) {
        const use = couponUse({
          frequency: current.coupon.frequency,
          frequency_duration: current.frequency_duration ?? current.coupon.frequency_duration ?? null,
          frequency_duration_remaining: current.frequency_duration_remaining ?? null,
        });
        if (use.ends) return [];
        if (current.coupon.frequency === 'recurring') current = { ...current, frequency_duration_remaining: use.remaining };
      }
      return [current];
    });
    const result = applyCoupons({ currency: invoice.currency, subtotal: amountOf(invoice.subtotal), applied_coupons: available });
    for (const a of result.applications) this.couponUses.set(a.applied_coupon_id, (this.couponUses.get(a.applied_coupon_id) ?? 0) + 1);
    return { applications: result.applications, total: result.coupons_amount_cents };
  }

  /**
   * The customer's finalized credit notes with a balance, oldest first, each paying the smaller of
   * its balance and what is left (applyCreditNotesToInvoice); then the ones this preview issued.
   */
  private async takeCreditNotes(invoice: InvoiceDoc, due: Decimal): Promise<Decimal> {
    const notes = await this.db.models.CreditNote.find(
      {
        organization_id: invoice.organization_id,
        customer_id: invoice.customer_id,
        currency: invoice.currency,
        status: 'finalized',
        balance_amount_cents: { $gt: toDecimal128(0) },
      },
      { balance_amount_cents: 1 },
    )
      .sort({ created_at: 1, sequential_id: 1, _id: 1 })
      .lean();
    const balances = [
      ...notes.map((n) => ({ id: n._id, balance: amountOf(n.balance_amount_cents) })),
      // Issued by this preview's step (an upgrade's credit): in the invoice's currency, the newest.
      ...this.creditNotes.map((n, i) => ({ id: `preview/${i}`, balance: n.amountCents })),
    ];
    let total: Decimal = new Dec(0);
    for (const { id, balance } of balances) {
      const remaining = due.minus(total);
      if (remaining.lessThanOrEqualTo(0)) break;
      const left = balance.minus(this.creditNotesTaken.get(id) ?? ZERO);
      if (left.lessThanOrEqualTo(0)) continue;
      const value = Dec.min(left, remaining);
      this.creditNotesTaken.set(id, (this.creditNotesTaken.get(id) ?? ZERO).plus(value));
      total = total.plus(value);
    }
    return total;
  }

  /** The customer's wallets in the invoice's currency as consumeWalletsForInvoice allocates them, less what the preview took. */
  private async takeWallets(invoice: InvoiceDoc, due: Decimal, at: Date): Promise<Decimal> {
    const wallets = await this.db.models.Wallet.find({
      organization_id: invoice.organization_id,
      customer_id: invoice.customer_id,
      currency: invoice.currency,
    }).lean();
    const allocation = allocateWallets(
      due,
      wallets.map((w) => ({
        id: w._id,
        balanceCents: (fromDecimal128(w.balance_cents) ?? ZERO).minus(this.walletsTaken.get(w._id) ?? ZERO),
        priority: w.priority,
        createdAt: w.created_at,
        status: w.status,
        expirationAt: w.expiration_at,
        terminatedAt: w.terminated_at,
      })),
      at,
    );
    for (const { walletId, amountCents } of allocation.allocations) {
      this.walletsTaken.set(walletId, (this.walletsTaken.get(walletId) ?? ZERO).plus(amountCents));
    }
    return allocation.totalCents;
  }
}

export interface PreviewOptions {
  /** Coupons to apply as if the customer had them, after their own. */
  coupons?: AppliedCoupon[];
}

function dryContext(db: Db, deps: SubscriptionBillingDeps, book: PreviewBook): StepContext {
  return { ...subscriptionBillingContext(db, deps), dryRun: book };
}

/**
 * The invoices the current period of `state` ends with (its boundary step, billPeriodEnd, run dry),
 * when nothing else happens before, in issue order: the active parts kept by pauses (one invoice
 * each), then the ended segment's usage, in arrear its base fee, in advance the next period's (a
 * scheduled downgrade, or units carried by in-advance charges, bill on invoices of their own).
 * Paused: what the end of the period the pause began in issues (its active parts); none once that
 * period has ended (`main` null: nothing is billed until the subscription is resumed).
 * `main`: the ended segment's invoice, else the first. A pending subscription (or a new one): its
 * first period's (see previewFirstPeriod).
 */
export async function previewPeriodEnd(
  db: Db,
  deps: SubscriptionBillingDeps,
  base: SubscriptionDoc,
  state: SubscriptionState,
  options: PreviewOptions = {},
): Promise<PreviewResult & { main: PreviewedInvoice | null }> {
  if (state.status === 'pending') return previewFirstPeriod(db, deps, base, state, options);
  const book = new PreviewBook(db, base, options.coupons ?? []);
  const period = state.currentPeriod;
  if (!period) return { invoices: [], creditNotes: [], main: null };
  await billPeriodEnd(dryContext(db, deps, book), state, new Date(period.to));
  // The period's own invoice: its segment's (with, in advance, the next period's base fee).
  const segmentKey = state.status === 'paused' ? null : billKey(state, state.plan, state.segmentFrom ?? period.from, 'subscription');
  const main = book.invoices.find((i) => i.key === segmentKey) ?? book.invoices[0] ?? null;
  return { invoices: book.invoices, creditNotes: book.creditNotes, main };
}

/**
 * The first period of a subscription not active yet, as it would be billed: activation (in
 * advance, the prorated base fee), a trial's end within it (in advance, the rest of the period),
 * its end (in arrear, its base fee; its usage: none yet). `main`: the first invoice it issues.
 */
export async function previewFirstPeriod(
  db: Db,
  deps: SubscriptionBillingDeps,
  base: SubscriptionDoc,
  pending: SubscriptionState,
  options: PreviewOptions = {},
): Promise<PreviewResult & { main: PreviewedInvoice | null }> {
  const book = new PreviewBook(db, base, options.coupons ?? []);
  const ctx = dryContext(db, deps, book);
  let { state } = await activate(ctx, pending, new Date(pending.startedAt));
  const period = state.currentPeriod!;
  const trialEnd = state.trialEndsAt ? new Date(state.trialEndsAt) : null;
  if (trialEnd && trialEnd.getTime() < Date.parse(period.to)) ({ state } = await endTrial(ctx, state, trialEnd));
  await closePeriod(ctx, state, new Date(period.to));
  return { invoices: book.invoices, creditNotes: book.creditNotes, main: book.invoices[0] ?? null };
}

export interface PlanChangePreview extends PreviewResult {
  /** downgrade_removed: the current plan requested while a downgrade is pending (the period end bills the current plan). */
  change: PlanChangeKind | 'downgrade_removed';
  /** When the new plan takes effect: an upgrade on the change day, a downgrade (or its removal) at the period end. */
  effectiveAt: Date;
  /** A downgrade: what the boundary that switches plans will issue (nothing is billed at the change). */
  atEffectiveDate: PreviewResult;
}

/**
 * What changing `state` to `target` at `at` would do (changePlan, run dry): an upgrade's invoices
 * and credit notes now; a downgrade bills nothing now and switches at the period end, whose
 * boundary invoices are given too.
 */
export async function previewPlanChange(
  db: Db,
  deps: SubscriptionBillingDeps,
  base: SubscriptionDoc,
  state: SubscriptionState,
  target: PlanSnapshot,
  at: Date,
): Promise<PlanChangePreview> {
  const book = new PreviewBook(db, base, []);
  const ctx = dryContext(db, deps, book);
  const change = target.id === state.plan.id ? 'downgrade_removed' : classifyPlanChange(state.plan, target);
  const period = state.currentPeriod!;
  const { state: next } = await changePlan(ctx, state, target, at);
  if (change === 'upgrade') {
    const effectiveAt = planChangeDay(at, new Date(state.segmentFrom ?? period.from), state.timezone);
    return {
      change,
      effectiveAt,
      invoices: book.invoices,
      creditNotes: book.creditNotes,
      atEffectiveDate: { invoices: [], creditNotes: [] },
    };
  }
  const boundary = new Date(period.to);
  const later = new PreviewBook(db, base, []);
  await billPeriodEnd(dryContext(db, deps, later), next, boundary);
  return {
    change,
    effectiveAt: boundary,
    invoices: book.invoices,
    creditNotes: book.creditNotes,
    atEffectiveDate: { invoices: later.invoices, creditNotes: later.creditNotes },
  };
}
