import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export type PaymentRequestStatus = 'pending' | 'succeeded' | 'failed';

/**
 * Overdue invoices of one customer and currency collected together (api-contract.md, Dunning
 * campaigns and payment requests). Its workflow (`payment-request/<id>`) makes the attempts.
 */
export interface PaymentRequestDoc extends BaseDoc {
  organization_id: string;
  customer_id: string;
  dunning_campaign_id: string | null;
  /** Minor units: what the request's open invoices leave to pay (shrinks when one is paid otherwise). */
  amount_cents: Types.Decimal128;
  currency: string;
  status: PaymentRequestStatus;
  payment_attempts: number;
  max_attempts: number;
  days_between_attempts: number;
  next_attempt_at: Date | null;
  invoice_ids: string[];
  payment_ids: string[];
  checkout_url: string | null;
}

export const paymentRequestSchema = new Schema<PaymentRequestDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    dunning_campaign_id: { type: String, default: null },
    amount_cents: { type: Decimal128, required: true },
    currency: { type: String, required: true },
    status: { type: String, enum: ['pending', 'succeeded', 'failed'], default: 'pending' },
    payment_attempts: { type: Number, default: 0 },
    max_attempts: { type: Number, required: true },
    days_between_attempts: { type: Number, required: true },
    next_attempt_at: { type: Date, default: null },
    invoice_ids: { type: [String], default: () => [] },
    payment_ids: { type: [String], default: () => [] },
    checkout_url: { type: String, default: null },
  },
  collectionOptions<PaymentRequestDoc>('payment_requests'),
);

paymentRequestSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
// The open requests of a customer: which overdue invoices are already held by one.
paymentRequestSchema.index({ customer_id: 1, status: 1 });
