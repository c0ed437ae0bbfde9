// The commitment resource (a plan's minimum spend) as the API returns it.
import { z } from 'zod';
import { COMMITMENT_TYPES, type CommitmentDoc } from '../db/models/commitment';
import { d4, decimal4, iso, timestamp } from './format';

export const commitmentResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    plan_id: z.string(),
    commitment_type: z.enum(COMMITMENT_TYPES),
    amount_cents: decimal4,
    invoice_display_name: z.string().nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Commitment' });

export type CommitmentResource = z.output<typeof commitmentResource>;

export function toCommitmentResource(doc: CommitmentDoc): CommitmentResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    plan_id: doc.plan_id,
    commitment_type: doc.commitment_type,
    amount_cents: d4(doc.amount_cents),
    invoice_display_name: doc.invoice_display_name ?? null,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
