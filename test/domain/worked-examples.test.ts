import { describe, expect, it } from 'vitest';
import {
  AGGREGATION_TYPES,
  aggregate,
  type AggregationContext,
  type AggregationMetric,
  type AggregationType,
  prorationFor,
} from '../../src/domain/aggregation';
import { splitEventsByFilters, type ChargeFilterLike } from '../../src/domain/charge-filters';
import { computeChargeFees, type PricedCharge } from '../../src/domain/charges';
import { type ChargeModel } from '../../src/domain/charge-models';
import { applyCoupons, type AppliedCoupon, type Coupon } from '../../src/domain/coupons';
import { assembleInvoice, type PricedFee } from '../../src/domain/invoice-assembly';
import { dec, roundCents } from '../../src/domain/money';
import {
  countDays,
  fullPeriodDays,
  nextBoundary,
  periodContaining,
  prorate,
  type BillingInterval,
  type BillingSchedule,
  type BillingTime,
} from '../../src/domain/periods';
import type { FeeType, Tax, TaxSets } from '../../src/domain/taxes';
import type { AggregationResult, UsageEvent } from '../../src/domain/usage-types';

/**
 * The worked examples of billing-rules.md and lago-reference.md that no module's own test file
 * quoted yet, one describe per document section, plus the edges of issue 3 that were only covered
 * module by module (events on a boundary, negative values and zero usage, end to end). Amounts are
 * in cents: lago-reference.md's major-unit amounts are multiplied by 100 (billing-rules.md,
 * Numbers), and where billing-rules.md decides differently the case says so and follows it.
 *
 * The other examples are covered where their module is tested; the audit table in the issue's
 * report maps each one to its test.
 */

const d = (iso: string): Date => new Date(iso);
const s = (value: { toString(): string }): string => value.toString();

let sequence = 0;
function ev(timestamp: string, properties: Record<string, unknown> = {}): UsageEvent {
  sequence += 1;
  return { transactionId: `we-${sequence}`, timestamp: d(timestamp), properties };
}

function schedule(interval: BillingInterval, billingTime: BillingTime, anchor: string, timezone = 'UTC'): BillingSchedule {
  return { interval, billingTime, anchor: d(anchor), timezone };
}

function fee(key: string, fee_type: FeeType, amount: string, extra: Partial<PricedFee> = {}): PricedFee {
  return { key, fee_type, amount_cents: dec(amount), units: dec(1), events_count: 0, unit_amount_cents: dec(amount), ...extra };
}

const tax = (code: string, rate: string): Tax => ({ id: `tax-${code}`, code, rate: dec(rate) });
const taxSets = (t: Partial<TaxSets>): TaxSets => ({ organization: [], customer: [], plan: [], charges: {}, add_ons: {}, ...t });

function appliedCoupon(coupon: Partial<Coupon> & Pick<Coupon, 'coupon_type'>, extra: Partial<AppliedCoupon> = {}): AppliedCoupon {
  sequence += 1;
  return {
    id: `applied-${sequence}`,
    coupon: { id: `coupon-${sequence}`, code: `C${sequence}`, frequency: 'forever', reusable: true, ...coupon },
    status: 'active',
    applied_at: d('2025-01-01T00:00:00Z'),
    ...extra,
  };
}

const countOf = (n: number): AggregationResult => ({
  units: dec(n),
  eventsCount: n,
  perEventValues: Array.from({ length: n }, () => dec(1)),
});

const standard = (amount: string, extra: Partial<PricedCharge> = {}): PricedCharge => ({
  charge_model: 'standard',
  properties: { amount },
  ...extra,
});

describe('lago-reference.md 0: conventions', () => {
  it('lago-reference 0: day counting from 2024-01-15 00:00 to 2024-01-31 23:59:59.999 -> 17 days', () => {
    // Lago's period end is the inclusive 23:59:59.999; countDays takes the exclusive end, the
    // next local midnight. Either way the partial last day counts as a whole one.
    expect(countDays(d('2024-01-15T00:00:00Z'), d('2024-02-01T00:00:00Z'), 'UTC')).toBe(17);
    expect(countDays(d('2024-01-15T00:00:00Z'), d('2024-01-31T23:59:59.999Z'), 'UTC')).toBe(17);
  });
});

describe('lago-reference.md 1.4: charge filters', () => {
  it('lago-reference 1.4: default 1.00, {region: us} 2.00, {region: us, tier: gold} 3.00; us/gold x2, us/silver x3, eu x4, no region x1 -> 600 + 600 + 500', () => {
    // From raw events to priced buckets: split by the most specific filter, aggregate, price.
    const filters: (ChargeFilterLike & { properties: unknown })[] = [
      { values: { region: ['us'] }, properties: { amount: '200' } },
      { values: { region: ['us'], tier: ['gold'] }, properties: { amount: '300' } },
    ];
    const at = (day: number) => `2024-03-${String(day).padStart(2, '0')}T12:00:00Z`;
    const events = [
      ...[1, 2].map((i) => ev(at(i), { region: 'us', tier: 'gold' })),
      ...[3, 4, 5].map((i) => ev(at(i), { region: 'us', tier: 'silver' })),
      ...[6, 7, 8, 9].map((i) => ev(at(i), { region: 'eu' })),
      ev(at(10), {}),
    ];
    const count: AggregationMetric = { aggregation_type: 'count', recurring: false };
    const march: AggregationContext = { from: d('2024-03-01T00:00:00Z'), to: d('2024-04-01T00:00:00Z') };
    const buckets = splitEventsByFilters(filters, events);
    const fees = computeChargeFees(standard('100'), {
      default: aggregate(count, buckets.default, march),
      filters: filters.map((f, i) => ({ properties: f.properties, aggregation: aggregate(count, buckets.filters[i] ?? [], march) })),
    });
    expect(fees.filters.map((f) => [s(f.model.units), s(f.amount)])).toEqual([
      ['3', '600'], // us bucket: silver only, gold went to the more specific filter
      ['2', '600'], // us + gold
    ]);
    expect([s(fees.default.model.units), s(fees.default.amount)]).toEqual(['5', '500']); // eu + missing
    expect(s(fees.amount)).toBe('1700');
  });
});

describe('lago-reference.md 2: charge models', () => {
  it('lago-reference 2.8 (dynamic, as billing-rules redefines it): events priced 150.5 and 49.5 cents, quantity 1 each -> 200', () => {
    // billing-rules.md replaces Lago's precise_total_amount_cents with price_field x quantity_field.
    const fees = computeChargeFees(
      { charge_model: 'dynamic', properties: {} },
      {
        default: {
          units: dec(999), // the metric's own aggregation is irrelevant to dynamic pricing
          eventsCount: 2,
          perEventValues: [],
          events: [
            ev('2024-03-02T00:00:00Z', { unit_price: '150.5', quantity: 1 }),
            ev('2024-03-03T00:00:00Z', { unit_price: 49.5, quantity: '1' }),
          ],
        },
        filters: [],
      },
    );
    expect(s(fees.amount)).toBe('200');
    expect(s(fees.units)).toBe('2');
  });

  it('lago-reference 2.9: min 5000, subscription started Jan 15 (17/31 days), usage 1200 + 800 -> prorated min 2741.9355, true-up 741.9355, invoiced 2742', () => {
    const fees = computeChargeFees(
      standard('100', { min_amount_cents: 5000 }),
      { default: countOf(12), filters: [{ properties: { amount: '100' }, aggregation: countOf(8) }] },
      { usedDays: 17, periodDays: 31 },
    );
    // Lago: round(2741.94 - 2000) = 742 cents. billing-rules.md keeps 4 digits for prorated caps
    // and rounds at the invoice level: the invoice comes to the same 2742 cents.
    expect(s(fees.minAmount!)).toBe('2741.9355');
    expect(s(fees.minTrueUp)).toBe('741.9355');
    expect(s(fees.amount)).toBe('2741.9355');
    const invoice = assembleInvoice({
      currency: 'USD',
      fees: [
        fee('default', 'charge', s(fees.default.amount)),
        fee('us', 'charge', s(fees.filters[0]!.amount)),
        fee('min', 'charge', s(fees.minTrueUp)),
      ],
    });
    expect(s(invoice.subtotal)).toBe('2742');
    expect(s(invoice.total)).toBe('2742');
  });

  it('lago-reference 2.10 prorated (exact units per api-contract): +1 seat on day 11 of a 30-day month at 1000/seat -> fee 666.6667 (Lago 666.67), invoiced 667; next month 1000', () => {
    // A recurring sum priced by a prorated standard charge, through the engine: the seat counts for
    // April 11..30 = 20 of 30 days. api-contract.md: the units are exact (20/30), only the fee is
    // rounded, to 4 decimals: 20/30 x 1000 = 666.6666… -> 666.6667. Lago rounds the units up to 5
    // decimals first (0.66667 x 1000 = 666.67); both are 667 cents (6.67) on the invoice.
    const seats: AggregationMetric = { aggregation_type: 'sum', field_name: 'seats', recurring: true };
    const events = [ev('2025-04-11T09:00:00Z', { seats: 1 })];
    const april = prorationFor({ from: d('2025-04-01T00:00:00Z'), to: d('2025-05-01T00:00:00Z'), timezone: 'UTC' });
    expect(april.periodDays).toBe(30);
    const aprilUnits = aggregate(seats, events, { from: april.from, to: april.to, prorate: april });
    expect(aprilUnits.units.toFixed(5)).toBe('0.66667');
    const aprilFees = computeChargeFees(standard('1000'), { default: aprilUnits, filters: [] });
    expect(s(aprilFees.amount)).toBe('666.6667');
    expect(s(roundCents(aprilFees.amount))).toBe('667');
    // The same as the base-fee day arithmetic (src/domain/periods.ts): prorate(1000, 20, 30).
    expect(s(prorate(1000, countDays(d('2025-04-11T09:00:00Z'), d('2025-05-01T00:00:00Z'), 'UTC'), 30))).toBe('666.6667');

    // May: the seat is carried over for all 31 days -> 1 x 1000.
    const may = prorationFor({ from: d('2025-05-01T00:00:00Z'), to: d('2025-06-01T00:00:00Z'), timezone: 'UTC' });
    const mayFees = computeChargeFees(standard('1000'), {
      default: aggregate(seats, events, { from: may.from, to: may.to, prorate: may }),
      filters: [],
    });
    expect(s(mayFees.amount)).toBe('1000');
  });
});

describe('lago-reference.md 3: periods, proration, trials', () => {
  it('lago-reference 3.1: anniversary monthly from Jan 15 -> Jan 15-Feb 14 has 31 days, Feb 15-Mar 14 has 29 (leap) or 28', () => {
    const leap = schedule('monthly', 'anniversary', '2024-01-15T10:00:00Z');
    expect(fullPeriodDays({ ...leap, at: d('2024-01-20T00:00:00Z') })).toBe(31);
    expect(fullPeriodDays({ ...leap, at: d('2024-02-20T00:00:00Z') })).toBe(29);
    expect(fullPeriodDays({ ...leap, at: d('2024-03-14T23:59:59.999Z') })).toBe(29);
    expect(periodContaining({ ...leap, at: d('2024-03-14T23:59:59.999Z') }).to.toISOString()).toBe('2024-03-15T00:00:00.000Z');
    const common = schedule('monthly', 'anniversary', '2025-01-15T10:00:00Z');
    expect(fullPeriodDays({ ...common, at: d('2025-02-20T00:00:00Z') })).toBe(28);
  });

  it.each(['2025-01-15T00:00:00Z', '2025-01-15T23:59:00Z'])(
    'lago-reference 3.2: 3100/month calendar started Jan 15 (any hour: %s) -> 17 days x 100 = 1700, invoiced Feb 1 in arrear',
    (startedAt) => {
      const sched = schedule('monthly', 'calendar', startedAt);
      const period = periodContaining({ ...sched, at: sched.anchor });
      const days = countDays(period.from, period.to, 'UTC');
      expect(days).toBe(17);
      expect(s(prorate(3100, days, fullPeriodDays({ ...sched, at: sched.anchor })))).toBe('1700');
      expect(nextBoundary({ ...sched, at: sched.anchor }).toISOString()).toBe('2025-02-01T00:00:00.000Z');
    },
  );

  it('lago-reference 3.2: anniversary first period is a full period -> 3100 for a 3100/month plan started Jan 15 10:00', () => {
    const sched = schedule('monthly', 'anniversary', '2025-01-15T10:00:00Z');
    const period = periodContaining({ ...sched, at: sched.anchor });
    const days = countDays(period.from, period.to, 'UTC');
    expect(days).toBe(31);
    expect(s(prorate(3100, days, fullPeriodDays({ ...sched, at: sched.anchor })))).toBe('3100');
  });

  it('lago-reference 3.3: 3100/month calendar in advance, started Jan 10 14:00 with a 10-day trial -> trial ends Jan 20 14:00, 12 days = 1200, then Feb 1 the full 3100', () => {
    const sched = schedule('monthly', 'calendar', '2025-01-10T14:00:00Z');
    const trialEndsAt = d('2025-01-20T14:00:00Z');
    const period = periodContaining({ ...sched, at: trialEndsAt });
    const billed = countDays(trialEndsAt, period.to, 'UTC'); // the trial end day is billed
    expect(billed).toBe(12);
    expect(s(prorate(3100, billed, fullPeriodDays({ ...sched, at: trialEndsAt })))).toBe('1200');
    const february = periodContaining({ ...sched, at: period.to });
    expect(february.from.toISOString()).toBe('2025-02-01T00:00:00.000Z');
    expect(s(prorate(3100, countDays(february.from, february.to, 'UTC'), fullPeriodDays({ ...sched, at: february.from })))).toBe('3100');
  });
});

describe('lago-reference.md 4: invoice computation', () => {
  it('lago-reference 4.2 (PR #1784, base fee excluded per billing-rules): base fee 5000 + 3 units x 1000, minimum 10000 -> true-up 7000 (Lago: 2000)', () => {
    const invoice = assembleInvoice({
      currency: 'USD',
      fees: [fee('sub', 'subscription', '5000'), fee('api', 'charge', '3000', { units: dec(3), unit_amount_cents: dec(1000) })],
      minimum_commitment: { amount_cents: dec(10_000) },
    });
    // billing-rules.md: "the charges total less"; the base fee does not count.
    expect(s(invoice.commitment!.charges_amount_cents)).toBe('3000');
    expect(s(invoice.commitment!.true_up_amount_cents)).toBe('7000');
    expect(invoice.fees.map((f) => [f.key, s(f.amount_cents)])).toEqual([
      ['sub', '5000'],
      ['api', '3000'],
      ['commitment', '7000'],
    ]);
    expect(s(invoice.total)).toBe('15000');
  });

  it('lago-reference 4.2: minimum 10000 started Jan 15 (17/31) -> round(10000 x 17/31) = 5484 on the invoice (5483.8710 at fee precision)', () => {
    const invoice = assembleInvoice({
      currency: 'USD',
      fees: [],
      minimum_commitment: { amount_cents: dec(10_000) },
      commitment_proration: { usedDays: 17, periodDays: 31 },
    });
    expect(s(invoice.commitment!.commitment_amount_cents)).toBe('5483.871');
    expect(s(invoice.subtotal)).toBe('5484');
  });

  it('lago-reference 4.4 (taxes before coupons per billing-rules): subscription 10000 at 20 % + charge 5000 at 10 %, fixed coupon 3000 -> taxes 2500, total 14500 (Lago: 14000)', () => {
    const invoice = assembleInvoice({
      currency: 'USD',
      fees: [fee('sub', 'subscription', '10000'), fee('api', 'charge', '5000', { charge_id: 'c1' })],
      taxes: taxSets({ plan: [tax('VAT20', '0.2')], charges: { c1: [tax('VAT10', '0.1')] } }),
      applied_coupons: [appliedCoupon({ coupon_type: 'fixed_amount', amount_cents: dec(3000), amount_currency: 'USD' })],
    });
    // Each fee is taxed on its full amount; the coupon only reduces the pre-tax subtotal.
    expect(invoice.fees.map((f) => s(f.taxes_amount_cents))).toEqual(['2000', '500']);
    expect({
      subtotal: s(invoice.subtotal),
      tax: s(invoice.tax_amount),
      coupons: s(invoice.coupons_amount_cents),
      total: s(invoice.total),
    }).toEqual({ subtotal: '15000', tax: '2500', coupons: '3000', total: '14500' });
  });

  it('lago-reference 4.4 (once coupon per billing-rules): a 20000 once fixed coupon on a 15000 invoice -> 15000 now, then terminated with 5000 left (Lago: 5000 on the next invoice)', () => {
    const once = appliedCoupon({ coupon_type: 'fixed_amount', frequency: 'once', amount_cents: dec(20_000), amount_currency: 'USD' });
    const first = applyCoupons({ currency: 'USD', subtotal: dec(15_000), applied_coupons: [once] });
    expect(s(first.coupons_amount_cents)).toBe('15000');
    const consumption = first.applications[0]!.consumption;
    expect(consumption.status).toBe('terminated');
    expect(s(consumption.fixed_amount_left_cents!)).toBe('5000');
    // Recorded at finalization: the next invoice sees a terminated coupon and gets nothing from it.
    const next = applyCoupons({ currency: 'USD', subtotal: dec(15_000), applied_coupons: [{ ...once, status: consumption.status }] });
    expect(s(next.coupons_amount_cents)).toBe('0');
    expect(next.skipped.map((c) => c.reason)).toEqual(['not_active']);
  });
});

describe('lago-reference.md 7.1: progressive billing', () => {
  it('lago-reference 7.1: standard 100/unit, thresholds 100 and 200; usage 120 -> 12000, usage 210 -> 21000 - 12000 = 9000, period end 250 -> 25000 - 21000 = 4000; 25000 billed in all', () => {
    const usageFee = (units: number) => {
      const fees = computeChargeFees(standard('100'), { default: countOf(units), filters: [] });
      return fee('api', 'charge', s(fees.amount), { units: dec(units) });
    };
    const pb1 = assembleInvoice({ currency: 'USD', fees: [usageFee(120)] });
    const pb2 = assembleInvoice({
      currency: 'USD',
      fees: [usageFee(210)],
      progressive_billing_credits: [{ invoice_id: 'pb1', amount_cents: pb1.total }],
    });
    const final = assembleInvoice({
      currency: 'USD',
      fees: [usageFee(250)],
      progressive_billing_credits: [
        { invoice_id: 'pb1', amount_cents: pb1.total },
        { invoice_id: 'pb2', amount_cents: pb2.total },
      ],
    });
    expect([pb1.total, pb2.total, final.total].map(s)).toEqual(['12000', '9000', '4000']);
    expect(s(pb1.total.plus(pb2.total).plus(final.total))).toBe('25000');
  });
});

describe('edges', () => {
  const march: AggregationContext = { from: d('2024-03-01T00:00:00Z'), to: d('2024-04-01T00:00:00Z') };
  const april: AggregationContext = { from: d('2024-04-01T00:00:00Z'), to: d('2024-05-01T00:00:00Z') };
  const metricOf = (aggregation_type: AggregationType): AggregationMetric => ({
    aggregation_type,
    field_name: aggregation_type === 'count' ? null : 'value',
    expression: aggregation_type === 'custom' ? 'value * 2' : null,
    recurring: false,
  });

  // One event exactly on each boundary of March: [from, to) keeps the first and hands the second
  // to April. weighted_sum: a delta at the start weighs the whole period; a delta at the end
  // starts April's level.
  const expectedOnBoundaries: Record<AggregationType, [string, string]> = {
    count: ['1', '1'],
    sum: ['5', '7'],
    max: ['5', '7'],
    unique_count: ['1', '1'],
    weighted_sum: ['5', '7'],
    latest: ['5', '7'],
    custom: ['10', '14'],
  };
  it.each(AGGREGATION_TYPES.map((t) => [t, ...expectedOnBoundaries[t]] as const))(
    "events exactly on a period boundary (%s): the event at `from` is March's (%s), the one at `to` is April's (%s)",
    (type, inMarch, inApril) => {
      const events = [ev('2024-03-01T00:00:00Z', { value: 5 }), ev('2024-04-01T00:00:00Z', { value: 7 })];
      const m = metricOf(type);
      expect(s(aggregate(m, events, march).units)).toBe(inMarch);
      expect(s(aggregate(m, events, april).units)).toBe(inApril);
    },
  );

  it('events exactly on a period boundary in the customer time zone: local midnight in Europe/Paris (22:00 UTC) opens the next period', () => {
    const sched = schedule('monthly', 'calendar', '2024-01-01T00:00:00+01:00', 'Europe/Paris');
    // 2024-03-31T22:00:00Z is April 1 00:00 in Paris (summer time began that night).
    const onBoundary = d('2024-03-31T22:00:00Z');
    const before = new Date(onBoundary.getTime() - 1);
    expect(periodContaining({ ...sched, at: onBoundary }).from.toISOString()).toBe('2024-03-31T22:00:00.000Z');
    expect(periodContaining({ ...sched, at: before }).to.toISOString()).toBe('2024-03-31T22:00:00.000Z');
    const period = periodContaining({ ...sched, at: before });
    const events = [ev(before.toISOString(), { value: 1 }), ev(onBoundary.toISOString(), { value: 1 })];
    expect(s(aggregate(metricOf('count'), events, period).units)).toBe('1');
  });

  it('negative property values: a sum of -5 and +2 prices at 0 with 0 units in every model, and the invoice is 0', () => {
    const m = metricOf('sum');
    const agg = aggregate(m, [ev('2024-03-02T00:00:00Z', { value: '-5' }), ev('2024-03-03T00:00:00Z', { value: 2 })], march);
    expect(s(agg.units)).toBe('-3');
    const charges: Record<Exclude<ChargeModel, 'dynamic'>, unknown> = {
      standard: { amount: '100' },
      graduated: { graduated_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '100', flat_amount: '500' }] },
      volume: { volume_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '100', flat_amount: '500' }] },
      package: { amount: '100', package_size: 10 },
      percentage: { rate: '10', fixed_amount: '5' },
      graduated_percentage: { graduated_percentage_ranges: [{ from_value: 0, to_value: null, rate: '10', flat_amount: '500' }] },
      custom: { custom_amount: '1000' },
    };
    for (const [charge_model, properties] of Object.entries(charges)) {
      const fees = computeChargeFees({ charge_model: charge_model as ChargeModel, properties }, { default: agg, filters: [] });
      expect([charge_model, s(fees.amount), s(fees.units)]).toEqual([charge_model, '0', '0']);
    }
    const invoice = assembleInvoice({ currency: 'USD', fees: [fee('api', 'charge', '0')] });
    expect(s(invoice.total)).toBe('0');
  });

  it.each<[ChargeModel, unknown, string]>([
    ['standard', { amount: '100' }, '0'],
    [
      'graduated',
      {
        graduated_ranges: [
          { from_value: 0, to_value: 10, per_unit_amount: '1000', flat_amount: '200' },
          { from_value: 11, to_value: null, per_unit_amount: '500', flat_amount: '300' },
        ],
      },
      '200',
    ],
    [
      'volume',
      {
        volume_ranges: [
          { from_value: 0, to_value: 100, per_unit_amount: '200', flat_amount: '100' },
          { from_value: 101, to_value: null, per_unit_amount: '100', flat_amount: '0' },
        ],
      },
      '100',
    ],
    ['package', { amount: '500', package_size: 10, free_units: 100 }, '0'],
    ['percentage', { rate: '1', fixed_amount: '50' }, '0'],
    ['graduated_percentage', { graduated_percentage_ranges: [{ from_value: 0, to_value: null, rate: '2', flat_amount: '25' }] }, '25'],
    ['dynamic', {}, '0'],
    ['custom', { custom_amount: '1000' }, '1000'],
    ['custom', { unit_price: '3' }, '0'],
  ])('zero usage through computeChargeFees: %s %j -> %s', (charge_model, properties, expected) => {
    const empty = aggregate(metricOf('sum'), [], march);
    const fees = computeChargeFees({ charge_model, properties }, { default: empty, filters: [] });
    expect(s(fees.amount)).toBe(expected);
    expect(s(fees.units)).toBe('0');
  });
});
