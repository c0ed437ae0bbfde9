// GET /v1/customers/{id}/current_usage (api-contract.md "Customers"; billing-rules.md "Usage").
//
// Every number is asserted twice: against a value computed by hand from the rules (the comment next
// to it shows the arithmetic), and against the pricing engine called directly on the same events
// (`aggregate` from src/domain/aggregation, then `computeChargeFees`). The API reads daily
// pre-aggregates where it can and raw events elsewhere; the engine always reads raw events, so a
// divergence between the two paths fails here.
//
// Metrics and plans are created through the API; subscriptions are inserted as fixtures (the
// subscriptions API does not exist yet). The application clock is fixed, so "now" and therefore
// the current period are known: 2026-03-18 12:00 UTC, in March 2026. The main organization's time
// zone is Europe/Paris, so its calendar month starts at 2026-02-28T23:00Z and ends at
// 2026-03-31T22:00Z (CEST from March 29).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aggregate, type ProrationContext } from '../../src/domain/aggregation';
import { splitEventsByFilters } from '../../src/domain/charge-filters';
import { computeChargeFees } from '../../src/domain/charges';
import { toDecimal4String } from '../../src/domain/money';
import type { UsageEvent } from '../../src/domain/usage-types';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CurrentUsageResource } from '../../src/resources/current-usage';
import type { CustomerResource } from '../../src/resources/customer';
import type { EventResource } from '../../src/resources/event';
import type { ChargeResource, PlanResource } from '../../src/resources/plan';
import { insertSubscription } from '../support/catalog-fixtures';
import { expectError, expectValidationError } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

/** One charge of the current usage. */
type CurrentUsageCharge = CurrentUsageResource['charges'][number];

const NOW = new Date('2026-03-18T12:00:00.000Z');
/** 2026-03-01 00:00 in Europe/Paris (CET, UTC+1). */
const MONTH_START = new Date('2026-02-28T23:00:00.000Z');
/** 2026-04-01 00:00 in Europe/Paris (CEST, UTC+2). */
const MONTH_END = new Date('2026-03-31T22:00:00.000Z');

let clock = NOW;
let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const uid = (label: string) => `${label}_${(seq += 1)}_${randomUUID().slice(0, 6)}`;

beforeAll(async () => {
  stack = await createTestStack({ now: () => clock });
  org = await newOrg();
});
afterAll(async () => stack?.close());

async function newOrg(timezone = 'Europe/Paris'): Promise<TestOrganization> {
  return createOrganization(stack.app, { name: `Usage Org ${uid('o')}`, timezone, events_rate_limit_per_minute: 100_000 });
}

async function createCustomer(o: TestOrganization, extra: Record<string, unknown> = {}): Promise<CustomerResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: o.headers,
    payload: { external_id: uid('cus'), ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

async function createMetric(o: TestOrganization, body: Record<string, unknown>): Promise<BillableMetricResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/billable_metrics',
    headers: o.headers,
    payload: { code: uid('m'), name: 'Metric', ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<BillableMetricResource>();
}

async function createPlan(o: TestOrganization, charges: Record<string, unknown>[]): Promise<PlanResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/plans',
    headers: o.headers,
    payload: { code: uid('plan'), name: 'Plan', interval: 'monthly', amount_cents: 0, currency: 'USD', charges },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function subscribe(
  o: TestOrganization,
  customer: CustomerResource,
  plan: PlanResource,
  extra: { startedAt?: Date; externalId?: string; status?: 'active' | 'terminated' | 'pending'; endingAt?: Date } = {},
): Promise<string> {
  const id = await insertSubscription(stack.db, {
    organizationId: o.id,
    customerId: customer.id,
    externalCustomerId: customer.external_id,
    planId: plan.id,
    startedAt: extra.startedAt ?? MONTH_START,
    ...(extra.externalId ? { externalId: extra.externalId } : {}),
    ...(extra.status ? { status: extra.status } : {}),
  });
  if (extra.endingAt) {
    await stack.db.models.Subscription.updateOne({ _id: id }, { $set: { ending_at: extra.endingAt, terminated_at: extra.endingAt } });
  }
  return id;
}

type Sent = [timestamp: string, properties: Record<string, unknown>];

/** Sends events through POST /v1/events/batch (one or more batches); every event must be stored. */
async function send(
  o: TestOrganization,
  customer: CustomerResource,
  code: string,
  events: Sent[],
  extra: Record<string, unknown> = {},
): Promise<EventResource[]> {
  const stored: EventResource[] = [];
  for (let i = 0; i < events.length; i += 100) {
    const payload = {
      events: events.slice(i, i + 100).map(([timestamp, properties]) => ({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code,
        timestamp,
        properties,
        ...extra,
      })),
    };
    const res = await stack.app.inject({ method: 'POST', url: '/v1/events/batch', headers: o.headers, payload });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<{ ingested: number; errors: unknown[]; events: EventResource[] }>();
    expect(body.errors).toEqual([]);
    expect(body.ingested).toBe(payload.events.length);
    stored.push(...body.events);
  }
  return stored;
}

async function currentUsage(o: TestOrganization, customerId: string, subscriptionId?: string) {
  const query = subscriptionId === undefined ? '' : `?subscription_id=${encodeURIComponent(subscriptionId)}`;
  return stack.app.inject({
    method: 'GET',
    url: `/v1/customers/${encodeURIComponent(customerId)}/current_usage${query}`,
    headers: o.headers,
  });
}

async function usageOf(o: TestOrganization, customerId: string, subscriptionId?: string): Promise<CurrentUsageResource> {
  const res = await currentUsage(o, customerId, subscriptionId);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<CurrentUsageResource>();
}

function chargeOf(usage: CurrentUsageResource, chargeId: string): CurrentUsageCharge {
  const charge = usage.charges.find((c) => c.charge_id === chargeId);
  expect(charge, `charge ${chargeId} in current_usage`).toBeDefined();
  return charge!;
}

function amountsOf(charge: CurrentUsageCharge) {
  return { units: charge.units, events_count: charge.events_count, amount_cents: charge.amount_cents, filters: charge.filters };
}

/**
 * The engine's answer for one charge: the subscription's stored events of the charge's metric
 * (as ingestion attributed them), split by the charge's filters, aggregated with `aggregate` over
 * the period (with `now`, as current usage does), priced with `computeChargeFees`. Shaped like the
 * API's charge entry.
 */
function engine(
  metric: BillableMetricResource,
  charge: ChargeResource,
  stored: readonly EventResource[],
  subscriptionId: string,
  range: { from: Date; to: Date; now?: Date; prorate?: ProrationContext } = { from: MONTH_START, to: MONTH_END },
) {
  const events: UsageEvent[] = stored
    .filter((e) => e.code === metric.code && e.subscription_ids.includes(subscriptionId))
    .map((e) => ({ transactionId: e.transaction_id, timestamp: new Date(e.timestamp), properties: e.properties }));
  // Current usage counts every event reported for the period; only weighted_sum integrates up to now.
  const context = {
    from: range.from,
    to: range.to,
    ...(metric.aggregation_type === 'weighted_sum' ? { now: range.now ?? clock } : {}),
    ...(range.prorate ? { prorate: range.prorate } : {}),
  };
  const split = splitEventsByFilters(charge.filters, events);
  const filterAggregations = charge.filters.map((_, i) => aggregate(metric, split.filters[i]!, context));
  const fees = computeChargeFees(
    {
      charge_model: charge.charge_model,
      properties: charge.properties,
      min_amount_cents: charge.min_amount_cents,
      max_amount_cents: charge.max_amount_cents,
    },
    {
      default: aggregate(metric, split.default, context),
      filters: charge.filters.map((f, i) => ({ properties: f.properties, aggregation: filterAggregations[i]! })),
    },
  );
  return {
    fees,
    view: {
      units: toDecimal4String(fees.units),
      events_count: fees.eventsCount,
      amount_cents: toDecimal4String(fees.amount),
      filters: charge.filters.map((f, i) => ({
        values: f.values,
        units: toDecimal4String(filterAggregations[i]!.units),
        events_count: filterAggregations[i]!.eventsCount,
        amount_cents: toDecimal4String(fees.filters[i]!.amount),
      })),
    },
  };
}

const d = (n: number) => String(n).padStart(2, '0');
/** An instant on a March 2026 day, UTC (the whole day lies inside the Paris month too for days 1..31 at 01:00..21:59 UTC). */
const march = (day: number, hour = 10, minute = 0) => `2026-03-${d(day)}T${d(hour)}:${d(minute)}:00Z`;

describe('current usage matches the engine for every charge model', () => {
  interface ModelCase {
    name: string;
    metric: Record<string, unknown>;
    charge: Record<string, unknown>;
    events: Sent[];
    /** Computed by hand from billing-rules.md / lago-reference.md (amounts in cents). */
    expected: Pick<CurrentUsageCharge, 'units' | 'events_count' | 'amount_cents'>;
  }

  const countEvents = (n: number): Sent[] => Array.from({ length: n }, (_, i) => [march(1 + (i % 17), 10, i), {}] as Sent);
  const percentageEvents: Sent[] = [
    [march(2), { amount: 10000 }],
    [march(3), { amount: 20000 }],
    [march(4), { amount: 30000 }],
    [march(5), { amount: 40000 }],
  ];

  const cases: ModelCase[] = [
    {
      // 2.5 + 4 + 3.5 = 10 GB (the non-numeric and the missing value are ignored and not counted);
      // 10 x 12.5 = 125. The first event, 2026-02-28T23:30Z, is 00:30 on March 1 in Paris.
      name: 'standard (sum)',
      metric: { aggregation_type: 'sum', field_name: 'gb' },
      charge: { charge_model: 'standard', properties: { amount: '12.5' } },
      events: [
        ['2026-02-28T23:30:00Z', { gb: 2.5 }],
        [march(5), { gb: 4 }],
        [march(17, 22, 59), { gb: '3.5' }],
        [march(10), { gb: 'abc' }],
        [march(11), {}],
      ],
      expected: { units: '10.0000', events_count: 3, amount_cents: '125.0000' },
    },
    {
      // max(3, 9, 4) = 9 (the roll-up keeps each day's maximum); 9 x 7 = 63.
      name: 'standard (max)',
      metric: { aggregation_type: 'max', field_name: 'gb' },
      charge: { charge_model: 'standard', properties: { amount: '7' } },
      events: [
        [march(2), { gb: 3 }],
        [march(2, 11), { gb: 9 }],
        [march(9), { gb: 4 }],
      ],
      expected: { units: '9.0000', events_count: 3, amount_cents: '63.0000' },
    },
    {
      // 1.2 + 2.2 = 3.4, ceil -> 4 (rounding applies to the aggregated value); 4 x 10 = 40.
      name: 'standard (sum rounded up)',
      metric: { aggregation_type: 'sum', field_name: 'gb', rounding_function: 'ceil', rounding_precision: 0 },
      charge: { charge_model: 'standard', properties: { amount: '10' } },
      events: [
        [march(2), { gb: 1.2 }],
        [march(3), { gb: '2.2' }],
      ],
      expected: { units: '4.0000', events_count: 2, amount_cents: '40.0000' },
    },
    {
      // Classic tiers [0-10 @10 +2], [11-20 @5 +3], [21-inf @5 +3], 15 events:
      // (10 x 10 + 2) + ((15 - 11 + 1) x 5 + 3) = 102 + 28 = 130.
      name: 'graduated (count)',
      metric: { aggregation_type: 'count' },
      charge: {
        charge_model: 'graduated',
        properties: {
          graduated_ranges: [
            { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '2' },
            { from_value: 11, to_value: 20, per_unit_amount: '5', flat_amount: '3' },
            { from_value: 21, to_value: null, per_unit_amount: '5', flat_amount: '3' },
          ],
        },
      },
      events: countEvents(15),
      expected: { units: '15.0000', events_count: 15, amount_cents: '130.0000' },
    },
    {
      // 60 + 40.5 = 100.5 units; ceil(100.5) = 101 >= 101 and 100.5 <= 200: second tier for every
      // unit, 100.5 x 1 + 0 = 100.5.
      name: 'volume (sum)',
      metric: { aggregation_type: 'sum', field_name: 'gb' },
      charge: {
        charge_model: 'volume',
        properties: {
          volume_ranges: [
            { from_value: 0, to_value: 100, per_unit_amount: '2', flat_amount: '1' },
            { from_value: 101, to_value: 200, per_unit_amount: '1', flat_amount: '0' },
            { from_value: 201, to_value: null, per_unit_amount: '0.5', flat_amount: '50' },
          ],
        },
      },
      events: [
        [march(6), { gb: 60 }],
        [march(7), { gb: '40.5' }],
      ],
      expected: { units: '100.5000', events_count: 2, amount_cents: '100.5000' },
    },
    {
      // 100 + 115 = 215 units, 100 free -> 115 paid -> ceil(115 / 10) = 12 packages x 5 = 60.
      name: 'package (sum)',
      metric: { aggregation_type: 'sum', field_name: 'gb' },
      charge: { charge_model: 'package', properties: { amount: '5', package_size: 10, free_units: 100 } },
      events: [
        [march(3), { gb: 100 }],
        [march(12), { gb: 115 }],
      ],
      expected: { units: '215.0000', events_count: 2, amount_cents: '60.0000' },
    },
    {
      // Per transaction (raw events): 1000 x 1 % + 5 = 15 -> min 30; 5000 x 1 % + 5 = 55;
      // 50000 x 1 % + 5 = 505 -> max 200. 30 + 55 + 200 = 285.
      name: 'percentage with fixed_amount and per-transaction min/max',
      metric: { aggregation_type: 'sum', field_name: 'amount' },
      charge: {
        charge_model: 'percentage',
        properties: { rate: '1', fixed_amount: '5', per_transaction_min_amount: '30', per_transaction_max_amount: '200' },
      },
      events: [
        [march(2), { amount: 1000 }],
        [march(8), { amount: '5000' }],
        [march(15), { amount: 50000 }],
      ],
      expected: { units: '56000.0000', events_count: 3, amount_cents: '285.0000' },
    },
    {
      // lago-reference 2.5 Ex A in cents: the first 2 events are free (10000 + 20000 = 30000):
      // (100000 - 30000) x 1 % = 700, plus (4 - 2) x 50 = 100 -> 800.
      name: 'percentage with fixed_amount and free_units_per_events',
      metric: { aggregation_type: 'sum', field_name: 'amount' },
      charge: { charge_model: 'percentage', properties: { rate: '1', fixed_amount: '50', free_units_per_events: 2 } },
      events: percentageEvents,
      expected: { units: '100000.0000', events_count: 4, amount_cents: '800.0000' },
    },
    {
      // lago-reference 2.5 Ex B without the fixed amount: running totals 10000, 30000 (stops after
      // passing 25000) -> free value min(30000, 25000) = 25000 -> (100000 - 25000) x 1 % = 750.
      name: 'percentage with free_units_per_total_aggregation only',
      metric: { aggregation_type: 'sum', field_name: 'amount' },
      charge: { charge_model: 'percentage', properties: { rate: '1', free_units_per_total_aggregation: '25000' } },
      events: percentageEvents,
      expected: { units: '100000.0000', events_count: 4, amount_cents: '750.0000' },
    },
    {
      // 700 + 800 = 1500: 1000 x 2 % + ((1500 - 1001 + 1) x 1 % + 5) = 20 + 10 = 30.
      name: 'graduated_percentage (sum)',
      metric: { aggregation_type: 'sum', field_name: 'amount' },
      charge: {
        charge_model: 'graduated_percentage',
        properties: {
          graduated_percentage_ranges: [
            { from_value: 0, to_value: 1000, rate: '2', flat_amount: '0' },
            { from_value: 1001, to_value: null, rate: '1', flat_amount: '5' },
          ],
        },
      },
      events: [
        [march(4), { amount: 700 }],
        [march(16), { amount: 800 }],
      ],
      expected: { units: '1500.0000', events_count: 2, amount_cents: '30.0000' },
    },
    {
      // Each event prices itself: 150.5 x 2 + 49.5 x 3 = 301 + 148.5 = 449.5; units 2 + 3 = 5; the
      // event with neither price nor quantity contributes nothing.
      name: 'dynamic (sum of quantity)',
      metric: { aggregation_type: 'sum', field_name: 'quantity' },
      charge: { charge_model: 'dynamic', properties: {} },
      events: [
        [march(5), { unit_price: '150.5', quantity: 2 }],
        [march(6), { unit_price: 49.5, quantity: '3' }],
        [march(7), { note: 'nothing to price' }],
      ],
      expected: { units: '5.0000', events_count: 2, amount_cents: '449.5000' },
    },
    {
      // Expression cpu_seconds * 2 + memory_mb: 10 x 2 + 5 = 25, 1.5 x 2 + 0 = 3, the third lacks
      // memory_mb and is skipped -> 28 units x 0.5 = 14.
      name: 'custom with unit_price (custom aggregation)',
      metric: { aggregation_type: 'custom', field_name: 'cpu_seconds', expression: 'cpu_seconds * 2 + memory_mb' },
      charge: { charge_model: 'custom', properties: { unit_price: '0.5' } },
      events: [
        [march(2), { cpu_seconds: 10, memory_mb: 5 }],
        [march(3), { cpu_seconds: '1.5', memory_mb: 0 }],
        [march(4), { cpu_seconds: 3 }],
      ],
      expected: { units: '28.0000', events_count: 2, amount_cents: '14.0000' },
    },
    {
      // A fixed amount for the period, due without any event: 999.
      name: 'custom with custom_amount and no events',
      metric: { aggregation_type: 'custom', field_name: 'cpu_seconds', expression: 'cpu_seconds * 2' },
      charge: { charge_model: 'custom', properties: { custom_amount: '999' } },
      events: [],
      expected: { units: '0.0000', events_count: 0, amount_cents: '999.0000' },
    },
  ];

  it.each(cases)('$name', async ({ metric: metricBody, charge: chargeBody, events, expected }) => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, metricBody);
    const plan = await createPlan(org, [{ billable_metric_id: metric.id, ...chargeBody }]);
    const subscriptionId = await subscribe(org, customer, plan);
    const stored = await send(org, customer, metric.code, events);
    for (const e of stored) expect(e.subscription_ids).toEqual([subscriptionId]);

    const usage = await usageOf(org, customer.id);
    expect(usage).toMatchObject({
      customer_id: customer.id,
      subscription_id: subscriptionId,
      currency: 'USD',
      from_datetime: '2026-02-28T23:00:00.000Z',
      to_datetime: '2026-03-31T22:00:00.000Z',
    });
    const charge = chargeOf(usage, plan.charges[0]!.id);
    expect(charge).toMatchObject({ billable_metric_code: metric.code, charge_model: chargeBody.charge_model });
    // (a) by hand
    expect(amountsOf(charge)).toEqual({ ...expected, filters: [] });
    // (b) the engine on the same events
    expect(amountsOf(charge)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId).view);
    // One charge: the totals are its amount, untaxed.
    expect({ amount: usage.amount_cents, taxes: usage.taxes_amount_cents, total: usage.total_amount_cents }).toEqual({
      amount: expected.amount_cents,
      taxes: '0.0000',
      total: expected.amount_cents,
    });
  });
});

describe('charges with filters and caps', () => {
  it('lists each filter with its units, events_count and amount; the charge totals are the sums with the default bucket', async () => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, {
      aggregation_type: 'sum',
      field_name: 'gb',
      filters: [
        { key: 'region', values: ['eu', 'us', 'ap'] },
        { key: 'tier', values: ['gold', 'silver'] },
      ],
    });
    const plan = await createPlan(org, [
      {
        billable_metric_id: metric.code,
        charge_model: 'standard',
        properties: { amount: '1' },
        filters: [
          { values: { region: ['eu'] }, properties: { amount: '2' } },
          { values: { region: ['us'], tier: ['gold'] }, properties: { amount: '3' } },
        ],
      },
    ]);
    const subscriptionId = await subscribe(org, customer, plan);
    const stored = await send(org, customer, metric.code, [
      [march(2), { region: 'eu', gb: 4 }], // filter eu
      [march(3), { region: 'eu', tier: 'gold', gb: 1 }], // filter eu (us+gold needs us)
      [march(4), { region: 'us', tier: 'gold', gb: 5 }], // filter us+gold
      [march(5), { region: 'us', tier: 'silver', gb: 3 }], // default
      [march(6), { region: 'ap', gb: 7 }], // default
      [march(7), { gb: 2 }], // default (no region)
      [march(8), { region: 'mars', gb: 1 }], // default (a value the metric does not declare)
    ]);

    const usage = await usageOf(org, customer.id);
    const charge = chargeOf(usage, plan.charges[0]!.id);
    // eu: 4 + 1 = 5 GB x 2 = 10; us+gold: 5 GB x 3 = 15; default: 3 + 7 + 2 + 1 = 13 GB x 1 = 13.
    // Charge: 5 + 5 + 13 = 23 GB, 2 + 1 + 4 = 7 events, 10 + 15 + 13 = 38.
    expect(amountsOf(charge)).toEqual({
      units: '23.0000',
      events_count: 7,
      amount_cents: '38.0000',
      filters: [
        { values: { region: ['eu'] }, units: '5.0000', events_count: 2, amount_cents: '10.0000' },
        { values: { region: ['us'], tier: ['gold'] }, units: '5.0000', events_count: 1, amount_cents: '15.0000' },
      ],
    });
    expect(amountsOf(charge)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId).view);
    expect(usage.amount_cents).toBe('38.0000');
  });

  it('holds a charge total between min_amount_cents and max_amount_cents (full period), the max shared over filters', async () => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, { aggregation_type: 'count', filters: [{ key: 'region', values: ['eu', 'us'] }] });
    const plan = await createPlan(org, [
      { billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '10' }, min_amount_cents: 500 },
      {
        billable_metric_id: metric.id,
        charge_model: 'standard',
        properties: { amount: '100' },
        max_amount_cents: '200',
        filters: [{ values: { region: ['eu'] }, properties: { amount: '100' } }],
      },
      {
        billable_metric_id: metric.id,
        charge_model: 'standard',
        properties: { amount: '10' },
        min_amount_cents: '10',
        max_amount_cents: '1000',
      },
    ]);
    const subscriptionId = await subscribe(org, customer, plan);
    const stored = await send(org, customer, metric.code, [
      [march(2), { region: 'eu' }],
      [march(3), { region: 'eu' }],
      [march(4), { region: 'eu' }],
      [march(5), { region: 'us' }],
    ]);
    const usage = await usageOf(org, customer.id);
    const [minCharge, maxCharge, betweenCharge] = plan.charges.map((c) => chargeOf(usage, c.id));

    // 4 events x 10 = 40, below the minimum of 500 -> 500 (the whole period: no proration).
    expect(amountsOf(minCharge!)).toEqual({ units: '4.0000', events_count: 4, amount_cents: '500.0000', filters: [] });
    // eu 3 x 100 = 300, default (us) 1 x 100 = 100, 400 in all, above the maximum of 200: the 200
    // taken off is shared in proportion, 300/400 x 200 = 150 off eu, 50 off the default bucket.
    expect(amountsOf(maxCharge!)).toEqual({
      units: '4.0000',
      events_count: 4,
      amount_cents: '200.0000',
      filters: [{ values: { region: ['eu'] }, units: '3.0000', events_count: 3, amount_cents: '150.0000' }],
    });
    // 40 lies between 10 and 1000: unchanged.
    expect(amountsOf(betweenCharge!)).toEqual({ units: '4.0000', events_count: 4, amount_cents: '40.0000', filters: [] });
    // 500 + 200 + 40 = 740.
    expect(usage).toMatchObject({ amount_cents: '740.0000', taxes_amount_cents: '0.0000', total_amount_cents: '740.0000' });

    const byEngine = plan.charges.map((c) => engine(metric, c, stored, subscriptionId));
    expect([minCharge, maxCharge, betweenCharge].map((c) => amountsOf(c!))).toEqual(byEngine.map((e) => e.view));
    expect(byEngine.map((e) => e.fees.minTrueUp.toString())).toEqual(['460', '0', '0']);
  });
});

describe('aggregations', () => {
  it('a recurring sum counts every event since the subscription started, the previous month included', async () => {
    const customer = await createCustomer(org);
    const recurring = await createMetric(org, { aggregation_type: 'sum', field_name: 'seats', recurring: true });
    const metered = await createMetric(org, { aggregation_type: 'sum', field_name: 'seats' });
    const plan = await createPlan(org, [
      { billable_metric_id: recurring.id, charge_model: 'standard', properties: { amount: '100' } },
      { billable_metric_id: metered.id, charge_model: 'standard', properties: { amount: '100' } },
    ]);
    // Started on 2026-02-01 00:00 in Paris.
    const startedAt = new Date('2026-01-31T23:00:00.000Z');
    const subscriptionId = await subscribe(org, customer, plan, { startedAt });
    const events: Sent[] = [
      ['2026-01-20T10:00:00Z', { seats: 100 }], // before the subscription: never attributed
      ['2026-02-10T10:00:00Z', { seats: 5 }],
      ['2026-02-20T10:00:00Z', { seats: 3 }],
      [march(5), { seats: -2 }],
    ];
    const stored = [...(await send(org, customer, recurring.code, events)), ...(await send(org, customer, metered.code, events))];
    expect(stored.filter((e) => e.subscription_ids.length === 0).map((e) => e.timestamp)).toEqual([
      '2026-01-20T10:00:00.000Z',
      '2026-01-20T10:00:00.000Z',
    ]);

    const usage = await usageOf(org, customer.id);
    expect(usage.from_datetime).toBe('2026-02-28T23:00:00.000Z');
    const [recurringCharge, meteredCharge] = plan.charges.map((c) => chargeOf(usage, c.id));
    // Recurring: 5 + 3 - 2 = 6 seats (February's events carry over) x 100 = 600.
    expect(amountsOf(recurringCharge!)).toEqual({ units: '6.0000', events_count: 3, amount_cents: '600.0000', filters: [] });
    // Metered: only March's -2, a negative quantity: units and amount are 0 (no negative fee).
    expect(amountsOf(meteredCharge!)).toEqual({ units: '0.0000', events_count: 1, amount_cents: '0.0000', filters: [] });
    expect(amountsOf(recurringCharge!)).toEqual(engine(recurring, plan.charges[0]!, stored, subscriptionId).view);
    expect(amountsOf(meteredCharge!)).toEqual(engine(metered, plan.charges[1]!, stored, subscriptionId).view);
    expect(usage.amount_cents).toBe('600.0000');
  });

  it('prorated charges weigh each recurring unit by the local dates of the period it was present, in the customer time zone', async () => {
    // lago-reference.md 2.10, api-contract.md: units exact, only the fee rounded (4 decimals).
    const customer = await createCustomer(org); // Europe/Paris: March 2026 is 31 local dates
    const seats = await createMetric(org, { aggregation_type: 'sum', field_name: 'seats', recurring: true });
    const users = await createMetric(org, { aggregation_type: 'unique_count', field_name: 'user_id', recurring: true });
    const plan = await createPlan(org, [
      { billable_metric_id: seats.id, charge_model: 'standard', properties: { amount: '1000' }, prorated: true },
      { billable_metric_id: seats.id, charge_model: 'standard', properties: { amount: '1000' } },
      { billable_metric_id: users.id, charge_model: 'standard', properties: { amount: '250' }, prorated: true },
    ]);
    expect(plan.charges.map((c) => c.prorated)).toEqual([true, false, true]);
    // Started on 2026-02-01 00:00 in Paris.
    const subscriptionId = await subscribe(org, customer, plan, { startedAt: new Date('2026-01-31T23:00:00.000Z') });
    const stored = [
      ...(await send(org, customer, seats.code, [
        ['2026-02-10T10:00:00Z', { seats: 2 }], // carried over: all 31 dates
        ['2026-03-10T23:30:00Z', { seats: 1 }], // March 11 00:30 in Paris (March 10 in UTC): dates 11..31 = 21
        [march(16), { seats: -1 }], // removal: subtracts for dates 16..31 = 16
      ])),
      ...(await send(org, customer, users.code, [
        ['2026-02-05T10:00:00Z', { user_id: 'u1' }], // carried over: 31 dates
        ['2026-03-10T23:30:00Z', { user_id: 'u2' }], // March 11 in Paris
        [march(16), { user_id: 'u2', operation_type: 'remove' }], // u2 present March 11..16 = 6 dates
      ])),
    ];

    const usage = await usageOf(org, customer.id);
    expect(usage).toMatchObject({ from_datetime: MONTH_START.toISOString(), to_datetime: MONTH_END.toISOString() });
    const [proratedSeats, fullSeats, proratedUsers] = plan.charges.map((c) => chargeOf(usage, c.id));
    // (2 x 31 + 1 x 21 - 1 x 16) / 31 = 67/31 = 2.16129… seats; x 1000 = 2161.2903… -> 2161.2903.
    // (Had the event's UTC date been used: (62 + 22 - 16) / 31 x 1000 = 2193.5484.)
    expect(amountsOf(proratedSeats!)).toEqual({ units: '2.1613', events_count: 3, amount_cents: '2161.2903', filters: [] });
    // The same events unprorated: 2 + 1 - 1 = 2 seats x 1000 = 2000.
    expect(amountsOf(fullSeats!)).toEqual({ units: '2.0000', events_count: 3, amount_cents: '2000.0000', filters: [] });
    // (31 + 6) / 31 = 37/31 = 1.19354… users; x 250 = 298.3870967… -> 298.3871.
    expect(amountsOf(proratedUsers!)).toEqual({ units: '1.1935', events_count: 3, amount_cents: '298.3871', filters: [] });
    expect(usage.amount_cents).toBe('4459.6774'); // 2161.2903 + 2000 + 298.3871

    const prorate: ProrationContext = { from: MONTH_START, to: MONTH_END, periodDays: 31, timezone: 'Europe/Paris' };
    const range = { from: MONTH_START, to: MONTH_END, prorate };
    expect(amountsOf(proratedSeats!)).toEqual(engine(seats, plan.charges[0]!, stored, subscriptionId, range).view);
    expect(amountsOf(fullSeats!)).toEqual(engine(seats, plan.charges[1]!, stored, subscriptionId).view);
    expect(amountsOf(proratedUsers!)).toEqual(engine(users, plan.charges[2]!, stored, subscriptionId, range).view);
  });

  it('weighted_sum integrates the level from the period start to now over the whole period (raw events)', async () => {
    // A UTC customer, so that March is exactly 31 x 24 hours.
    const customer = await createCustomer(org, { timezone: 'UTC' });
    const metric = await createMetric(org, { aggregation_type: 'weighted_sum', field_name: 'level' });
    const plan = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '31' } }]);
    const from = new Date('2026-03-01T00:00:00.000Z');
    const to = new Date('2026-04-01T00:00:00.000Z');
    const subscriptionId = await subscribe(org, customer, plan, { startedAt: from });
    const stored = await send(org, customer, metric.code, [
      ['2026-03-16T00:00:00Z', { level: 20 }],
      ['2026-03-18T00:00:00Z', { level: '10' }],
      ['2026-03-25T00:00:00Z', { level: 100 }], // after now: not integrated yet
    ]);
    const usage = await usageOf(org, customer.id);
    expect(usage).toMatchObject({ from_datetime: '2026-03-01T00:00:00.000Z', to_datetime: '2026-04-01T00:00:00.000Z' });
    const charge = chargeOf(usage, plan.charges[0]!.id);
    // Level 0 for 15 days, 20 for 2 days, 30 from the 18th 00:00 to now (12:00): 0.5 day.
    // (20 x 2 + 30 x 0.5) / 31 days = 55 / 31 = 1.77419... units; x 31 = 55.
    expect(amountsOf(charge)).toEqual({ units: '1.7742', events_count: 2, amount_cents: '55.0000', filters: [] });
    expect(amountsOf(charge)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId, { from, to }).view);
  });

  it('unique_count counts distinct values present at the end, adds and removes in time order (raw events)', async () => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, { aggregation_type: 'unique_count', field_name: 'user_id' });
    const plan = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '250' } }]);
    const subscriptionId = await subscribe(org, customer, plan);
    const stored = await send(org, customer, metric.code, [
      [march(1, 9), { user_id: 'u1' }],
      [march(2), { user_id: 'u2' }],
      [march(3), { user_id: 'u1' }], // already present
      [march(4), { user_id: 'u3' }],
      [march(5), { user_id: 'u2', operation_type: 'remove' }],
      [march(6), { user_id: 7 }],
      [march(7), { user_id: '7' }], // the same value as 7
      [march(8), { other: 1 }], // no value: skipped
    ]);
    const usage = await usageOf(org, customer.id);
    const charge = chargeOf(usage, plan.charges[0]!.id);
    // Present at the end: u1, u3, 7 = 3 x 250 = 750; 7 events carried a value.
    expect(amountsOf(charge)).toEqual({ units: '3.0000', events_count: 7, amount_cents: '750.0000', filters: [] });
    expect(amountsOf(charge)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId).view);
  });

  it('treats an event stamped later in the period than now alike on the daily-row path and the raw-event path', async () => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, { aggregation_type: 'sum', field_name: 'amount' });
    const plan = await createPlan(org, [
      // Priced from units only: read from the daily rows.
      { billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '1' } },
      // Per-transaction maximum: read from the raw events.
      { billable_metric_id: metric.id, charge_model: 'percentage', properties: { rate: '10', per_transaction_max_amount: '1000000' } },
    ]);
    const subscriptionId = await subscribe(org, customer, plan);
    const stored = await send(org, customer, metric.code, [
      [march(5), { amount: 100 }],
      [march(25), { amount: 50 }], // inside March, but after now (March 18)
    ]);
    const usage = await usageOf(org, customer.id);
    const [standard, percentage] = plan.charges.map((c) => chargeOf(usage, c.id));
    // Both paths must see the same events: every event reported for the period, the one stamped
    // after now included (current usage is "what has been reported for this period so far").
    expect(standard!.units).toBe(percentage!.units);
    expect(amountsOf(standard!)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId).view);
    expect(amountsOf(percentage!)).toEqual(engine(metric, plan.charges[1]!, stored, subscriptionId).view);
    // (100 + 50) x 1 = 150 and (100 + 50) x 10 % = 15.
    expect([standard!.amount_cents, percentage!.amount_cents]).toEqual(['150.0000', '15.0000']);
  });
});

describe('taxes', () => {
  it('applies the organization tax, overridden on one charge by its own tax', async () => {
    const o = await newOrg();
    const vat = await stack.app.inject({
      method: 'POST',
      url: '/v1/taxes',
      headers: o.headers,
      payload: { code: 'vat', name: 'VAT', rate: '0.2', applied_to_organization: true },
    });
    expect(vat.statusCode, vat.body).toBe(201);
    const reduced = await stack.app.inject({
      method: 'POST',
      url: '/v1/taxes',
      headers: o.headers,
      payload: { code: 'reduced', name: 'Reduced', rate: '0.05' },
    });
    expect(reduced.statusCode, reduced.body).toBe(201);
    const customer = await createCustomer(o);
    const metric = await createMetric(o, { aggregation_type: 'sum', field_name: 'gb' });
    const plan = await createPlan(o, [
      { billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '10' } },
      { billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '7' } },
    ]);
    const applied = await stack.app.inject({
      method: 'POST',
      url: '/v1/taxes/apply',
      headers: o.headers,
      payload: { tax_code: 'reduced', taxable_type: 'charge', taxable_id: plan.charges[1]!.id },
    });
    expect(applied.statusCode, applied.body).toBe(201);
    const subscriptionId = await subscribe(o, customer, plan);
    const stored = await send(o, customer, metric.code, [
      [march(3), { gb: 10 }],
      [march(4), { gb: '2.345' }],
    ]);
    const usage = await usageOf(o, customer.id);
    const [first, second] = plan.charges.map((c) => chargeOf(usage, c.id));
    // 12.345 GB x 10 = 123.45 and x 7 = 86.415.
    expect([first!.amount_cents, second!.amount_cents]).toEqual(['123.4500', '86.4150']);
    expect([amountsOf(first!), amountsOf(second!)]).toEqual(plan.charges.map((c) => engine(metric, c, stored, subscriptionId).view));
    // Taxes: 123.45 x 20 % = 24.69 (organization), 86.415 x 5 % = 4.32075 -> 4.3208 (the charge's
    // own tax replaces the organization's). 24.69 + 4.3208 = 29.0108; total 209.865 + 29.0108.
    expect(usage).toMatchObject({ amount_cents: '209.8650', taxes_amount_cents: '29.0108', total_amount_cents: '238.8758' });
  });
});

describe('which subscription and which events', () => {
  it('requires subscription_id (422) when the customer has two active subscriptions, and accepts its id or external_id', async () => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, { aggregation_type: 'count' });
    const planOne = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '1' } }]);
    const planTwo = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '2' } }]);
    const one = await subscribe(org, customer, planOne, { externalId: uid('sub-one') });
    const twoExternalId = uid('sub-two');
    const two = await subscribe(org, customer, planTwo, { externalId: twoExternalId });
    // A terminated one does not make the choice harder.
    await subscribe(org, customer, planOne, {
      status: 'terminated',
      startedAt: new Date('2026-01-01T00:00:00Z'),
      endingAt: new Date('2026-02-15T00:00:00Z'),
    });
    const stored = await send(org, customer, metric.code, [
      [march(2), {}],
      [march(3), {}],
      [march(4), {}],
    ]);
    for (const e of stored) expect([...e.subscription_ids].sort()).toEqual([one, two].sort());

    expectValidationError(await currentUsage(org, customer.id), 'subscription_id');
    const byId = await usageOf(org, customer.id, one);
    // 3 events x 1 = 3 on the first plan.
    expect(byId).toMatchObject({ subscription_id: one, amount_cents: '3.0000' });
    expect(amountsOf(byId.charges[0]!)).toEqual(engine(metric, planOne.charges[0]!, stored, one).view);
    const byExternalId = await usageOf(org, customer.external_id, twoExternalId);
    // 3 events x 2 = 6 on the second.
    expect(byExternalId).toMatchObject({ customer_id: customer.id, subscription_id: two, amount_cents: '6.0000' });
    expect(amountsOf(byExternalId.charges[0]!)).toEqual(engine(metric, planTwo.charges[0]!, stored, two).view);

    expectError(await currentUsage(org, customer.id, 'no-such-subscription'), 404, 'subscription_not_found');
    // A subscription of another customer is not this customer's.
    const other = await createCustomer(org);
    const otherSubscription = await subscribe(org, other, planOne);
    expectError(await currentUsage(org, customer.id, otherSubscription), 404, 'subscription_not_found');
  });

  it("answers 404 for an unknown customer, a customer without an active subscription, and another organization's customer", async () => {
    expectError(await currentUsage(org, 'no-such-customer'), 404, 'customer_not_found');
    expectError(await currentUsage(org, randomUUID()), 404, 'customer_not_found');

    const idle = await createCustomer(org);
    expectError(await currentUsage(org, idle.id), 404, 'subscription_not_found');
    const metric = await createMetric(org, { aggregation_type: 'count' });
    const plan = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '1' } }]);
    await subscribe(org, idle, plan, {
      status: 'terminated',
      startedAt: new Date('2026-01-01T00:00:00Z'),
      endingAt: new Date('2026-03-05T00:00:00Z'),
    });
    await subscribe(org, idle, plan, { status: 'pending', startedAt: new Date('2026-05-01T00:00:00Z') });
    expectError(await currentUsage(org, idle.external_id), 404, 'subscription_not_found');

    const otherOrg = await newOrg();
    const foreign = await createCustomer(otherOrg);
    const foreignMetric = await createMetric(otherOrg, { aggregation_type: 'count' });
    const foreignPlan = await createPlan(otherOrg, [
      { billable_metric_id: foreignMetric.id, charge_model: 'standard', properties: { amount: '1' } },
    ]);
    const foreignSubscription = await subscribe(otherOrg, foreign, foreignPlan);
    expect((await currentUsage(otherOrg, foreign.id)).statusCode).toBe(200);
    expectError(await currentUsage(org, foreign.id), 404, 'customer_not_found');
    expectError(await currentUsage(org, foreign.external_id), 404, 'customer_not_found');
    expectError(await currentUsage(org, foreign.id, foreignSubscription), 404, 'customer_not_found');
  });

  it("counts in the customer's time zone (Asia/Tokyo): days and the period follow local midnights", async () => {
    const previous = clock;
    // 2026-04-02 12:00 in Tokyo: the current period is Tokyo's April.
    clock = new Date('2026-04-02T03:00:00.000Z');
    try {
      const customer = await createCustomer(org, { timezone: 'Asia/Tokyo' });
      const metric = await createMetric(org, { aggregation_type: 'count' });
      const plan = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '100' } }]);
      // 2026-03-01 00:00 in Tokyo.
      const subscriptionId = await subscribe(org, customer, plan, { startedAt: new Date('2026-02-28T15:00:00.000Z') });
      const stored = await send(org, customer, metric.code, [
        ['2026-03-31T14:59:59Z', {}], // 23:59:59 on March 31 in Tokyo: the previous period
        ['2026-03-31T15:30:00Z', {}], // 00:30 on April 1 in Tokyo (still March 31 in UTC)
        ['2026-04-01T16:00:00Z', {}], // 01:00 on April 2 in Tokyo (April 1 in UTC)
      ]);
      for (const e of stored) expect(e.subscription_ids).toEqual([subscriptionId]);

      const rows = await stack.db.models.DailyUsage.find({ subscription_id: subscriptionId }).lean();
      expect(rows.map((r) => [r.usage_date, r.events_count]).sort()).toEqual([
        ['2026-03-31', 1],
        ['2026-04-01', 1],
        ['2026-04-02', 1],
      ]);

      const usage = await usageOf(org, customer.id);
      // April in Tokyo: 2026-04-01 00:00+09:00 to 2026-05-01 00:00+09:00.
      expect(usage).toMatchObject({ from_datetime: '2026-03-31T15:00:00.000Z', to_datetime: '2026-04-30T15:00:00.000Z' });
      const charge = chargeOf(usage, plan.charges[0]!.id);
      // The last two events: 2 x 100 = 200.
      expect(amountsOf(charge)).toEqual({ units: '2.0000', events_count: 2, amount_cents: '200.0000', filters: [] });
      const range = { from: new Date('2026-03-31T15:00:00.000Z'), to: new Date('2026-04-30T15:00:00.000Z') };
      expect(amountsOf(charge)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId, range).view);
    } finally {
      clock = previous;
    }
  });

  it("counts neither other customers' events nor other metrics' events", async () => {
    const alice = await createCustomer(org);
    const bob = await createCustomer(org);
    const calls = await createMetric(org, { aggregation_type: 'count' });
    const other = await createMetric(org, { aggregation_type: 'count' });
    const plan = await createPlan(org, [{ billable_metric_id: calls.id, charge_model: 'standard', properties: { amount: '10' } }]);
    const aliceExternalSubscription = uid('alice-sub');
    const aliceSubscription = await subscribe(org, alice, plan, { externalId: aliceExternalSubscription });
    const bobSubscription = await subscribe(org, bob, plan);

    const stored = [
      ...(await send(org, alice, calls.code, [
        [march(2), {}],
        [march(3), {}],
      ])),
      // Another metric: not charged by the plan, so attributed to no subscription...
      ...(await send(org, alice, other.code, [
        [march(2), {}],
        [march(4), {}],
      ])),
      // ...or attributed to the subscription when named, but still not a charge of its plan.
      ...(await send(org, alice, other.code, [[march(5), {}]], { external_subscription_id: aliceExternalSubscription })),
      ...(await send(org, bob, calls.code, [
        [march(2), {}],
        [march(3), {}],
        [march(4), {}],
        [march(5), {}],
        [march(6), {}],
      ])),
    ];
    const aliceUsage = await usageOf(org, alice.id);
    const bobUsage = await usageOf(org, bob.external_id);
    // Alice: her 2 calls x 10 = 20. Bob: his 5 calls x 10 = 50.
    expect(amountsOf(aliceUsage.charges[0]!)).toEqual({ units: '2.0000', events_count: 2, amount_cents: '20.0000', filters: [] });
    expect(amountsOf(bobUsage.charges[0]!)).toEqual({ units: '5.0000', events_count: 5, amount_cents: '50.0000', filters: [] });
    expect(aliceUsage.charges).toHaveLength(1);
    expect(amountsOf(aliceUsage.charges[0]!)).toEqual(engine(calls, plan.charges[0]!, stored, aliceSubscription).view);
    expect(amountsOf(bobUsage.charges[0]!)).toEqual(engine(calls, plan.charges[0]!, stored, bobSubscription).view);
    expect([aliceUsage.amount_cents, bobUsage.amount_cents]).toEqual(['20.0000', '50.0000']);
  });

  it('does not attribute an event stamped before the subscription started (subscription started mid-day)', async () => {
    const customer = await createCustomer(org);
    const metric = await createMetric(org, { aggregation_type: 'count' });
    const plan = await createPlan(org, [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '100' } }]);
    // 10:30 on March 10 in Paris.
    const startedAt = new Date('2026-03-10T09:30:00.000Z');
    const subscriptionId = await subscribe(org, customer, plan, { startedAt });
    const stored = await send(org, customer, metric.code, [
      ['2026-03-09T12:00:00Z', {}], // the day before
      ['2026-03-10T08:00:00Z', {}], // the same local day, before the start
      ['2026-03-10T10:00:00Z', {}], // the same local day, after the start
      [march(12), {}],
    ]);
    expect(stored.map((e) => e.subscription_ids)).toEqual([[], [], [subscriptionId], [subscriptionId]]);

    const usage = await usageOf(org, customer.id);
    // The first period runs from the start to the next calendar boundary.
    expect(usage).toMatchObject({ from_datetime: '2026-03-10T09:30:00.000Z', to_datetime: '2026-03-31T22:00:00.000Z' });
    const charge = chargeOf(usage, plan.charges[0]!.id);
    // 2 events x 100 = 200.
    expect(amountsOf(charge)).toEqual({ units: '2.0000', events_count: 2, amount_cents: '200.0000', filters: [] });
    expect(amountsOf(charge)).toEqual(engine(metric, plan.charges[0]!, stored, subscriptionId, { from: startedAt, to: MONTH_END }).view);
  });
});
