// The feature resource (something a plan may grant) and the entitlement resource (a plan's value
// for a feature) as the API returns them, and what a subscription's customer may use.
import { z } from 'zod';
import type { EntitlementDoc } from '../db/models/entitlement';
import type { FeatureDoc } from '../db/models/feature';
import { FEATURE_TYPES, type EntitlementValue } from '../domain/entitlements';
import { iso, nullableTimestamp, timestamp } from './format';

export const featureResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    feature_type: z.enum(FEATURE_TYPES),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Feature' });

export type FeatureResource = z.output<typeof featureResource>;

export function toFeatureResource(doc: FeatureDoc): FeatureResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    description: doc.description ?? null,
    feature_type: doc.feature_type,
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

/** boolean: true/false; quantity: a whole number >= 0; custom: a string, JSON object or array. */
export const entitlementValue = z
  .union([z.boolean(), z.number(), z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())])
  .describe('boolean feature: true or false; quantity: a whole number >= 0; custom: a string, a JSON object or a JSON array');

export const entitlementResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    plan_id: z.string(),
    feature_id: z.string(),
    feature_code: z.string(),
    feature_name: z.string(),
    feature_type: z.enum(FEATURE_TYPES),
    value: entitlementValue,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Entitlement' });

export type EntitlementResource = z.output<typeof entitlementResource>;

export function toEntitlementResource(doc: EntitlementDoc, feature: FeatureDoc): EntitlementResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    plan_id: doc.plan_id,
    feature_id: feature._id,
    feature_code: feature.code,
    feature_name: feature.name,
    feature_type: feature.feature_type,
    value: JSON.parse(doc.value_json) as EntitlementValue,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

/** One thing the customer of a subscription may use: the feature and its plan's value. */
export const grantedEntitlement = z.object({
  feature_id: z.string(),
  feature_code: z.string(),
  feature_name: z.string(),
  feature_type: z.enum(FEATURE_TYPES),
  value: entitlementValue,
});

export type GrantedEntitlement = z.output<typeof grantedEntitlement>;

export const subscriptionEntitlementsResource = z
  .object({
    subscription_id: z.string(),
    external_id: z.string(),
    status: z.string().describe("only an active subscription grants its plan's entitlements; any other has none"),
    plan_id: z.string().describe('the plan the subscription is on now (a pending downgrade is not it yet)'),
    entitlements: z.array(grantedEntitlement).describe('ordered by feature_code'),
  })
  .meta({ id: 'SubscriptionEntitlements' });

export type SubscriptionEntitlementsResource = z.output<typeof subscriptionEntitlementsResource>;
