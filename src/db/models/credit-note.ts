import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';
import { setsReadFlag } from '../read-flags';

export type CreditNoteStatus = 'draft' | 'finalized' | 'voided';

/** Lago's reasons; the specification names two of them and leaves the list open. */
export const CREDIT_NOTE_REASONS = [
  'duplicated_charge',
  'product_unsatisfactory',
  'order_change',
  'order_cancellation',
  'fraudulent_charge',
  'other',
] as const;
export type CreditNoteReason = (typeof CREDIT_NOTE_REASONS)[number];

export interface CreditNoteItemDoc {
  /** Also the idempotency marker this item leaves on its fee (`credit_note_item_ids`). */
  _id: string;
  fee_id: string;
  amount_cents: Types.Decimal128;
  /** Set when the note is voided: what this item gave back to the fee's creditable amount. */
  released_amount_cents: Types.Decimal128 | null;
}

/** One application of the note's balance to a later invoice (mirrors its InvoiceSettlement). */
export interface CreditNoteApplicationDoc {
  invoice_id: string;
  amount_cents: Types.Decimal128;
  applied_at: Date;
}

/**
 * A credit note on a finalized (or paid) invoice. Its balance is not applied to its own invoice but
 * to the customer's later invoices in the same currency, at their finalization.
 *
 * Invariants kept by atomic single-document updates (no transactions on the stand-in):
 * - `balance_amount_cents` only decreases together with a push to `applied_invoice_ids` and
 *   `applications` (one findOneAndUpdate guarded by `balance >= amount` and the invoice not yet in
 *   `applied_invoice_ids`), so a retried or concurrent finalization never applies a note twice to
 *   one invoice nor below zero.
 * - Each item raised its fee's `credited_amount_cents` by its amount, guarded on the fee by
 *   `credited <= total - amount` and by the item id not yet in the fee's `credit_note_item_ids`.
 */
export interface CreditNoteDoc extends BaseDoc {
  organization_id: string;
  customer_id: string;
  invoice_id: string;
  /** `CN-<YYYYMMDD>-<4 digits>`, unique per organization (numbering is per organization). */
  number: string;
  /** The sequence within the organization's day. */
  sequential_id: number;
  /** The creation date in the organization's time zone, `YYYY-MM-DD` (the number's date). */
  issuing_date: string;
  currency: string;
  status: CreditNoteStatus;
  credit_note_type: 'credit';
  reason: CreditNoteReason;
  description: string | null;
  items: CreditNoteItemDoc[];
  credit_amount_cents: Types.Decimal128;
  balance_amount_cents: Types.Decimal128;
  /** Invoices this note's balance went to: the idempotency markers of the balance decrements. */
  applied_invoice_ids: string[];
  applications: CreditNoteApplicationDoc[];
  finalized_at: Date | null;
  voided_at: Date | null;
}

export const creditNoteSchema = new Schema<CreditNoteDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    invoice_id: { type: String, required: true },
    number: { type: String, required: true },
    sequential_id: { type: Number, required: true },
    issuing_date: { type: String, required: true },
    currency: { type: String, required: true },
    status: { type: String, enum: ['draft', 'finalized', 'voided'], default: 'draft' },
    credit_note_type: { type: String, enum: ['credit'], default: 'credit' },
    reason: { type: String, enum: CREDIT_NOTE_REASONS, required: true },
    description: { type: String, default: null },
    items: {
      type: [
        {
          _id: { type: String, required: true },
          fee_id: { type: String, required: true },
          amount_cents: { type: Decimal128, required: true },
          released_amount_cents: { type: Decimal128, default: null },
        },
      ],
      default: [],
    },
    credit_amount_cents: { type: Decimal128, required: true },
    balance_amount_cents: { type: Decimal128, required: true },
    applied_invoice_ids: { type: [String], default: [] },
    applications: {
      type: [{ _id: false, invoice_id: String, amount_cents: Decimal128, applied_at: Date }],
      default: [],
    },
    finalized_at: { type: Date, default: null },
    voided_at: { type: Date, default: null },
  },
  collectionOptions<CreditNoteDoc>('credit_notes'),
);

creditNoteSchema.index({ organization_id: 1, number: 1 }, { unique: true });
creditNoteSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
// Application at invoice finalization: the customer's finalized notes in a currency, oldest first.
creditNoteSchema.index({ organization_id: 1, customer_id: 1, currency: 1, status: 1, created_at: 1 });
creditNoteSchema.index({ organization_id: 1, invoice_id: 1 });

// Billing reads these only for an owner whose flag says it may have some (src/db/read-flags.ts).
setsReadFlag(creditNoteSchema, { model: 'Customer', key: 'customer_id', flag: 'has_credit_notes' });
