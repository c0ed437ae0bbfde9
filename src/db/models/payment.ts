import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';
import type { ProviderCode } from '../../domain/payment-providers';

export type PaymentStatus = 'pending' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'refunded';

/** A payment of an invoice through a provider (api-contract.md, Payments). Its status changes only in its workflow. */
export interface PaymentDoc extends BaseDoc {
  organization_id: string;
  invoice_id: string;
  customer_id: string;
  payment_request_id: string | null;
  /** Minor units (cents) of `currency`. */
  amount: Types.Decimal128;
  currency: string;
  status: PaymentStatus;
  provider: ProviderCode;
  provider_payment_id: string | null;
  provider_checkout_id: string | null;
  checkout_url: string | null;
  expires_at: Date | null;
  failure_reason: string | null;
  reference: string | null;
  paid_at: Date | null;
  refunded_at: Date | null;
  refund_amount_cents: Types.Decimal128 | null;
  provider_refund_id: string | null;
  success_url: string | null;
  cancel_url: string | null;
  /** A payment request's attempt on the customer's saved method (charged without the customer, no checkout). */
  saved_method_id: string | null;
  /** Where a redirect flow brings the customer back: our GET /v1/payments/{id}/return. */
  return_url: string | null;
  /**
   * `open` while the payment is pending or processing, else the payment's id: with the unique
   * (invoice_id, provider, open_slot) index, an invoice has at most one open payment per provider,
   * so two concurrent checkouts answer the same payment.
   */
  open_slot: string;
  /** DELETE of a pending payment: hidden from the API from then on. */
  deleted_at: Date | null;
}

export const paymentSchema = new Schema<PaymentDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    invoice_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    payment_request_id: { type: String, default: null },
    amount: { type: Decimal128, required: true },
    currency: { type: String, required: true },
    status: {
      type: String,
      enum: ['pending', 'processing', 'succeeded', 'failed', 'canceled', 'refunded'],
      default: 'pending',
    },
    provider: { type: String, enum: ['provider_a', 'provider_b', 'provider_c', 'provider_d', 'manual'], required: true },
    provider_payment_id: { type: String, default: null },
    provider_checkout_id: { type: String, default: null },
    checkout_url: { type: String, default: null },
    expires_at: { type: Date, default: null },
    failure_reason: { type: String, default: null },
    reference: { type: String, default: null },
    paid_at: { type: Date, default: null },
    refunded_at: { type: Date, default: null },
    refund_amount_cents: { type: Decimal128, default: null },
    provider_refund_id: { type: String, default: null },
    success_url: { type: String, default: null },
    cancel_url: { type: String, default: null },
    return_url: { type: String, default: null },
    saved_method_id: { type: String, default: null },
    open_slot: { type: String, required: true },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<PaymentDoc>('payments'),
);

paymentSchema.index({ invoice_id: 1, provider: 1, open_slot: 1 }, { unique: true });
paymentSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
// Notifications that carry no payment id are matched on the provider's ids.
paymentSchema.index({ provider: 1, provider_checkout_id: 1 });
paymentSchema.index({ provider: 1, provider_payment_id: 1 });
