import Decimal from 'decimal.js';
import { type CommitmentTrueUp, type MinimumCommitment, type Proration, computeCommitmentTrueUp } from './commitment';
import { type AppliedCoupon, type CouponApplication, type SkippedCoupon, applyCoupons } from './coupons';
import { Dec, ZERO, dec, nonNegative, roundCents, roundFee, sum } from './money';
import {
  type AppliedFeeTax,
  type FeeType,
  type InvoiceAppliedTax,
  NO_TAXES,
  type TaxLevel,
  type TaxSets,
  computeFeeTaxes,
  summarizeInvoiceTaxes,
} from './taxes';

/**
 * Invoice assembly: from already priced fees to the invoice's amounts, in the order of the
 * specification's pipeline (section 4), which billing-rules.md keeps:
 *
 *   1. charge fees            (priced by the caller)
 *   2. commitment true-up     needs the final charge fees, so it comes right after them
 *   3. taxes, per fee         on each fee's full pre-tax amount, so the true-up fee is taxed too
 *   4. coupons                on the pre-tax subtotal, after taxes: coupons never change a tax
 *   5. wallet credits         at finalization only: see `applyPrepaidCredits`
 *   6. progressive credits    what this period's progressive invoices already billed
 *   +  credit notes           the customer's balances, last: unlike the credits of this period
 *                             they carry over, so they only take what is still due
 *
 * Wallets come after everything computed here although the specification lists them fifth:
 * they are consumed at finalization, when every other credit is known, so that a wallet never
 * pays for usage a progressive invoice already billed (billing-rules.md, Invoice pipeline 5 and 6).
 *
 * Fee amounts keep 4 fractional digits; invoice amounts are whole cents, half up
 * (billing-rules.md, Numbers).
 */

export type { FeeType } from './taxes';

export class InvalidInvoiceInput extends Error {
  override readonly name = 'InvalidInvoiceInput';
}

export interface PricedFee {
  /** The caller's stable identifier of the line (for example charge id + filter), unique per invoice. */
  key: string;
  fee_type: FeeType;
  charge_id?: string | undefined;
  charge_filter_id?: string | undefined;
  add_on_id?: string | undefined;
  invoice_display_name?: string | undefined;
  /** Pre-tax, minor units, never negative. */
  amount_cents: Dec;
  units: Dec;
  events_count: number;
  unit_amount_cents: Dec;
  /**
   * The span this line bills, when it differs from the invoice's: an in-advance base fee pays for
   * the period that starts while the usage beside it measured the one that ended.
   */
  period?: { from: Date; to: Date } | undefined;
  /** Billed when its event arrived (a charge paid in advance), and that event. */
  pay_in_advance?: boolean | undefined;
  event_id?: string | undefined;
  event_transaction_id?: string | undefined;
  /**
   * What the line was priced from (the plan and charge as they were, the usage read), kept with the
   * fee for explanations (src/billing/fee-basis.ts). Opaque here: assembly passes it through.
   */
  basis?: Readonly<Record<string, unknown>> | undefined;
}

export interface AssembledFee extends PricedFee {
  tax_level: TaxLevel | null;
  applied_taxes: AppliedFeeTax[];
  taxes_amount_cents: Dec;
  total_amount_cents: Dec;
}

/** A `progressive_billing` invoice issued earlier in the period, with what it billed. */
export interface ProgressiveBillingCredit {
  invoice_id: string;
  amount_cents: Dec;
}

/** A finalized credit note of the customer with balance left, listed oldest first. */
export interface CreditNoteCredit {
  credit_note_id: string;
  balance_amount_cents: Dec;
}

export interface InvoiceAssemblyInput {
  currency: string;
  fees: readonly PricedFee[];
  minimum_commitment?: MinimumCommitment | null | undefined;
  /** The part of the period the invoice covers, for the commitment; absent means the whole period. */
  commitment_proration?: Proration | undefined;
  taxes?: TaxSets | undefined;
  applied_coupons?: readonly AppliedCoupon[] | undefined;
  progressive_billing_credits?: readonly ProgressiveBillingCredit[] | undefined;
  credit_notes?: readonly CreditNoteCredit[] | undefined;
}

/** The invoice-level amounts, all whole cents. */
export interface InvoiceAmounts {
  subtotal: Dec;
  tax_amount: Dec;
  coupons_amount_cents: Dec;
  progressive_billing_credit_amount_cents: Dec;
  credit_notes_amount_cents: Dec;
  prepaid_credit_amount: Dec;
  total: Dec;
}

export interface AssembledInvoice extends InvoiceAmounts {
  currency: string;
  fees: AssembledFee[];
  /** Sum of the fee amounts before rounding to whole cents (4 fractional digits). */
  fees_amount_cents: Dec;
  applied_taxes: InvoiceAppliedTax[];
  /** Null when the plan has no minimum commitment. */
  commitment: CommitmentTrueUp | null;
  coupons: CouponApplication[];
  skipped_coupons: SkippedCoupon[];
  /** What each progressive invoice credits here (zero when nothing was left). */
  progressive_billing_credits: { invoice_id: string; amount_cents: Dec }[];
  /** What to consume from each credit note's balance when the invoice is finalized. */
  credit_notes: { credit_note_id: string; amount_cents: Dec }[];
}

export const COMMITMENT_FEE_KEY = 'commitment';

function validate(input: InvoiceAssemblyInput): void {
  const keys = new Set<string>();
  for (const fee of input.fees) {
    if (keys.has(fee.key)) throw new InvalidInvoiceInput(`duplicate fee key "${fee.key}"`);
    keys.add(fee.key);
    // The charge models already clamp at zero (billing-rules.md): a negative fee here is a bug upstream.
    if (fee.amount_cents.isNegative()) throw new InvalidInvoiceInput(`fee "${fee.key}" has a negative amount`);
  }
  if (input.minimum_commitment) {
    if (input.fees.some((f) => f.fee_type === 'commitment')) {
      throw new InvalidInvoiceInput('the fees already hold a commitment fee; it would be billed twice');
    }
    if (keys.has(COMMITMENT_FEE_KEY)) {
      throw new InvalidInvoiceInput(`fee key "${COMMITMENT_FEE_KEY}" is reserved for the commitment true-up`);
    }
  }
}

/** Consumes `available` across sources in the given order, each up to its own amount. */
function consumeInOrder<T>(
  sources: readonly T[],
  amountOf: (source: T) => Dec,
  available: Dec,
): { consumed: { source: T; amount: Dec }[]; total: Dec } {
  let left = available;
  const consumed = sources.map((source) => {
    const amount = Dec.min(roundCents(nonNegative(amountOf(source))), left);
    left = left.minus(amount);
    return { source, amount };
  });
  return { consumed, total: available.minus(left) };
}

function commitmentFee(amount_cents: Dec): PricedFee {
  return {
    key: COMMITMENT_FEE_KEY,
    fee_type: 'commitment',
    amount_cents,
    units: dec(1),
    events_count: 0,
    unit_amount_cents: amount_cents,
  };
}

function amountDue(a: Omit<InvoiceAmounts, 'prepaid_credit_amount' | 'total'>): Dec {
  return nonNegative(
    a.subtotal
      .plus(a.tax_amount)
      .minus(a.coupons_amount_cents)
      .minus(a.progressive_billing_credit_amount_cents)
      .minus(a.credit_notes_amount_cents),
  );
}

export function assembleInvoice(input: InvoiceAssemblyInput): AssembledInvoice {
  validate(input);
  const priced = input.fees.map((f) => ({ ...f, amount_cents: roundFee(f.amount_cents) }));

  // 2. Commitment true-up.
  let commitment: CommitmentTrueUp | null = null;
  if (input.minimum_commitment) {
    commitment = computeCommitmentTrueUp({
      commitment: input.minimum_commitment,
      proration: input.commitment_proration,
      fees: priced,
    });
    if (commitment.true_up_amount_cents.gt(0)) priced.push(commitmentFee(commitment.true_up_amount_cents));
  }

  // 3. Taxes per fee, on the full pre-tax amount.
  const taxSets = input.taxes ?? NO_TAXES;
  const fees: AssembledFee[] = priced.map((fee) => {
    const taxes = computeFeeTaxes(fee, taxSets);
    return { ...fee, ...taxes, total_amount_cents: fee.amount_cents.plus(taxes.taxes_amount_cents) };
  });
  const fees_amount_cents = sum(fees.map((f) => f.amount_cents));
  const subtotal = roundCents(fees_amount_cents);
  // Rounded once over the sum, not per fee, so that many small fees do not drift by a cent each.
  const tax_amount = roundCents(sum(fees.map((f) => f.taxes_amount_cents)));

  // 4. Coupons on the pre-tax subtotal; their total cannot exceed it.
  const coupons = applyCoupons({
    currency: input.currency,
    subtotal,
    applied_coupons: input.applied_coupons ?? [],
  });

  // 6. Progressive billing credits: up to what is still due after coupons, never more.
  const progressive = consumeInOrder(
    input.progressive_billing_credits ?? [],
    (c) => c.amount_cents,
    nonNegative(subtotal.plus(tax_amount).minus(coupons.coupons_amount_cents)),
  );

  // Credit notes last among the generation-time credits: their unused balance stays for later invoices.
  const notes = consumeInOrder(
    input.credit_notes ?? [],
    (n) => n.balance_amount_cents,
    nonNegative(subtotal.plus(tax_amount).minus(coupons.coupons_amount_cents).minus(progressive.total)),
  );

  const amounts = {
    subtotal,
    tax_amount,
    coupons_amount_cents: coupons.coupons_amount_cents,
    progressive_billing_credit_amount_cents: progressive.total,
    credit_notes_amount_cents: notes.total,
  };

  return {
    currency: input.currency,
    fees,
    fees_amount_cents,
    applied_taxes: summarizeInvoiceTaxes(fees),
    commitment,
    coupons: coupons.applications,
    skipped_coupons: coupons.skipped,
    progressive_billing_credits: progressive.consumed.map(({ source, amount }) => ({
      invoice_id: source.invoice_id,
      amount_cents: amount,
    })),
    credit_notes: notes.consumed.map(({ source, amount }) => ({
      credit_note_id: source.credit_note_id,
      amount_cents: amount,
    })),
    ...amounts,
    // 5. Wallets are applied at finalization (applyPrepaidCredits); a draft has none yet.
    prepaid_credit_amount: ZERO,
    total: amountDue(amounts),
  };
}

/**
 * Recomputes the total once the wallets are known, at finalization: the wallets cover what is still
 * due after every other credit, up to `walletTotal` (the customer's usable wallet balance). Calling it
 * again with another wallet total replaces, never adds to, the earlier prepaid amount.
 *
 * Rounded DOWN to whole cents, unlike other invoice amounts: rounding half up could take a
 * fraction of a cent more than the wallets hold.
 */
export function applyPrepaidCredits<T extends InvoiceAmounts>(invoiceAmounts: T, walletTotal: Dec): T {
  const due = amountDue(invoiceAmounts);
  const usable = nonNegative(walletTotal).toDecimalPlaces(0, Decimal.ROUND_DOWN);
  const prepaid_credit_amount = Dec.min(usable, due);
  return { ...invoiceAmounts, prepaid_credit_amount, total: due.minus(prepaid_credit_amount) };
}
