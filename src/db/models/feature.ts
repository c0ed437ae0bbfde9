import { Schema } from 'mongoose';
import { FEATURE_TYPES, type FeatureType } from '../../domain/entitlements';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

/** Something a plan may grant (a switch, a number of seats, a custom setting): see entitlement.ts. */
export interface FeatureDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  description: string | null;
  /** Fixed at creation: the plans' values of the feature were validated against it. */
  feature_type: FeatureType;
  /** Soft delete: set once, never cleared. */
  deleted_at: Date | null;
}

export const featureSchema = new Schema<FeatureDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    feature_type: { type: String, enum: FEATURE_TYPES, required: true },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<FeatureDoc>('features'),
);

// One live feature per code and organization; deleted_at is part of the key (no partial indexes on
// the MongoDB stand-in) so that a deleted feature's code can be used again, as for plans.
featureSchema.index({ organization_id: 1, code: 1, deleted_at: 1 }, { unique: true });
featureSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
