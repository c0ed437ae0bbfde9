// Plans (api-contract.md "Catalog: Plans"; billing-rules.md charge models and filters): CRUD by id
// and by code, charges validated per charge model with the full path of a wrong field, charge
// filters against the billable metric, min/max caps, pay-in-advance rules, ids kept on update,
// soft delete, resource_in_use, tenant isolation, pagination.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SubscriptionStatus } from '../../src/db/models/subscription';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { PlanResource } from '../../src/resources/plan';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let other: TestOrganization;
let seq = 0;
const nextCode = (label = 'plan') => `${label}_${(seq += 1)}_${Date.now()}`;

type Headers = Record<string, string>;
const api = {
  create: (payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: '/v1/plans', headers, payload: payload as Record<string, unknown> }),
  get: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'GET', url: `/v1/plans/${encodeURIComponent(id)}`, headers }),
  list: (query = '', headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url: `/v1/plans${query}`, headers }),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'PUT', url: `/v1/plans/${encodeURIComponent(id)}`, headers, payload: payload as Record<string, unknown> }),
  remove: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'DELETE', url: `/v1/plans/${encodeURIComponent(id)}`, headers }),
};

async function createMetric(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<BillableMetricResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/billable_metrics',
    headers,
    payload: { code: nextCode('bm'), name: 'Metric', aggregation_type: 'count', ...payload },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<BillableMetricResource>();
}

async function createPlan(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<PlanResource> {
  const res = await api.create({ code: nextCode(), name: 'Plan', interval: 'monthly', ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function subscribe(planId: string, status: SubscriptionStatus, field: 'plan_id' | 'previous_plan_id' = 'plan_id'): Promise<void> {
  await stack.db.models.Subscription.create({
    organization_id: org.id,
    customer_id: randomUUID(),
    external_customer_id: nextCode('cus'),
    external_id: nextCode('sub'),
    plan_id: field === 'plan_id' ? planId : randomUUID(),
    previous_plan_id: field === 'previous_plan_id' ? planId : null,
    status,
    started_at: new Date(),
  });
}

let countMetric: BillableMetricResource;
let regionMetric: BillableMetricResource;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Plan Org' });
  other = await createOrganization(stack.app, { name: 'Other Plan Org' });
  countMetric = await createMetric();
  regionMetric = await createMetric({
    aggregation_type: 'sum',
    field_name: 'amount',
    filters: [
      { key: 'region', values: ['eu', 'us', 'apac'] },
      { key: 'tier', values: ['gold', 'silver'] },
    ],
  });
});
afterAll(async () => stack?.close());

const standard = (metricId: string, extra: Record<string, unknown> = {}) => ({
  billable_metric_id: metricId,
  charge_model: 'standard',
  properties: { amount: '5' },
  ...extra,
});

describe('create and read', () => {
  it('creates a plan with the defaults', async () => {
    const code = nextCode('defaults');
    const res = await api.create({ code, name: 'Starter', interval: 'monthly' });
    expect(res.statusCode, res.body).toBe(201);
    const plan = res.json<PlanResource>();
    expect(plan).toMatchObject({
      organization_id: org.id,
      code,
      name: 'Starter',
      description: null,
      interval: 'monthly',
      amount_cents: 0,
      currency: 'USD',
      trial_period_days: 0,
      charges: [],
      deleted_at: null,
    });
    expect(plan.id).toMatch(UUID);
    expect(plan.created_at).toMatch(ISO_MS_UTC);
    expect(plan.updated_at).toMatch(ISO_MS_UTC);
  });

  it('keeps every given field, with charges embedded and each charge its own id', async () => {
    const payload = {
      code: nextCode('full'),
      name: 'Pro',
      description: 'For teams',
      interval: 'yearly',
      amount_cents: 120000,
      currency: 'eur',
      trial_period_days: 14,
      charges: [
        standard(countMetric.id, { invoice_display_name: 'API calls', min_amount_cents: '100', max_amount_cents: 2500.5 }),
        { billable_metric_id: regionMetric.id, charge_model: 'package', properties: { amount: '100', package_size: 10 } },
      ],
    };
    const res = await api.create(payload);
    expect(res.statusCode, res.body).toBe(201);
    const plan = res.json<PlanResource>();
    expect(plan).toMatchObject({ ...payload, currency: 'EUR', charges: expect.any(Array) });
    expect(plan.charges).toEqual([
      {
        id: expect.stringMatching(UUID),
        billable_metric_id: countMetric.id,
        charge_model: 'standard',
        properties: { amount: '5' },
        pay_in_advance: false,
        prorated: false,
        invoiceable: true,
        min_amount_cents: '100.0000',
        max_amount_cents: '2500.5000',
        invoice_display_name: 'API calls',
        filters: [],
      },
      {
        id: expect.stringMatching(UUID),
        billable_metric_id: regionMetric.id,
        charge_model: 'package',
        // The model's defaults are stored too.
        properties: { amount: '100', package_size: 10, free_units: 0 },
        pay_in_advance: false,
        prorated: false,
        invoiceable: true,
        min_amount_cents: null,
        max_amount_cents: null,
        invoice_display_name: null,
        filters: [],
      },
    ]);
    expect(plan.charges[0]!.id).not.toBe(plan.charges[1]!.id);
    const stored = await stack.db.connection.collection('plans').findOne({ _id: plan.id as never });
    expect(stored).toMatchObject({ organization_id: org.id, code: payload.code, amount_cents: 120000, currency: 'EUR', deleted_at: null });
    const charge = (stored!.charges as Record<string, unknown>[])[0]!;
    expect(charge._id).toBe(plan.charges[0]!.id);
    expect(String(charge.min_amount_cents)).toBe('100');
    expect(charge.min_amount_cents?.constructor.name).toBe('Decimal128');
    expect(await api.get(plan.id).then((r) => r.json())).toEqual(plan);
  });

  it('gets a plan by id and by code, with or without a trailing slash', async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id)] });
    for (const ref of [plan.id, plan.code]) {
      for (const url of [`/v1/plans/${ref}`, `/v1/plans/${ref}/`]) {
        const res = await stack.app.inject({ method: 'GET', url, headers: org.headers });
        expect(res.statusCode, url).toBe(200);
        expect(res.json()).toEqual(plan);
      }
    }
    const slash = await stack.app.inject({
      method: 'POST',
      url: '/v1/plans/',
      headers: org.headers,
      payload: { code: nextCode(), name: 'x', interval: 'weekly' },
    });
    expect(slash.statusCode, slash.body).toBe(201);
    const list = await stack.app.inject({ method: 'GET', url: '/v1/plans/', headers: org.headers });
    expect(list.statusCode).toBe(200);
    expect(list.json<PlanResource[]>().map((p) => p.id)).toContain(plan.id);
  });

  it('is 404 plan_not_found for an unknown id or code', async () => {
    expectError(await api.get('00000000-0000-4000-8000-000000000000'), 404, 'plan_not_found');
    expectError(await api.get('no_such_plan'), 404, 'plan_not_found');
    expectError(await api.update('no_such_plan', { name: 'x' }), 404, 'plan_not_found');
    expectError(await api.remove('no_such_plan'), 404, 'plan_not_found');
  });

  it('is 409 already_exists on a duplicate code, and the same code is allowed in another organization', async () => {
    const plan = await createPlan({ name: 'First' });
    const res = await api.create({ code: plan.code, name: 'Second', interval: 'monthly' });
    const body = expectError(res, 409, 'already_exists');
    expect(body.message).toContain(plan.code);
    const theirs = await createPlan({ code: plan.code }, other.headers);
    expect(theirs.organization_id).toBe(other.id);
  });

  it('creates exactly one plan from concurrent creations of one code', async () => {
    const code = nextCode('race');
    const results = await Promise.all(Array.from({ length: 6 }, () => api.create({ code, name: 'Race', interval: 'monthly' })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(await stack.db.models.Plan.countDocuments({ organization_id: org.id, code })).toBe(1);
  });

  it('lists plans newest first with paging, X-Total-Count and filters', async () => {
    const own = await createOrganization(stack.app, { name: 'Paging Org' });
    const made: PlanResource[] = [];
    for (let i = 0; i < 5; i++) {
      made.push(await createPlan({ interval: i % 2 ? 'weekly' : 'monthly', currency: i === 4 ? 'EUR' : 'USD' }, own.headers));
      await sleep(5);
    }
    const ids = made.map((p) => p.id).reverse();
    const all = await api.list('', own.headers);
    expect(all.json<PlanResource[]>().map((p) => p.id)).toEqual(ids);
    expect(all.headers['x-total-count']).toBe('5');
    const page = await api.list('?skip=1&limit=2', own.headers);
    expect(page.json<PlanResource[]>().map((p) => p.id)).toEqual(ids.slice(1, 3));
    expect(page.headers['x-total-count']).toBe('5');
    const weekly = await api.list('?interval=weekly', own.headers);
    expect(weekly.json<PlanResource[]>().map((p) => p.id)).toEqual([made[3]!.id, made[1]!.id]);
    expect(weekly.headers['x-total-count']).toBe('2');
    expect((await api.list('?currency=eur', own.headers)).json<PlanResource[]>().map((p) => p.id)).toEqual([made[4]!.id]);
    for (const q of ['?limit=0', '?limit=1001', '?skip=-1', '?interval=daily'])
      expectError(await api.list(q, own.headers), 422, 'validation_error');
  });
});

describe('validation', () => {
  it.each([
    ['a missing code', { code: undefined }, 'code'],
    ['a missing name', { name: undefined }, 'name'],
    ['a missing interval', { interval: undefined }, 'interval'],
    ['a daily interval', { interval: 'daily' }, 'interval'],
    ['a fractional amount_cents', { amount_cents: 10.5 }, 'amount_cents'],
    ['a negative amount_cents', { amount_cents: -1 }, 'amount_cents'],
    ['a string amount_cents', { amount_cents: 'abc' }, 'amount_cents'],
    ['a two-letter currency', { currency: 'US' }, 'currency'],
    ['an unknown currency', { currency: 'ZZZ' }, 'currency'],
    ['a negative trial', { trial_period_days: -1 }, 'trial_period_days'],
    ['charges that are not an array', { charges: {} }, 'charges'],
    ['a charge that is not an object', { charges: [5] }, 'charges.0'],
    [
      'a charge without billable_metric_id',
      { charges: [{ charge_model: 'standard', properties: { amount: '1' } }] },
      'charges.0.billable_metric_id',
    ],
    [
      'an unknown charge model',
      { charges: [{ billable_metric_id: 'x', charge_model: 'tiered', properties: {} }] },
      'charges.0.charge_model',
    ],
    ['a charge without charge_model', { charges: [{ billable_metric_id: 'x', properties: {} }] }, 'charges.0.charge_model'],
    ['pay_in_advance that is not a boolean', { charges: [{ ...standard('x'), pay_in_advance: 'yes' }] }, 'charges.0.pay_in_advance'],
    ['a negative min_amount_cents', { charges: [{ ...standard('x'), min_amount_cents: '-1' }] }, 'charges.0.min_amount_cents'],
    [
      'max_amount_cents with 5 fractional digits',
      { charges: [{ ...standard('x'), max_amount_cents: '1.00001' }] },
      'charges.0.max_amount_cents',
    ],
    ['filters that are not an array', { charges: [{ ...standard('x'), filters: { region: ['eu'] } }] }, 'charges.0.filters'],
    [
      'a filter without values',
      { charges: [{ ...standard('x'), filters: [{ properties: { amount: '1' } }] }] },
      'charges.0.filters.0.values',
    ],
    [
      'a filter with no key',
      { charges: [{ ...standard('x'), filters: [{ values: {}, properties: { amount: '1' } }] }] },
      'charges.0.filters.0.values',
    ],
    [
      'a filter key with no value',
      { charges: [{ ...standard('x'), filters: [{ values: { region: [] }, properties: { amount: '1' } }] }] },
      'charges.0.filters.0.values.region',
    ],
  ])('is 422 with %s, naming the field, and creates nothing', async (_name, payload, path) => {
    const before = await stack.db.models.Plan.countDocuments({ organization_id: org.id });
    expectValidationError(await api.create({ code: nextCode('invalid'), name: 'x', interval: 'monthly', ...payload }), path);
    expect(await stack.db.models.Plan.countDocuments({ organization_id: org.id })).toBe(before);
  });

  it.each([
    ['on the plan', {}, 'amount', 'amount'],
    ['in a charge', { charges: [{ ...standard(countMetricRef()), colour: 'blue' }] }, 'colour', 'charges.0.colour'],
    [
      'in a charge filter',
      { charges: [{ ...standard(countMetricRef()), filters: [{ values: { region: ['eu'] }, properties: { amount: '1' }, colour: 'x' }] }] },
      'colour',
      'charges.0.filters.0.colour',
    ],
  ])('is 422 with an unknown field %s, with its full path', async (_where, payload, field, path) => {
    const res = await api.create({ code: nextCode(), name: 'x', interval: 'monthly', amount: 5, ...payload });
    const body = expectUnknownFields(res, [field]);
    expect(body.errors.map((e) => e.path)).toContain(path);
  });
});

// it.each tables are built before beforeAll runs; charges that must pass the body schema only
// need some metric reference there, and the 422 comes before any lookup.
function countMetricRef(): string {
  return 'metric-resolved-later';
}

describe('charge models', () => {
  const valid: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['standard', { amount: '0.05' }, { amount: '0.05' }],
    [
      'graduated',
      {
        graduated_ranges: [
          { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '2' },
          { from_value: 11, to_value: null, per_unit_amount: '5', flat_amount: '3' },
        ],
      },
      {
        graduated_ranges: [
          { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '2' },
          { from_value: 11, to_value: null, per_unit_amount: '5', flat_amount: '3' },
        ],
      },
    ],
    [
      'volume',
      {
        volume_ranges: [
          { from_value: 0, to_value: 100, per_unit_amount: '2', flat_amount: '1' },
          { from_value: 100, per_unit_amount: '1', flat_amount: '0' },
        ],
      },
      {
        volume_ranges: [
          { from_value: 0, to_value: 100, per_unit_amount: '2', flat_amount: '1' },
          { from_value: 100, to_value: null, per_unit_amount: '1', flat_amount: '0' },
        ],
      },
    ],
    ['package', { amount: '500', package_size: 10, free_units: 100 }, { amount: '500', package_size: 10, free_units: 100 }],
    [
      'percentage',
      { rate: '1.5', fixed_amount: '50', free_units_per_events: 2, per_transaction_min_amount: '30', per_transaction_max_amount: '200' },
      { rate: '1.5', fixed_amount: '50', free_units_per_events: 2, per_transaction_min_amount: '30', per_transaction_max_amount: '200' },
    ],
    [
      'graduated_percentage',
      {
        graduated_percentage_ranges: [
          { from_value: 0, to_value: 1000, rate: '2', flat_amount: '0' },
          { from_value: 1001, to_value: null, rate: '1', flat_amount: '500' },
        ],
      },
      {
        graduated_percentage_ranges: [
          { from_value: 0, to_value: 1000, rate: '2', flat_amount: '0' },
          { from_value: 1001, to_value: null, rate: '1', flat_amount: '500' },
        ],
      },
    ],
    ['dynamic', {}, { price_field: 'unit_price', quantity_field: 'quantity' }],
    ['custom', { custom_amount: '1000' }, { custom_amount: '1000' }],
    ['custom', { unit_price: '12.5' }, { unit_price: '12.5' }],
  ];

  it.each(valid)('accepts a %s charge with valid properties, stored with defaults: %j', async (model, properties, stored) => {
    const plan = await createPlan({ charges: [{ billable_metric_id: regionMetric.id, charge_model: model, properties }] });
    expect(plan.charges[0]).toMatchObject({ charge_model: model, properties: stored });
    const read = await api.get(plan.id);
    expect(read.json<PlanResource>().charges[0]!.properties).toEqual(stored);
  });

  it('applies the model schema to filter properties too', async () => {
    const plan = await createPlan({
      charges: [
        {
          billable_metric_id: regionMetric.id,
          charge_model: 'package',
          properties: { amount: '100', package_size: 10 },
          filters: [{ values: { region: ['eu'] }, properties: { amount: '200', package_size: 5 }, invoice_display_name: 'EU' }],
        },
      ],
    });
    expect(plan.charges[0]!.filters).toEqual([
      {
        id: expect.stringMatching(UUID),
        values: { region: ['eu'] },
        properties: { amount: '200', package_size: 5, free_units: 0 },
        invoice_display_name: 'EU',
      },
    ]);
  });

  it('treats absent properties as {}: enough for dynamic, a named missing field for standard', async () => {
    const plan = await createPlan({ charges: [{ billable_metric_id: regionMetric.id, charge_model: 'dynamic' }] });
    expect(plan.charges[0]!.properties).toEqual({ price_field: 'unit_price', quantity_field: 'quantity' });
    expectValidationError(
      await api.create({
        code: nextCode(),
        name: 'x',
        interval: 'monthly',
        charges: [{ billable_metric_id: regionMetric.id, charge_model: 'standard' }],
      }),
      'charges.0.properties.amount',
    );
  });

  const ranges = (key: string, rows: Record<string, unknown>[]) => ({ [key]: rows });
  const invalid: [string, string, unknown, string][] = [
    ['standard', 'a negative amount', { amount: '-1' }, 'charges.0.properties.amount'],
    ['standard', 'an amount with 5 fractional digits', { amount: '0.00001' }, 'charges.0.properties.amount'],
    ['standard', 'an unknown property', { amount: '1', price: '2' }, 'charges.0.properties.price'],
    ['standard', "another model's property", { amount: '1', graduated_ranges: [] }, 'charges.0.properties.graduated_ranges'],
    ['standard', 'properties that are not an object', 'five', 'charges.0.properties'],
    [
      'graduated',
      'a range ending before it starts',
      ranges('graduated_ranges', [
        { from_value: 0, to_value: 10, per_unit_amount: '1', flat_amount: '0' },
        { from_value: 10, to_value: 5, per_unit_amount: '1', flat_amount: '0' },
        { from_value: 5, to_value: null, per_unit_amount: '1', flat_amount: '0' },
      ]),
      'charges.0.properties.graduated_ranges.1.to_value',
    ],
    [
      'graduated',
      'a gap between ranges',
      ranges('graduated_ranges', [
        { from_value: 0, to_value: 10, per_unit_amount: '1', flat_amount: '0' },
        { from_value: 20, to_value: null, per_unit_amount: '1', flat_amount: '0' },
      ]),
      'charges.0.properties.graduated_ranges.1.from_value',
    ],
    [
      'graduated',
      'a missing flat_amount',
      ranges('graduated_ranges', [{ from_value: 0, to_value: null, per_unit_amount: '1' }]),
      'charges.0.properties.graduated_ranges.0.flat_amount',
    ],
    ['graduated', 'no ranges', ranges('graduated_ranges', []), 'charges.0.properties.graduated_ranges'],
    [
      'volume',
      'a first range not starting at 0',
      ranges('volume_ranges', [{ from_value: 1, to_value: null, per_unit_amount: '1', flat_amount: '0' }]),
      'charges.0.properties.volume_ranges.0.from_value',
    ],
    [
      'volume',
      'an unknown range field',
      ranges('volume_ranges', [{ from_value: 0, to_value: null, per_unit_amount: '1', flat_amount: '0', rate: '1' }]),
      'charges.0.properties.volume_ranges.0.rate',
    ],
    ['package', 'a package_size of 0', { amount: '1', package_size: 0 }, 'charges.0.properties.package_size'],
    ['package', 'a fractional free_units', { amount: '1', package_size: 10, free_units: 1.5 }, 'charges.0.properties.free_units'],
    ['percentage', 'a rate that is not a number', { rate: 'abc' }, 'charges.0.properties.rate'],
    [
      'percentage',
      'a per-transaction maximum below the minimum',
      { rate: '1', per_transaction_min_amount: '300', per_transaction_max_amount: '200' },
      'charges.0.properties.per_transaction_max_amount',
    ],
    [
      'graduated_percentage',
      'a per_unit_amount in a percentage range',
      ranges('graduated_percentage_ranges', [{ from_value: 0, to_value: null, rate: '1', flat_amount: '0', per_unit_amount: '1' }]),
      'charges.0.properties.graduated_percentage_ranges.0.per_unit_amount',
    ],
    [
      'graduated_percentage',
      'a missing rate',
      ranges('graduated_percentage_ranges', [{ from_value: 0, to_value: null, flat_amount: '0' }]),
      'charges.0.properties.graduated_percentage_ranges.0.rate',
    ],
    ['dynamic', 'an empty price_field', { price_field: '' }, 'charges.0.properties.price_field'],
    ['dynamic', 'an unknown property', { amount: '1' }, 'charges.0.properties.amount'],
    ['custom', 'both custom_amount and unit_price', { custom_amount: '1', unit_price: '2' }, 'charges.0.properties.unit_price'],
    ['custom', 'neither custom_amount nor unit_price', {}, 'charges.0.properties.custom_amount'],
  ];

  it.each(invalid)('refuses a %s charge with %s, naming the full path', async (model, _what, properties, path) => {
    const res = await api.create({
      code: nextCode('bad'),
      name: 'x',
      interval: 'monthly',
      charges: [{ billable_metric_id: regionMetric.id, charge_model: model, properties }],
    });
    expectValidationError(res, path);
  });

  it('names the full path inside a filter and in a later charge', async () => {
    const res = await api.create({
      code: nextCode('bad'),
      name: 'x',
      interval: 'monthly',
      charges: [
        standard(regionMetric.id),
        {
          billable_metric_id: regionMetric.id,
          charge_model: 'standard',
          properties: { amount: 'x' },
          filters: [{ values: { region: ['eu'] }, properties: { amount: '1', unit: 'call' } }],
        },
      ],
    });
    const body = expectValidationError(res, 'charges.1.properties.amount');
    expect(body.errors.map((e) => e.path)).toContain('charges.1.filters.0.properties.unit');
  });

  it('names a wrong filter property of another model', async () => {
    const res = await api.create({
      code: nextCode('bad'),
      name: 'x',
      interval: 'monthly',
      charges: [
        {
          billable_metric_id: regionMetric.id,
          charge_model: 'graduated',
          properties: { graduated_ranges: [{ from_value: 0, per_unit_amount: '1', flat_amount: '0' }] },
          filters: [{ values: { region: ['eu'] }, properties: { amount: '1' } }],
        },
      ],
    });
    const body = expectValidationError(res, 'charges.0.filters.0.properties.amount');
    expect(body.errors.map((e) => e.path)).toContain('charges.0.filters.0.properties.graduated_ranges');
  });
});

describe('charges and their billable metric', () => {
  it('accepts the metric by id or by code and stores its id', async () => {
    const plan = await createPlan({ charges: [standard(countMetric.code), standard(countMetric.id)] });
    expect(plan.charges.map((c) => c.billable_metric_id)).toEqual([countMetric.id, countMetric.id]);
  });

  it('is 404 billable_metric_not_found for an unknown, deleted or foreign metric, creating nothing', async () => {
    const deleted = await createMetric();
    const del = await stack.app.inject({ method: 'DELETE', url: `/v1/billable_metrics/${deleted.id}`, headers: org.headers });
    expect(del.statusCode, del.body).toBe(200);
    const foreign = await createMetric({}, other.headers);
    for (const ref of ['no_such_metric', deleted.id, deleted.code, foreign.id, foreign.code]) {
      const code = nextCode('missing');
      const res = await api.create({ code, name: 'x', interval: 'monthly', charges: [standard(countMetric.id), standard(ref)] });
      const body = expectError(res, 404, 'billable_metric_not_found');
      expect(body.message).toContain('charges.1.billable_metric_id');
      expectError(await api.get(code), 404, 'plan_not_found');
    }
  });

  it('stores filters whose keys and values the metric declares, each with its id', async () => {
    const plan = await createPlan({
      charges: [
        {
          ...standard(regionMetric.id),
          filters: [
            { values: { region: ['eu', 'us', 'eu'] }, properties: { amount: '10' } },
            { values: { region: ['eu'], tier: ['gold'] }, properties: { amount: '20' } },
          ],
        },
      ],
    });
    const filters = plan.charges[0]!.filters;
    expect(filters.map((f) => f.values)).toEqual([{ region: ['eu', 'us'] }, { region: ['eu'], tier: ['gold'] }]);
    expect(filters.map((f) => f.invoice_display_name)).toEqual([null, null]);
    for (const f of filters) expect(f.id).toMatch(UUID);
    expect(filters[0]!.id).not.toBe(filters[1]!.id);
  });

  it.each([
    [
      'a key the metric does not declare',
      [{ values: { country: ['fr'] }, properties: { amount: '1' } }],
      'charges.0.filters.0.values.country',
    ],
    [
      'a value the metric does not declare',
      [{ values: { region: ['eu', 'mars'] }, properties: { amount: '1' } }],
      'charges.0.filters.0.values.region.1',
    ],
    [
      'two filters with the same values',
      [
        { values: { region: ['eu', 'us'] }, properties: { amount: '1' } },
        { values: { region: ['us', 'eu'] }, properties: { amount: '2' } },
      ],
      'charges.0.filters.1.values',
    ],
    [
      'the all-values marker (not a declared value)',
      [{ values: { region: ['__ALL_FILTER_VALUES__'] }, properties: { amount: '1' } }],
      'charges.0.filters.0.values.region.0',
    ],
  ])('is 422 for a filter with %s', async (_what, filters, path) => {
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [{ ...standard(regionMetric.id), filters }],
    });
    expectValidationError(res, path);
  });

  it('is 422 for any filter on a metric that declares none', async () => {
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [{ ...standard(countMetric.id), filters: [{ values: { region: ['eu'] }, properties: { amount: '1' } }] }],
    });
    const body = expectValidationError(res, 'charges.0.filters.0.values.region');
    expect(body.message).toContain('declares no filters');
  });

  it('accepts min equal to max, refuses min above max', async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id, { min_amount_cents: '100', max_amount_cents: 100 })] });
    expect(plan.charges[0]).toMatchObject({ min_amount_cents: '100.0000', max_amount_cents: '100.0000' });
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [standard(countMetric.id, { min_amount_cents: '100.0001', max_amount_cents: '100' })],
    });
    expectValidationError(res, 'charges.0.max_amount_cents');
    const minOnly = await createPlan({ charges: [standard(countMetric.id, { min_amount_cents: 0 })] });
    expect(minOnly.charges[0]).toMatchObject({ min_amount_cents: '0.0000', max_amount_cents: null });
  });

  it.each(['max', 'latest', 'weighted_sum'])('refuses pay_in_advance for a %s metric', async (aggregation) => {
    const metric = await createMetric({ aggregation_type: aggregation, field_name: 'value' });
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [standard(metric.id, { pay_in_advance: true })],
    });
    const body = expectValidationError(res, 'charges.0.pay_in_advance');
    expect(body.message).toContain(aggregation);
  });

  it.each([
    ['count', {}],
    ['sum', { field_name: 'value' }],
    ['unique_count', { field_name: 'value' }],
  ])('accepts pay_in_advance for a %s metric', async (aggregation, extra) => {
    const metric = await createMetric({ aggregation_type: aggregation, ...extra });
    const plan = await createPlan({ charges: [standard(metric.id, { pay_in_advance: true, invoiceable: false })] });
    expect(plan.charges[0]).toMatchObject({ pay_in_advance: true, invoiceable: false });
  });

  it.each([
    [
      'a volume charge in advance',
      {
        charge_model: 'volume',
        properties: { volume_ranges: [{ from_value: 0, per_unit_amount: '1', flat_amount: '0' }] },
        pay_in_advance: true,
      },
      'charges.0.pay_in_advance',
    ],
    ['a minimum on a pay-in-advance charge', { pay_in_advance: true, min_amount_cents: '10' }, 'charges.0.min_amount_cents'],
    ['a maximum on a pay-in-advance charge', { pay_in_advance: true, max_amount_cents: '10' }, 'charges.0.max_amount_cents'],
    ['a non-invoiceable charge in arrear', { invoiceable: false }, 'charges.0.invoiceable'],
    ['a prorated charge of a metric that is not recurring', { prorated: true }, 'charges.0.prorated'],
  ])('is 422 for %s', async (_what, extra, path) => {
    const res = await api.create({ code: nextCode(), name: 'x', interval: 'monthly', charges: [standard(countMetric.id, extra)] });
    expectValidationError(res, path);
  });

  it('accepts a prorated standard or graduated charge of a recurring metric, not a package one', async () => {
    const seats = await createMetric({ aggregation_type: 'sum', field_name: 'seats', recurring: true });
    const plan = await createPlan({
      charges: [
        standard(seats.id, { prorated: true }),
        standard(seats.id, { prorated: true, pay_in_advance: true }),
        {
          billable_metric_id: seats.id,
          charge_model: 'graduated',
          prorated: true,
          properties: { graduated_ranges: [{ from_value: 0, per_unit_amount: '1', flat_amount: '0' }] },
        },
      ],
    });
    expect(plan.charges.map((c) => c.prorated)).toEqual([true, true, true]);
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [{ billable_metric_id: seats.id, charge_model: 'package', prorated: true, properties: { amount: '1', package_size: 1 } }],
    });
    expectValidationError(res, 'charges.0.prorated');
  });

  it('reports every broken rule of every charge at once', async () => {
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [
        standard(countMetric.id, { invoiceable: false }),
        {
          ...standard(regionMetric.id, { min_amount_cents: '2', max_amount_cents: '1' }),
          filters: [{ values: { zone: ['a'] }, properties: { amount: '1' } }],
        },
      ],
    });
    const body = expectError(res, 422, 'validation_error');
    expect(body.errors.map((e) => e.path).sort()).toEqual([
      'charges.0.invoiceable',
      'charges.1.filters.0.values.zone',
      'charges.1.max_amount_cents',
    ]);
  });
});

describe('update', () => {
  it('updates by code; fields left out keep their values, updated_at moves and created_at stays', async () => {
    const plan = await createPlan({ description: 'd', amount_cents: 1000, charges: [standard(countMetric.id)] });
    await sleep(5);
    const res = await api.update(plan.code, { name: 'Renamed', amount_cents: 2000, description: null });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<PlanResource>();
    expect(updated).toMatchObject({
      id: plan.id,
      name: 'Renamed',
      amount_cents: 2000,
      description: null,
      interval: 'monthly',
      charges: plan.charges,
    });
    expect(updated.created_at).toBe(plan.created_at);
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(plan.updated_at));
    expect((await api.get(plan.id)).json()).toEqual(updated);
  });

  it('replaces the charges: a charge given with its id keeps it, others get new ids, left-out ones are removed', async () => {
    const plan = await createPlan({
      charges: [
        {
          ...standard(regionMetric.id),
          filters: [
            { values: { region: ['eu'] }, properties: { amount: '7' } },
            { values: { region: ['us'] }, properties: { amount: '8' } },
          ],
        },
        standard(countMetric.id),
      ],
    });
    const [kept, dropped] = plan.charges;
    const res = await api.update(plan.id, {
      charges: [
        {
          id: kept!.id,
          billable_metric_id: regionMetric.code,
          charge_model: 'standard',
          properties: { amount: '6' },
          filters: [
            { values: { region: ['eu'] }, properties: { amount: '9' } },
            { values: { region: ['apac'] }, properties: { amount: '10' } },
          ],
        },
        standard(countMetric.id, { properties: { amount: '1' } }),
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const charges = res.json<PlanResource>().charges;
    expect(charges).toHaveLength(2);
    expect(charges[0]).toMatchObject({ id: kept!.id, properties: { amount: '6' } });
    // The filter with unchanged values keeps its id; a new one gets a new id.
    expect(charges[0]!.filters[0]).toMatchObject({ id: kept!.filters[0]!.id, properties: { amount: '9' } });
    expect(charges[0]!.filters[1]!.id).not.toBe(kept!.filters[1]!.id);
    expect(charges[1]!.id).toMatch(UUID);
    expect([kept!.id, dropped!.id]).not.toContain(charges[1]!.id);
    const removed = await api.update(plan.id, { charges: [] });
    expect(removed.json<PlanResource>().charges).toEqual([]);
  });

  it('leaves the charges alone when the body has none', async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id)] });
    const res = await api.update(plan.id, { trial_period_days: 7 });
    expect(res.json<PlanResource>().charges).toEqual(plan.charges);
  });

  it("is 404 charge_not_found for an id that is not one of the plan's charges", async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id)] });
    const otherPlan = await createPlan({ charges: [standard(countMetric.id)] });
    for (const id of [randomUUID(), otherPlan.charges[0]!.id]) {
      const res = await api.update(plan.id, { charges: [standard(countMetric.id, { id })] });
      const body = expectError(res, 404, 'charge_not_found');
      expect(body.message).toContain('charges.0.id');
    }
    expect((await api.get(plan.id)).json<PlanResource>().charges).toEqual(plan.charges);
  });

  it('is 422 for a charge id given twice or a kept charge with another metric', async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id)] });
    const id = plan.charges[0]!.id;
    expectValidationError(
      await api.update(plan.id, { charges: [standard(countMetric.id, { id }), standard(countMetric.id, { id })] }),
      'charges.1.id',
    );
    expectValidationError(await api.update(plan.id, { charges: [standard(regionMetric.id, { id })] }), 'charges.0.billable_metric_id');
  });

  it('refuses an id in a charge of a new plan, and unknown fields on update', async () => {
    const res = await api.create({
      code: nextCode(),
      name: 'x',
      interval: 'monthly',
      charges: [standard(countMetric.id, { id: randomUUID() })],
    });
    expect(expectUnknownFields(res, ['id']).errors.map((e) => e.path)).toContain('charges.0.id');
    const plan = await createPlan();
    expect(expectUnknownFields(await api.update(plan.id, { colour: 'x' }), ['colour']).errors.map((e) => e.path)).toEqual(['colour']);
  });

  it('validates charges on update like on create', async () => {
    const plan = await createPlan();
    expectValidationError(
      await api.update(plan.id, {
        charges: [{ billable_metric_id: countMetric.id, charge_model: 'package', properties: { amount: '1', package_size: -1 } }],
      }),
      'charges.0.properties.package_size',
    );
    expectError(await api.update(plan.id, { charges: [standard('no_such_metric')] }), 404, 'billable_metric_not_found');
  });

  it('is 409 when the new code is taken', async () => {
    const a = await createPlan();
    const b = await createPlan();
    expectError(await api.update(b.id, { code: a.code }), 409, 'already_exists');
    expect((await api.get(b.id)).json<PlanResource>().code).toBe(b.code);
  });

  it('refuses to change interval or currency while a subscription uses the plan (400 resource_in_use)', async () => {
    const plan = await createPlan();
    expect((await api.update(plan.id, { interval: 'weekly', currency: 'EUR' })).statusCode).toBe(200);
    await subscribe(plan.id, 'active');
    expectError(await api.update(plan.id, { interval: 'monthly' }), 400, 'resource_in_use');
    expectError(await api.update(plan.id, { currency: 'USD' }), 400, 'resource_in_use');
    // Unchanged values and other fields are fine.
    const res = await api.update(plan.id, { interval: 'weekly', currency: 'EUR', amount_cents: 5 });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('delete', () => {
  it('soft-deletes: 200 with deleted_at, then 404 by id and code, gone from the list, code free again', async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id)] });
    const res = await api.remove(plan.code);
    expect(res.statusCode, res.body).toBe(200);
    const deleted = res.json<PlanResource>();
    expect(deleted.id).toBe(plan.id);
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expectError(await api.get(plan.id), 404, 'plan_not_found');
    expectError(await api.get(plan.code), 404, 'plan_not_found');
    expectError(await api.remove(plan.id), 404, 'plan_not_found');
    expect((await api.list('?limit=1000')).json<PlanResource[]>().map((p) => p.id)).not.toContain(plan.id);
    const stored = await stack.db.models.Plan.findById(plan.id).lean();
    expect(stored?.deleted_at).toBeInstanceOf(Date);
    expect(stored?.charges).toHaveLength(1);
    const again = await createPlan({ code: plan.code });
    expect(again.id).not.toBe(plan.id);
  });

  it.each([
    ['an active subscription', 'active', 'plan_id'],
    ['a pending subscription', 'pending', 'plan_id'],
    ['a pending downgrade to it', 'active', 'previous_plan_id'],
  ] as const)('is 400 resource_in_use while %s uses the plan', async (_what, status, field) => {
    const plan = await createPlan();
    await subscribe(plan.id, status, field);
    expectError(await api.remove(plan.id), 400, 'resource_in_use');
    expect((await api.get(plan.id)).statusCode).toBe(200);
  });

  it('deletes a plan whose subscriptions are all terminated or canceled', async () => {
    const plan = await createPlan();
    await subscribe(plan.id, 'terminated');
    await subscribe(plan.id, 'canceled');
    expect((await api.remove(plan.id)).statusCode).toBe(200);
  });
});

describe('tenant isolation', () => {
  it("is 404 for another organization's plan, by id and by code, and never lists it", async () => {
    const plan = await createPlan({ charges: [standard(countMetric.id)] });
    for (const ref of [plan.id, plan.code]) {
      expectError(await api.get(ref, other.headers), 404, 'plan_not_found');
      expectError(await api.update(ref, { name: 'hijacked' }, other.headers), 404, 'plan_not_found');
      expectError(await api.remove(ref, other.headers), 404, 'plan_not_found');
    }
    expect((await api.list('?limit=1000', other.headers)).json<PlanResource[]>().map((p) => p.id)).not.toContain(plan.id);
    expect((await api.get(plan.id)).json<PlanResource>()).toEqual(plan);
  });

  it("is 404 for a charge on another organization's metric", async () => {
    const res = await api.create({ code: nextCode(), name: 'x', interval: 'monthly', charges: [standard(countMetric.id)] }, other.headers);
    expectError(res, 404, 'billable_metric_not_found');
  });
});

describe('OpenAPI', () => {
  it('documents the plan paths with each charge model', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json<{ paths: Record<string, Record<string, unknown>> }>();
    expect(Object.keys(doc.paths['/v1/plans']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/plans/{id}']!).sort()).toEqual(['delete', 'get', 'put']);
    expect(res.body).toContain('graduated_percentage_ranges');
  });
});
