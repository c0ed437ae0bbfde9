// Wallets through the API (specification "Wallets", api-contract.md "Wallets"), with a worker on the
// run's Temporal dev server: creation starts the wallet's workflow, DELETE goes through its
// terminate update, PUT of expiration_at re-arms its timer, and an expiration passes in real time.
import { randomUUID } from 'node:crypto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createWalletActivities } from '../../activities/wallets';
import { consumeWalletsForInvoice } from '../../src/billing/wallets';
import { dec } from '../../src/domain/money';
import { BillingCustomerId, BillingEntityType, BillingOrganizationId, BillingStatus } from '../../src/temporal/search-attributes';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { walletStateQuery } from '../../workflows/wallet.messages';
import type { WalletResource } from '../../src/resources/wallet';
import type { WalletTransactionResource } from '../../src/resources/wallet-transaction';
import { eventually, expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { bundleWorkflows } from '../support/temporal';

let stack: TestStack;
let connection: NativeConnection;
let worker: Worker;
let workerRun: Promise<void>;
let stopWorker: () => void = () => undefined;
let workerError: unknown;
let org: TestOrganization;

beforeAll(async () => {
  let bundle: Awaited<ReturnType<typeof bundleWorkflows>>;
  [stack, connection, bundle] = await Promise.all([
    createTestStack(),
    NativeConnection.connect({ address: inject('temporalAddress') }),
    bundleWorkflows(),
  ]);
  worker = await Worker.create({
    connection,
    taskQueue: stack.taskQueue,
    workflowBundle: bundle,
    activities: createWalletActivities({ models: stack.db.models, temporal: stack.temporal }),
  });
  const stopped = new Promise<void>((resolve) => {
    stopWorker = resolve;
  });
  workerRun = worker.runUntil(stopped);
  workerRun.catch((err: unknown) => {
    workerError = err;
  });
  org = await createOrganization(stack.app, { default_currency: 'USD' });
}, 120_000);

afterAll(async () => {
  stopWorker();
  await workerRun?.catch(() => undefined);
  await connection?.close();
  await stack?.close();
});

function assertWorkerAlive() {
  if (workerError !== undefined) throw new Error(`the worker stopped: ${String(workerError)}`);
}

type Headers = Record<string, string>;
const post = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, payload: payload as object });
const put = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'PUT', url, headers, payload: payload as object });
const get = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url, headers });
const del = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'DELETE', url, headers });

async function customer(headers: Headers = org.headers, extra: Record<string, unknown> = {}): Promise<{ id: string; external_id: string }> {
  const res = await post('/v1/customers', { external_id: `w-${randomUUID()}`, name: 'Wallet Customer', ...extra }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function wallet(body: Record<string, unknown>, headers: Headers = org.headers): Promise<WalletResource> {
  const res = await post('/v1/wallets', { name: 'Prepaid', ...body }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<WalletResource>();
}

async function transactions(walletId: string, query = ''): Promise<{ items: WalletTransactionResource[]; total: number }> {
  const res = await get(`/v1/wallets/${walletId}/transactions${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return { items: res.json<WalletTransactionResource[]>(), total: Number(res.headers['x-total-count']) };
}

const future = (ms: number) => new Date(Date.now() + ms).toISOString();
const DAY = 86_400_000;

describe('POST /v1/wallets', () => {
  it('creates an active wallet with the defaults and starts its workflow', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });

    expect(w).toMatchObject({
      organization_id: org.id,
      customer_id: c.id,
      name: 'Prepaid',
      code: null,
      currency: 'USD',
      status: 'active',
      rate_amount: '1',
      credits_balance: '0.0000',
      balance_cents: '0.0000',
      priority: 1,
      expiration_at: null,
      terminated_at: null,
    });
    expect(w.id).toMatch(UUID);
    expect(w.created_at).toMatch(ISO_MS_UTC);

    const description = await stack.temporal.client.workflow.getHandle(workflowIds.wallet(w.id)).describe();
    expect(description.status.name).toBe('RUNNING');
    expect(description.type).toBe('walletWorkflow');
    expect(description.typedSearchAttributes.get(BillingOrganizationId)).toBe(org.id);
    expect(description.typedSearchAttributes.get(BillingCustomerId)).toBe(c.id);
    expect(description.typedSearchAttributes.get(BillingEntityType)).toBe('wallet');
    expect(description.typedSearchAttributes.get(BillingStatus)).toBe('active');

    const events = await stack.db.models.LifecycleEvent.find({ organization_id: org.id, type: 'wallet.created', 'object.id': w.id }).lean();
    expect(events).toHaveLength(1);
    expect(events[0]!.object).toMatchObject({ id: w.id, status: 'active' });
  });

  it('grants initial credits at the rate: 10 credits at 2.5 are 2500.0000 cents, one granted inbound transaction', async () => {
    const c = await customer();
    const w = await wallet({
      customer_id: c.external_id,
      rate_amount: '2.5',
      initial_granted_credits: '10',
      priority: 7,
      code: 'main',
      currency: 'usd',
    });

    expect(w).toMatchObject({
      customer_id: c.id,
      rate_amount: '2.5',
      credits_balance: '10.0000',
      balance_cents: '2500.0000',
      priority: 7,
      code: 'main',
      currency: 'USD',
    });
    const { items, total } = await transactions(w.id);
    expect(total).toBe(1);
    expect(items[0]).toMatchObject({
      wallet_id: w.id,
      customer_id: c.id,
      transaction_type: 'inbound',
      status: 'granted',
      source: 'manual',
      amount: '2500.0000',
      credit_amount: '10',
      invoice_id: null,
    });
    expect(await stack.db.models.LifecycleEvent.countDocuments({ type: 'wallet_transaction.created', 'object.id': items[0]!.id })).toBe(1);
  });

  it('accepts initial credits as a JSON number and a future expiration', async () => {
    const c = await customer();
    const expiration = future(30 * DAY);
    const w = await wallet({ customer_id: c.id, initial_granted_credits: 3, expiration_at: expiration, priority: 50 });
    expect(w).toMatchObject({ balance_cents: '300.0000', credits_balance: '3.0000', expiration_at: expiration, priority: 50 });
    expect(await stack.temporal.client.workflow.getHandle(workflowIds.wallet(w.id)).query(walletStateQuery)).toMatchObject({
      status: 'active',
      expirationAt: expiration,
    });
  });

  it('answers 422 for out-of-range or malformed fields', async () => {
    const c = await customer();
    const base = { customer_id: c.id, name: 'w' };
    for (const priority of [0, 51, -1, 2.5, '3']) expectValidationError(await post('/v1/wallets', { ...base, priority }), 'priority');
    for (const rate of ['0', 0, '-1', '1.00001', 'abc'])
      expectValidationError(await post('/v1/wallets', { ...base, rate_amount: rate }), 'rate_amount');
    expectValidationError(await post('/v1/wallets', { ...base, initial_granted_credits: '1.00001' }), 'initial_granted_credits');
    expectValidationError(await post('/v1/wallets', { ...base, initial_granted_credits: '-1' }), 'initial_granted_credits');
    expectValidationError(
      await post('/v1/wallets', { ...base, expiration_at: new Date(Date.now() - 60_000).toISOString() }),
      'expiration_at',
    );
    expectValidationError(await post('/v1/wallets', { ...base, expiration_at: 'tomorrow' }), 'expiration_at');
    expectValidationError(await post('/v1/wallets', { ...base, currency: 'XYZ' }), 'currency');
    expectValidationError(await post('/v1/wallets', { name: 'w' }), 'customer_id');
    expectUnknownFields(await post('/v1/wallets', { ...base, balance_cents: '100' }), ['balance_cents']);
    // None of them created anything.
    const list = await get(`/v1/wallets?customer_id=${c.id}`);
    expect(list.headers['x-total-count']).toBe('0');
  });

  it("answers 422 when the currency is not the customer's", async () => {
    const c = await customer(org.headers, { currency: 'EUR' });
    expectValidationError(await post('/v1/wallets', { customer_id: c.id, currency: 'USD' }), 'currency');
    const w = await wallet({ customer_id: c.id });
    expect(w.currency).toBe('EUR');
  });

  it('answers 404 for an unknown customer', async () => {
    expectError(await post('/v1/wallets', { customer_id: randomUUID() }), 404, 'customer_not_found');
  });

  it('answers 409 for a second active wallet with the same code of a customer; after termination the code is free', async () => {
    const c = await customer();
    const other = await customer();
    const first = await wallet({ customer_id: c.id, code: 'promo' });
    expectError(await post('/v1/wallets', { customer_id: c.id, code: 'promo' }), 409, 'already_exists');
    // Another customer, or no code at all, never collide.
    await wallet({ customer_id: other.id, code: 'promo' });
    await wallet({ customer_id: c.id });
    await wallet({ customer_id: c.id });

    expect((await del(`/v1/wallets/${first.id}`)).statusCode).toBe(200);
    const again = await wallet({ customer_id: c.id, code: 'promo' });
    expect(again.id).not.toBe(first.id);
    expectError(await post('/v1/wallets', { customer_id: c.id, code: 'promo' }), 409, 'already_exists');
  });

  it('lets only one of several concurrent creations with the same code through', async () => {
    const c = await customer();
    const results = await Promise.all(Array.from({ length: 5 }, () => post('/v1/wallets', { customer_id: c.id, code: 'race' })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409]);
  });
});

describe('GET /v1/wallets', () => {
  it('lists newest first with X-Total-Count, filtered by customer (id or external_id) and status, paginated', async () => {
    const c = await customer();
    const a = await wallet({ customer_id: c.id, name: 'a' });
    const b = await wallet({ customer_id: c.id, name: 'b' });
    const d = await wallet({ customer_id: c.id, name: 'd' });
    expect((await del(`/v1/wallets/${b.id}`)).statusCode).toBe(200);

    const all = await get(`/v1/wallets?customer_id=${c.id}`);
    expect(all.headers['x-total-count']).toBe('3');
    expect(all.json<WalletResource[]>().map((w) => w.id)).toEqual([d.id, b.id, a.id]);
    const byExternal = await get(`/v1/wallets?customer_id=${encodeURIComponent(c.external_id)}&status=active`);
    expect(byExternal.json<WalletResource[]>().map((w) => w.id)).toEqual([d.id, a.id]);
    const terminated = await get(`/v1/wallets?customer_id=${c.id}&status=terminated`);
    expect(terminated.json<WalletResource[]>().map((w) => [w.id, w.status])).toEqual([[b.id, 'terminated']]);
    const page = await get(`/v1/wallets?customer_id=${c.id}&skip=1&limit=1`);
    expect(page.headers['x-total-count']).toBe('3');
    expect(page.json<WalletResource[]>().map((w) => w.id)).toEqual([b.id]);
    expect((await get(`/v1/wallets?customer_id=${randomUUID()}`)).json()).toEqual([]);
    expectValidationError(await get('/v1/wallets?status=expired'), 'status');
    expectValidationError(await get('/v1/wallets?limit=0'), 'limit');
  });

  it('gets one wallet; unknown is 404', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, initial_granted_credits: '1.5' });
    const res = await get(`/v1/wallets/${w.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(w);
    expectError(await get(`/v1/wallets/${randomUUID()}`), 404, 'wallet_not_found');
  });
});

describe('PUT /v1/wallets/{id}', () => {
  it('updates name and priority, and an expiration change re-arms the workflow', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, expiration_at: future(10 * DAY) });
    const expiration = future(20 * DAY);
    const res = await put(`/v1/wallets/${w.id}`, { name: 'Renamed', priority: 3, expiration_at: expiration });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: w.id, name: 'Renamed', priority: 3, expiration_at: expiration, status: 'active' });

    const handle = stack.temporal.client.workflow.getHandle(workflowIds.wallet(w.id));
    await eventually(
      async () => ((await handle.query(walletStateQuery)).expirationAt === expiration ? true : undefined),
      5000,
      'the new expiration',
    );
    const cleared = await put(`/v1/wallets/${w.id}`, { expiration_at: null });
    expect(cleared.json()).toMatchObject({ expiration_at: null, name: 'Renamed', priority: 3 });
    await eventually(async () => ((await handle.query(walletStateQuery)).expirationAt === null ? true : undefined), 5000, 'no expiration');
  });

  it('answers 422 for a past expiration, a priority out of range and an unknown field', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    expectValidationError(await put(`/v1/wallets/${w.id}`, { expiration_at: new Date(Date.now() - 1000).toISOString() }), 'expiration_at');
    expectValidationError(await put(`/v1/wallets/${w.id}`, { priority: 51 }), 'priority');
    expectValidationError(await put(`/v1/wallets/${w.id}`, { priority: 0 }), 'priority');
    expectUnknownFields(await put(`/v1/wallets/${w.id}`, { currency: 'EUR' }), ['currency']);
    expect((await get(`/v1/wallets/${w.id}`)).json()).toEqual(w);
  });
});

describe('POST /v1/wallets/{id}/top_up', () => {
  it('raises the balance by credits x rate_amount x 100 and records granted inbound transactions', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, rate_amount: '2.5' });

    const first = await post(`/v1/wallets/${w.id}/top_up`, { credits: '10' });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ id: w.id, credits_balance: '10.0000', balance_cents: '2500.0000' });
    const second = await post(`/v1/wallets/${w.id}/top_up`, { credits: 0.5, source: 'threshold' });
    expect(second.json()).toMatchObject({ credits_balance: '10.5000', balance_cents: '2625.0000' });

    const { items, total } = await transactions(w.id);
    expect(total).toBe(2);
    expect(items.map((t) => [t.transaction_type, t.status, t.source, t.amount, t.credit_amount])).toEqual([
      ['inbound', 'granted', 'threshold', '125.0000', '0.5'],
      ['inbound', 'granted', 'manual', '2500.0000', '10'],
    ]);
    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ balance_cents: '2625.0000' });
  });

  it('answers 422 for zero, negative or over-precise credits, an unknown source and unknown fields', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    for (const credits of ['0', 0, '-5', '1.00001', 'ten'])
      expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { credits }), 'credits');
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, {}), 'credits');
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { credits: '1', source: 'gift' }), 'source');
    expectUnknownFields(await post(`/v1/wallets/${w.id}/top_up`, { credits: '1', paid_credits: '1' }), ['paid_credits']);
    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ balance_cents: '0.0000' });
    expectError(await post(`/v1/wallets/${randomUUID()}/top_up`, { credits: '1' }), 404, 'wallet_not_found');
  });

  it('keeps every concurrent top-up', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    const results = await Promise.all(Array.from({ length: 10 }, () => post(`/v1/wallets/${w.id}/top_up`, { credits: '1.25' })));
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ credits_balance: '12.5000', balance_cents: '1250.0000' });
    expect((await transactions(w.id)).total).toBe(10);
  });
});

describe('GET /v1/wallets/{id}/transactions', () => {
  it('lists consumption (outbound, invoiced) beside top-ups, filtered and paginated', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, initial_granted_credits: '20' });
    const invoiceId = randomUUID();
    await consumeWalletsForInvoice(stack.db, {
      organizationId: org.id,
      customerId: c.id,
      currency: 'USD',
      invoiceId,
      amountCents: dec(750),
      at: new Date(),
    });

    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ balance_cents: '1250.0000', credits_balance: '12.5000' });
    const outbound = await transactions(w.id, '?transaction_type=outbound');
    expect(outbound.total).toBe(1);
    expect(outbound.items[0]).toMatchObject({
      transaction_type: 'outbound',
      status: 'invoiced',
      amount: '750.0000',
      credit_amount: '7.5',
      invoice_id: invoiceId,
    });
    expect((await transactions(w.id, '?status=granted')).total).toBe(1);
    const page = await transactions(w.id, '?limit=1');
    expect(page.total).toBe(2);
    expect(page.items).toHaveLength(1);
    expectError(await get(`/v1/wallets/${randomUUID()}/transactions`), 404, 'wallet_not_found');
  });
});

describe('DELETE /v1/wallets/{id}', () => {
  it('terminates through the workflow; afterwards PUT, top_up and DELETE answer 400 wallet_terminated', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, initial_granted_credits: '5', expiration_at: future(10 * DAY) });

    const res = await del(`/v1/wallets/${w.id}`);
    assertWorkerAlive();
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<WalletResource>();
    expect(body).toMatchObject({ id: w.id, status: 'terminated', balance_cents: '500.0000' });
    expect(body.terminated_at).toMatch(ISO_MS_UTC);
    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ status: 'terminated', terminated_at: body.terminated_at });

    const handle = stack.temporal.client.workflow.getHandle(workflowIds.wallet(w.id));
    expect(await handle.result()).toMatchObject({ status: 'terminated', reason: 'manual' });
    expect(await stack.db.models.LifecycleEvent.countDocuments({ type: 'wallet.terminated', 'object.id': w.id })).toBe(1);

    expectError(await put(`/v1/wallets/${w.id}`, { name: 'x' }), 400, 'wallet_terminated');
    expectError(await post(`/v1/wallets/${w.id}/top_up`, { credits: '1' }), 400, 'wallet_terminated');
    expectError(await del(`/v1/wallets/${w.id}`), 400, 'wallet_terminated');
    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ name: 'Prepaid', balance_cents: '500.0000' });
  });

  it('two concurrent DELETEs: one terminates, the other answers 400 wallet_terminated', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    const results = await Promise.all([del(`/v1/wallets/${w.id}`), del(`/v1/wallets/${w.id}`)]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 400]);
    expectError(
      results.find((r) => r.statusCode === 400)!,
      400,
      'wallet_terminated',
    );
  });

  it('a wallet whose workflow is missing is still terminated (the workflow is started again)', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    await stack.temporal.client.workflow.getHandle(workflowIds.wallet(w.id)).terminate('test: lost workflow');
    const res = await del(`/v1/wallets/${w.id}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ status: 'terminated' });
  });
});

describe('expiration', () => {
  it('an expired wallet is terminated by its workflow at expiration_at', async () => {
    const c = await customer();
    const expiration = future(1500);
    const w = await wallet({ customer_id: c.id, expiration_at: expiration });
    const ended = await eventually(
      async () => {
        assertWorkerAlive();
        const body = (await get(`/v1/wallets/${w.id}`)).json<WalletResource>();
        return body.status === 'terminated' ? body : undefined;
      },
      15_000,
      'the wallet to expire',
    );
    expect(ended.terminated_at).toBe(expiration);
    expectError(await post(`/v1/wallets/${w.id}/top_up`, { credits: '1' }), 400, 'wallet_terminated');
  });
});

describe('tenant isolation', () => {
  it('another organization sees none of the wallets and changes nothing', async () => {
    const other = await createOrganization(stack.app, { name: 'Other Org' });
    const c = await customer();
    const w = await wallet({ customer_id: c.id, initial_granted_credits: '10' });

    expectError(await get(`/v1/wallets/${w.id}`, other.headers), 404, 'wallet_not_found');
    expectError(await put(`/v1/wallets/${w.id}`, { name: 'x' }, other.headers), 404, 'wallet_not_found');
    expectError(await post(`/v1/wallets/${w.id}/top_up`, { credits: '5' }, other.headers), 404, 'wallet_not_found');
    expectError(await get(`/v1/wallets/${w.id}/transactions`, other.headers), 404, 'wallet_not_found');
    expectError(await del(`/v1/wallets/${w.id}`, other.headers), 404, 'wallet_not_found');
    expectError(await post('/v1/wallets', { customer_id: c.id }, other.headers), 404, 'customer_not_found');
    const list = await get('/v1/wallets', other.headers);
    expect(list.json()).toEqual([]);
    expect(list.headers['x-total-count']).toBe('0');
    expect((await get(`/v1/wallets?customer_id=${c.id}`, other.headers)).json()).toEqual([]);

    expect((await get(`/v1/wallets/${w.id}`)).json()).toMatchObject({ status: 'active', name: 'Prepaid', balance_cents: '1000.0000' });
  });

  it('requires an API key', async () => {
    expectError(await stack.app.inject({ method: 'GET', url: '/v1/wallets' }), 401, 'unauthorized');
  });
});
