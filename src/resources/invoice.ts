// The invoice and fee resources as the API returns them (and as invoice webhooks carry them).
import { z } from 'zod';
import type { FeeDoc } from '../db/models/fee';
import type { InvoiceDoc } from '../db/models/invoice';
import { d4, iso, nullableTimestamp, timestamp } from './format';

const appliedTax = z.object({ tax_id: z.string(), tax_code: z.string(), tax_rate: z.string(), amount_cents: z.string() });

export const feeResource = z
  .object({
    id: z.string(),
    invoice_id: z.string().nullable().describe('null for a fee billed in advance on a charge that is not invoiceable'),
    customer_id: z.string(),
    subscription_id: z.string().nullable(),
    fee_type: z.enum(['subscription', 'charge', 'add_on', 'credit', 'commitment']),
    charge_id: z.string().nullable(),
    charge_filter_id: z.string().nullable(),
    add_on_id: z.string().nullable(),
    invoice_display_name: z.string().nullable(),
    description: z.string().nullable(),
    currency: z.string(),
    units: z.string(),
    events_count: z.number().int(),
    unit_amount_cents: z.string(),
    amount_cents: z.string(),
    taxes_amount_cents: z.string(),
    total_amount_cents: z.string(),
    credited_amount_cents: z.string(),
    applied_taxes: z.array(appliedTax),
    payment_status: z.enum(['pending', 'succeeded', 'failed', 'refunded']),
    pay_in_advance: z.boolean().describe('billed when its event arrived'),
    event_transaction_id: z.string().nullable().describe('the event a fee billed in advance prices'),
    period_started_at: nullableTimestamp,
    period_ended_at: nullableTimestamp,
    created_at: timestamp,
  })
  .meta({ id: 'Fee' });

export const invoiceResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    customer_id: z.string(),
    subscription_id: z.string().nullable(),
    invoice_type: z.enum(['subscription', 'add_on', 'credit', 'one_off', 'progressive_billing']),
    status: z.enum(['draft', 'finalized', 'paid', 'voided']),
    number: z.string(),
    invoice_number: z.string(),
    currency: z.string(),
    issuing_date: z.string().nullable(),
    payment_due_date: z.string().nullable(),
    net_payment_term: z.number().int(),
    payment_status: z.enum(['pending', 'succeeded', 'failed', 'refunded']),
    payment_overdue: z.boolean(),
    period_started_at: nullableTimestamp,
    period_ended_at: nullableTimestamp,
    fees_amount_cents: z.string(),
    subtotal: z.string(),
    tax_amount: z.string(),
    coupons_amount_cents: z.string(),
    progressive_billing_credit_amount_cents: z.string(),
    credit_notes_amount_cents: z.string(),
    prepaid_credit_amount: z.string(),
    total: z.string(),
    applied_taxes: z.array(appliedTax.extend({ fees_amount_cents: z.string() })),
    applied_coupons: z.array(
      z.object({ applied_coupon_id: z.string(), coupon_id: z.string(), coupon_code: z.string(), amount_cents: z.string() }),
    ),
    metadata: z.record(z.string(), z.unknown()),
    fees: z.array(feeResource).optional(),
    finalized_at: nullableTimestamp,
    paid_at: nullableTimestamp,
    voided_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Invoice' });

export type InvoiceResource = z.output<typeof invoiceResource>;

function rate(value: unknown): string {
  return String(value ?? '0');
}

export type FeeResource = z.output<typeof feeResource>;

export function toFeeResource(fee: FeeDoc): FeeResource {
  return {
    id: fee._id,
    invoice_id: fee.invoice_id,
    customer_id: fee.customer_id,
    subscription_id: fee.subscription_id ?? null,
    fee_type: fee.fee_type,
    charge_id: fee.charge_id ?? null,
    charge_filter_id: fee.charge_filter_id ?? null,
    add_on_id: fee.add_on_id ?? null,
    invoice_display_name: fee.invoice_display_name ?? null,
    description: fee.description ?? null,
    currency: fee.currency,
    units: d4(fee.units),
    events_count: fee.events_count,
    unit_amount_cents: d4(fee.unit_amount_cents),
    amount_cents: d4(fee.amount_cents),
    taxes_amount_cents: d4(fee.taxes_amount_cents),
    total_amount_cents: d4(fee.total_amount_cents),
    credited_amount_cents: d4(fee.credited_amount_cents),
    applied_taxes: (fee.applied_taxes ?? []).map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: rate(t.tax_rate),
      amount_cents: d4(t.amount_cents),
    })),
    payment_status: fee.payment_status,
    pay_in_advance: fee.pay_in_advance ?? false,
    event_transaction_id: fee.event_transaction_id ?? null,
    period_started_at: iso(fee.period_started_at),
    period_ended_at: iso(fee.period_ended_at),
    created_at: iso(fee.created_at),
  };
}

/** The invoice; with `fees` embedded when given (GET /v1/invoices/{id}, webhooks). */
export function toInvoiceResource(invoice: InvoiceDoc, fees?: FeeDoc[]): InvoiceResource {
  return {
    id: invoice._id,
    organization_id: invoice.organization_id,
    customer_id: invoice.customer_id,
    subscription_id: invoice.subscription_id ?? null,
    invoice_type: invoice.invoice_type,
    status: invoice.status,
    number: invoice.number,
    invoice_number: invoice.number,
    currency: invoice.currency,
    issuing_date: invoice.issuing_date ?? null,
    payment_due_date: invoice.payment_due_date ?? null,
    net_payment_term: invoice.net_payment_term,
    payment_status: invoice.payment_status,
    payment_overdue: invoice.payment_overdue,
    period_started_at: iso(invoice.period_started_at),
    period_ended_at: iso(invoice.period_ended_at),
    fees_amount_cents: d4(invoice.fees_amount_cents),
    subtotal: d4(invoice.subtotal),
    tax_amount: d4(invoice.tax_amount),
    coupons_amount_cents: d4(invoice.coupons_amount_cents),
    progressive_billing_credit_amount_cents: d4(invoice.progressive_billing_credit_amount_cents),
    credit_notes_amount_cents: d4(invoice.credit_notes_amount_cents),
    prepaid_credit_amount: d4(invoice.prepaid_credit_amount),
    total: d4(invoice.total),
    applied_taxes: (invoice.applied_taxes ?? []).map((t) => ({
      tax_id: t.tax_id,
      tax_code: t.tax_code,
      tax_rate: rate(t.tax_rate),
      fees_amount_cents: d4(t.fees_amount_cents),
      amount_cents: d4(t.amount_cents),
    })),
    applied_coupons: (invoice.applied_coupons ?? []).map((c) => ({
      applied_coupon_id: c.applied_coupon_id,
      coupon_id: c.coupon_id,
      coupon_code: c.coupon_code,
      amount_cents: d4(c.amount_cents),
    })),
    metadata: invoice.metadata ?? {},
    ...(fees ? { fees: fees.map(toFeeResource) } : {}),
    finalized_at: iso(invoice.finalized_at),
    paid_at: iso(invoice.paid_at),
    voided_at: iso(invoice.voided_at),
    created_at: iso(invoice.created_at),
    updated_at: iso(invoice.updated_at),
  };
}
