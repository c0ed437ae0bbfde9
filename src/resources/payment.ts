// The payment resource as the API returns it (and as the payment.* events carry it).
import { z } from 'zod';
import type { PaymentDoc } from '../db/models/payment';
import { providerCodes } from '../domain/payment-providers';
import { d4, decimal4, iso, nullableTimestamp, timestamp } from './format';

export const paymentStatuses = ['pending', 'processing', 'succeeded', 'failed', 'canceled', 'refunded'] as const;

export const paymentResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    invoice_id: z.string(),
    customer_id: z.string(),
    payment_request_id: z.string().nullable(),
    amount: decimal4.describe('minor units (cents) of the currency'),
    currency: z.string(),
    status: z.enum(paymentStatuses),
    provider: z.enum(providerCodes),
    provider_payment_id: z.string().nullable(),
    provider_checkout_id: z.string().nullable(),
    checkout_url: z.string().nullable(),
    expires_at: nullableTimestamp,
    failure_reason: z.string().nullable(),
    reference: z.string().nullable(),
    refund_amount_cents: decimal4.nullable(),
    paid_at: nullableTimestamp,
    refunded_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Payment' });

export type PaymentResource = z.output<typeof paymentResource>;

export function toPaymentResource(doc: PaymentDoc): PaymentResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    invoice_id: doc.invoice_id,
    customer_id: doc.customer_id,
    payment_request_id: doc.payment_request_id ?? null,
    amount: d4(doc.amount),
    currency: doc.currency,
    status: doc.status,
    provider: doc.provider,
    provider_payment_id: doc.provider_payment_id ?? null,
    provider_checkout_id: doc.provider_checkout_id ?? null,
    checkout_url: doc.checkout_url ?? null,
    expires_at: iso(doc.expires_at),
    failure_reason: doc.failure_reason ?? null,
    reference: doc.reference ?? null,
    refund_amount_cents: doc.refund_amount_cents ? d4(doc.refund_amount_cents) : null,
    paid_at: iso(doc.paid_at),
    refunded_at: iso(doc.refunded_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
