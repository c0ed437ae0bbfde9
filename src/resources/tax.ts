// The tax resource and the applied tax (a tax's link to a customer, plan, charge or add-on) as the
// API returns them.
import { z } from 'zod';
import { TAXABLE_TYPES, type AppliedTaxDoc } from '../db/models/applied-tax';
import type { TaxDoc } from '../db/models/tax';
import { fromDecimal128 } from '../db/decimal';
import { iso, nullableTimestamp, timestamp } from './format';

export const taxResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    rate: z.string().describe('a plain decimal fraction, e.g. "0.2"'),
    applied_to_organization: z.boolean(),
    description: z.string().nullable(),
    category: z.string().nullable(),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Tax' });

export type TaxResource = z.output<typeof taxResource>;

export function toTaxResource(doc: TaxDoc): TaxResource {
  const value = fromDecimal128(doc.rate);
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    // Plain decimal text, normalized: "0.20" and 0.2 are both "0.2".
    rate: value === null || value.isZero() ? '0' : value.toFixed(),
    applied_to_organization: doc.applied_to_organization,
    description: doc.description ?? null,
    category: doc.category ?? null,
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

export const appliedTaxResource = z
  .object({
    id: z.string(),
    tax_id: z.string(),
    tax_code: z.string(),
    taxable_type: z.enum(TAXABLE_TYPES),
    taxable_id: z.string(),
    created_at: timestamp,
  })
  .meta({ id: 'AppliedTax' });

export type AppliedTaxResource = z.output<typeof appliedTaxResource>;

/** The link carries the tax's id only; its code is read with the tax. */
export function toAppliedTaxResource(doc: AppliedTaxDoc, taxCode: string): AppliedTaxResource {
  return {
    id: doc._id,
    tax_id: doc.tax_id,
    tax_code: taxCode,
    taxable_type: doc.taxable_type,
    taxable_id: doc.taxable_id,
    created_at: iso(doc.created_at),
  };
}
