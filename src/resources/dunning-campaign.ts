// The dunning campaign resource as the API returns it.
import { z } from 'zod';
import type { DunningCampaignDoc } from '../db/models/dunning-campaign';
import { iso, nullableTimestamp, timestamp } from './format';

export const dunningCampaignResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    max_attempts: z.number().int(),
    days_between_attempts: z.number().int(),
    thresholds: z.array(z.object({ currency: z.string(), amount_cents: z.number().int().describe('minor units') })),
    applied_to_organization: z.boolean(),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'DunningCampaign' });

export type DunningCampaignResource = z.output<typeof dunningCampaignResource>;

export function toDunningCampaignResource(doc: DunningCampaignDoc): DunningCampaignResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    description: doc.description ?? null,
    max_attempts: doc.max_attempts,
    days_between_attempts: doc.days_between_attempts,
    thresholds: (doc.thresholds ?? []).map((t) => ({ currency: t.currency, amount_cents: t.amount_cents })),
    applied_to_organization: doc.applied_to_organization,
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
