// What the preview tests (test/api/previews*.test.ts) compare: a previewed invoice against the one
// the period end then issues, and the collections a preview must not write to.
import type { Connection } from 'mongoose';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { InvoicePreviewResource } from '../../src/resources/invoice-preview';

/** Fees in a stable order: by type, then charge, then amount. */
export const byLine = <F extends { fee_type: string; charge_id: string | null; amount_cents: string }>(a: F, b: F) =>
  a.fee_type.localeCompare(b.fee_type) ||
  (a.charge_id ?? '').localeCompare(b.charge_id ?? '') ||
  a.amount_cents.localeCompare(b.amount_cents);

/** An issued invoice in the preview's shape: what a previewed invoice must equal. */
export function asPreview(inv: InvoiceResource): InvoicePreviewResource {
  return {
    customer_id: inv.customer_id,
    subscription_id: inv.subscription_id,
    invoice_type: inv.invoice_type,
    status: inv.status === 'paid' ? 'paid' : 'finalized',
    issued_at: inv.finalized_at!,
    currency: inv.currency,
    issuing_date: inv.issuing_date,
    payment_due_date: inv.payment_due_date,
    net_payment_term: inv.net_payment_term,
    period_started_at: inv.period_started_at,
    period_ended_at: inv.period_ended_at,
    fees_amount_cents: inv.fees_amount_cents,
    subtotal: inv.subtotal,
    tax_amount: inv.tax_amount,
    coupons_amount_cents: inv.coupons_amount_cents,
    progressive_billing_credit_amount_cents: inv.progressive_billing_credit_amount_cents,
    credit_notes_amount_cents: inv.credit_notes_amount_cents,
    prepaid_credit_amount: inv.prepaid_credit_amount,
    total: inv.total,
    applied_taxes: inv.applied_taxes,
    applied_coupons: inv.applied_coupons.map((c) => ({ coupon_id: c.coupon_id, coupon_code: c.coupon_code, amount_cents: c.amount_cents })),
    fees: inv
      .fees!.map(({ id: _id, invoice_id: _inv, payment_status: _ps, credited_amount_cents: _cr, created_at: _c, ...fee }) => fee)
      .sort(byLine),
  };
}

/** A previewed invoice with its fees in the same order as asPreview's. */
export const sorted = (p: InvoicePreviewResource): InvoicePreviewResource => ({ ...p, fees: [...p.fees].sort(byLine) });

/** What billing writes to, and a preview must not. */
const BILLING_COLLECTIONS = [
  'invoices',
  'fees',
  'lifecycle_events',
  'document_numbers',
  'credit_notes',
  'wallet_transactions',
  'applied_coupons',
  'subscriptions',
];

/** The documents in each collection billing writes to. */
export async function billingCounts(connection: Connection): Promise<Record<string, number>> {
  const entries = await Promise.all(BILLING_COLLECTIONS.map(async (c) => [c, await connection.collection(c).countDocuments()] as const));
  return Object.fromEntries(entries);
}
