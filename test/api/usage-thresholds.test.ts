// Usage thresholds (api-contract.md "Catalog: Usage thresholds", progressive billing): per plan,
// amounts > 0, at most one recurring threshold, distinct fixed amounts (409), tenant isolation.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlanResource } from '../../src/resources/plan';
import type { UsageThresholdResource } from '../../src/resources/usage-threshold';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let other: TestOrganization;
let seq = 0;
const nextCode = (label = 'plan') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Threshold Org' });
  other = await createOrganization(stack.app, { name: 'Other Threshold Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const api = {
  create: (plan: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: `/v1/plans/${plan}/usage_thresholds`, headers, payload: payload as Record<string, unknown> }),
  list: (plan: string, query = '', headers: Headers = org.headers) =>
    stack.app.inject({ method: 'GET', url: `/v1/plans/${plan}/usage_thresholds${query}`, headers }),
  remove: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'DELETE', url: `/v1/usage_thresholds/${id}`, headers }),
};

async function createPlan(headers: Headers = org.headers): Promise<PlanResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/plans',
    headers,
    payload: { code: nextCode(), name: 'Plan', interval: 'monthly' },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function createThreshold(plan: string, payload: Record<string, unknown> = {}): Promise<UsageThresholdResource> {
  const res = await api.create(plan, { amount_cents: 10000, ...payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<UsageThresholdResource>();
}

describe('create and list', () => {
  it('creates a threshold with the defaults', async () => {
    const plan = await createPlan();
    const res = await api.create(plan.id, { amount_cents: 10000 });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      plan_id: plan.id,
      amount_cents: '10000.0000',
      recurring: false,
      threshold_display_name: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
    const stored = await stack.db.connection
      .collection('usage_thresholds')
      .findOne({ _id: res.json<UsageThresholdResource>().id as never });
    expect(stored).toMatchObject({ organization_id: org.id, plan_id: plan.id, recurring: false, threshold_display_name: null });
    expect(stored!.amount_cents.constructor.name).toBe('Decimal128');
  });

  it('addresses the plan by code and lists its thresholds newest first, with paging', async () => {
    const plan = await createPlan();
    const made: UsageThresholdResource[] = [];
    for (const [i, amount] of ['100', '200.5', '300'].entries()) {
      made.push(await createThreshold(plan.code, { amount_cents: amount, threshold_display_name: `T${i}` }));
      await sleep(5);
    }
    made.push(await createThreshold(plan.code, { amount_cents: 1000, recurring: true }));
    expect(made.map((t) => [t.amount_cents, t.recurring])).toEqual([
      ['100.0000', false],
      ['200.5000', false],
      ['300.0000', false],
      ['1000.0000', true],
    ]);
    const list = await api.list(plan.code);
    expect(list.json()).toEqual([...made].reverse());
    expect(list.headers['x-total-count']).toBe('4');
    const page = await api.list(plan.id, '?skip=1&limit=2');
    expect(page.json<UsageThresholdResource[]>().map((t) => t.id)).toEqual([made[2]!.id, made[1]!.id]);
    expect(page.headers['x-total-count']).toBe('4');
    const slash = await stack.app.inject({ method: 'GET', url: `/v1/plans/${plan.id}/usage_thresholds/`, headers: org.headers });
    expect(slash.json<UsageThresholdResource[]>()).toHaveLength(4);
  });

  it('is 409 for a second fixed threshold of the same amount, however it is written', async () => {
    const plan = await createPlan();
    await createThreshold(plan.id, { amount_cents: 100 });
    for (const amount of [100, '100', '100.00', '100.0000']) {
      const body = expectError(await api.create(plan.id, { amount_cents: amount }), 409, 'already_exists');
      expect(body.message).toContain('100.0000');
    }
    await createThreshold(plan.id, { amount_cents: '100.0001' });
    expect((await api.list(plan.id)).headers['x-total-count']).toBe('2');
  });

  it('is 409 for a second recurring threshold, whatever its amount; a recurring amount may equal a fixed one', async () => {
    const plan = await createPlan();
    await createThreshold(plan.id, { amount_cents: 500 });
    await createThreshold(plan.id, { amount_cents: 500, recurring: true });
    const body = expectError(await api.create(plan.id, { amount_cents: 700, recurring: true }), 409, 'already_exists');
    expect(body.message).toContain('recurring');
  });

  it('allows the same amount on two plans', async () => {
    const a = await createPlan();
    const b = await createPlan();
    await createThreshold(a.id, { amount_cents: 100, recurring: true });
    await createThreshold(b.id, { amount_cents: 100, recurring: true });
    await createThreshold(b.id, { amount_cents: 100 });
  });

  it('creates exactly one from concurrent creations of the same amount', async () => {
    const plan = await createPlan();
    const results = await Promise.all(Array.from({ length: 5 }, () => api.create(plan.id, { amount_cents: 42 })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409]);
    expect(await stack.db.models.UsageThreshold.countDocuments({ plan_id: plan.id })).toBe(1);
  });

  it('is 404 plan_not_found for an unknown or deleted plan', async () => {
    expectError(await api.create(randomUUID(), { amount_cents: 1 }), 404, 'plan_not_found');
    expectError(await api.list('no_such_plan'), 404, 'plan_not_found');
    const plan = await createPlan();
    const threshold = await createThreshold(plan.id);
    expect((await stack.app.inject({ method: 'DELETE', url: `/v1/plans/${plan.id}`, headers: org.headers })).statusCode).toBe(200);
    expectError(await api.list(plan.id), 404, 'plan_not_found');
    expectError(await api.create(plan.id, { amount_cents: 1 }), 404, 'plan_not_found');
    expectError(await api.remove(threshold.id), 404, 'usage_threshold_not_found');
  });
});

describe('validation', () => {
  it.each([
    ['a missing amount_cents', {}, 'amount_cents'],
    ['an amount_cents of 0', { amount_cents: 0 }, 'amount_cents'],
    ['a negative amount_cents', { amount_cents: -1 }, 'amount_cents'],
    ['5 fractional digits', { amount_cents: '0.00001' }, 'amount_cents'],
    ['recurring that is not a boolean', { amount_cents: 1, recurring: 'yes' }, 'recurring'],
    ['a display name over 255 characters', { amount_cents: 1, threshold_display_name: 'x'.repeat(256) }, 'threshold_display_name'],
  ])('is 422 with %s', async (_what, payload, path) => {
    const plan = await createPlan();
    expectValidationError(await api.create(plan.id, payload), path);
    expect(await stack.db.models.UsageThreshold.countDocuments({ plan_id: plan.id })).toBe(0);
  });

  it('is 422 with an unknown field', async () => {
    const plan = await createPlan();
    const body = expectUnknownFields(await api.create(plan.id, { amount_cents: 1, amount_currency: 'USD' }), ['amount_currency']);
    expect(body.errors.map((e) => e.path)).toEqual(['amount_currency']);
  });
});

describe('delete', () => {
  it('removes a threshold; its amount can then be used again', async () => {
    const plan = await createPlan();
    const threshold = await createThreshold(plan.id, { amount_cents: 250, recurring: true });
    const res = await api.remove(threshold.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual(threshold);
    expect((await api.list(plan.id)).json()).toEqual([]);
    expectError(await api.remove(threshold.id), 404, 'usage_threshold_not_found');
    await createThreshold(plan.id, { amount_cents: 999, recurring: true });
  });

  it('answers with a trailing slash too, and 404 for an unknown id', async () => {
    const plan = await createPlan();
    const threshold = await createThreshold(plan.id);
    const res = await stack.app.inject({ method: 'DELETE', url: `/v1/usage_thresholds/${threshold.id}/`, headers: org.headers });
    expect(res.statusCode).toBe(200);
    expectError(await api.remove(randomUUID()), 404, 'usage_threshold_not_found');
  });
});

describe('tenant isolation', () => {
  it("is 404 for another organization's plan and threshold, and changes nothing", async () => {
    const plan = await createPlan();
    const threshold = await createThreshold(plan.id);
    expectError(await api.list(plan.id, '', other.headers), 404, 'plan_not_found');
    expectError(await api.create(plan.code, { amount_cents: 5 }, other.headers), 404, 'plan_not_found');
    expectError(await api.remove(threshold.id, other.headers), 404, 'usage_threshold_not_found');
    expect((await api.list(plan.id)).json()).toEqual([threshold]);
  });
});
