import { Schema, type Types } from 'mongoose';
import type { CouponFrequency, CouponType } from '../../domain/coupons';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export const COUPON_TYPES = ['fixed_amount', 'percentage'] as const satisfies readonly CouponType[];
export const COUPON_FREQUENCIES = ['once', 'recurring', 'forever'] as const satisfies readonly CouponFrequency[];
export type CouponStatus = 'active' | 'terminated';

export interface CouponDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  description: string | null;
  coupon_type: CouponType;
  /** fixed_amount: minor units of amount_currency, per invoice: Decimal(12,4). Null for percentage. */
  amount_cents: Types.Decimal128 | null;
  amount_currency: string | null;
  /** percentage: 20 = 20 %, 0 < rate <= 100. Null for fixed_amount. */
  percentage_rate: Types.Decimal128 | null;
  frequency: CouponFrequency;
  /** recurring: number of billing periods (>= 1); null otherwise. */
  frequency_duration: number | null;
  reusable: boolean;
  expiration_at: Date | null;
  status: CouponStatus;
  terminated_at: Date | null;
  /** Soft delete; the API terminates coupons instead (DELETE sets status terminated). */
  deleted_at: Date | null;
}

export const couponSchema = new Schema<CouponDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    coupon_type: { type: String, enum: COUPON_TYPES, required: true },
    amount_cents: { type: Decimal128, default: null },
    amount_currency: { type: String, default: null },
    percentage_rate: { type: Decimal128, default: null },
    frequency: { type: String, enum: COUPON_FREQUENCIES, required: true },
    frequency_duration: { type: Number, default: null },
    reusable: { type: Boolean, default: true },
    expiration_at: { type: Date, default: null },
    status: { type: String, enum: ['active', 'terminated'], default: 'active' },
    terminated_at: { type: Date, default: null },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<CouponDoc>('coupons'),
);

// One active coupon per code and organization. A terminated coupon can never be applied again, so
// its code is free: terminated_at (like deleted_at) is part of the key, null for every active one.
couponSchema.index({ organization_id: 1, code: 1, terminated_at: 1, deleted_at: 1 }, { unique: true });
couponSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
