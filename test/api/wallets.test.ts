// Wallets through the API (specification "Wallets", api-contract.md "Wallets"), with a worker on the
// run's Temporal dev server: creation starts the wallet's workflow, DELETE goes through its
// terminate update, PUT of expiration_at re-arms its timer, and an expiration passes in real time.
// Top-ups grant, buy (a credit invoice, whose payment through its invoice workflow brings the
// credits) and void credits.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCreditInvoice, markPaidIfSettled, payInvoice } from '../../src/billing/invoices';
import { applyTopUp, consumeWalletsForInvoice, settleWalletPurchase } from '../../src/billing/wallets';
import { dec } from '../../src/domain/money';
import type { InvoiceResource } from '../../src/resources/invoice';
import { BillingCustomerId, BillingEntityType, BillingOrganizationId, BillingStatus } from '../../src/temporal/search-attributes';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { walletStateQuery } from '../../workflows/wallet.messages';
import type { WalletResource } from '../../src/resources/wallet';
import type { WalletTransactionResource } from '../../src/resources/wallet-transaction';
import { eventually, expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;

beforeAll(async () => {
  stack = await createTestStack();
  // Every activity: wallets, and invoices for the credit invoices of purchases.
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, { default_currency: 'USD' });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

function assertWorkerAlive() {
  worker.assertAlive();
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
    expectUnknownFields(await post(`/v1/wallets/${w.id}/top_up`, { credits: '1', amount: '1' }), ['amount']);
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

describe('paid, granted and voided top-ups', () => {
  const deps = () => ({ models: stack.db.models, temporal: stack.temporal });
  const eventCount = (type: string, objectId: string) => stack.db.models.LifecycleEvent.countDocuments({ type, 'object.id': objectId });

  async function invoice(id: string): Promise<InvoiceResource> {
    const res = await get(`/v1/invoices/${id}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<InvoiceResource>();
  }

  async function balanceOf(walletId: string): Promise<Pick<WalletResource, 'credits_balance' | 'balance_cents'>> {
    const { credits_balance, balance_cents } = (await get(`/v1/wallets/${walletId}`)).json<WalletResource>();
    return { credits_balance, balance_cents };
  }

  it('paid_credits: a purchased transaction and a finalized credit invoice; its payment brings the credits, exactly once', async () => {
    const c = await customer();
    // 2 granted credits at 1.5: 2 x 1.5 x 100 = 300 cents.
    const w = await wallet({ customer_id: c.id, rate_amount: '1.5', granted_credits: '2' });
    expect(w).toMatchObject({ credits_balance: '2.0000', balance_cents: '300.0000' });

    const res = await post(`/v1/wallets/${w.id}/top_up`, { paid_credits: '10' });
    expect(res.statusCode, res.body).toBe(200);
    // Bought, not paid yet: the balance does not move.
    expect(res.json()).toMatchObject({ id: w.id, credits_balance: '2.0000', balance_cents: '300.0000' });

    const purchased = await transactions(w.id, '?status=purchased');
    expect(purchased.total).toBe(1);
    const purchase = purchased.items[0]!;
    // 10 credits x 1.5 x 100 = 1500 cents.
    expect(purchase).toMatchObject({
      wallet_id: w.id,
      customer_id: c.id,
      transaction_type: 'inbound',
      status: 'purchased',
      source: 'manual',
      amount: '1500.0000',
      credit_amount: '10',
      settled_at: null,
    });
    expect(purchase.invoice_id).toMatch(UUID);
    expect(await eventCount('wallet_transaction.created', purchase.id)).toBe(1);
    expect(await eventCount('wallet_transaction.settled', purchase.id)).toBe(0);

    // The credit invoice: one untaxed credit fee, finalized (numbered) at once, nothing taken off it
    // (the wallet's own 300 cents in particular).
    const credit = await invoice(purchase.invoice_id!);
    expect(credit).toMatchObject({
      customer_id: c.id,
      invoice_type: 'credit',
      status: 'finalized',
      currency: 'USD',
      payment_status: 'pending',
      paid_at: null,
    });
    expect(credit.number).not.toContain('DRAFT');
    expect(dec(credit.total).toFixed()).toBe('1500');
    expect(dec(credit.tax_amount).toFixed()).toBe('0');
    expect(dec(credit.prepaid_credit_amount).toFixed()).toBe('0');
    expect(dec(credit.coupons_amount_cents).toFixed()).toBe('0');
    expect(credit.fees!.map((f) => [f.fee_type, dec(f.amount_cents).toFixed(), dec(f.units).toFixed()])).toEqual([
      ['credit', '1500', '10'],
    ]);

    // Never before the invoice is paid: a settlement attempt on the finalized invoice changes nothing.
    const unpaid = (await stack.db.models.Invoice.findById(credit.id).lean())!;
    expect(await settleWalletPurchase(deps(), unpaid, new Date())).toBeNull();
    expect((await markPaidIfSettled(stack.db, deps(), credit.id, new Date())).status).toBe('finalized');
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '2.0000', balance_cents: '300.0000' });

    // Paid through its invoice workflow: the 1500 cents (10 credits) arrive.
    const paid = await post(`/v1/invoices/${credit.id}/pay`, undefined);
    assertWorkerAlive();
    expect(paid.statusCode, paid.body).toBe(200);
    expect(paid.json<InvoiceResource>()).toMatchObject({ status: 'paid', payment_status: 'succeeded' });
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '12.0000', balance_cents: '1800.0000' });
    const settled = (await transactions(w.id, '?status=purchased')).items[0]!;
    expect(settled).toMatchObject({ id: purchase.id, amount: '1500.0000', invoice_id: credit.id });
    expect(settled.settled_at).toMatch(ISO_MS_UTC);
    expect(settled.settled_at).toBe((await invoice(credit.id)).paid_at);
    const events = await stack.db.models.LifecycleEvent.find({ type: 'wallet_transaction.settled', 'object.id': purchase.id }).lean();
    expect(events).toHaveLength(1);
    expect(events[0]!.object).toMatchObject({ status: 'purchased', settled_at: settled.settled_at });

    // A credit note on the purchase would give its value twice: refused, nothing written.
    const note = await post('/v1/credit_notes', {
      invoice_id: credit.id,
      reason: 'other',
      items: [{ fee_id: credit.fees![0]!.id, amount_cents: 1500 }],
    });
    expectValidationError(note, 'invoice_id');
    expect(await stack.db.models.CreditNote.countDocuments({ invoice_id: credit.id })).toBe(0);

    // Retries of the payment's steps change nothing.
    await markPaidIfSettled(stack.db, deps(), credit.id, new Date());
    await payInvoice(stack.db, deps(), credit.id, new Date());
    expect(await settleWalletPurchase(deps(), (await stack.db.models.Invoice.findById(credit.id).lean())!, new Date())).toMatchObject({
      _id: purchase.id,
    });
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '12.0000', balance_cents: '1800.0000' });
    expect(await eventCount('wallet_transaction.settled', purchase.id)).toBe(1);
    expect((await transactions(w.id)).total).toBe(2);

    // The credits are spendable: a one-off invoice of 1000 cents is paid from the wallet (1800 - 1000 = 800).
    const created = await post('/v1/invoices/one_off', { customer_id: c.id, line_items: [{ description: 'Service', unit_price: '1000' }] });
    expect(created.statusCode, created.body).toBe(201);
    const spent = await eventually(
      async () => {
        assertWorkerAlive();
        const current = await invoice(created.json<InvoiceResource>().id);
        return current.status === 'draft' ? undefined : current;
      },
      15_000,
      'the one-off invoice to be finalized',
    );
    expect(spent.status).toBe('paid');
    expect(dec(spent.prepaid_credit_amount).toFixed()).toBe('1000');
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '5.3333', balance_cents: '800.0000' });
  });

  it('POST /v1/wallets takes paid_credits and granted_credits for the first top-up', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, rate_amount: '2', granted_credits: '3', paid_credits: '5' });
    // Only the grant is in the balance: 3 x 2 x 100 = 600 cents.
    expect(w).toMatchObject({ credits_balance: '3.0000', balance_cents: '600.0000' });
    const { items } = await transactions(w.id);
    expect(items.map((t) => [t.status, t.amount, t.credit_amount, t.settled_at === null]).sort()).toEqual([
      ['granted', '600.0000', '3', false],
      ['purchased', '1000.0000', '5', true],
    ]);
    const purchase = items.find((t) => t.status === 'purchased')!;
    const credit = await invoice(purchase.invoice_id!);
    expect(credit).toMatchObject({ invoice_type: 'credit', status: 'finalized' });
    expect(dec(credit.total).toFixed()).toBe('1000');
    for (const t of items) expect(await eventCount('wallet_transaction.created', t.id)).toBe(1);

    expect((await post(`/v1/invoices/${credit.id}/pay`, undefined)).statusCode).toBe(200);
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '8.0000', balance_cents: '1600.0000' });

    expectValidationError(
      await post('/v1/wallets', { customer_id: c.id, initial_granted_credits: '1', granted_credits: '1' }),
      'granted_credits',
    );
    expectValidationError(await post('/v1/wallets', { customer_id: c.id, paid_credits: '1.00001' }), 'paid_credits');
  });

  it('granted_credits are granted at once (a granted inbound transaction)', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, rate_amount: '0.5' });
    const res = await post(`/v1/wallets/${w.id}/top_up`, { granted_credits: '8', paid_credits: '0', source: 'interval' });
    expect(res.statusCode, res.body).toBe(200);
    // 8 x 0.5 x 100 = 400 cents.
    expect(res.json()).toMatchObject({ credits_balance: '8.0000', balance_cents: '400.0000' });
    const { items, total } = await transactions(w.id);
    expect(total).toBe(1);
    expect(items[0]).toMatchObject({
      transaction_type: 'inbound',
      status: 'granted',
      source: 'interval',
      amount: '400.0000',
      invoice_id: null,
    });
    expect(items[0]!.settled_at).toBe(items[0]!.created_at);
  });

  it('voided_credits leave the balance at once; more than the balance is 422 and changes nothing', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, rate_amount: '2', granted_credits: '10' }); // 2000 cents

    const res = await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '4' });
    expect(res.statusCode, res.body).toBe(200);
    // 10 - 4 = 6 credits; 2000 - 4 x 2 x 100 = 1200 cents.
    expect(res.json()).toMatchObject({ credits_balance: '6.0000', balance_cents: '1200.0000' });
    const voided = await transactions(w.id, '?status=voided');
    expect(voided.total).toBe(1);
    expect(voided.items[0]).toMatchObject({
      transaction_type: 'outbound',
      status: 'voided',
      source: 'manual',
      amount: '800.0000',
      credit_amount: '4',
      invoice_id: null,
    });
    expect(voided.items[0]!.settled_at).toBe(voided.items[0]!.created_at);
    expect(await eventCount('wallet_transaction.created', voided.items[0]!.id)).toBe(1);

    // More than the 6 credits left: 422, and nothing of the request is applied (not the grant beside it either).
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '6.0001' }), 'voided_credits');
    expectValidationError(
      await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '7', granted_credits: '5', paid_credits: '1' }),
      'voided_credits',
    );
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '6.0000', balance_cents: '1200.0000' });
    expect((await transactions(w.id)).total).toBe(2);
    expect(await stack.db.models.Invoice.countDocuments({ customer_id: c.id })).toBe(0);

    // The whole balance: both balances are exactly zero.
    const all = await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: 6 });
    expect(all.statusCode, all.body).toBe(200);
    expect(all.json()).toMatchObject({ credits_balance: '0.0000', balance_cents: '0.0000' });
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '0.0001' }), 'voided_credits');
    expect((await transactions(w.id)).total).toBe(3);
  });

  it('voids and grants in one request: the void is checked against the balance before the request', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, granted_credits: '3' }); // 300 cents
    const res = await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '3', granted_credits: '5' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ credits_balance: '5.0000', balance_cents: '500.0000' });
    const { items } = await transactions(w.id);
    expect(items.map((t) => [t.transaction_type, t.status, t.amount]).sort()).toEqual([
      ['inbound', 'granted', '300.0000'],
      ['inbound', 'granted', '500.0000'],
      ['outbound', 'voided', '300.0000'],
    ]);
  });

  it('answers 422 when no credits above zero are given, or credits beside granted_credits', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, granted_credits: '1' });
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, {}), 'credits');
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { source: 'manual' }), 'credits');
    expectValidationError(
      await post(`/v1/wallets/${w.id}/top_up`, { granted_credits: '0', paid_credits: 0, voided_credits: '0' }),
      'credits',
    );
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { credits: '1', granted_credits: '1' }), 'granted_credits');
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { paid_credits: '-1' }), 'paid_credits');
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '1.00001' }), 'voided_credits');
    expectValidationError(await post(`/v1/wallets/${w.id}/top_up`, { granted_credits: 'many' }), 'granted_credits');
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '1.0000', balance_cents: '100.0000' });
    expect((await transactions(w.id)).total).toBe(1);
  });

  it('a terminated wallet takes no purchase or void (400 wallet_terminated)', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, granted_credits: '1' });
    expect((await del(`/v1/wallets/${w.id}`)).statusCode).toBe(200);
    expectError(await post(`/v1/wallets/${w.id}/top_up`, { paid_credits: '1' }), 400, 'wallet_terminated');
    expectError(await post(`/v1/wallets/${w.id}/top_up`, { voided_credits: '1' }), 400, 'wallet_terminated');
    expect(await stack.db.models.Invoice.countDocuments({ customer_id: c.id })).toBe(0);
  });

  it('concurrent settlements of one paid credit invoice bring the credits once', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    expect((await post(`/v1/wallets/${w.id}/top_up`, { paid_credits: '4' })).statusCode).toBe(200);
    const purchase = (await transactions(w.id)).items[0]!;
    // Paid behind the workflow's back, as a crash right after the status change would leave it.
    const paidAt = new Date();
    await stack.db.models.Invoice.updateOne({ _id: purchase.invoice_id }, { $set: { status: 'paid', paid_at: paidAt } });
    const paid = (await stack.db.models.Invoice.findById(purchase.invoice_id).lean())!;
    const results = await Promise.all(Array.from({ length: 4 }, () => settleWalletPurchase(deps(), paid, new Date())));
    expect(results.every((r) => r?._id === purchase.id)).toBe(true);
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '4.0000', balance_cents: '400.0000' });
    const settled = (await transactions(w.id)).items[0]!;
    expect(settled.settled_at).toBe(paidAt.toISOString());
    expect(await eventCount('wallet_transaction.settled', purchase.id)).toBe(1);
    expect((await stack.db.models.Wallet.findById(w.id).lean())!.pending_transactions).toEqual([]);
  });

  it('a purchase interrupted before its credit invoice is completed by a retry with the same ids', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id, rate_amount: '3' });
    const ids = { paid: randomUUID(), granted: randomUUID() };
    const input = {
      organizationId: org.id,
      walletId: w.id,
      changes: { paidCredits: dec(2), grantedCredits: dec(1) },
      source: 'manual' as const,
      at: new Date(),
      ids,
    };
    await expect(
      applyTopUp(stack.db, {
        ...input,
        createCreditInvoice: () => Promise.reject(new Error('crash before the credit invoice')),
      }),
    ).rejects.toThrow('crash before the credit invoice');
    // The grant is applied, the purchase parked; no invoice yet.
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '1.0000', balance_cents: '300.0000' });
    expect(await stack.db.models.Invoice.countDocuments({ customer_id: c.id })).toBe(0);
    // Listing the transactions records what a crash left parked, but not a purchase whose credit
    // invoice is not issued yet (its top-up may be creating it this very moment): no record may
    // name an invoice that cannot be read.
    const meanwhile = await transactions(w.id);
    expect(meanwhile.items.map((t) => [t.id, t.status])).toEqual([[ids.granted, 'granted']]);
    expect((await stack.db.models.Wallet.findById(w.id).lean())!.pending_transactions.map((p) => p.id)).toEqual([ids.paid]);

    const retry = await applyTopUp(stack.db, {
      ...input,
      createCreditInvoice: (request) => createCreditInvoice(stack.db, deps(), request),
    });
    expect(retry.outcome).toBe('applied');
    expect(await balanceOf(w.id)).toEqual({ credits_balance: '1.0000', balance_cents: '300.0000' });
    const { items, total } = await transactions(w.id);
    expect(total).toBe(2);
    const purchase = items.find((t) => t.id === ids.paid)!;
    // 2 credits x 3 x 100 = 600 cents.
    expect(purchase).toMatchObject({ status: 'purchased', amount: '600.0000', settled_at: null });
    const credit = await invoice(purchase.invoice_id!);
    expect(credit).toMatchObject({ invoice_type: 'credit', status: 'finalized' });
    expect(dec(credit.total).toFixed()).toBe('600');
    expect((await stack.db.models.Wallet.findById(w.id).lean())!.pending_transactions).toEqual([]);
  });

  it('an Idempotency-Key makes a repeated purchase the same one', async () => {
    const c = await customer();
    const w = await wallet({ customer_id: c.id });
    const headers = { ...org.headers, 'idempotency-key': randomUUID() };
    const first = await post(`/v1/wallets/${w.id}/top_up`, { paid_credits: '2' }, headers);
    expect(first.statusCode, first.body).toBe(200);
    const again = await post(`/v1/wallets/${w.id}/top_up`, { paid_credits: '2' }, headers);
    expect(again.statusCode).toBe(200);
    expect((await transactions(w.id)).total).toBe(1);
    expect(await stack.db.models.Invoice.countDocuments({ customer_id: c.id, invoice_type: 'credit' })).toBe(1);
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

describe('OpenAPI', () => {
  it('documents the top-up fields and the settled_at of a wallet transaction', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(res.statusCode).toBe(200);
    type Schema = { properties?: Record<string, unknown>; required?: string[]; $ref?: string };
    const doc = res.json<{
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> } }>>;
      components: { schemas: Record<string, Schema> };
    }>();
    const topUp = doc.paths['/v1/wallets/{id}/top_up']!.post!.requestBody!.content['application/json']!.schema;
    expect(Object.keys(topUp.properties ?? {}).sort()).toEqual(['credits', 'granted_credits', 'paid_credits', 'source', 'voided_credits']);
    expect(topUp.required ?? []).toEqual([]);
    const create = doc.paths['/v1/wallets']!.post!.requestBody!.content['application/json']!.schema;
    expect(Object.keys(create.properties ?? {})).toEqual(
      expect.arrayContaining(['initial_granted_credits', 'granted_credits', 'paid_credits']),
    );
    const transaction = doc.components.schemas['WalletTransaction']!;
    expect(Object.keys(transaction.properties ?? {})).toEqual(expect.arrayContaining(['settled_at', 'invoice_id']));
    expect(transaction.required).toEqual(expect.arrayContaining(['settled_at']));
  });
});
