import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export type FeeType = 'subscription' | 'charge' | 'add_on' | 'credit' | 'commitment';

export interface FeeAppliedTax {
  tax_id: string;
  tax_code: string;
  tax_rate: Types.Decimal128;
  amount_cents: Types.Decimal128;
}

/** One line of an invoice (the specification's Fee). Amounts in cents with 4 fractional digits. */
export interface FeeDoc extends BaseDoc {
  organization_id: string;
  /** Null for a fee billed in advance on a charge that is not invoiceable. */
  invoice_id: string | null;
  customer_id: string;
  subscription_id: string | null;
  /** Unique within the invoice: `charge/<id>/<filter key>`, `subscription`, `commitment`, `line/<n>`. */
  key: string;
  fee_type: FeeType;
  charge_id: string | null;
  charge_filter_id: string | null;
  add_on_id: string | null;
  invoice_display_name: string | null;
  description: string | null;
  currency: string;
  units: Types.Decimal128;
  events_count: number;
  unit_amount_cents: Types.Decimal128;
  amount_cents: Types.Decimal128;
  taxes_amount_cents: Types.Decimal128;
  total_amount_cents: Types.Decimal128;
  applied_taxes: FeeAppliedTax[];
  payment_status: 'pending' | 'succeeded' | 'failed' | 'refunded';
  /** How much of total_amount_cents credit notes have credited so far. */
  credited_amount_cents: Types.Decimal128;
  /** Credit note items already counted in credited_amount_cents (exactly-once markers). */
  credit_note_item_ids: string[];
  /** Billed when its event arrived (a charge paid in advance); `event_id` is that event. */
  pay_in_advance: boolean;
  event_id: string | null;
  event_transaction_id: string | null;
  period_started_at: Date | null;
  period_ended_at: Date | null;
  /**
   * What the line was priced from when it was billed (src/billing/fee-basis.ts: the plan and charge
   * as they were, the usage read), for GET /v1/invoices/{id}/explain. Absent or null on fees billed
   * before it was recorded, and on lines with nothing to explain beyond their amount.
   */
  basis?: Record<string, unknown> | null;
}

export const feeSchema = new Schema<FeeDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    invoice_id: { type: String, default: null },
    customer_id: { type: String, required: true },
    subscription_id: { type: String, default: null },
    key: { type: String, required: true },
    fee_type: { type: String, enum: ['subscription', 'charge', 'add_on', 'credit', 'commitment'], required: true },
    charge_id: { type: String, default: null },
    charge_filter_id: { type: String, default: null },
    add_on_id: { type: String, default: null },
    invoice_display_name: { type: String, default: null },
    description: { type: String, default: null },
    currency: { type: String, required: true },
    units: { type: Decimal128, required: true },
    events_count: { type: Number, default: 0 },
    unit_amount_cents: { type: Decimal128, required: true },
    amount_cents: { type: Decimal128, required: true },
    taxes_amount_cents: { type: Decimal128, required: true },
    total_amount_cents: { type: Decimal128, required: true },
    applied_taxes: {
      type: [{ _id: false, tax_id: String, tax_code: String, tax_rate: Decimal128, amount_cents: Decimal128 }],
      default: [],
    },
    payment_status: { type: String, enum: ['pending', 'succeeded', 'failed', 'refunded'], default: 'pending' },
    credited_amount_cents: { type: Decimal128, required: true },
    credit_note_item_ids: { type: [String], default: [] },
    period_started_at: { type: Date, default: null },
    period_ended_at: { type: Date, default: null },
    pay_in_advance: { type: Boolean, default: false },
    event_id: { type: String, default: null },
    event_transaction_id: { type: String, default: null },
    basis: { type: Schema.Types.Mixed, default: null },
  },
  collectionOptions<FeeDoc>('fees'),
);

// A retried generation writes each line once.
feeSchema.index({ invoice_id: 1, key: 1 }, { unique: true });
feeSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
feeSchema.index({ organization_id: 1, customer_id: 1 });
// The fees billed in advance in a charge's period (src/billing/subscription/in-advance.ts).
feeSchema.index({ subscription_id: 1, charge_id: 1, period_started_at: 1 }, { partialFilterExpression: { pay_in_advance: true } });
