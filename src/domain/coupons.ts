import { Dec, nonNegative, roundCents, sum } from './money';

/**
 * Coupons (specification section 4, step 4 and "Coupon consumption"; billing-rules.md, Invoice
 * pipeline 4).
 *
 * Coupons reduce the PRE-TAX subtotal and come after taxes, so they never change a tax amount
 * (the specification's order, kept by billing-rules.md; today's Lago discounts before taxing).
 * Nothing here writes: the consumption is returned so that it is recorded only when the invoice
 * is finalized, and a draft that is refreshed or deleted has used no coupon.
 */

export type CouponType = 'fixed_amount' | 'percentage';
export type CouponFrequency = 'once' | 'recurring' | 'forever';
export type AppliedCouponStatus = 'active' | 'terminated';

export interface Coupon {
  id: string;
  code: string;
  coupon_type: CouponType;
  frequency: CouponFrequency;
  /** A coupon that is not reusable is terminated itself together with its (single) application. */
  reusable: boolean;
  /** fixed_amount: minor units, per invoice. */
  amount_cents?: Dec | null;
  amount_currency?: string | null;
  /** percentage: a percentage, 20 = 20 % (billing-rules.md, Numbers). */
  percentage_rate?: Dec | null;
  /** recurring: number of billing periods. */
  frequency_duration?: number | null;
}

/** The customer's use of a coupon; its own values, when set, override the coupon's (api-contract.md). */
export interface AppliedCoupon {
  id: string;
  coupon: Coupon;
  status: AppliedCouponStatus;
  /** When it was applied to the customer: coupons are used in this order, oldest first. */
  applied_at: Date;
  amount_cents?: Dec | null;
  amount_currency?: string | null;
  percentage_rate?: Dec | null;
  frequency_duration?: number | null;
  /** recurring: periods left before this invoice; absent before the first use (= frequency_duration). */
  frequency_duration_remaining?: number | null;
}

/** What to record on the applied coupon (and the coupon) when the invoice is finalized. */
export interface CouponConsumption {
  status: AppliedCouponStatus;
  /** recurring: periods left after this invoice; null for once and forever. */
  frequency_duration_remaining: number | null;
  /**
   * fixed_amount: the part of this invoice's amount that found nothing to discount. It is never
   * carried to a later invoice: a `once` coupon is terminated even with an amount left
   * (billing-rules.md, unlike Lago), and a recurring or forever amount is granted anew per period.
   * Null for percentage coupons.
   */
  fixed_amount_left_cents: Dec | null;
  /** True when the coupon itself must be terminated too (not reusable and now used up). */
  terminate_coupon: boolean;
}

export interface CouponApplication {
  applied_coupon_id: string;
  coupon_id: string;
  coupon_code: string;
  coupon_type: CouponType;
  frequency: CouponFrequency;
  /** What remained of the subtotal when this coupon's turn came. */
  base_amount_cents: Dec;
  /** The discount, whole cents. */
  amount_cents: Dec;
  consumption: CouponConsumption;
}

export type CouponSkipReason =
  /** Not active (terminated): the customer no longer has this coupon. */
  | 'not_active'
  /** A fixed amount in another currency than the invoice's: the API refuses it at apply time. */
  | 'currency_mismatch'
  /** Lacks the amount, currency, rate or duration its type and frequency need. */
  | 'invalid_terms'
  /** A recurring coupon with no period left (it should already have been terminated). */
  | 'exhausted'
  /** Earlier coupons left nothing it could discount: it is not used, so it is not consumed. */
  | 'nothing_to_discount';

export interface SkippedCoupon {
  applied_coupon_id: string;
  coupon_code: string;
  reason: CouponSkipReason;
}

export interface CouponsResult {
  coupons_amount_cents: Dec;
  /** The subtotal left after every coupon; never negative. */
  remaining_amount_cents: Dec;
  applications: CouponApplication[];
  skipped: SkippedCoupon[];
}

interface EffectiveTerms {
  amount_cents: Dec | null;
  amount_currency: string | null;
  percentage_rate: Dec | null;
  frequency_duration: number | null;
}

export function effectiveCouponTerms(applied: AppliedCoupon): EffectiveTerms {
  const { coupon } = applied;
  return {
    amount_cents: applied.amount_cents ?? coupon.amount_cents ?? null,
    amount_currency: applied.amount_currency ?? coupon.amount_currency ?? null,
    percentage_rate: applied.percentage_rate ?? coupon.percentage_rate ?? null,
    frequency_duration: applied.frequency_duration ?? coupon.frequency_duration ?? null,
  };
}

/** Oldest application first; equal dates keep the caller's order (Array.prototype.sort is stable). */
export function orderOfApplication(coupons: readonly AppliedCoupon[]): AppliedCoupon[] {
  return [...coupons].sort((a, b) => a.applied_at.getTime() - b.applied_at.getTime());
}

type Discount = { ok: true; amount: Dec; fixedLeft: Dec | null; periodsBefore: number | null } | { ok: false; reason: CouponSkipReason };

function discount(applied: AppliedCoupon, terms: EffectiveTerms, currency: string, remaining: Dec): Discount {
  const { coupon } = applied;
  let periodsBefore: number | null = null;
  if (coupon.frequency === 'recurring') {
    periodsBefore = applied.frequency_duration_remaining ?? terms.frequency_duration;
    if (periodsBefore === null) return { ok: false, reason: 'invalid_terms' };
    if (periodsBefore <= 0) return { ok: false, reason: 'exhausted' };
  }

  if (coupon.coupon_type === 'fixed_amount') {
    if (terms.amount_cents === null || terms.amount_currency === null) {
      return { ok: false, reason: 'invalid_terms' };
    }
    if (terms.amount_currency.toUpperCase() !== currency.toUpperCase()) {
      return { ok: false, reason: 'currency_mismatch' };
    }
    const amount = roundCents(terms.amount_cents);
    const credited = Dec.min(amount, remaining);
    return { ok: true, amount: credited, fixedLeft: amount.minus(credited), periodsBefore };
  }

  if (terms.percentage_rate === null) return { ok: false, reason: 'invalid_terms' };
  // Capped because a rate above 100 would otherwise take more than is left.
  const credited = Dec.min(roundCents(remaining.times(terms.percentage_rate).div(100)), remaining);
  return { ok: true, amount: credited, fixedLeft: null, periodsBefore };
}

function consumption(applied: AppliedCoupon, fixedLeft: Dec | null, periodsBefore: number | null): CouponConsumption {
  let status: AppliedCouponStatus = 'active';
  let frequency_duration_remaining: number | null = null;
  switch (applied.coupon.frequency) {
    case 'once':
      status = 'terminated';
      break;
    case 'recurring':
      frequency_duration_remaining = (periodsBefore ?? 1) - 1;
      if (frequency_duration_remaining <= 0) status = 'terminated';
      break;
    case 'forever':
      break;
  }
  return {
    status,
    frequency_duration_remaining,
    fixed_amount_left_cents: fixedLeft,
    terminate_coupon: status === 'terminated' && !applied.coupon.reusable,
  };
}

/**
 * Applies the customer's coupons to a pre-tax subtotal (whole cents). Each coupon discounts what
 * the previous ones left: a fixed amount `min(amount, remaining)`, a percentage
 * `remaining * rate / 100` rounded half up to whole cents. Their total therefore never exceeds the
 * subtotal. A coupon that would discount nothing is skipped and not consumed, so a `once` coupon is
 * not burnt on an invoice with nothing left to discount.
 */
export function applyCoupons(input: { currency: string; subtotal: Dec; applied_coupons: readonly AppliedCoupon[] }): CouponsResult {
  // The subtotal is an invoice-level amount: whole cents, never negative.
  let remaining = nonNegative(roundCents(input.subtotal));
  const applications: CouponApplication[] = [];
  const skipped: SkippedCoupon[] = [];

  for (const applied of orderOfApplication(input.applied_coupons)) {
    const skip = (reason: CouponSkipReason): void => {
      skipped.push({ applied_coupon_id: applied.id, coupon_code: applied.coupon.code, reason });
    };
    if (applied.status !== 'active') {
      skip('not_active');
      continue;
    }
    const result = discount(applied, effectiveCouponTerms(applied), input.currency, remaining);
    if (!result.ok) {
      skip(result.reason);
      continue;
    }
    if (result.amount.lte(0)) {
      skip('nothing_to_discount');
      continue;
    }
    applications.push({
      applied_coupon_id: applied.id,
      coupon_id: applied.coupon.id,
      coupon_code: applied.coupon.code,
      coupon_type: applied.coupon.coupon_type,
      frequency: applied.coupon.frequency,
      base_amount_cents: remaining,
      amount_cents: result.amount,
      consumption: consumption(applied, result.fixedLeft, result.periodsBefore),
    });
    remaining = remaining.minus(result.amount);
  }

  return {
    coupons_amount_cents: sum(applications.map((a) => a.amount_cents)),
    remaining_amount_cents: remaining,
    applications,
    skipped,
  };
}
