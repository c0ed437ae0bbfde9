import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export const COMMITMENT_TYPES = ['minimum_commitment'] as const;
export type CommitmentType = (typeof COMMITMENT_TYPES)[number];

/** A plan's minimum spend per billing period (specification: Commitment). One per plan. */
export interface CommitmentDoc extends BaseDoc {
  organization_id: string;
  plan_id: string;
  commitment_type: CommitmentType;
  /** Minor units of the plan's currency for a whole period: Decimal(12,4). */
  amount_cents: Types.Decimal128;
  invoice_display_name: string | null;
}

export const commitmentSchema = new Schema<CommitmentDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    plan_id: { type: String, required: true },
    commitment_type: { type: String, enum: COMMITMENT_TYPES, default: 'minimum_commitment' },
    amount_cents: { type: Decimal128, required: true },
    invoice_display_name: { type: String, default: null },
  },
  collectionOptions<CommitmentDoc>('commitments'),
);

// One commitment per plan: two concurrent creations cannot both succeed. Deleting one removes the
// document, so the plan may get a new one.
commitmentSchema.index({ plan_id: 1 }, { unique: true });
commitmentSchema.index({ organization_id: 1, plan_id: 1 });
