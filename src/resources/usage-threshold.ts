// The usage threshold resource (progressive billing of a plan) as the API returns it.
import { z } from 'zod';
import type { UsageThresholdDoc } from '../db/models/usage-threshold';
import { d4, decimal4, iso, timestamp } from './format';

export const usageThresholdResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    plan_id: z.string(),
    amount_cents: decimal4,
    recurring: z.boolean(),
    threshold_display_name: z.string().nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'UsageThreshold' });

export type UsageThresholdResource = z.output<typeof usageThresholdResource>;

export function toUsageThresholdResource(doc: UsageThresholdDoc): UsageThresholdResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    plan_id: doc.plan_id,
    amount_cents: d4(doc.amount_cents),
    recurring: doc.recurring,
    threshold_display_name: doc.threshold_display_name ?? null,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
