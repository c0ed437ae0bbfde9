import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { aggregate, type AggregationContext, type AggregationMetric, type AggregationType } from '../../src/domain/aggregation';
import { splitEventsByFilters } from '../../src/domain/charge-filters';
import { type ChargeModel, computeChargeModel } from '../../src/domain/charge-models';
import { computeChargeFees, priceEventInAdvance, type ProrationRatio } from '../../src/domain/charges';
import type { AppliedCoupon } from '../../src/domain/coupons';
import { applyPrepaidCredits, assembleInvoice, type PricedFee } from '../../src/domain/invoice-assembly';
import { type Dec, dec, nonNegative, roundCents } from '../../src/domain/money';
import {
  countDays,
  fullPeriodContaining,
  fullPeriodDays,
  periodContaining,
  prorate,
  startOfLocalDay,
  type BillingInterval,
  type BillingTime,
} from '../../src/domain/periods';
import { computeTerminationAmounts } from '../../src/domain/plan-change';
import type { FeeType, TaxSets } from '../../src/domain/taxes';
import type { UsageEvent } from '../../src/domain/usage-types';
import { allocateWallets } from '../../src/domain/wallet-allocation';

/**
 * The invariants issue 3 asks for, each under the name the issue gives it. Some have a narrower
 * twin in a module's own file (charge-models/invariants.test.ts prices one bucket,
 * wallet-allocation.test.ts checks pairs); these run the engine across modules: events through
 * aggregation, filters, charge models, caps and invoice assembly; schedules through periods and
 * plan changes.
 */

const DAY = 86_400_000;
const ZONES = [
  'UTC',
  'Europe/Paris',
  'America/New_York',
  'Pacific/Auckland',
  'Asia/Kolkata',
  'America/Santiago', // DST starts at midnight: that date's first instant is 01:00
  'Australia/Lord_Howe', // 30-minute DST shift
  'Pacific/Chatham', // +12:45 / +13:45
];

/** A decimal with at most 4 fractional digits in [min, max]. */
const decimal = (min: number, max: number) => fc.integer({ min: min * 10_000, max: max * 10_000 }).map((n) => dec(n).div(10_000));
const amount = (max = 100_000) => decimal(0, max).map(String);

const scheduleArb = fc.record({
  interval: fc.constantFrom<BillingInterval>('weekly', 'monthly', 'quarterly', 'yearly'),
  billingTime: fc.constantFrom<BillingTime>('calendar', 'anniversary'),
  anchor: fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2040-01-01T00:00:00Z'), noInvalidDate: true }),
  timezone: fc.constantFrom(...ZONES),
});

// ---------------------------------------------------------------------------------------------
// Pricing inputs: any charge model with valid properties, any metric, events with negative,
// fractional and non-numeric values.

interface Tier {
  from_value: number;
  to_value: number | null;
}

function tiersOf<P extends object>(price: fc.Arbitrary<P>): fc.Arbitrary<(Tier & P)[]> {
  return fc
    .record({
      adjacent: fc.boolean(),
      closed: fc.array(fc.tuple(fc.integer({ min: 1, max: 40 }), price), { maxLength: 4 }),
      last: price,
    })
    .map(({ adjacent, closed, last }) => {
      const tiers: (Tier & P)[] = [];
      let from = 0;
      for (const [width, p] of closed) {
        tiers.push({ from_value: from, to_value: from + width, ...p });
        from = adjacent ? from + width : from + width + 1;
      }
      tiers.push({ from_value: from, to_value: null, ...last });
      return tiers;
    });
}

const unitTiers = tiersOf(fc.record({ per_unit_amount: amount(10_000), flat_amount: amount(10_000) }));

const chargeArb: fc.Arbitrary<{ model: ChargeModel; properties: unknown }> = fc.oneof(
  fc.record({ model: fc.constant('standard' as const), properties: fc.record({ amount: amount() }) }),
  fc.record({ model: fc.constant('graduated' as const), properties: unitTiers.map((graduated_ranges) => ({ graduated_ranges })) }),
  fc.record({ model: fc.constant('volume' as const), properties: unitTiers.map((volume_ranges) => ({ volume_ranges })) }),
  fc.record({
    model: fc.constant('package' as const),
    properties: fc.record({ amount: amount(), package_size: fc.integer({ min: 1, max: 50 }), free_units: fc.nat(20) }),
  }),
  fc.record({
    model: fc.constant('percentage' as const),
    properties: fc
      .record({ rate: decimal(0, 100), fixed: amount(500), freeEvents: fc.nat(3), cap: fc.constantFrom('none', 'min', 'max', 'both') })
      .map(({ rate, fixed, freeEvents, cap }) => ({
        rate: rate.toString(),
        fixed_amount: fixed,
        free_units_per_events: freeEvents,
        ...(cap === 'min' || cap === 'both' ? { per_transaction_min_amount: '10' } : {}),
        ...(cap === 'max' || cap === 'both' ? { per_transaction_max_amount: '400' } : {}),
      })),
  }),
  fc.record({
    model: fc.constant('graduated_percentage' as const),
    properties: tiersOf(fc.record({ rate: decimal(0, 100).map(String), flat_amount: amount(1_000) })).map(
      (graduated_percentage_ranges) => ({
        graduated_percentage_ranges,
      }),
    ),
  }),
  fc.record({ model: fc.constant('dynamic' as const), properties: fc.constant({}) }),
  fc.record({
    model: fc.constant('custom' as const),
    properties: fc.oneof(fc.record({ custom_amount: amount() }), fc.record({ unit_price: amount(1_000) })),
  }),
);

const metricArb: fc.Arbitrary<AggregationMetric> = fc
  .record({
    aggregation_type: fc.constantFrom<AggregationType>('count', 'sum', 'max', 'unique_count', 'weighted_sum', 'latest', 'custom'),
    expression: fc.constantFrom(null, 'value * 2 - 3', 'round(value / 3, 2)'),
    recurring: fc.boolean(),
    rounding_function: fc.constantFrom(null, 'round', 'ceil', 'floor'),
  })
  .map(({ aggregation_type, expression, recurring, rounding_function }) => ({
    aggregation_type,
    field_name: aggregation_type === 'count' ? null : 'value',
    expression: aggregation_type === 'count' ? null : expression,
    recurring: recurring && ['sum', 'unique_count', 'weighted_sum'].includes(aggregation_type),
    rounding_function,
    rounding_precision: 1,
  }));

const march: AggregationContext = { from: new Date('2024-03-01T00:00:00Z'), to: new Date('2024-04-01T00:00:00Z') };

const eventArb: fc.Arbitrary<UsageEvent> = fc
  .record({
    offset: fc.integer({ min: -5 * DAY, max: 32 * DAY }), // some before and after the period
    value: fc.oneof(
      decimal(-1_000, 1_000).map(String),
      fc.integer({ min: -1_000, max: 1_000 }),
      fc.constantFrom('abc', '1e3', null, undefined),
    ),
    region: fc.constantFrom('us', 'eu', undefined),
    price: decimal(-100, 1_000),
    quantity: decimal(-5, 50),
  })
  .map(({ offset, value, region, price, quantity }) => ({
    transactionId: `e${offset}`,
    timestamp: new Date(march.from.getTime() + offset),
    properties: {
      ...(value === undefined ? {} : { value }),
      ...(region === undefined ? {} : { region }),
      unit_price: price.toString(),
      quantity: quantity.toNumber(),
    },
  }));

const prorationArb: fc.Arbitrary<ProrationRatio> = fc
  .tuple(fc.integer({ min: 1, max: 31 }), fc.integer({ min: 0, max: 31 }))
  .map(([periodDays, used]) => ({ periodDays, usedDays: used % (periodDays + 1) }));

const capsArb = fc.record({ min: fc.option(amount(50_000)), max: fc.option(amount(50_000)) });

describe('no fee is ever negative', () => {
  it('no fee is ever negative: from raw events (negative values included) through filters, every charge model, prorated caps and invoice assembly', () => {
    fc.assert(
      fc.property(
        metricArb,
        chargeArb,
        chargeArb,
        fc.array(eventArb, { maxLength: 25 }),
        capsArb,
        prorationArb,
        fc.option(amount(50_000)),
        (metric, charge, filterCharge, events, caps, proration, commitment) => {
          // The filter bucket must use its charge's model, so it reuses the charge's properties
          // when the generated filter is of another model.
          const filterProperties = filterCharge.model === charge.model ? filterCharge.properties : charge.properties;
          const filters = [{ values: { region: ['us'] } }];
          const buckets = splitEventsByFilters(filters, events);
          const fees = computeChargeFees(
            { charge_model: charge.model, properties: charge.properties, min_amount_cents: caps.min, max_amount_cents: caps.max },
            {
              default: aggregate(metric, buckets.default, march),
              filters: [{ properties: filterProperties, aggregation: aggregate(metric, buckets.filters[0] ?? [], march) }],
            },
            proration,
          );
          for (const bucket of [fees.default, ...fees.filters]) {
            expect(bucket.amount.isNegative()).toBe(false);
            expect(bucket.model.amount.isNegative()).toBe(false);
            expect(bucket.model.units.isNegative()).toBe(false);
            expect(bucket.unitAmount.isNegative()).toBe(false);
          }
          expect(fees.minTrueUp.isNegative()).toBe(false);
          expect(fees.amount.isNegative()).toBe(false);

          const priced: PricedFee[] = [fees.default, ...fees.filters].map((b, i) => ({
            key: `bucket-${i}`,
            fee_type: 'charge',
            charge_id: 'c1',
            amount_cents: b.amount,
            units: b.model.units,
            events_count: b.model.eventsCount,
            unit_amount_cents: b.unitAmount,
          }));
          if (fees.minTrueUp.gt(0)) {
            priced.push({
              key: 'min',
              fee_type: 'charge',
              amount_cents: fees.minTrueUp,
              units: dec(1),
              events_count: 0,
              unit_amount_cents: fees.minTrueUp,
            });
          }
          // assembleInvoice refuses a negative fee, so assembling at all is part of the check.
          const invoice = assembleInvoice({
            currency: 'USD',
            fees: priced,
            minimum_commitment: commitment === null ? null : { amount_cents: dec(commitment) },
            commitment_proration: proration,
            taxes: { organization: [], customer: [{ id: 't', code: 'T', rate: dec('0.2') }], plan: [], charges: {}, add_ons: {} },
          });
          for (const f of invoice.fees) {
            expect(f.amount_cents.isNegative()).toBe(false);
            expect(f.taxes_amount_cents.isNegative()).toBe(false);
          }
          expect(invoice.total.isNegative()).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('no fee is ever negative: a pay-in-advance event never costs less than zero, whatever it does to the aggregation', () => {
    const inAdvance = chargeArb.filter((c) => c.model !== 'volume');
    fc.assert(
      fc.property(metricArb, inAdvance, fc.array(eventArb, { minLength: 1, maxLength: 15 }), (metric, charge, events) => {
        const sorted = [...events].sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime());
        const price = priceEventInAdvance({
          charge_model: charge.model,
          properties: charge.properties,
          before: aggregate(metric, sorted.slice(0, -1), march),
          after: aggregate(metric, sorted, march),
        });
        expect(price.isNegative()).toBe(false);
      }),
      { numRuns: 200 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Proration over real schedules.

describe('proration', () => {
  it('prorating a full period gives the full amount (any interval, billing time, time zone; base fee, cap and termination on the boundary)', () => {
    fc.assert(
      fc.property(scheduleArb, fc.integer({ min: 0, max: 3 * 366 * DAY }), amount(1_000_000), (sched, offset, amountCents) => {
        const at = new Date(sched.anchor.getTime() + offset);
        const full = fullPeriodContaining({ ...sched, at });
        const periodDays = fullPeriodDays({ ...sched, at });
        expect(countDays(full.from, full.to, sched.timezone)).toBe(periodDays);
        expect(prorate(amountCents, periodDays, periodDays).eq(amountCents)).toBe(true);

        // A billing period that is not a calendar plan's first one is a whole period, and so is an
        // anniversary plan's first one (its start day counts whole).
        const period = periodContaining({ ...sched, at });
        const usedDays = countDays(period.from, period.to, sched.timezone);
        const isFirst = period.from.getTime() === sched.anchor.getTime();
        if (!isFirst || sched.billingTime === 'anniversary') expect(usedDays).toBe(periodDays);
        if (usedDays !== periodDays) return;

        // A charge cap over that period is not reduced either...
        const fees = computeChargeFees(
          { charge_model: 'standard', properties: { amount: '1' }, min_amount_cents: amountCents },
          { default: { units: dec(0), eventsCount: 0, perEventValues: [] }, filters: [] },
          { usedDays, periodDays },
        );
        expect(fees.amount.eq(amountCents)).toBe(true);
        // ...and a termination exactly at the period end bills the whole base fee in arrear.
        const termination = computeTerminationAmounts({
          plan: { amount_cents: amountCents, interval: sched.interval },
          billingTime: sched.billingTime,
          anchor: sched.anchor,
          timezone: sched.timezone,
          payInAdvance: false,
          action: 'generate_invoice',
          terminatedAt: period.to,
        });
        expect(termination.usedDays).toBe(periodDays);
        expect(termination.unusedDays).toBe(0);
        expect(termination.baseFee?.eq(amountCents) ?? dec(amountCents).isZero()).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('splitting a period at any day and prorating both parts gives the whole within one rounding unit', () => {
    fc.assert(
      fc.property(
        scheduleArb,
        fc.integer({ min: 0, max: 3 * 366 * DAY }),
        amount(1_000_000),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (sched, offset, amountCents, splitAt, instantAt) => {
          const at = new Date(sched.anchor.getTime() + offset);
          const { timezone } = sched;
          const full = fullPeriodContaining({ ...sched, at });
          const periodDays = fullPeriodDays({ ...sched, at });

          // Split the whole period at the local midnight that starts its k-th day (k = 0..P).
          const k = Math.min(periodDays, Math.floor(splitAt * (periodDays + 1)));
          // Noon of the k-th day stays on that date whatever the DST shifts of the period.
          const split = k === periodDays ? full.to : startOfLocalDay(new Date(full.from.getTime() + k * DAY + DAY / 2), timezone);
          const before = countDays(full.from, split, timezone);
          const after = countDays(split, full.to, timezone);
          expect(before).toBe(k);
          expect(before + after).toBe(periodDays);
          const parts = prorate(amountCents, before, periodDays).plus(prorate(amountCents, after, periodDays));
          // Each part is rounded to 4 digits: together they miss the whole by at most 0.0001.
          expect(parts.minus(amountCents).abs().lte('0.0001')).toBe(true);
          // At invoice precision, whole cents: within one cent.
          const cents = roundCents(prorate(amountCents, before, periodDays)).plus(roundCents(prorate(amountCents, after, periodDays)));
          expect(
            cents
              .minus(roundCents(dec(amountCents)))
              .abs()
              .lte(1),
          ).toBe(true);

          // The same for the billing period itself (a calendar plan's first period is partial),
          // split on the local day of any instant inside it, as a plan change splits it.
          const period = periodContaining({ ...sched, at });
          const instant = new Date(period.from.getTime() + Math.floor(instantAt * (period.to.getTime() - period.from.getTime() - 1)));
          const dayStart = startOfLocalDay(instant, timezone);
          const cut = dayStart.getTime() < period.from.getTime() ? period.from : dayStart;
          const used = countDays(period.from, period.to, timezone);
          const first = countDays(period.from, cut, timezone);
          const second = countDays(cut, period.to, timezone);
          expect(first + second).toBe(used);
          const whole = prorate(amountCents, used, periodDays);
          const split2 = prorate(amountCents, first, periodDays).plus(prorate(amountCents, second, periodDays));
          expect(split2.minus(whole).abs().lte('0.0001')).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Coupons through the whole invoice.

describe('coupons', () => {
  const feeArb = fc.record({
    type: fc.constantFrom<FeeType>('subscription', 'charge', 'add_on', 'commitment'),
    amount: amount(200_000),
  });
  const couponArb = fc.record({
    fixed: fc.boolean(),
    amount: decimal(0, 500_000),
    rate: decimal(0, 150), // above 100 % too: capped at what remains
    frequency: fc.constantFrom('once' as const, 'recurring' as const, 'forever' as const),
    day: fc.integer({ min: 1, max: 28 }),
  });
  const rateArb = fc.integer({ min: 0, max: 10_000 }).map((n) => dec(n).div(10_000));

  it('coupons never push a total below zero (through assembleInvoice, with taxes, progressive credits, credit notes and wallets)', () => {
    fc.assert(
      fc.property(
        fc.array(feeArb, { maxLength: 8 }),
        fc.array(couponArb, { minLength: 1, maxLength: 5 }),
        rateArb,
        fc.array(fc.integer({ min: 0, max: 300_000 }), { maxLength: 2 }),
        fc.array(fc.integer({ min: 0, max: 300_000 }), { maxLength: 2 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (feeInputs, couponInputs, rate, progressive, notes, wallet) => {
          const fees: PricedFee[] = feeInputs.map((f, i) => ({
            key: `f${i}`,
            fee_type: f.type,
            charge_id: f.type === 'charge' ? 'c1' : undefined,
            amount_cents: dec(f.amount),
            units: dec(1),
            events_count: 0,
            unit_amount_cents: dec(f.amount),
          }));
          const coupons: AppliedCoupon[] = couponInputs.map((c, i) => ({
            id: `ac${i}`,
            status: 'active',
            applied_at: new Date(Date.UTC(2026, 0, c.day)),
            coupon: {
              id: `c${i}`,
              code: `C${i}`,
              coupon_type: c.fixed ? 'fixed_amount' : 'percentage',
              frequency: c.frequency,
              frequency_duration: 3,
              reusable: true,
              ...(c.fixed ? { amount_cents: c.amount, amount_currency: 'USD' } : { percentage_rate: c.rate }),
            },
          }));
          const taxes: TaxSets = { organization: [], customer: [{ id: 't', code: 'T', rate }], plan: [], charges: {}, add_ons: {} };

          // Coupons alone: they take at most the pre-tax subtotal, so the taxes stay due.
          const plain = assembleInvoice({ currency: 'USD', fees, taxes, applied_coupons: coupons });
          expect(plain.coupons_amount_cents.lte(plain.subtotal)).toBe(true);
          expect(plain.total.eq(plain.subtotal.plus(plain.tax_amount).minus(plain.coupons_amount_cents))).toBe(true);
          expect(plain.total.gte(plain.tax_amount)).toBe(true);
          for (const c of plain.coupons) expect(c.amount_cents.gt(0) && c.amount_cents.lte(c.base_amount_cents)).toBe(true);

          // With every other credit too, before and after the wallets.
          const invoice = assembleInvoice({
            currency: 'USD',
            fees,
            taxes,
            applied_coupons: coupons,
            progressive_billing_credits: progressive.map((p, i) => ({ invoice_id: `pb${i}`, amount_cents: dec(p) })),
            credit_notes: notes.map((n, i) => ({ credit_note_id: `cn${i}`, balance_amount_cents: dec(n) })),
          });
          expect(invoice.total.isNegative()).toBe(false);
          const formula = invoice.subtotal
            .plus(invoice.tax_amount)
            .minus(invoice.coupons_amount_cents)
            .minus(invoice.progressive_billing_credit_amount_cents)
            .minus(invoice.credit_notes_amount_cents);
          expect(formula.isNegative()).toBe(false);
          const paid = applyPrepaidCredits(invoice, dec(wallet));
          expect(paid.total.isNegative()).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Wallets.

describe('wallet allocation', () => {
  const AT = new Date('2026-03-01T12:00:00Z');
  // Few priorities and dates, so that ties on priority, and on priority and age, are frequent.
  const walletArb = fc.record({
    id: fc.string({ minLength: 1, maxLength: 4 }),
    balanceCents: fc.oneof(decimal(-100, 50_000).map(String), fc.integer({ min: 0, max: 50_000 })),
    priority: fc.constantFrom(1, 2, 10, 50),
    createdAt: fc.constantFrom(new Date('2025-01-01T00:00:00Z'), new Date('2025-06-01T00:00:00Z'), new Date('2026-01-01T00:00:00Z')),
    status: fc.constantFrom<'active' | 'terminated'>('active', 'active', 'active', 'terminated'),
    expirationAt: fc.constantFrom(null, new Date('2026-02-01T00:00:00Z'), AT, new Date('2026-04-01T00:00:00Z')),
  });
  const walletsArb = fc.uniqueArray(walletArb, { selector: (w) => w.id, maxLength: 8 });
  const dueArb = fc.oneof(decimal(-100, 200_000).map(String), fc.integer({ min: 0, max: 200_000 }));

  it('wallet allocation never exceeds a balance, nor the amount due', () => {
    fc.assert(
      fc.property(dueArb, walletsArb, (due, wallets) => {
        const result = allocateWallets(due, wallets, AT);
        const byId = new Map(wallets.map((w) => [w.id, w]));
        for (const a of result.allocations) {
          expect(a.amountCents.gt(0)).toBe(true);
          expect(a.amountCents.lte(dec(byId.get(a.walletId)!.balanceCents))).toBe(true);
        }
        expect(result.totalCents.lte(nonNegative(dec(due)))).toBe(true);
        expect(result.totalCents.plus(result.remainingCents).eq(nonNegative(dec(due)))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('wallet allocation follows priority then age: it matches draining usable wallets sorted by (priority, created_at)', () => {
    fc.assert(
      fc.property(dueArb, walletsArb, (due, wallets) => {
        // Reference: usable wallets with at least a whole cent, priority 1 first, then the oldest,
        // each paying all its whole cents can until nothing is due. The id only breaks complete ties.
        const cents = (w: (typeof wallets)[number]) => dec(w.balanceCents).floor();
        const usable = wallets
          .filter((w) => w.status === 'active' && (w.expirationAt === null || w.expirationAt.getTime() > AT.getTime()))
          .filter((w) => cents(w).gt(0))
          .sort(
            (a, b) => a.priority - b.priority || a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
          );
        let left = nonNegative(dec(due));
        const expected: [string, string][] = [];
        for (const w of usable) {
          if (!left.gt(0)) break;
          const take = cents(w).lt(left) ? cents(w) : left;
          expected.push([w.id, take.toString()]);
          left = left.minus(take);
        }
        const result = allocateWallets(due, [...wallets].reverse(), AT);
        expect(result.allocations.map((a) => [a.walletId, a.amountCents.toString()])).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Graduated pricing.

describe('graduated pricing', () => {
  // Whole units and fractions next to the tier bounds (a classic tier boundary leaves the gap
  // between 10 and 11 to the next tier: 10.5 units put 0.5 in it).
  const unitsArb = fc
    .tuple(fc.integer({ min: 0, max: 200 }), fc.constantFrom('0', '0.0001', '0.5', '0.9999'), decimal(0, 1))
    .chain(([whole, near, any]) => fc.constantFrom(dec(whole).plus(near), dec(whole).plus(any)));

  it('a graduated price never decreases when units grow (classic and adjacent tiers, fractional units, tier boundaries)', () => {
    fc.assert(
      fc.property(unitTiers, unitsArb, unitsArb, (graduated_ranges, a, b) => {
        const [low, high] = a.lte(b) ? [a, b] : [b, a];
        const price = (units: Dec) =>
          computeChargeModel('graduated', { graduated_ranges }, { units, eventsCount: 0, perEventValues: [] }).amount;
        expect(price(low).lte(price(high))).toBe(true);
        expect(price(high.plus(1)).gte(price(high))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
