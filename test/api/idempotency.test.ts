// Idempotency-Key on the money-moving POSTs (api-contract.md "Idempotent requests"): the first
// answer is kept 24 hours and replayed to a repeat of the same request, refused for another
// request (422) and while the first still runs (409); a 4xx is not kept; keys are per
// organization; expired keys are removed by the sweep-idempotency-keys schedule's activity.
import { randomUUID } from 'node:crypto';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotencyKeyActivities } from '../../activities/idempotency-keys';
import { IDEMPOTENCY_KEY_TTL_MS, IN_PROGRESS_TAKEOVER_MS, idempotencyRequestHash } from '../../src/api/plugins/idempotency';
import type { IdempotencyKeyDoc } from '../../src/db/models/idempotency-key';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { WalletResource } from '../../src/resources/wallet';
import { ensureIdempotencyKeySweepSchedule, IDEMPOTENCY_KEY_SWEEP_SCHEDULE_ID } from '../../src/temporal/schedules';
import { sweepIdempotencyKeysWorkflowType } from '../../workflows/idempotency-keys.messages';
import { expectError, expectValidationError, injectAs, ok, type Method } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  // A grace period keeps one-off invoices in draft, so that finalize can be called.
  org = await createOrganization(stack.app, { name: 'Idempotency Org', default_currency: 'USD', invoice_grace_period: 30 });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

const call = (as: TestOrganization, method: Method, url: string, payload?: unknown, key?: string) =>
  injectAs(stack.app, as, method, url, payload, key === undefined ? {} : { 'idempotency-key': key });

async function newCustomer(as: TestOrganization = org, externalId = `c-${randomUUID()}`): Promise<{ id: string }> {
  return ok(await call(as, 'POST', '/v1/customers', { external_id: externalId, currency: 'USD' }), 201);
}

function expectReplayOf(repeat: LightMyRequestResponse, first: LightMyRequestResponse): void {
  expect(repeat.statusCode, repeat.body).toBe(first.statusCode);
  expect(repeat.headers['idempotent-replayed']).toBe('true');
  expect(repeat.headers['content-type']).toBe(first.headers['content-type']);
  expect(repeat.body).toBe(first.body);
}

const keyRows = (organizationId: string, key: string) =>
  stack.db.models.IdempotencyKey.find({ organization_id: organizationId, key }).lean<IdempotencyKeyDoc[]>();

describe('a repeat of the same request', () => {
  it('gets the first answer again, and the wallet is created once', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const body = { customer_id: customer.id, name: 'Prepaid', initial_granted_credits: '10' };
    const first = await call(org, 'POST', '/v1/wallets', body, key);
    expect(first.statusCode, first.body).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    const repeat = await call(org, 'POST', '/v1/wallets', body, key);
    expectReplayOf(repeat, first);
    expect(repeat.headers['x-request-id']).not.toBe(first.headers['x-request-id']);
    // The same body with its keys in another order is the same request.
    const reordered = { initial_granted_credits: '10', name: 'Prepaid', customer_id: customer.id };
    expectReplayOf(await call(org, 'POST', '/v1/wallets', reordered, key), first);

    expect(await stack.db.models.Wallet.countDocuments({ organization_id: org.id, customer_id: customer.id })).toBe(1);
    expect(
      await stack.db.models.WalletTransaction.countDocuments({ organization_id: org.id, wallet_id: first.json<WalletResource>().id }),
    ).toBe(1);
    const [row] = await keyRows(org.id, key);
    expect(row).toMatchObject({ state: 'completed', method: 'POST', path: '/v1/wallets', response_status: 201, response_body: first.body });
    expect(row!.expires_at.getTime() - row!.created_at.getTime()).toBe(IDEMPOTENCY_KEY_TTL_MS);
  });

  it('tops a wallet up once', async () => {
    const customer = await newCustomer();
    const wallet = ok<WalletResource>(await call(org, 'POST', '/v1/wallets', { customer_id: customer.id }), 201);
    const key = randomUUID();
    const url = `/v1/wallets/${wallet.id}/top_up`;
    const first = await call(org, 'POST', url, { credits: '5' }, key);
    expect(first.statusCode, first.body).toBe(200);
    expectReplayOf(await call(org, 'POST', url, { credits: '5' }, key), first);
    const now = ok<WalletResource>(await call(org, 'GET', `/v1/wallets/${wallet.id}`));
    expect(now.credits_balance).toBe('5.0000');
    // Without a key, a repeat is a new top-up.
    ok(await call(org, 'POST', url, { credits: '5' }));
    expect(ok<WalletResource>(await call(org, 'GET', `/v1/wallets/${wallet.id}`)).credits_balance).toBe('10.0000');
  });

  it('creates one one-off invoice, and replays an invoice action instead of refusing it', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const body = { customer_id: customer.id, line_items: [{ description: 'Setup', unit_price: '100' }] };
    const first = await call(org, 'POST', '/v1/invoices/one_off', body, key);
    expect(first.statusCode, first.body).toBe(201);
    expectReplayOf(await call(org, 'POST', '/v1/invoices/one_off', body, key), first);
    expect(await stack.db.models.Invoice.countDocuments({ organization_id: org.id, customer_id: customer.id })).toBe(1);

    const invoice = first.json<InvoiceResource>();
    expect(invoice.status).toBe('draft');
    const finalizeKey = randomUUID();
    const finalized = await call(org, 'POST', `/v1/invoices/${invoice.id}/finalize`, undefined, finalizeKey);
    expect(finalized.statusCode, finalized.body).toBe(200);
    expect(finalized.json<InvoiceResource>().status).toBe('finalized');
    // The retry of a finalize whose answer was lost gets that answer, not "cannot finalize".
    expectReplayOf(await call(org, 'POST', `/v1/invoices/${invoice.id}/finalize`, undefined, finalizeKey), finalized);
    expectError(await call(org, 'POST', `/v1/invoices/${invoice.id}/finalize`), 400, 'invalid_state_transition');
  });
});

describe('the same key for another request', () => {
  it('with another body is 422 idempotency_key_reused, and nothing is created', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    ok(await call(org, 'POST', '/v1/wallets', { customer_id: customer.id, name: 'A' }, key), 201);
    const res = await call(org, 'POST', '/v1/wallets', { customer_id: customer.id, name: 'B' }, key);
    const error = expectError(res, 422, 'idempotency_key_reused');
    expect(error.errors.map((e) => e.path)).toEqual(['idempotency-key']);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(await stack.db.models.Wallet.countDocuments({ organization_id: org.id, customer_id: customer.id })).toBe(1);
    // The kept answer is untouched by the refusal.
    expect((await keyRows(org.id, key))[0]).toMatchObject({ state: 'completed', response_status: 201 });
  });

  it('with another path is 422 idempotency_key_reused, naming the first request', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const wallet = ok<WalletResource>(await call(org, 'POST', '/v1/wallets', { customer_id: customer.id }, key), 201);
    const res = await call(org, 'POST', `/v1/wallets/${wallet.id}/top_up`, { credits: '5' }, key);
    const error = expectError(res, 422, 'idempotency_key_reused');
    expect(error.message).toContain('POST /v1/wallets');
    expect(ok<WalletResource>(await call(org, 'GET', `/v1/wallets/${wallet.id}`)).credits_balance).toBe('0.0000');
  });
});

describe('answers that are not kept', () => {
  it('a 4xx from the route frees the key: the same request succeeds once it can', async () => {
    const externalId = `later-${randomUUID()}`;
    const key = randomUUID();
    const body = { customer_id: externalId, name: 'Later' };
    expectError(await call(org, 'POST', '/v1/wallets', body, key), 404, 'customer_not_found');
    expect(await keyRows(org.id, key)).toEqual([]);

    await newCustomer(org, externalId);
    const res = await call(org, 'POST', '/v1/wallets', body, key);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expectReplayOf(await call(org, 'POST', '/v1/wallets', body, key), res);
  });

  it('a validation 422 does not bind the key to its body: the corrected request runs', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    expectValidationError(await call(org, 'POST', '/v1/wallets', { customer_id: customer.id, priority: 0 }, key), 'priority');
    expect(await keyRows(org.id, key)).toEqual([]);
    const res = await call(org, 'POST', '/v1/wallets', { customer_id: customer.id, priority: 2 }, key);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json<WalletResource>().priority).toBe(2);
  });
});

describe('keys are per organization', () => {
  it('two organizations using the same key each get their own wallet', async () => {
    const other = await createOrganization(stack.app, { name: 'Other Idempotency Org', default_currency: 'USD' });
    const key = randomUUID();
    const mine = await newCustomer(org);
    const theirs = await newCustomer(other);
    const a = ok<WalletResource>(await call(org, 'POST', '/v1/wallets', { customer_id: mine.id }, key), 201);
    const res = await call(other, 'POST', '/v1/wallets', { customer_id: theirs.id }, key);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    const b = res.json<WalletResource>();
    expect(b.id).not.toBe(a.id);
    expect(b.customer_id).toBe(theirs.id);
    expect(await stack.db.models.Wallet.countDocuments({ _id: { $in: [a.id, b.id] } })).toBe(2);
  });
});

describe('a repeat while the first request runs', () => {
  /** A claim as the API writes it when a request starts, `ageMs` old. */
  async function claimRow(key: string, path: string, body: unknown, ageMs: number, overrides: Partial<IdempotencyKeyDoc> = {}) {
    const createdAt = new Date(Date.now() - ageMs);
    await stack.db.models.IdempotencyKey.create({
      _id: randomUUID(),
      organization_id: org.id,
      key,
      method: 'POST',
      path,
      request_hash: idempotencyRequestHash('POST', path, body),
      state: 'in_progress',
      response_status: null,
      response_body: null,
      content_type: null,
      created_at: createdAt,
      expires_at: new Date(createdAt.getTime() + IDEMPOTENCY_KEY_TTL_MS),
      ...overrides,
    });
  }

  it('is 409 idempotency_key_in_use and runs nothing', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const body = { customer_id: customer.id };
    await claimRow(key, '/v1/wallets', body, 1000);
    expectError(await call(org, 'POST', '/v1/wallets', body, key), 409, 'idempotency_key_in_use');
    expect(await stack.db.models.Wallet.countDocuments({ organization_id: org.id, customer_id: customer.id })).toBe(0);
    expect((await keyRows(org.id, key))[0]?.state).toBe('in_progress');
  });

  it('two at once: one runs, the other is refused or replays its answer; one wallet', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const body = { customer_id: customer.id };
    const answers = await Promise.all([1, 2, 3].map(() => call(org, 'POST', '/v1/wallets', body, key)));
    const fresh = answers.filter((r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined);
    expect(fresh).toHaveLength(1);
    for (const r of answers) {
      if (r === fresh[0]) continue;
      if (r.statusCode === 409) expectError(r, 409, 'idempotency_key_in_use');
      else expectReplayOf(r, fresh[0]!);
    }
    expect(await stack.db.models.Wallet.countDocuments({ organization_id: org.id, customer_id: customer.id })).toBe(1);
  });

  it('a claim abandoned longer than the takeover delay (a crashed API) is taken over by the same request', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const body = { customer_id: customer.id };
    await claimRow(key, '/v1/wallets', body, IN_PROGRESS_TAKEOVER_MS + 1000);
    const res = await call(org, 'POST', '/v1/wallets', body, key);
    expect(res.statusCode, res.body).toBe(201);
    const rows = await keyRows(org.id, key);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ state: 'completed', response_body: res.body });
  });

  it('an expired answer not swept yet is ignored: the request runs again', async () => {
    const customer = await newCustomer();
    const key = randomUUID();
    const body = { customer_id: customer.id };
    await claimRow(key, '/v1/wallets', { other: 'body' }, IDEMPOTENCY_KEY_TTL_MS + 1000, {
      state: 'completed',
      response_status: 201,
      response_body: '{}',
    });
    const res = await call(org, 'POST', '/v1/wallets', body, key);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(await keyRows(org.id, key)).toHaveLength(1);
  });
});

describe('the header', () => {
  it.each([
    ['longer than 255 characters', 'k'.repeat(256)],
    ['empty', ''],
  ])('%s is 422 validation_error naming it, and nothing runs', async (_, key) => {
    const customer = await newCustomer();
    expectValidationError(await call(org, 'POST', '/v1/wallets', { customer_id: customer.id }, key), 'idempotency-key');
    expect(await stack.db.models.Wallet.countDocuments({ organization_id: org.id, customer_id: customer.id })).toBe(0);
  });

  it('of 255 characters is accepted', async () => {
    const customer = await newCustomer();
    const key = `${randomUUID()}${'k'.repeat(255 - 36)}`;
    const first = await call(org, 'POST', '/v1/wallets', { customer_id: customer.id }, key);
    expect(first.statusCode, first.body).toBe(201);
    expectReplayOf(await call(org, 'POST', '/v1/wallets', { customer_id: customer.id }, key), first);
  });

  it('is ignored by a route that did not opt in', async () => {
    const key = randomUUID();
    ok(await call(org, 'POST', '/v1/customers', { external_id: `x-${randomUUID()}` }, key), 201);
    const second = await call(org, 'POST', '/v1/customers', { external_id: `y-${randomUUID()}` }, key);
    expect(second.statusCode, second.body).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(await keyRows(org.id, key)).toEqual([]);
  });

  it('is documented on the flagged routes in the OpenAPI document', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' })).json<{
      paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
    }>();
    const headerOf = (path: string, method: string) =>
      doc.paths[path]?.[method]?.parameters?.some((p) => p.in === 'header' && p.name === 'idempotency-key') ?? false;
    for (const path of ['/v1/wallets', '/v1/wallets/{id}/top_up', '/v1/subscriptions', '/v1/invoices/one_off', '/v1/add_ons/apply']) {
      expect(headerOf(path, 'post'), path).toBe(true);
    }
    expect(headerOf('/v1/credit_notes', 'post')).toBe(true);
    expect(headerOf('/v1/invoices/{id}/finalize', 'post')).toBe(true);
    expect(headerOf('/v1/customers', 'post')).toBe(false);
  });
});

describe('the sweep of expired keys', () => {
  async function seed(key: string, expiresAt: Date) {
    await stack.db.models.IdempotencyKey.create({
      _id: randomUUID(),
      organization_id: org.id,
      key,
      method: 'POST',
      path: '/v1/wallets',
      request_hash: 'x',
      state: 'completed',
      response_status: 201,
      response_body: '{}',
      content_type: 'application/json; charset=utf-8',
      created_at: new Date(expiresAt.getTime() - IDEMPOTENCY_KEY_TTL_MS),
      expires_at: expiresAt,
    });
  }

  it('removes the expired rows and keeps the fresh ones', async () => {
    const at = new Date('2030-01-02T00:00:00.000Z');
    const [expired1, expired2, fresh] = [randomUUID(), randomUUID(), randomUUID()];
    await seed(expired1, new Date(at.getTime() - 1));
    await seed(expired2, new Date(at.getTime() - IDEMPOTENCY_KEY_TTL_MS));
    await seed(fresh, new Date(at.getTime() + 1));
    const before = await stack.db.models.IdempotencyKey.countDocuments({});

    const { deleteExpiredIdempotencyKeys } = createIdempotencyKeyActivities({ db: stack.db, now: () => at });
    // Every row the other tests kept expires before 2030 too.
    const { deleted } = await deleteExpiredIdempotencyKeys();
    expect(deleted).toBe(before - 1);
    const left = await stack.db.models.IdempotencyKey.find({}).lean<IdempotencyKeyDoc[]>();
    expect(left.map((r) => r.key)).toEqual([fresh]);
    expect(await deleteExpiredIdempotencyKeys()).toEqual({ deleted: 0 });
  });

  it('deletes in bounded rounds, oldest first, until none is left', async () => {
    const at = new Date('2031-01-02T00:00:00.000Z');
    const expired = Array.from({ length: 7 }, (_, i) => ({ key: randomUUID(), expiresAt: new Date(at.getTime() - (i + 1) * 1000) }));
    const fresh = randomUUID();
    for (const row of expired) await seed(row.key, row.expiresAt);
    await seed(fresh, new Date(at.getTime() + 1));
    const { IdempotencyKey } = stack.db.models;
    const before = await IdempotencyKey.countDocuments({ expires_at: { $lte: at } });
    expect(before).toBeGreaterThanOrEqual(7);
    const oldest = await IdempotencyKey.find({ expires_at: { $lte: at } }, { _id: 1 })
      .sort({ expires_at: 1, _id: 1 })
      .limit(3)
      .lean();

    const deletes = vi.spyOn(IdempotencyKey, 'deleteMany');
    try {
      const { deleteExpiredIdempotencyKeys } = createIdempotencyKeyActivities({ db: stack.db, now: () => at, sweepRound: 3 });
      expect(await deleteExpiredIdempotencyKeys()).toEqual({ deleted: before });
      // Every round deleted at most 3 rows, named by id, the oldest first; a round that found fewer than 3 ended the sweep.
      const idsOf = (filter: unknown) => (filter as { _id: { $in: string[] } })._id.$in;
      const rounds = deletes.mock.calls.map(([filter]) => idsOf(filter).length);
      expect(rounds.length).toBe(Math.ceil(before / 3));
      expect(rounds.every((n) => n <= 3)).toBe(true);
      expect(rounds.reduce((a, b) => a + b, 0)).toBe(before);
      const first = idsOf(deletes.mock.calls[0]![0]);
      expect([...first].sort()).toEqual(oldest.map((r) => r._id).sort());
    } finally {
      deletes.mockRestore();
    }
    expect(await IdempotencyKey.countDocuments({ expires_at: { $lte: at } })).toBe(0);
    expect((await keyRows(org.id, fresh)).map((r) => r.key)).toEqual([fresh]);
  });

  it('runs as the schedule runs it: the sweep workflow on the worker', async () => {
    const key = randomUUID();
    await seed(key, new Date(Date.now() - 1000));
    const result = await stack.temporal.client.workflow.execute(sweepIdempotencyKeysWorkflowType, {
      taskQueue: stack.taskQueue,
      workflowId: `test-sweep-${randomUUID()}`,
      args: [],
    });
    worker.assertAlive();
    expect(result.deleted).toBeGreaterThanOrEqual(1);
    expect(await keyRows(org.id, key)).toEqual([]);
  });

  it('ensureIdempotencyKeySweepSchedule creates the schedule once; a second call leaves it', async () => {
    const client = stack.temporal.client;
    const schedule = client.schedule.getHandle(IDEMPOTENCY_KEY_SWEEP_SCHEDULE_ID);
    await schedule.delete().catch(() => undefined); // a leftover of an interrupted run
    try {
      expect(await ensureIdempotencyKeySweepSchedule(client, stack.taskQueue, '1 hour')).toBe(true);
      expect(await ensureIdempotencyKeySweepSchedule(client, stack.taskQueue, '1 hour')).toBe(false);
      const description = await schedule.describe();
      expect(description.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'sweepIdempotencyKeysWorkflow',
        taskQueue: stack.taskQueue,
      });
      expect(description.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
      expect(description.spec.intervals?.map((i) => i.every)).toEqual([3_600_000]);
    } finally {
      await schedule.delete();
    }
  });
});
