import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

export const TAXABLE_TYPES = ['customer', 'plan', 'charge', 'add_on'] as const;
export type TaxableType = (typeof TAXABLE_TYPES)[number];

/**
 * A tax linked to a customer, plan, charge or add-on (the specification's AppliedTax, at the
 * catalog level; the amounts computed per fee live with the fees). Removing the link deletes it.
 */
export interface AppliedTaxDoc extends BaseDoc {
  organization_id: string;
  tax_id: string;
  taxable_type: TaxableType;
  /** Always the taxable's id (a customer given by external_id, or a plan by code, is resolved). */
  taxable_id: string;
}

export const appliedTaxSchema = new Schema<AppliedTaxDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    tax_id: { type: String, required: true },
    taxable_type: { type: String, enum: TAXABLE_TYPES, required: true },
    taxable_id: { type: String, required: true },
  },
  collectionOptions<AppliedTaxDoc>('applied_taxes'),
);

// A tax is applied to a taxable at most once (409 on the second time).
appliedTaxSchema.index({ tax_id: 1, taxable_type: 1, taxable_id: 1 }, { unique: true });
// Invoice assembly reads "the taxes of this customer / plan / charge / add-on".
appliedTaxSchema.index({ organization_id: 1, taxable_type: 1, taxable_id: 1 });
appliedTaxSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
