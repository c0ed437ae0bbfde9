// The coupon resource and the applied coupon (a coupon given to a customer, with the terms it got)
// as the API returns them.
import { z } from 'zod';
import type { AppliedCouponDoc } from '../db/models/applied-coupon';
import { COUPON_FREQUENCIES, COUPON_TYPES, type CouponDoc } from '../db/models/coupon';
import { fromDecimal128 } from '../db/decimal';
import { d4OrNull, decimal4, iso, nullableTimestamp, timestamp } from './format';

/** A percentage as plain decimal text ("12.5"), as api-contract.md serializes rates. */
function plainDecimal(value: unknown): string | null {
  const d = fromDecimal128(value);
  return d === null ? null : d.toFixed();
}

export const couponResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    coupon_type: z.enum(COUPON_TYPES),
    amount_cents: decimal4.nullable(),
    amount_currency: z.string().nullable(),
    percentage_rate: z.string().nullable().describe('plain decimal text, "12.5" = 12.5 %'),
    frequency: z.enum(COUPON_FREQUENCIES),
    frequency_duration: z.number().int().nullable(),
    reusable: z.boolean(),
    expiration_at: nullableTimestamp,
    status: z.enum(['active', 'terminated']),
    terminated_at: nullableTimestamp,
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Coupon' });

export type CouponResource = z.output<typeof couponResource>;

export const appliedCouponResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    coupon_id: z.string(),
    coupon_code: z.string(),
    coupon_type: z.enum(COUPON_TYPES),
    customer_id: z.string(),
    amount_cents: decimal4.nullable(),
    amount_currency: z.string().nullable(),
    percentage_rate: z.string().nullable(),
    frequency: z.enum(COUPON_FREQUENCIES),
    frequency_duration: z.number().int().nullable(),
    frequency_duration_remaining: z.number().int().nullable(),
    status: z.enum(['active', 'terminated']),
    terminated_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'AppliedCoupon' });

export type AppliedCouponResource = z.output<typeof appliedCouponResource>;

export function toCouponResource(doc: CouponDoc): CouponResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    description: doc.description ?? null,
    coupon_type: doc.coupon_type,
    amount_cents: d4OrNull(doc.amount_cents),
    amount_currency: doc.amount_currency ?? null,
    percentage_rate: plainDecimal(doc.percentage_rate),
    frequency: doc.frequency,
    frequency_duration: doc.frequency_duration ?? null,
    reusable: doc.reusable,
    expiration_at: iso(doc.expiration_at),
    status: doc.status,
    terminated_at: iso(doc.terminated_at),
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

export function toAppliedCouponResource(doc: AppliedCouponDoc): AppliedCouponResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    coupon_id: doc.coupon_id,
    coupon_code: doc.coupon_code,
    coupon_type: doc.coupon_type,
    customer_id: doc.customer_id,
    amount_cents: d4OrNull(doc.amount_cents),
    amount_currency: doc.amount_currency ?? null,
    percentage_rate: plainDecimal(doc.percentage_rate),
    frequency: doc.frequency,
    frequency_duration: doc.frequency_duration ?? null,
    frequency_duration_remaining: doc.frequency_duration_remaining ?? null,
    status: doc.status,
    terminated_at: iso(doc.terminated_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
