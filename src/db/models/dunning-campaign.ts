import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

export interface DunningThreshold {
  currency: string;
  /** Minor units: the overdue total at which a payment request starts. */
  amount_cents: number;
}

/** A dunning campaign (api-contract.md, Dunning campaigns and payment requests). */
export interface DunningCampaignDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  description: string | null;
  max_attempts: number;
  days_between_attempts: number;
  thresholds: DunningThreshold[];
  /** The organization's default campaign (at most one has it). */
  applied_to_organization: boolean;
  deleted_at: Date | null;
}

export const dunningCampaignSchema = new Schema<DunningCampaignDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    max_attempts: { type: Number, required: true },
    days_between_attempts: { type: Number, required: true },
    thresholds: { type: [{ _id: false, currency: String, amount_cents: Number }], default: () => [] },
    applied_to_organization: { type: Boolean, default: false },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<DunningCampaignDoc>('dunning_campaigns'),
);

// One live campaign per code (deleted_at in the key, as customers' external_id: a deleted code can be used again).
dunningCampaignSchema.index({ organization_id: 1, code: 1, deleted_at: 1 }, { unique: true });
dunningCampaignSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
