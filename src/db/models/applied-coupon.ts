import { Schema, type Types } from 'mongoose';
import type { AppliedCouponStatus, CouponFrequency, CouponType } from '../../domain/coupons';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';
import { setsReadFlag } from '../read-flags';

/**
 * A customer's use of a coupon. Its terms are copied from the coupon when it is applied (with the
 * overrides given then), so a later edit of the coupon does not change what a customer was granted.
 * `created_at` is the order of application: coupons are used oldest first.
 */
export interface AppliedCouponDoc extends BaseDoc {
  organization_id: string;
  coupon_id: string;
  coupon_code: string;
  coupon_type: CouponType;
  customer_id: string;
  /** fixed_amount: minor units per invoice: Decimal(12,4); null for percentage. */
  amount_cents: Types.Decimal128 | null;
  amount_currency: string | null;
  /** percentage: 20 = 20 %; null for fixed_amount. */
  percentage_rate: Types.Decimal128 | null;
  frequency: CouponFrequency;
  frequency_duration: number | null;
  /** recurring: periods left (starts at frequency_duration); null for once and forever. */
  frequency_duration_remaining: number | null;
  status: AppliedCouponStatus;
  terminated_at: Date | null;
  /**
   * Unique across the collection. While an application of a coupon that is not reusable is
   * active, it holds the coupon's id, so a second application of that coupon (to anyone) is a
   * duplicate key, even when two arrive at once; otherwise (reusable, or terminated) it is the
   * application's own id.
   */
  exclusive_key: string;
}

export const appliedCouponSchema = new Schema<AppliedCouponDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    coupon_id: { type: String, required: true },
    coupon_code: { type: String, required: true },
    coupon_type: { type: String, required: true },
    customer_id: { type: String, required: true },
    amount_cents: { type: Decimal128, default: null },
    amount_currency: { type: String, default: null },
    percentage_rate: { type: Decimal128, default: null },
    frequency: { type: String, required: true },
    frequency_duration: { type: Number, default: null },
    frequency_duration_remaining: { type: Number, default: null },
    status: { type: String, enum: ['active', 'terminated'], default: 'active' },
    terminated_at: { type: Date, default: null },
    exclusive_key: { type: String, required: true },
  },
  collectionOptions<AppliedCouponDoc>('applied_coupons'),
);

appliedCouponSchema.index({ exclusive_key: 1 }, { unique: true });
appliedCouponSchema.index({ organization_id: 1, customer_id: 1, created_at: -1, _id: -1 });
appliedCouponSchema.index({ organization_id: 1, coupon_id: 1, status: 1 });

// Billing reads these only for an owner whose flag says it may have some (src/db/read-flags.ts).
setsReadFlag(appliedCouponSchema, { model: 'Customer', key: 'customer_id', flag: 'has_applied_coupons' });
