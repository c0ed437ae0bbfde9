import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/api/app';
import { insertMetric, insertPlan, insertSubscription } from '../support/catalog-fixtures';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let subscriptionId: string;
let metricId: string;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { events_rate_limit_per_minute: 100_000 });
  const customer = await stack.app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: org.headers,
    payload: { external_id: 'cus_1' },
  });
  metricId = await insertMetric(stack.db, org.id, {
    code: 'storage',
    aggregation_type: 'sum',
    field_name: 'gb',
    filters: [{ key: 'region', values: ['eu', 'us'] }],
  });
  const { planId } = await insertPlan(stack.db, org.id, {
    charges: [{ billable_metric_id: metricId, charge_model: 'standard', properties: { amount: '10' } }],
  });
  subscriptionId = await insertSubscription(stack.db, {
    organizationId: org.id,
    customerId: customer.json<{ id: string }>().id,
    externalCustomerId: 'cus_1',
    planId,
    startedAt: new Date('2026-01-01T00:00:00Z'),
  });
});
afterAll(async () => stack?.close());

const post = (payload: unknown, headers = org.headers) =>
  stack.app.inject({ method: 'POST', url: '/v1/events', headers, payload: payload as object });

describe('POST /v1/events', () => {
  it('stores the event, resolves it to the subscription and adds it to the daily pre-aggregate', async () => {
    const res = await post({
      transaction_id: 'tx-1',
      external_customer_id: 'cus_1',
      code: 'storage',
      timestamp: '2026-11-20T10:00:00Z',
      properties: { gb: '2.5', region: 'eu' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      transaction_id: 'tx-1',
      subscription_ids: [subscriptionId],
      billable_metric_id: metricId,
      timestamp: '2026-11-20T10:00:00.000Z',
    });
    expect(res.headers['x-ratelimit-limit']).toBe('100000');
    const rows = await stack.db.models.DailyUsage.find({ subscription_id: subscriptionId }).lean();
    expect(rows.map((r) => ({ date: r.usage_date, dims: r.dimensions_key, value: String(r.usage_value), n: r.events_count }))).toEqual([
      { date: '2026-11-20', dims: '{"region":"eu"}', value: '2.5', n: 1 },
    ]);
  });

  it('answers 409 with existing_event_id for a duplicate transaction_id, and 422 for unknown metric or customer', async () => {
    const first = await post({ transaction_id: 'tx-dup', external_customer_id: 'cus_1', code: 'storage', properties: { gb: 1 } });
    const again = await post({ transaction_id: 'tx-dup', external_customer_id: 'cus_1', code: 'storage', properties: { gb: 1 } });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'already_exists', existing_event_id: first.json<{ id: string }>().id });
    const badMetric = await post({ transaction_id: 'tx-x', external_customer_id: 'cus_1', code: 'nope' });
    expect(badMetric.statusCode).toBe(422);
    expect(badMetric.json().errors).toEqual([{ path: 'code', message: 'no billable metric "nope"' }]);
    const badCustomer = await post({ transaction_id: 'tx-y', external_customer_id: 'ghost', code: 'storage' });
    expect(badCustomer.statusCode).toBe(422);
    expect(badCustomer.json().errors[0].path).toBe('external_customer_id');
  });

  it('stores exactly one event and one unit of daily usage for ten concurrent submissions of one transaction_id', async () => {
    const body = {
      transaction_id: `tx-race-${randomUUID()}`,
      external_customer_id: 'cus_1',
      code: 'storage',
      timestamp: '2026-11-19T10:00:00Z',
      properties: { gb: 1, region: 'us' },
    };
    const results = await Promise.all(Array.from({ length: 10 }, () => post(body)));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    expect(await stack.db.models.Event.countDocuments({ transaction_id: body.transaction_id })).toBe(1);
    const row = await stack.db.models.DailyUsage.findOne({ subscription_id: subscriptionId, usage_date: '2026-11-19' }).lean();
    expect(row?.events_count).toBe(1);
    expect(String(row?.usage_value)).toBe('1');
  });
});

describe('POST /v1/events/batch', () => {
  it('stores every valid event, counts duplicates and reports errors by index', async () => {
    await post({ transaction_id: 'b-existing', external_customer_id: 'cus_1', code: 'storage', properties: { gb: 1 } });
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/events/batch',
      headers: org.headers,
      payload: {
        events: [
          { transaction_id: 'b-1', external_customer_id: 'cus_1', code: 'storage', properties: { gb: 3 } },
          { transaction_id: 'b-existing', external_customer_id: 'cus_1', code: 'storage', properties: { gb: 1 } },
          { transaction_id: 'b-2', external_customer_id: 'cus_1', code: 'unknown' },
          { transaction_id: 'b-3', code: 'storage' },
          { transaction_id: 'b-4', external_customer_id: 'cus_1', code: 'storage', properties: { gb: 4 } },
        ],
      },
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.ingested).toBe(2);
    expect(body.duplicates).toBe(1);
    expect(body.events.map((e: { transaction_id: string }) => e.transaction_id)).toEqual(['b-1', 'b-4']);
    expect(body.errors.map((e: { index: number; code: string }) => [e.index, e.code])).toEqual([
      [2, 'billable_metric_not_found'],
      [3, 'validation_error'],
    ]);
    expect(await stack.db.models.Event.countDocuments({ transaction_id: { $in: ['b-1', 'b-4'] } })).toBe(2);
  });
});

describe('rate limit', () => {
  it('is shared by two API instances on one database and answers 429 with Retry-After', async () => {
    const limited = await createOrganization(stack.app, { events_rate_limit_per_minute: 3 });
    await stack.app.inject({ method: 'POST', url: '/v1/customers', headers: limited.headers, payload: { external_id: 'c' } });
    const second = await buildApp({
      config: { LOG_LEVEL: 'silent', BILLING_SIGNUP_TOKEN: undefined, BODY_LIMIT_BYTES: 1 << 20 },
      db: stack.db,
      temporal: stack.temporal,
      logger: false,
    });
    try {
      const send = (app: typeof stack.app) => app.inject({ method: 'GET', url: '/v1/events', headers: limited.headers });
      const answers = [await send(stack.app), await send(second), await send(stack.app), await send(second)];
      expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 429]);
      expect(answers.map((a) => a.headers['x-ratelimit-remaining'])).toEqual(['2', '1', '0', '0']);
      expect(Number(answers[3]!.headers['retry-after'])).toBeGreaterThan(0);
      expect(answers[3]!.json()).toMatchObject({ status: 429, code: 'rate_limited' });
      // Other routes are not limited.
      expect((await second.inject({ method: 'GET', url: '/v1/customers', headers: limited.headers })).statusCode).toBe(200);
    } finally {
      await second.close();
    }
  });
});

describe('rate limit under concurrency', () => {
  it('counts 25 simultaneous requests one by one: exactly the limit of 10 pass, each with its own remaining count', async () => {
    const limited = await createOrganization(stack.app, { events_rate_limit_per_minute: 10 });
    // All in one window: not in the last 3 seconds of a minute.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 57_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100));
    const answers = await Promise.all(
      Array.from({ length: 25 }, () => stack.app.inject({ method: 'GET', url: '/v1/events', headers: limited.headers })),
    );
    const passed = answers.filter((a) => a.statusCode === 200);
    expect(passed).toHaveLength(10);
    expect(answers.filter((a) => a.statusCode === 429)).toHaveLength(15);
    expect(passed.map((a) => Number(a.headers['x-ratelimit-remaining'])).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // The window's stored count is every request, refused ones included.
    const windows = await stack.db.models.RateLimitWindow.find({ organization_id: limited.id }).lean();
    expect(windows.reduce((n, w) => n + w.count, 0)).toBe(25);
  });
});

describe('GET /v1/customers/{id}/current_usage', () => {
  it('prices the current period from the daily pre-aggregate, by filter', async () => {
    const o = await createOrganization(stack.app, { events_rate_limit_per_minute: 100_000 });
    const c = await stack.app.inject({ method: 'POST', url: '/v1/customers', headers: o.headers, payload: { external_id: 'u1' } });
    const m = await insertMetric(stack.db, o.id, {
      code: 'calls',
      aggregation_type: 'count',
      filters: [{ key: 'region', values: ['eu', 'us'] }],
    });
    const { planId, chargeIds } = await insertPlan(stack.db, o.id, {
      charges: [
        {
          billable_metric_id: m,
          charge_model: 'graduated',
          properties: {
            graduated_ranges: [
              { from_value: 0, to_value: 2, per_unit_amount: '100', flat_amount: '0' },
              { from_value: 2, to_value: null, per_unit_amount: '10', flat_amount: '0' },
            ],
          },
          filters: [
            {
              _id: randomUUID(),
              values: { region: ['eu'] },
              properties: { graduated_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '1', flat_amount: '0' }] },
            },
          ],
        },
      ],
    });
    await insertSubscription(stack.db, {
      organizationId: o.id,
      customerId: c.json<{ id: string }>().id,
      externalCustomerId: 'u1',
      planId,
      startedAt: new Date('2026-01-01T00:00:00Z'),
    });
    const now = new Date();
    const events = [{ region: 'eu' }, { region: 'eu' }, { region: 'us' }, { region: 'us' }, { region: 'us' }, {}].map((properties, i) => ({
      transaction_id: `u-${i}`,
      external_customer_id: 'u1',
      code: 'calls',
      timestamp: now.toISOString(),
      properties,
    }));
    const batch = await stack.app.inject({ method: 'POST', url: '/v1/events/batch', headers: o.headers, payload: { events } });
    expect(batch.json().ingested).toBe(6);

    const res = await stack.app.inject({ method: 'GET', url: '/v1/customers/u1/current_usage', headers: o.headers });
    expect(res.statusCode).toBe(200);
    const usage = res.json();
    // eu: 2 events at 1 cent each = 2; default bucket (us x3 + no region x1 = 4): 2 x 100 + 2 x 10 = 220.
    expect(usage.charges).toEqual([
      {
        charge_id: chargeIds[0],
        billable_metric_code: 'calls',
        charge_model: 'graduated',
        units: '6.0000',
        events_count: 6,
        amount_cents: '222.0000',
        filters: [{ values: { region: ['eu'] }, units: '2.0000', events_count: 2, amount_cents: '2.0000' }],
      },
    ]);
    expect(usage).toMatchObject({
      amount_cents: '222.0000',
      taxes_amount_cents: '0.0000',
      total_amount_cents: '222.0000',
      currency: 'USD',
    });
  });
});
