import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

/** A progressive billing threshold of a plan: usage above it is invoiced before the period ends. */
export interface UsageThresholdDoc extends BaseDoc {
  organization_id: string;
  plan_id: string;
  /** Minor units of the plan's currency, > 0: Decimal(12,4). */
  amount_cents: Types.Decimal128;
  /** A recurring threshold repeats every `amount_cents` after the last fixed one. */
  recurring: boolean;
  threshold_display_name: string | null;
  /**
   * What must be unique per plan: "recurring" (at most one recurring threshold) or the amount of a
   * fixed one ("amount:100.0000"), so that the unique index below, not a read-then-write, keeps
   * concurrent creations apart.
   */
  uniqueness_key: string;
}

export const usageThresholdSchema = new Schema<UsageThresholdDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    plan_id: { type: String, required: true },
    amount_cents: { type: Decimal128, required: true },
    recurring: { type: Boolean, default: false },
    threshold_display_name: { type: String, default: null },
    uniqueness_key: { type: String, required: true },
  },
  collectionOptions<UsageThresholdDoc>('usage_thresholds'),
);

usageThresholdSchema.index({ plan_id: 1, uniqueness_key: 1 }, { unique: true });
usageThresholdSchema.index({ organization_id: 1, plan_id: 1, created_at: -1, _id: -1 });
