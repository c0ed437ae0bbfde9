// What the previews answer (docs/previews.md): an invoice as it would be issued, never stored (no
// id, no number), in the invoice resource's own shapes and formats (toInvoiceResource maps it).
import { z } from 'zod';
import type { FeeDoc } from '../db/models/fee';
import type { InvoiceDoc } from '../db/models/invoice';
import type Decimal from 'decimal.js';
import { toDecimal4String } from '../domain/money';
import { iso, timestamp } from './format';
import { feeResource, invoiceResource, toInvoiceResource } from './invoice';

const previewFee = feeResource.omit({ id: true, invoice_id: true, payment_status: true, credited_amount_cents: true, created_at: true });

export const invoicePreviewResource = invoiceResource
  .pick({
    customer_id: true,
    subscription_id: true,
    invoice_type: true,
    currency: true,
    issuing_date: true,
    payment_due_date: true,
    net_payment_term: true,
    period_started_at: true,
    period_ended_at: true,
    fees_amount_cents: true,
    subtotal: true,
    tax_amount: true,
    coupons_amount_cents: true,
    progressive_billing_credit_amount_cents: true,
    credit_notes_amount_cents: true,
    prepaid_credit_amount: true,
    total: true,
    applied_taxes: true,
  })
  .extend({
    status: z.enum(['finalized', 'paid']).describe('what it would be once finalized (paid: nothing left to pay)'),
    issued_at: timestamp.describe('when it would be issued'),
    applied_coupons: z.array(z.object({ coupon_id: z.string(), coupon_code: z.string(), amount_cents: z.string() })),
    fees: z.array(previewFee),
  })
  .meta({ id: 'InvoicePreview' });

export type InvoicePreviewResource = z.output<typeof invoicePreviewResource>;

/**
 * POST /v1/invoices/preview: the invoice (its fields at the top level, as before) and every invoice
 * issued with it (`invoices`, in issue order, that invoice among them): a period end may issue
 * several (the active parts kept by pauses, a downgrade's next base fee, carried in-advance units).
 */
export const invoicesPreviewResource = invoicePreviewResource
  .extend({
    invoices: z
      .array(invoicePreviewResource)
      .describe('every invoice issued at the same step as this one, in issue order (this one among them)'),
  })
  .meta({ id: 'InvoicesPreview' });

export type InvoicesPreviewResource = z.output<typeof invoicesPreviewResource>;

export function toInvoicePreviewResource(invoice: InvoiceDoc, fees: FeeDoc[]): InvoicePreviewResource {
  const full = toInvoiceResource(invoice, fees);
  return {
    customer_id: full.customer_id,
    subscription_id: full.subscription_id,
    invoice_type: full.invoice_type,
    status: invoice.status === 'paid' ? 'paid' : 'finalized',
    issued_at: iso(invoice.finalized_at ?? invoice.created_at),
    currency: full.currency,
    issuing_date: full.issuing_date,
    payment_due_date: full.payment_due_date,
    net_payment_term: full.net_payment_term,
    period_started_at: full.period_started_at,
    period_ended_at: full.period_ended_at,
    fees_amount_cents: full.fees_amount_cents,
    subtotal: full.subtotal,
    tax_amount: full.tax_amount,
    coupons_amount_cents: full.coupons_amount_cents,
    progressive_billing_credit_amount_cents: full.progressive_billing_credit_amount_cents,
    credit_notes_amount_cents: full.credit_notes_amount_cents,
    prepaid_credit_amount: full.prepaid_credit_amount,
    total: full.total,
    applied_taxes: full.applied_taxes,
    applied_coupons: full.applied_coupons.map((c) => ({
      coupon_id: c.coupon_id,
      coupon_code: c.coupon_code,
      amount_cents: c.amount_cents,
    })),
    fees: (full.fees ?? []).map((f) => {
      const { id: _id, invoice_id: _invoice, payment_status: _status, credited_amount_cents: _credited, created_at: _created, ...fee } = f;
      return fee;
    }),
  };
}

export const creditNotePreviewResource = z
  .object({
    invoice_id: z.string().describe('the invoice whose fee it credits'),
    fee_id: z.string(),
    reason: z.enum(['order_change', 'order_cancellation']),
    amount_cents: z.string(),
    issued_at: timestamp,
  })
  .meta({ id: 'CreditNotePreview' });

export const planChangePreviewResource = z
  .object({
    subscription_id: z.string(),
    plan_id: z.string().describe('the current plan'),
    new_plan_id: z.string(),
    change: z
      .enum(['upgrade', 'downgrade', 'downgrade_removed'])
      .describe('downgrade_removed: new_plan_id is the current plan and removes the pending downgrade'),
    effective_date: timestamp.describe(
      'when the new plan takes effect: an upgrade at the start of the change day, a downgrade (or its removal) at the period end',
    ),
    invoices: z.array(invoicePreviewResource).describe('issued at the change'),
    credit_notes: z.array(creditNotePreviewResource).describe('issued at the change (in advance, the unused part of the old base fee)'),
    invoices_at_effective_date: z
      .array(invoicePreviewResource)
      .describe('a downgrade: what the period end that switches plans issues, when nothing else happens before'),
  })
  .meta({ id: 'PlanChangePreview' });

export type PlanChangePreviewResource = z.output<typeof planChangePreviewResource>;

export function toCreditNotePreviewResource(note: {
  invoiceId: string;
  feeId: string;
  reason: 'order_change' | 'order_cancellation';
  amountCents: Decimal;
  at: Date;
}) {
  return {
    invoice_id: note.invoiceId,
    fee_id: note.feeId,
    reason: note.reason,
    amount_cents: toDecimal4String(note.amountCents),
    issued_at: iso(note.at),
  };
}
