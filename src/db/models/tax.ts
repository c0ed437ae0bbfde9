import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';
import { setsReadFlag } from '../read-flags';

export interface TaxDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  /** A fraction, 0 to 1 with at most 4 decimals: 0.0875 is 8.75 % (billing-rules.md, Numbers). */
  rate: Types.Decimal128;
  /** The organization's default tax: applies to fees for which no more specific level has taxes. */
  applied_to_organization: boolean;
  description: string | null;
  category: string | null;
  /** Soft delete: set once, never cleared. */
  deleted_at: Date | null;
}

export const taxSchema = new Schema<TaxDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    rate: { type: Decimal128, required: true },
    applied_to_organization: { type: Boolean, default: false },
    description: { type: String, default: null },
    category: { type: String, default: null },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<TaxDoc>('taxes'),
);

// One live tax per code and organization; a deleted tax's code can be used again.
taxSchema.index({ organization_id: 1, code: 1, deleted_at: 1 }, { unique: true });
taxSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
// Invoice assembly reads the organization-level taxes.
taxSchema.index({ organization_id: 1, applied_to_organization: 1, deleted_at: 1 });

// Billing reads these only for an owner whose flag says it may have some (src/db/read-flags.ts).
setsReadFlag(taxSchema, { model: 'Organization', key: 'organization_id', flag: 'has_taxes' });
