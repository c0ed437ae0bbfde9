/**
 * Benchmarks of the pure pricing engine (src/domain). Not timed tests: they print numbers and
 * assert nothing about speed. Run with `npx vitest bench --run --config vitest.bench.config.mts`
 * (scripts/bench.sh runs them first, without a running stack). The config's reporter ends with a
 * compact summary: mean and p99 per operation, and events/s for benches named "[N events/op]".
 *
 * 1. Invoice assembly for one subscription: 20 charges of mixed charge models, each priced from
 *    the 31 daily pre-aggregate rows (`daily_usage`) of a month that received 1,000,000 events,
 *    then taxes, a minimum commitment and two coupons: aggregateDailyRows + computeChargeFees +
 *    assembleInvoice, as the invoicing activity runs them. Target: < 5 ms per invoice.
 * 2. In-memory aggregation throughput of each aggregation type over 200,000 raw events (the path of
 *    current usage and of the aggregations a daily row cannot compute exactly).
 */
import { bench, describe } from 'vitest';
import {
  aggregate,
  aggregateDailyRows,
  type AggregationContext,
  type AggregationMetric,
  type AggregationType,
  type DailyUsageRow,
} from '../src/domain/aggregation';
import { type ChargeModel } from '../src/domain/charge-models';
import { computeChargeFees, type PricedCharge } from '../src/domain/charges';
import type { AppliedCoupon } from '../src/domain/coupons';
import { assembleInvoice, type PricedFee } from '../src/domain/invoice-assembly';
import { Dec, dec } from '../src/domain/money';
import type { TaxSets } from '../src/domain/taxes';
import type { UsageEvent } from '../src/domain/usage-types';

const MARCH: AggregationContext = { from: new Date('2026-03-01T00:00:00Z'), to: new Date('2026-04-01T00:00:00Z') };

/** A small deterministic generator (mulberry32), so every run prices the same month. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

// ---------------------------------------------------------------------------------------------
// 1. Invoice assembly from daily pre-aggregates.

const CHARGES = 20;
const DAYS = 31;
const MONTH_EVENTS = 1_000_000;

const tiers = (a: string, b: string, c: string) => [
  { from_value: 0, to_value: 10_000, per_unit_amount: a, flat_amount: '500' },
  { from_value: 10_001, to_value: 40_000, per_unit_amount: b, flat_amount: '0' },
  { from_value: 40_001, to_value: null, per_unit_amount: c, flat_amount: '0' },
];

/** Ten pricing templates, each used twice with a different metric: every roll-up-able model. */
const TEMPLATES: { model: ChargeModel; properties: unknown; caps?: Pick<PricedCharge, 'min_amount_cents' | 'max_amount_cents'> }[] = [
  { model: 'standard', properties: { amount: '0.05' } },
  { model: 'graduated', properties: { graduated_ranges: tiers('0.1', '0.05', '0.01') } },
  { model: 'volume', properties: { volume_ranges: tiers('0.1', '0.05', '0.01') } },
  { model: 'package', properties: { amount: '250', package_size: 1000, free_units: 5000 } },
  { model: 'percentage', properties: { rate: '1.5', fixed_amount: '0.2' } },
  {
    model: 'graduated_percentage',
    properties: {
      graduated_percentage_ranges: [
        { from_value: 0, to_value: 100_000, rate: '2', flat_amount: '0' },
        { from_value: 100_001, to_value: null, rate: '1', flat_amount: '500' },
      ],
    },
  },
  { model: 'custom', properties: { unit_price: '0.0125' } },
  { model: 'standard', properties: { amount: '1.25' }, caps: { min_amount_cents: '50000', max_amount_cents: '200000' } },
  { model: 'graduated', properties: { graduated_ranges: tiers('2', '1', '0.5') }, caps: { max_amount_cents: '150000' } },
  { model: 'custom', properties: { custom_amount: '9900' } },
];

/** Aggregations a daily row computes exactly (aggregation/daily.ts). */
const ROLL_UP_METRICS: AggregationMetric[] = [
  { aggregation_type: 'count', recurring: false },
  { aggregation_type: 'sum', field_name: 'gb', recurring: false, rounding_function: 'ceil', rounding_precision: 2 },
  { aggregation_type: 'max', field_name: 'seats', recurring: false },
  { aggregation_type: 'custom', expression: 'cpu_seconds * 2 + memory_mb * 0.001', recurring: false },
];

interface BenchCharge {
  id: string;
  charge: PricedCharge;
  metric: AggregationMetric;
  rows: DailyUsageRow[];
}

/** The month's rows of one charge: its share of the 1,000,000 events spread over 31 days. */
function dailyRows(metric: AggregationMetric, events: number, next: () => number): DailyUsageRow[] {
  const perDay = Math.floor(events / DAYS);
  return Array.from({ length: DAYS }, (_, day) => {
    const count = perDay + (day < events - perDay * DAYS ? 1 : 0);
    const value =
      metric.aggregation_type === 'count'
        ? new Dec(count)
        : metric.aggregation_type === 'max'
          ? new Dec(Math.floor(next() * 500) + 1)
          : // a sum of `count` values averaging 0.5: four fractional digits as ingestion stores them
            new Dec(Math.round(count * next() * 10_000)).div(10_000);
    return { usage_date: `2026-03-${String(day + 1).padStart(2, '0')}`, usage_value: value, events_count: count };
  });
}

function monthOfCharges(): BenchCharge[] {
  const next = random(42);
  return Array.from({ length: CHARGES }, (_, i) => {
    const template = TEMPLATES[i % TEMPLATES.length]!;
    const metric = ROLL_UP_METRICS[i % ROLL_UP_METRICS.length]!;
    return {
      id: `charge-${i}`,
      charge: { charge_model: template.model, properties: template.properties, ...template.caps },
      metric,
      rows: dailyRows(metric, MONTH_EVENTS / CHARGES, next),
    };
  });
}

const charges = monthOfCharges();
const totalEvents = charges.reduce((n, c) => n + c.rows.reduce((m, r) => m + r.events_count, 0), 0);
if (totalEvents !== MONTH_EVENTS || charges.some((c) => c.rows.length !== DAYS)) {
  throw new Error(`bench setup: expected ${CHARGES} x ${DAYS} rows of ${MONTH_EVENTS} events, got ${totalEvents} events`);
}

const TAXES: TaxSets = {
  organization: [{ id: 'org-vat', code: 'ORG_VAT', rate: dec('0.19'), applied_to_organization: true }],
  customer: [{ id: 'vat', code: 'VAT', rate: dec('0.2') }],
  plan: [],
  charges: {
    'charge-3': [{ id: 'reduced', code: 'REDUCED', rate: dec('0.055') }],
    'charge-7': [
      { id: 'state', code: 'STATE', rate: dec('0.0625') },
      { id: 'city', code: 'CITY', rate: dec('0.02') },
    ],
  },
  add_ons: {},
};

const COUPONS: AppliedCoupon[] = [
  {
    id: 'applied-fixed',
    status: 'active',
    applied_at: new Date('2026-01-10T00:00:00Z'),
    coupon: {
      id: 'fixed',
      code: 'WELCOME',
      coupon_type: 'fixed_amount',
      frequency: 'forever',
      reusable: true,
      amount_cents: dec(5000),
      amount_currency: 'USD',
    },
  },
  {
    id: 'applied-percent',
    status: 'active',
    applied_at: new Date('2026-02-01T00:00:00Z'),
    coupon: {
      id: 'percent',
      code: 'SPRING10',
      coupon_type: 'percentage',
      frequency: 'recurring',
      frequency_duration: 3,
      reusable: true,
      percentage_rate: dec(10),
    },
  },
];

/** One invoice: every charge from its daily rows, then the invoice pipeline. */
function invoiceFromDailyRows() {
  const fees: PricedFee[] = [
    {
      key: 'subscription',
      fee_type: 'subscription',
      amount_cents: dec(9900),
      units: dec(1),
      events_count: 0,
      unit_amount_cents: dec(9900),
    },
  ];
  for (const { id, charge, metric, rows } of charges) {
    const daily = aggregateDailyRows(metric, rows);
    const priced = computeChargeFees(charge, { default: { ...daily, perEventValues: [] }, filters: [] });
    fees.push({
      key: id,
      fee_type: 'charge',
      charge_id: id,
      amount_cents: priced.default.amount,
      units: priced.default.model.units,
      events_count: priced.default.model.eventsCount,
      unit_amount_cents: priced.default.unitAmount,
    });
    if (priced.minTrueUp.gt(0)) {
      fees.push({
        key: `${id}:min`,
        fee_type: 'charge',
        charge_id: id,
        amount_cents: priced.minTrueUp,
        units: dec(1),
        events_count: 0,
        unit_amount_cents: priced.minTrueUp,
      });
    }
  }
  return assembleInvoice({
    currency: 'USD',
    fees,
    taxes: TAXES,
    applied_coupons: COUPONS,
    minimum_commitment: { amount_cents: dec(2_000_000) },
  });
}

// A wrong wiring would bench nothing: the sample invoice must have every fee, both coupons, taxes.
const sample = invoiceFromDailyRows();
if (sample.fees.length < CHARGES + 1 || sample.coupons.length !== 2 || !sample.tax_amount.gt(0) || !sample.total.gt(0)) {
  throw new Error('bench setup: the sample invoice is not what the benchmark means to measure');
}

describe('invoice assembly from daily pre-aggregates', () => {
  bench(
    `invoice: ${CHARGES} charges x ${DAYS} daily rows (${MONTH_EVENTS.toLocaleString('en-US')} events), taxes, 2 coupons (target < 5 ms)`,
    () => {
      invoiceFromDailyRows();
    },
    { time: 2000, warmupTime: 500 },
  );
});

// ---------------------------------------------------------------------------------------------
// 2. In-memory aggregation throughput.

const AGGREGATION_EVENTS = 200_000;

/** 200,000 events over March in timestamp order (as the store returns them), with every property the metrics read. */
function monthOfEvents(): UsageEvent[] {
  const next = random(7);
  const step = (MARCH.to.getTime() - MARCH.from.getTime()) / AGGREGATION_EVENTS;
  return Array.from({ length: AGGREGATION_EVENTS }, (_, i) => ({
    transactionId: `tx-${i}`,
    timestamp: new Date(MARCH.from.getTime() + Math.floor(i * step)),
    properties: {
      // numbers and numeric strings, as clients send both; a few deltas are negative
      value: i % 3 === 0 ? String(Math.floor(next() * 10_000) / 100) : Math.floor(next() * 2000 - 200) / 100,
      user_id: `user-${Math.floor(next() * 20_000)}`,
      operation_type: i % 10 === 9 ? 'remove' : 'add',
      cpu_seconds: Math.floor(next() * 3600),
      memory_mb: String(Math.floor(next() * 16_384)),
    },
  }));
}

const events = monthOfEvents();
if (events.at(-1)!.timestamp.getTime() >= MARCH.to.getTime() || events.length !== AGGREGATION_EVENTS) {
  throw new Error('bench setup: the events must all fall in March');
}

const AGGREGATIONS: Record<AggregationType, AggregationMetric> = {
  count: { aggregation_type: 'count', recurring: false },
  sum: { aggregation_type: 'sum', field_name: 'value', recurring: false },
  max: { aggregation_type: 'max', field_name: 'value', recurring: false },
  unique_count: { aggregation_type: 'unique_count', field_name: 'user_id', recurring: false },
  weighted_sum: { aggregation_type: 'weighted_sum', field_name: 'value', recurring: false },
  latest: { aggregation_type: 'latest', field_name: 'value', recurring: false },
  custom: { aggregation_type: 'custom', expression: 'round(cpu_seconds / 3600 * 2 + memory_mb / 1024, 4)', recurring: false },
};

describe('in-memory aggregation throughput', () => {
  for (const [type, metric] of Object.entries(AGGREGATIONS)) {
    bench(
      `aggregate ${type} [${AGGREGATION_EVENTS} events/op]`,
      () => {
        aggregate(metric, events, MARCH);
      },
      // A few hundred milliseconds an operation: a handful of iterations is enough.
      { time: 1500, iterations: 5, warmupTime: 0, warmupIterations: 1 },
    );
  }
});
