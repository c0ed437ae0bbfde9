import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export type InvoiceStatus = 'draft' | 'finalized' | 'paid' | 'voided';
export type InvoiceType = 'subscription' | 'add_on' | 'credit' | 'one_off' | 'progressive_billing';
export type PaymentStatus = 'pending' | 'succeeded' | 'failed' | 'refunded';

export interface InvoiceAppliedTax {
  tax_id: string;
  tax_code: string;
  tax_rate: Types.Decimal128;
  fees_amount_cents: Types.Decimal128;
  amount_cents: Types.Decimal128;
}

export interface InvoiceAppliedCoupon {
  applied_coupon_id: string;
  coupon_id: string;
  coupon_code: string;
  amount_cents: Types.Decimal128;
}

/**
 * The Temporal activity that wrote an invoice at a step of its life (issued, finalized): which
 * workflow run, which activity, which attempt. Null when no activity did (an API request).
 */
export interface InvoiceOrigin {
  workflow_id: string;
  run_id: string;
  workflow_type: string | null;
  activity_type: string;
  activity_id: string;
  attempt: number;
  task_queue: string;
  recorded_at: Date;
}

/** The plan an invoice bills, as it was when the invoice was issued. */
export interface InvoicePlanSnapshot {
  id: string;
  code: string | null;
  name: string | null;
  interval: string | null;
  amount_cents: number | null;
  currency: string | null;
}

/**
 * An invoice. Its invoiceWorkflow (`invoice/<id>`) is its only writer after creation; money
 * amounts are Decimal128 in minor units: fee-level sums with 4 digits, invoice-level amounts whole.
 */
export interface InvoiceDoc extends BaseDoc {
  organization_id: string;
  customer_id: string;
  subscription_id: string | null;
  invoice_type: InvoiceType;
  status: InvoiceStatus;
  /** Drafts: `<prefix>-DRAFT-<first 8 hex digits of the id, lowercase>`; from finalization: `<prefix>-<6 digits>`. */
  number: string;
  sequential_id: number | null;
  currency: string;
  issuing_date: string | null;
  payment_due_date: string | null;
  net_payment_term: number;
  grace_period_days: number;
  payment_status: PaymentStatus;
  payment_overdue: boolean;
  period_started_at: Date | null;
  period_ended_at: Date | null;
  fees_amount_cents: Types.Decimal128;
  subtotal: Types.Decimal128;
  tax_amount: Types.Decimal128;
  coupons_amount_cents: Types.Decimal128;
  progressive_billing_credit_amount_cents: Types.Decimal128;
  credit_notes_amount_cents: Types.Decimal128;
  prepaid_credit_amount: Types.Decimal128;
  total: Types.Decimal128;
  applied_taxes: InvoiceAppliedTax[];
  applied_coupons: InvoiceAppliedCoupon[];
  metadata: Record<string, unknown>;
  /** `<subscription>/<start of what it bills>/<kind>/<plan>/v<state version>` for subscription bills, or the request's key; unique per organization. */
  idempotency_key: string;
  finalized_at: Date | null;
  paid_at: Date | null;
  voided_at: Date | null;
  deleted_at: Date | null;
  // For explanations (GET /v1/invoices/{id}/explain); absent on invoices issued before they were recorded.
  plan?: InvoicePlanSnapshot | null;
  /** The progressive billing invoices credited here and how much each, in order. */
  progressive_billing_credits?: { invoice_id: string; amount_cents: Types.Decimal128 }[];
  issued_by?: InvoiceOrigin | null;
  finalized_by?: InvoiceOrigin | null;
}

const money = { type: Decimal128, required: true };

export const invoiceSchema = new Schema<InvoiceDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    subscription_id: { type: String, default: null },
    invoice_type: { type: String, enum: ['subscription', 'add_on', 'credit', 'one_off', 'progressive_billing'], required: true },
    status: { type: String, enum: ['draft', 'finalized', 'paid', 'voided'], default: 'draft' },
    number: { type: String, required: true },
    sequential_id: { type: Number, default: null },
    currency: { type: String, required: true },
    issuing_date: { type: String, default: null },
    payment_due_date: { type: String, default: null },
    net_payment_term: { type: Number, required: true },
    grace_period_days: { type: Number, required: true },
    payment_status: { type: String, enum: ['pending', 'succeeded', 'failed', 'refunded'], default: 'pending' },
    payment_overdue: { type: Boolean, default: false },
    period_started_at: { type: Date, default: null },
    period_ended_at: { type: Date, default: null },
    fees_amount_cents: money,
    subtotal: money,
    tax_amount: money,
    coupons_amount_cents: money,
    progressive_billing_credit_amount_cents: money,
    credit_notes_amount_cents: money,
    prepaid_credit_amount: money,
    total: money,
    applied_taxes: {
      type: [
        { _id: false, tax_id: String, tax_code: String, tax_rate: Decimal128, fees_amount_cents: Decimal128, amount_cents: Decimal128 },
      ],
      default: [],
    },
    applied_coupons: {
      type: [{ _id: false, applied_coupon_id: String, coupon_id: String, coupon_code: String, amount_cents: Decimal128 }],
      default: [],
    },
    metadata: { type: Schema.Types.Mixed, default: () => ({}) },
    idempotency_key: { type: String, required: true },
    finalized_at: { type: Date, default: null },
    paid_at: { type: Date, default: null },
    voided_at: { type: Date, default: null },
    deleted_at: { type: Date, default: null },
    plan: { type: Schema.Types.Mixed, default: null },
    progressive_billing_credits: { type: [{ _id: false, invoice_id: String, amount_cents: Decimal128 }], default: undefined },
    issued_by: { type: Schema.Types.Mixed, default: null },
    finalized_by: { type: Schema.Types.Mixed, default: null },
  },
  { ...collectionOptions<InvoiceDoc>('invoices'), minimize: false },
);

// A retried generation finds the invoice its first attempt created. The key is unique within an
// organization only: a request's Idempotency-Key is the client's choice, and another organization
// using the same one must get its own invoice, not this one. (It replaced `idempotency_key_1`,
// which src/db drops from older databases.)
invoiceSchema.index({ organization_id: 1, idempotency_key: 1 }, { unique: true });
invoiceSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
invoiceSchema.index({ organization_id: 1, customer_id: 1, status: 1, currency: 1 });
invoiceSchema.index({ organization_id: 1, subscription_id: 1, period_started_at: 1 });
