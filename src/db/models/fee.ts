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
  invoice_id: string;
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
  period_started_at: Date | null;
  period_ended_at: Date | null;
}

export const feeSchema = new Schema<FeeDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    invoice_id: { type: String, required: true },
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
  },
  collectionOptions<FeeDoc>('fees'),
);

// A retried generation writes each line once.
feeSchema.index({ invoice_id: 1, key: 1 }, { unique: true });
feeSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
feeSchema.index({ organization_id: 1, customer_id: 1 });
