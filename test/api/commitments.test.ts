// Commitments (api-contract.md "Catalog: Commitments"; the specification's Commitment): a plan's
// minimum commitment, one per plan, addressed through the plan by id or code, tenant isolation.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommitmentResource } from '../../src/resources/commitment';
import type { PlanResource } from '../../src/resources/plan';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let other: TestOrganization;
let seq = 0;
const nextCode = (label = 'plan') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Commitment Org' });
  other = await createOrganization(stack.app, { name: 'Other Commitment Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const api = {
  create: (plan: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: `/v1/plans/${plan}/commitments`, headers, payload: payload as Record<string, unknown> }),
  list: (plan: string, query = '', headers: Headers = org.headers) =>
    stack.app.inject({ method: 'GET', url: `/v1/plans/${plan}/commitments${query}`, headers }),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'PUT', url: `/v1/commitments/${id}`, headers, payload: payload as Record<string, unknown> }),
  remove: (id: string, headers: Headers = org.headers) => stack.app.inject({ method: 'DELETE', url: `/v1/commitments/${id}`, headers }),
};

async function createPlan(headers: Headers = org.headers): Promise<PlanResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/plans',
    headers,
    payload: { code: nextCode(), name: 'Plan', interval: 'monthly', amount_cents: 1000 },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function createCommitment(plan: string, payload: Record<string, unknown> = {}): Promise<CommitmentResource> {
  const res = await api.create(plan, { commitment_type: 'minimum_commitment', amount_cents: 5000, ...payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CommitmentResource>();
}

describe('create and list', () => {
  it('creates the minimum commitment of a plan', async () => {
    const plan = await createPlan();
    const res = await api.create(plan.id, { commitment_type: 'minimum_commitment', amount_cents: 5000 });
    expect(res.statusCode, res.body).toBe(201);
    const commitment = res.json<CommitmentResource>();
    expect(commitment).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      plan_id: plan.id,
      commitment_type: 'minimum_commitment',
      amount_cents: '5000.0000',
      invoice_display_name: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
    const stored = await stack.db.connection.collection('commitments').findOne({ _id: commitment.id as never });
    expect(stored).toMatchObject({ organization_id: org.id, plan_id: plan.id, commitment_type: 'minimum_commitment' });
    expect(stored!.amount_cents.constructor.name).toBe('Decimal128');
    expect(String(stored!.amount_cents)).toBe('5000');
  });

  it('addresses the plan by code, defaults commitment_type and keeps the display name', async () => {
    const plan = await createPlan();
    const commitment = await createCommitment(plan.code, {
      commitment_type: undefined,
      amount_cents: '1234.5',
      invoice_display_name: 'Minimum spend',
    });
    expect(commitment).toMatchObject({
      plan_id: plan.id,
      commitment_type: 'minimum_commitment',
      amount_cents: '1234.5000',
      invoice_display_name: 'Minimum spend',
    });
    const list = await api.list(plan.code);
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual([commitment]);
    expect(list.headers['x-total-count']).toBe('1');
    const slash = await stack.app.inject({ method: 'GET', url: `/v1/plans/${plan.id}/commitments/`, headers: org.headers });
    expect(slash.json()).toEqual([commitment]);
  });

  it('lists nothing for a plan without a commitment, and pages', async () => {
    const plan = await createPlan();
    const empty = await api.list(plan.id);
    expect(empty.json()).toEqual([]);
    expect(empty.headers['x-total-count']).toBe('0');
    await createCommitment(plan.id);
    const page = await api.list(plan.id, '?skip=1');
    expect(page.json()).toEqual([]);
    expect(page.headers['x-total-count']).toBe('1');
    expectError(await api.list(plan.id, '?limit=0'), 422, 'validation_error');
  });

  it('is 409 already_exists for a second commitment of the plan', async () => {
    const plan = await createPlan();
    const first = await createCommitment(plan.id);
    expectError(await api.create(plan.code, { commitment_type: 'minimum_commitment', amount_cents: 1 }), 409, 'already_exists');
    expect((await api.list(plan.id)).json()).toEqual([first]);
  });

  it('creates exactly one commitment from concurrent creations', async () => {
    const plan = await createPlan();
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => api.create(plan.id, { amount_cents: 100 + i })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409]);
    expect(await stack.db.models.Commitment.countDocuments({ plan_id: plan.id })).toBe(1);
  });

  it('is 404 plan_not_found for an unknown or deleted plan', async () => {
    expectError(await api.create(randomUUID(), { amount_cents: 1 }), 404, 'plan_not_found');
    expectError(await api.list('no_such_plan'), 404, 'plan_not_found');
    const plan = await createPlan();
    const commitment = await createCommitment(plan.id);
    expect((await stack.app.inject({ method: 'DELETE', url: `/v1/plans/${plan.id}`, headers: org.headers })).statusCode).toBe(200);
    expectError(await api.create(plan.id, { amount_cents: 1 }), 404, 'plan_not_found');
    expectError(await api.list(plan.id), 404, 'plan_not_found');
    expectError(await api.update(commitment.id, { amount_cents: 1 }), 404, 'commitment_not_found');
    expectError(await api.remove(commitment.id), 404, 'commitment_not_found');
  });
});

describe('validation', () => {
  it.each([
    ['a missing amount_cents', { amount_cents: undefined }, 'amount_cents'],
    ['an amount_cents of 0', { amount_cents: 0 }, 'amount_cents'],
    ['a negative amount_cents', { amount_cents: '-5' }, 'amount_cents'],
    ['5 fractional digits', { amount_cents: '1.00001' }, 'amount_cents'],
    ['13 digits', { amount_cents: '123456789.1234' }, 'amount_cents'],
    ['not a number', { amount_cents: '12,50' }, 'amount_cents'],
    ['another commitment_type', { commitment_type: 'maximum_commitment' }, 'commitment_type'],
    ['a display name over 255 characters', { invoice_display_name: 'x'.repeat(256) }, 'invoice_display_name'],
  ])('is 422 with %s', async (_what, payload, path) => {
    const plan = await createPlan();
    expectValidationError(await api.create(plan.id, { commitment_type: 'minimum_commitment', amount_cents: 10, ...payload }), path);
    expect(await stack.db.models.Commitment.countDocuments({ plan_id: plan.id })).toBe(0);
  });

  it('is 422 with an unknown field, on create and update', async () => {
    const plan = await createPlan();
    expectUnknownFields(await api.create(plan.id, { amount_cents: 10, amount: 10 }), ['amount']);
    const commitment = await createCommitment(plan.id);
    const body = expectUnknownFields(await api.update(commitment.id, { plan_id: randomUUID() }), ['plan_id']);
    expect(body.errors.map((e) => e.path)).toEqual(['plan_id']);
  });
});

describe('update and delete', () => {
  it('updates the amount and the display name', async () => {
    const plan = await createPlan();
    const commitment = await createCommitment(plan.id);
    await sleep(5);
    const res = await api.update(commitment.id, { amount_cents: '7500.25', invoice_display_name: 'Floor' });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<CommitmentResource>();
    expect(updated).toMatchObject({ id: commitment.id, plan_id: plan.id, amount_cents: '7500.2500', invoice_display_name: 'Floor' });
    expect(updated.created_at).toBe(commitment.created_at);
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(commitment.updated_at));
    expect((await api.list(plan.id)).json()).toEqual([updated]);
    const trailing = await stack.app.inject({
      method: 'PUT',
      url: `/v1/commitments/${commitment.id}/`,
      headers: org.headers,
      payload: { invoice_display_name: null },
    });
    expect(trailing.json<CommitmentResource>()).toMatchObject({ amount_cents: '7500.2500', invoice_display_name: null });
    expectValidationError(await api.update(commitment.id, { amount_cents: 0 }), 'amount_cents');
  });

  it('deletes a commitment, after which the plan may get a new one', async () => {
    const plan = await createPlan();
    const commitment = await createCommitment(plan.id);
    const res = await api.remove(commitment.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual(commitment);
    expect((await api.list(plan.id)).json()).toEqual([]);
    expectError(await api.remove(commitment.id), 404, 'commitment_not_found');
    expectError(await api.update(commitment.id, { amount_cents: 1 }), 404, 'commitment_not_found');
    const again = await createCommitment(plan.id, { amount_cents: 300 });
    expect(again.id).not.toBe(commitment.id);
  });

  it('is 404 commitment_not_found for an unknown id', async () => {
    expectError(await api.update(randomUUID(), { amount_cents: 1 }), 404, 'commitment_not_found');
    expectError(await api.remove('not-a-commitment'), 404, 'commitment_not_found');
  });
});

describe('tenant isolation', () => {
  it("is 404 for another organization's plan and commitment, and changes nothing", async () => {
    const plan = await createPlan();
    const commitment = await createCommitment(plan.id);
    expectError(await api.list(plan.id, '', other.headers), 404, 'plan_not_found');
    expectError(await api.list(plan.code, '', other.headers), 404, 'plan_not_found');
    expectError(await api.create(plan.id, { amount_cents: 1 }, other.headers), 404, 'plan_not_found');
    expectError(await api.update(commitment.id, { amount_cents: 1 }, other.headers), 404, 'commitment_not_found');
    expectError(await api.remove(commitment.id, other.headers), 404, 'commitment_not_found');
    expect((await api.list(plan.id)).json()).toEqual([commitment]);
  });

  it("gives each organization's plan its own commitment", async () => {
    const mine = await createPlan();
    const theirs = await createPlan(other.headers);
    await createCommitment(mine.id);
    const res = await api.create(theirs.id, { amount_cents: 1 }, other.headers);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json<CommitmentResource>().organization_id).toBe(other.id);
  });
});
