import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export interface AddOnDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  /** The default unit price, in minor units of amount_currency: Decimal(12,4). */
  amount_cents: Types.Decimal128;
  amount_currency: string;
  description: string | null;
  invoice_display_name: string | null;
  /** Soft delete: set once, never cleared. */
  deleted_at: Date | null;
}

export const addOnSchema = new Schema<AddOnDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    amount_cents: { type: Decimal128, required: true },
    amount_currency: { type: String, required: true },
    description: { type: String, default: null },
    invoice_display_name: { type: String, default: null },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<AddOnDoc>('add_ons'),
);

// One live add-on per code and organization; a deleted add-on's code can be used again.
addOnSchema.index({ organization_id: 1, code: 1, deleted_at: 1 }, { unique: true });
addOnSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
