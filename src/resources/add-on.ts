// The add-on resource (a one-off charge of the catalog) as the API returns it.
import { z } from 'zod';
import type { AddOnDoc } from '../db/models/add-on';
import { d4, decimal4, iso, nullableTimestamp, timestamp } from './format';

export const addOnResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    amount_cents: decimal4,
    amount_currency: z.string(),
    description: z.string().nullable(),
    invoice_display_name: z.string().nullable(),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'AddOn' });

export type AddOnResource = z.output<typeof addOnResource>;

export function toAddOnResource(doc: AddOnDoc): AddOnResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    amount_cents: d4(doc.amount_cents),
    amount_currency: doc.amount_currency,
    description: doc.description ?? null,
    invoice_display_name: doc.invoice_display_name ?? null,
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
