import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AppliedCoupon, type Coupon, applyCoupons, effectiveCouponTerms, orderOfApplication } from '../../src/domain/coupons';
import { dec, sum } from '../../src/domain/money';

let seq = 0;
function coupon(terms: Partial<Coupon> & Pick<Coupon, 'coupon_type'>): Coupon {
  seq += 1;
  return { id: `coupon-${seq}`, code: `C${seq}`, frequency: 'forever', reusable: true, ...terms };
}
const fixed = (cents: number, extra: Partial<Coupon> = {}): Coupon =>
  coupon({ coupon_type: 'fixed_amount', amount_cents: dec(cents), amount_currency: 'USD', ...extra });
const percent = (rate: string, extra: Partial<Coupon> = {}): Coupon =>
  coupon({ coupon_type: 'percentage', percentage_rate: dec(rate), ...extra });

function applied(c: Coupon, day: number, extra: Partial<AppliedCoupon> = {}): AppliedCoupon {
  return { id: `applied-${c.id}`, coupon: c, status: 'active', applied_at: new Date(Date.UTC(2026, 0, day)), ...extra };
}

const run = (subtotal: number | string, coupons: AppliedCoupon[], currency = 'USD') =>
  applyCoupons({ currency, subtotal: dec(subtotal), applied_coupons: coupons });

describe('applyCoupons: amounts', () => {
  const cases: { name: string; subtotal: number; coupons: () => AppliedCoupon[]; amounts: string[]; total: string }[] = [
    { name: 'fixed below the subtotal', subtotal: 10_000, coupons: () => [applied(fixed(3000), 1)], amounts: ['3000'], total: '3000' },
    { name: 'fixed capped at the subtotal', subtotal: 500, coupons: () => [applied(fixed(1000), 1)], amounts: ['500'], total: '500' },
    { name: 'percentage of the subtotal', subtotal: 10_000, coupons: () => [applied(percent('20'), 1)], amounts: ['2000'], total: '2000' },
    // 333 x 15 % = 49.95 -> 50
    { name: 'percentage rounded to whole cents', subtotal: 333, coupons: () => [applied(percent('15'), 1)], amounts: ['50'], total: '50' },
    // 125 x 10 % = 12.5 -> 13 (a half, rounded up)
    { name: 'percentage half rounds up', subtotal: 125, coupons: () => [applied(percent('10'), 1)], amounts: ['13'], total: '13' },
    // 10000 - 2000 = 8000 left; 10 % of what remains = 800, not 10 % of the subtotal
    {
      name: 'percentage after fixed takes what remains',
      subtotal: 10_000,
      coupons: () => [applied(fixed(2000), 1), applied(percent('10'), 2)],
      amounts: ['2000', '800'],
      total: '2800',
    },
    // 10 % first = 1000, then the fixed 2000 of the 9000 left
    {
      name: 'fixed after percentage',
      subtotal: 10_000,
      coupons: () => [applied(percent('10'), 1), applied(fixed(2000), 2)],
      amounts: ['1000', '2000'],
      total: '3000',
    },
    {
      name: 'two fixed, the second capped',
      subtotal: 5000,
      coupons: () => [applied(fixed(3000), 1), applied(fixed(3000), 2)],
      amounts: ['3000', '2000'],
      total: '5000',
    },
    {
      name: '100 % percentage takes everything',
      subtotal: 4321,
      coupons: () => [applied(percent('100'), 1)],
      amounts: ['4321'],
      total: '4321',
    },
    { name: 'percentage above 100 capped', subtotal: 1000, coupons: () => [applied(percent('150'), 1)], amounts: ['1000'], total: '1000' },
    {
      name: 'fractional fixed amount rounded to whole cents',
      subtotal: 1000,
      coupons: () => [applied(fixed(0, { amount_cents: dec('99.5') }), 1)],
      amounts: ['100'],
      total: '100',
    },
  ];
  it.each(cases)('$name', ({ subtotal, coupons, amounts, total }) => {
    const result = run(subtotal, coupons());
    expect(result.applications.map((a) => a.amount_cents.toString())).toEqual(amounts);
    expect(result.coupons_amount_cents.toString()).toBe(total);
    expect(result.remaining_amount_cents.toString()).toBe(dec(subtotal).minus(total).toString());
  });

  it('records what remained when each coupon came', () => {
    const result = run(10_000, [applied(fixed(2000), 1), applied(percent('10'), 2)]);
    expect(result.applications.map((a) => a.base_amount_cents.toString())).toEqual(['10000', '8000']);
  });

  it('applies coupons in order of application, not in the order given', () => {
    const pct = applied(percent('10'), 5);
    const fix = applied(fixed(2000), 3);
    const result = run(10_000, [pct, fix]);
    expect(result.applications.map((a) => a.applied_coupon_id)).toEqual([fix.id, pct.id]);
    expect(result.coupons_amount_cents.toString()).toBe('2800');
    expect(orderOfApplication([pct, fix]).map((a) => a.id)).toEqual([fix.id, pct.id]);
  });

  it('keeps the given order for coupons applied at the same instant', () => {
    const a = applied(percent('50'), 1);
    const b = applied(fixed(1000), 1);
    expect(run(10_000, [a, b]).applications.map((x) => x.amount_cents.toString())).toEqual(['5000', '1000']);
    expect(run(10_000, [b, a]).applications.map((x) => x.amount_cents.toString())).toEqual(['1000', '4500']);
  });

  it('uses the applied coupon overrides over the coupon values', () => {
    const c = fixed(1000, { frequency: 'recurring', frequency_duration: 12 });
    const over = applied(c, 1, { amount_cents: dec(2500), amount_currency: 'EUR', frequency_duration: 2 });
    expect(effectiveCouponTerms(over)).toEqual({
      amount_cents: dec(2500),
      amount_currency: 'EUR',
      percentage_rate: null,
      frequency_duration: 2,
    });
    const result = run(10_000, [over], 'EUR');
    expect(result.applications[0]?.amount_cents.toString()).toBe('2500');
    expect(result.applications[0]?.consumption.frequency_duration_remaining).toBe(1);

    const rate = run(10_000, [applied(percent('10'), 1, { percentage_rate: dec('25') })]);
    expect(rate.coupons_amount_cents.toString()).toBe('2500');
  });
});

describe('applyCoupons: coupons that do not apply', () => {
  it('skips a fixed coupon in another currency, but a percentage applies in any currency', () => {
    const eur = applied(fixed(1000, { amount_currency: 'EUR' }), 1);
    const pct = applied(percent('10'), 2);
    const result = run(10_000, [eur, pct]);
    expect(result.skipped).toEqual([{ applied_coupon_id: eur.id, coupon_code: eur.coupon.code, reason: 'currency_mismatch' }]);
    expect(result.applications.map((a) => a.applied_coupon_id)).toEqual([pct.id]);
    expect(result.coupons_amount_cents.toString()).toBe('1000');
  });

  it('compares currencies case-insensitively', () => {
    expect(run(10_000, [applied(fixed(1000, { amount_currency: 'usd' }), 1)]).coupons_amount_cents.toString()).toBe('1000');
  });

  it('skips terminated applied coupons', () => {
    const gone = applied(fixed(1000), 1, { status: 'terminated' });
    const result = run(10_000, [gone]);
    expect(result.skipped.map((s) => s.reason)).toEqual(['not_active']);
    expect(result.coupons_amount_cents.toString()).toBe('0');
  });

  it('does not use (and so does not consume) a coupon when nothing is left to discount', () => {
    const first = applied(fixed(5000), 1);
    const once = applied(percent('10', { frequency: 'once' }), 2);
    const result = run(5000, [first, once]);
    expect(result.applications.map((a) => a.applied_coupon_id)).toEqual([first.id]);
    expect(result.skipped).toEqual([{ applied_coupon_id: once.id, coupon_code: once.coupon.code, reason: 'nothing_to_discount' }]);
  });

  it('does not use a coupon on a zero subtotal', () => {
    const result = run(0, [applied(fixed(1000, { frequency: 'once' }), 1)]);
    expect(result.applications).toEqual([]);
    expect(result.skipped.map((s) => s.reason)).toEqual(['nothing_to_discount']);
  });

  const invalid: { name: string; c: () => AppliedCoupon; reason: string }[] = [
    {
      name: 'fixed without amount',
      c: () => applied(coupon({ coupon_type: 'fixed_amount', amount_currency: 'USD' }), 1),
      reason: 'invalid_terms',
    },
    {
      name: 'fixed without currency',
      c: () => applied(coupon({ coupon_type: 'fixed_amount', amount_cents: dec(10) }), 1),
      reason: 'invalid_terms',
    },
    { name: 'percentage without rate', c: () => applied(coupon({ coupon_type: 'percentage' }), 1), reason: 'invalid_terms' },
    { name: 'recurring without duration', c: () => applied(percent('10', { frequency: 'recurring' }), 1), reason: 'invalid_terms' },
    {
      name: 'recurring with no period left',
      c: () => applied(percent('10', { frequency: 'recurring', frequency_duration: 3 }), 1, { frequency_duration_remaining: 0 }),
      reason: 'exhausted',
    },
  ];
  it.each(invalid)('skips $name', ({ c, reason }) => {
    const result = run(10_000, [c()]);
    expect(result.skipped.map((s) => s.reason)).toEqual([reason]);
    expect(result.applications).toEqual([]);
    expect(result.coupons_amount_cents.toString()).toBe('0');
  });
});

describe('applyCoupons: consumption to record at finalization', () => {
  const cases: {
    name: string;
    c: () => AppliedCoupon;
    subtotal: number;
    status: string;
    remaining: number | null;
    left: string | null;
    terminateCoupon: boolean;
  }[] = [
    {
      name: 'once percentage is terminated',
      c: () => applied(percent('10', { frequency: 'once' }), 1),
      subtotal: 10_000,
      status: 'terminated',
      remaining: null,
      left: null,
      terminateCoupon: false,
    },
    // Terminated even with 6000 of its amount left (billing-rules.md, unlike Lago).
    {
      name: 'once fixed is terminated with an amount left',
      c: () => applied(fixed(10_000, { frequency: 'once' }), 1),
      subtotal: 4000,
      status: 'terminated',
      remaining: null,
      left: '6000',
      terminateCoupon: false,
    },
    {
      name: 'once fixed fully used',
      c: () => applied(fixed(1000, { frequency: 'once' }), 1),
      subtotal: 4000,
      status: 'terminated',
      remaining: null,
      left: '0',
      terminateCoupon: false,
    },
    {
      name: 'once, not reusable: the coupon is terminated too',
      c: () => applied(fixed(1000, { frequency: 'once', reusable: false }), 1),
      subtotal: 4000,
      status: 'terminated',
      remaining: null,
      left: '0',
      terminateCoupon: true,
    },
    {
      name: 'recurring first use counts down from frequency_duration',
      c: () => applied(percent('10', { frequency: 'recurring', frequency_duration: 3 }), 1),
      subtotal: 4000,
      status: 'active',
      remaining: 2,
      left: null,
      terminateCoupon: false,
    },
    {
      name: 'recurring counts down from what remains',
      c: () => applied(percent('10', { frequency: 'recurring', frequency_duration: 3 }), 1, { frequency_duration_remaining: 2 }),
      subtotal: 4000,
      status: 'active',
      remaining: 1,
      left: null,
      terminateCoupon: false,
    },
    {
      name: 'recurring last period is terminated',
      c: () => applied(fixed(500, { frequency: 'recurring', frequency_duration: 3 }), 1, { frequency_duration_remaining: 1 }),
      subtotal: 4000,
      status: 'terminated',
      remaining: 0,
      left: '0',
      terminateCoupon: false,
    },
    {
      name: 'recurring last period, not reusable',
      c: () => applied(fixed(500, { frequency: 'recurring', frequency_duration: 1, reusable: false }), 1),
      subtotal: 4000,
      status: 'terminated',
      remaining: 0,
      left: '0',
      terminateCoupon: true,
    },
    {
      name: 'recurring not yet done, not reusable: coupon stays',
      c: () => applied(fixed(500, { frequency: 'recurring', frequency_duration: 2, reusable: false }), 1),
      subtotal: 4000,
      status: 'active',
      remaining: 1,
      left: '0',
      terminateCoupon: false,
    },
    {
      name: 'forever is unchanged',
      c: () => applied(percent('10', { frequency: 'forever' }), 1),
      subtotal: 4000,
      status: 'active',
      remaining: null,
      left: null,
      terminateCoupon: false,
    },
    {
      name: 'forever fixed reports the unused part',
      c: () => applied(fixed(5000, { frequency: 'forever', reusable: false }), 1),
      subtotal: 4000,
      status: 'active',
      remaining: null,
      left: '1000',
      terminateCoupon: false,
    },
  ];
  it.each(cases)('$name', ({ c, subtotal, status, remaining, left, terminateCoupon }) => {
    const [application] = run(subtotal, [c()]).applications;
    expect(application).toBeDefined();
    const consumption = application!.consumption;
    expect(consumption.status).toBe(status);
    expect(consumption.frequency_duration_remaining).toBe(remaining);
    expect(consumption.fixed_amount_left_cents?.toString() ?? null).toBe(left);
    expect(consumption.terminate_coupon).toBe(terminateCoupon);
  });
});

describe('applyCoupons: properties', () => {
  const arbCoupon = fc.record({
    fixed: fc.boolean(),
    amount: fc.integer({ min: 0, max: 2_000_000 }),
    rate: fc.integer({ min: 0, max: 10_000 }), // hundredths of a percent: 0.00 .. 100.00
    frequency: fc.constantFrom('once' as const, 'recurring' as const, 'forever' as const),
    duration: fc.integer({ min: 0, max: 5 }),
    currency: fc.constantFrom('USD', 'USD', 'EUR'),
    day: fc.integer({ min: 1, max: 28 }),
    active: fc.boolean(),
  });

  it('never discounts more than the subtotal, every amount is a positive whole cent, and the totals add up', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5_000_000 }), fc.array(arbCoupon, { maxLength: 6 }), (subtotal, specs) => {
        const coupons = specs.map((s) =>
          applied(
            s.fixed
              ? fixed(s.amount, { amount_currency: s.currency, frequency: s.frequency, frequency_duration: s.duration })
              : percent(dec(s.rate).div(100).toString(), { frequency: s.frequency, frequency_duration: s.duration }),
            s.day,
            { status: s.active ? 'active' : 'terminated' },
          ),
        );
        const result = run(subtotal, coupons);
        expect(result.coupons_amount_cents.lte(subtotal)).toBe(true);
        expect(result.remaining_amount_cents.isNegative()).toBe(false);
        expect(result.coupons_amount_cents.plus(result.remaining_amount_cents).eq(subtotal)).toBe(true);
        expect(result.coupons_amount_cents.eq(sum(result.applications.map((a) => a.amount_cents)))).toBe(true);
        for (const a of result.applications) {
          expect(a.amount_cents.gt(0)).toBe(true);
          expect(a.amount_cents.isInteger()).toBe(true);
          expect(a.amount_cents.lte(a.base_amount_cents)).toBe(true);
        }
        // Every coupon is either applied or skipped, exactly once.
        expect(result.applications.length + result.skipped.length).toBe(coupons.length);
      }),
    );
  });
});
