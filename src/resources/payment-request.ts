// The payment request resource as the API returns it (and as the payment_request.* events carry it).
import { z } from 'zod';
import type { PaymentRequestDoc } from '../db/models/payment-request';
import { d4, decimal4, iso, nullableTimestamp, timestamp } from './format';

export const paymentRequestResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    customer_id: z.string(),
    dunning_campaign_id: z.string().nullable(),
    amount_cents: decimal4.describe('minor units of the currency'),
    currency: z.string(),
    status: z.enum(['pending', 'succeeded', 'failed']),
    payment_attempts: z.number().int(),
    max_attempts: z.number().int(),
    next_attempt_at: nullableTimestamp,
    invoice_ids: z.array(z.string()),
    payment_ids: z.array(z.string()),
    checkout_url: z.string().nullable().describe("the current attempt's checkout, when it is one"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'PaymentRequest' });

export type PaymentRequestResource = z.output<typeof paymentRequestResource>;

export function toPaymentRequestResource(doc: PaymentRequestDoc): PaymentRequestResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    customer_id: doc.customer_id,
    dunning_campaign_id: doc.dunning_campaign_id ?? null,
    amount_cents: d4(doc.amount_cents),
    currency: doc.currency,
    status: doc.status,
    payment_attempts: doc.payment_attempts,
    max_attempts: doc.max_attempts,
    next_attempt_at: iso(doc.next_attempt_at),
    invoice_ids: doc.invoice_ids ?? [],
    payment_ids: doc.payment_ids ?? [],
    checkout_url: doc.checkout_url ?? null,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
