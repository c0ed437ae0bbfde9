import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

/**
 * A plan's value for a feature. The value is stored as JSON text: a custom value may be any JSON
 * object, whose keys (a leading `$`, dots) MongoDB would refuse or misread as a document.
 */
export interface EntitlementDoc extends BaseDoc {
  organization_id: string;
  plan_id: string;
  feature_id: string;
  /** JSON of the value, validated against the feature's type (src/domain/entitlements.ts). */
  value_json: string;
}

export const entitlementSchema = new Schema<EntitlementDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    plan_id: { type: String, required: true },
    feature_id: { type: String, required: true },
    value_json: { type: String, required: true },
  },
  collectionOptions<EntitlementDoc>('entitlements'),
);

// One value per plan and feature; its prefix lists a plan's entitlements (the cache's load).
entitlementSchema.index({ organization_id: 1, plan_id: 1, feature_id: 1 }, { unique: true });
// "Which plans use this feature?" (deleting a feature is refused while a live plan does).
entitlementSchema.index({ organization_id: 1, feature_id: 1 });
entitlementSchema.index({ organization_id: 1, created_at: -1, _id: -1 });

/**
 * The organization's entitlements stamp (`_id` = organization id): every write to its features or
 * entitlements increments `version` after the write. Each API process caches a plan's
 * entitlements under the version it read before loading them, and serves the entry only while
 * the stamp still has that version (src/entitlements/view.ts).
 */
export interface EntitlementStampDoc {
  _id: string;
  version: number;
}

export const entitlementStampSchema = new Schema<EntitlementStampDoc>(
  { _id: { type: String, required: true }, version: { type: Number, default: 0 } },
  { collection: 'entitlement_stamps', versionKey: false, autoIndex: false, autoCreate: true },
);
