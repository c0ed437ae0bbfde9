// A wallet's recurring transaction rules through the API (api-contract.md, Wallets), with a worker
// on the run's Temporal dev server: interval rules are timers of the wallet's workflow, driven here
// by a test clock over a year (anniversaries of started_at in the customer's time zone, month ends
// clamped); threshold rules fire when a consumption crosses their threshold, once per crossing,
// under concurrent finalizations; a rule's top-up is made once whatever the retries.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCreditInvoice } from '../../src/billing/invoices';
import { applyIntervalTopUp, applyThresholdTopUps, type CreateCreditInvoice } from '../../src/billing/wallets';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { TestClockResource } from '../../src/resources/test-clock';
import type { WalletResource } from '../../src/resources/wallet';
import type { WalletTransactionResource } from '../../src/resources/wallet-transaction';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { walletStateQuery } from '../../workflows/wallet.messages';
import { eventually, expectUnknownFields, expectValidationError } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, { default_currency: 'USD', timezone: 'UTC', invoice_grace_period: 0 });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

type Headers = Record<string, string>;
const post = (url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
const put = (url: string, payload: unknown) => stack.app.inject({ method: 'PUT', url, headers: org.headers, payload: payload as object });
const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: org.headers });

async function ok<T>(response: ReturnType<typeof get> | Awaited<ReturnType<typeof get>>, status = 200): Promise<T> {
  const res = await response;
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

const customer = (extra: Record<string, unknown> = {}) =>
  ok<CustomerResource>(post('/v1/customers', { external_id: `rules-${randomUUID()}`, currency: 'USD', ...extra }), 201);
const wallet = (body: Record<string, unknown>) => ok<WalletResource>(post('/v1/wallets', { name: 'Prepaid', ...body }), 201);
const getWallet = (id: string) => ok<WalletResource>(get(`/v1/wallets/${id}`));
const transactions = (walletId: string, query = '') =>
  ok<WalletTransactionResource[]>(get(`/v1/wallets/${walletId}/transactions?limit=100${query}`));

/** created_at of a wallet's transactions of `source`, oldest first, with their credits. */
async function bySource(walletId: string, source: string): Promise<[string, string, string][]> {
  return (await transactions(walletId))
    .filter((t) => t.source === source)
    .map((t): [string, string, string] => [t.created_at, t.status, t.credit_amount])
    .sort((a, b) => a[0].localeCompare(b[0]) || a[1].localeCompare(b[1]));
}

async function advance(clockId: string, iso: string): Promise<void> {
  worker.assertAlive();
  await ok<TestClockResource>(post(`/v1/test_clocks/${clockId}/advance`, { frozen_time: iso }), 202);
  await eventually(
    async () => {
      worker.assertAlive();
      const clock = await ok<TestClockResource>(get(`/v1/test_clocks/${clockId}`));
      return clock.status === 'ready' ? clock : undefined;
    },
    120_000,
    `test clock ${clockId} ready at ${iso}`,
  );
}

describe('recurring_transaction_rules on the wallet', () => {
  it('are stored with defaults and shown; PUT replaces them, an empty list removes them; the workflow schedules interval rules', async () => {
    const c = await customer();
    const created = await wallet({
      customer_id: c.id,
      recurring_transaction_rules: [
        { trigger: 'interval', interval: 'monthly', granted_credits: '10', started_at: '2030-01-31T10:00:00Z' },
        { trigger: 'threshold', threshold_credits: '5.5', paid_credits: 20 },
      ],
    });
    // The rules are made at the wallet's creation instant (the default anchor of interval rules).
    const opened = created.recurring_transaction_rules[0]!.created_at;
    expect(Math.abs(Date.parse(opened) - Date.parse(created.created_at))).toBeLessThan(5000);
    expect(created.recurring_transaction_rules).toEqual([
      {
        id: expect.any(String),
        trigger: 'interval',
        interval: 'monthly',
        threshold_credits: null,
        paid_credits: '0.0000',
        granted_credits: '10.0000',
        started_at: '2030-01-31T10:00:00.000Z',
        created_at: opened,
      },
      {
        id: expect.any(String),
        trigger: 'threshold',
        interval: null,
        threshold_credits: '5.5000',
        paid_credits: '20.0000',
        granted_credits: '0.0000',
        started_at: null,
        created_at: opened,
      },
    ]);
    const handle = stack.temporal.client.workflow.getHandle(workflowIds.wallet(created.id));
    // One interval after started_at (2030-02-28, the month's end), not before.
    expect((await handle.query(walletStateQuery)).nextRuns).toEqual([
      { ruleId: created.recurring_transaction_rules[0]!.id, at: '2030-02-28T10:00:00.000Z' },
    ]);

    const replaced = await ok<WalletResource>(
      put(`/v1/wallets/${created.id}`, { recurring_transaction_rules: [{ trigger: 'interval', interval: 'weekly', paid_credits: '1' }] }),
    );
    expect(replaced.recurring_transaction_rules).toHaveLength(1);
    const weekly = replaced.recurring_transaction_rules[0]!;
    expect(weekly).toMatchObject({ trigger: 'interval', interval: 'weekly', paid_credits: '1.0000', started_at: null });
    // Anchored at the wallet's creation: the first weekly anniversary after the rule was made.
    const week = 7 * 86_400_000;
    const expected = Date.parse(opened) + week * (Math.floor((Date.parse(weekly.created_at) - Date.parse(opened)) / week) + 1);
    await eventually(async () => {
      const runs = (await handle.query(walletStateQuery)).nextRuns;
      return runs?.length === 1 && runs[0]!.ruleId === weekly.id ? runs : undefined;
    });
    expect((await handle.query(walletStateQuery)).nextRuns).toEqual([{ ruleId: weekly.id, at: new Date(expected).toISOString() }]);
    // The same rules sent back keep their ids (their schedules go on); a PUT without the field keeps them.
    expect((await ok<WalletResource>(put(`/v1/wallets/${created.id}`, { name: 'Renamed' }))).recurring_transaction_rules).toEqual([weekly]);
    const again = await ok<WalletResource>(
      put(`/v1/wallets/${created.id}`, {
        recurring_transaction_rules: [
          { trigger: 'threshold', threshold_credits: '3', granted_credits: '1' },
          { trigger: 'interval', interval: 'weekly', paid_credits: '1.0' },
        ],
      }),
    );
    expect(again.recurring_transaction_rules[1]).toEqual(weekly);
    expect(again.recurring_transaction_rules[0]!.id).not.toBe(weekly.id);

    const removed = await ok<WalletResource>(put(`/v1/wallets/${created.id}`, { recurring_transaction_rules: [] }));
    expect(removed.recurring_transaction_rules).toEqual([]);
    await eventually(async () => ((await handle.query(walletStateQuery)).nextRuns?.length === 0 ? true : undefined));
  });

  it('answers 422 for a rule without its interval or threshold, with neither credits, with fields of the other trigger, or more than 5', async () => {
    const c = await customer();
    const bad = (rule: Record<string, unknown>) => post('/v1/wallets', { customer_id: c.id, recurring_transaction_rules: [rule] });
    expectValidationError(await bad({ trigger: 'interval', granted_credits: '1' }), 'recurring_transaction_rules.0.interval');
    expectValidationError(
      await bad({ trigger: 'interval', interval: 'daily', granted_credits: '1' }),
      'recurring_transaction_rules.0.interval',
    );
    expectValidationError(await bad({ trigger: 'threshold', granted_credits: '1' }), 'recurring_transaction_rules.0.threshold_credits');
    expectValidationError(await bad({ trigger: 'interval', interval: 'monthly' }), 'recurring_transaction_rules.0.paid_credits');
    expectValidationError(
      await bad({ trigger: 'interval', interval: 'monthly', paid_credits: '0', granted_credits: '0' }),
      'recurring_transaction_rules.0.paid_credits',
    );
    expectValidationError(
      await bad({ trigger: 'threshold', threshold_credits: '1', interval: 'monthly', granted_credits: '1' }),
      'recurring_transaction_rules.0.interval',
    );
    expectValidationError(
      await bad({ trigger: 'threshold', threshold_credits: '-1', granted_credits: '1' }),
      'recurring_transaction_rules.0.threshold_credits',
    );
    expectUnknownFields(await bad({ trigger: 'interval', interval: 'monthly', granted_credits: '1', method: 'target' }), ['method']);
    const six = Array.from({ length: 6 }, () => ({ trigger: 'interval', interval: 'monthly', granted_credits: '1' }));
    expectValidationError(
      await post('/v1/wallets', { customer_id: c.id, recurring_transaction_rules: six }),
      'recurring_transaction_rules',
    );
    // Nothing was created.
    expect(await ok<WalletResource[]>(get(`/v1/wallets?customer_id=${c.id}`))).toEqual([]);
    const w = await wallet({ customer_id: c.id });
    expectValidationError(await put(`/v1/wallets/${w.id}`, { recurring_transaction_rules: six }), 'recurring_transaction_rules');
    expect((await getWallet(w.id)).recurring_transaction_rules).toEqual([]);
  });
});

describe('interval rules on a test clock', () => {
  it('tops up every month for a year on the anniversaries of started_at; a quarterly purchase waits for its invoice to be paid', async () => {
    const clock = await ok<TestClockResource>(post('/v1/test_clocks', { name: 'rules', frozen_time: '2030-01-15T00:00:00Z' }), 201);
    const c = await customer({ test_clock_id: clock.id });
    const w = await wallet({
      customer_id: c.id,
      rate_amount: '2',
      recurring_transaction_rules: [
        { trigger: 'interval', interval: 'monthly', granted_credits: '10', started_at: '2030-01-31T10:00:00Z' },
        { trigger: 'interval', interval: 'quarterly', paid_credits: '5' },
      ],
    });

    // A second before the first anniversary nothing has happened; at it, the monthly grant.
    await advance(clock.id, '2030-02-28T09:59:59Z');
    expect(await bySource(w.id, 'interval')).toEqual([]);
    await advance(clock.id, '2030-02-28T10:00:00Z');
    expect(await bySource(w.id, 'interval')).toEqual([['2030-02-28T10:00:00.000Z', 'granted', '10']]);

    // The rest of the year in one advance: every run at its own instant.
    await advance(clock.id, '2031-01-31T10:00:00Z');
    const monthly = [
      '2030-02-28',
      '2030-03-31',
      '2030-04-30',
      '2030-05-31',
      '2030-06-30',
      '2030-07-31',
      '2030-08-31',
      '2030-09-30',
      '2030-10-31',
      '2030-11-30',
      '2030-12-31',
      '2031-01-31',
    ].map((day): [string, string, string] => [`${day}T10:00:00.000Z`, 'granted', '10']);
    // Quarterly from the wallet's creation (2030-01-15 00:00): April, July, October, January.
    const quarterly = ['2030-04-15', '2030-07-15', '2030-10-15', '2031-01-15'].map((day): [string, string, string] => [
      `${day}T00:00:00.000Z`,
      'purchased',
      '5',
    ]);
    const all = await bySource(w.id, 'interval');
    expect(all).toEqual([...monthly, ...quarterly].sort((a, b) => a[0].localeCompare(b[0])));

    // 12 x 10 granted credits at rate 2: 240 x 100 cents; the purchases are not in the balance.
    expect(await getWallet(w.id)).toMatchObject({ credits_balance: '120.0000', balance_cents: '24000.0000' });
    const purchases = (await transactions(w.id, '&status=purchased')).sort((a, b) => a.created_at.localeCompare(b.created_at));
    expect(purchases.every((t) => t.settled_at === null && t.invoice_id !== null)).toBe(true);
    const invoices = await Promise.all(purchases.map((t) => ok<InvoiceResource>(get(`/v1/invoices/${t.invoice_id}`))));
    // 5 credits x 2 x 100 = 1000 cents each.
    expect(invoices.map((i) => [i.invoice_type, i.status, i.total])).toEqual(Array(4).fill(['credit', 'finalized', '1000.0000']));
    expect(new Set(invoices.map((i) => i.id)).size).toBe(4);

    // Paying one brings its 5 credits, once.
    await ok<InvoiceResource>(post(`/v1/invoices/${invoices[0]!.id}/pay`));
    await eventually(async () => ((await getWallet(w.id)).credits_balance === '125.0000' ? true : undefined));
    expect(await getWallet(w.id)).toMatchObject({ credits_balance: '125.0000', balance_cents: '25000.0000' });

    // One wallet_transaction.created per run.
    const events = await stack.db.models.LifecycleEvent.find({
      organization_id: org.id,
      type: 'wallet_transaction.created',
      'object.wallet_id': w.id,
    }).lean();
    expect(events.filter((e) => (e.object as { source: string }).source === 'interval')).toHaveLength(16);
  }, 300_000);
});

describe('threshold rules', () => {
  const oneOff = (customerId: string, cents: string) =>
    ok<InvoiceResource>(
      post('/v1/invoices/one_off', { customer_id: customerId, line_items: [{ description: 'Usage', unit_price: cents }] }),
      201,
    );

  async function settled(invoiceIds: string[]): Promise<InvoiceResource[]> {
    return eventually(
      async () => {
        worker.assertAlive();
        const all = await Promise.all(invoiceIds.map((id) => ok<InvoiceResource>(get(`/v1/invoices/${id}`))));
        return all.every((i) => i.status === 'finalized' || i.status === 'paid') ? all : undefined;
      },
      60_000,
      'the invoices to be finalized',
    );
  }

  it('tops up once per crossing under concurrent finalizations, and again after the balance went back above it', async () => {
    const c = await customer();
    // 100 credits at rate 1 (10000 cents); threshold 50 credits, 10 credits granted per crossing:
    // a top-up can never lift the balance above the threshold again, so only one crossing happens.
    const w = await wallet({
      customer_id: c.id,
      granted_credits: '100',
      recurring_transaction_rules: [{ trigger: 'threshold', threshold_credits: '50', granted_credits: '10' }],
    });
    const drafts = await Promise.all(Array.from({ length: 5 }, () => oneOff(c.id, '2000')));
    await settled(drafts.map((d) => d.id));
    const threshold = await eventually(async () => {
      const rows = await bySource(w.id, 'threshold');
      return rows.length > 0 ? rows : undefined;
    });
    expect(threshold.map(([, status, credits]) => [status, credits])).toEqual([['granted', '10']]);
    // The top-up is made for the instant of the consumption that crossed (60 -> 40 credits).
    const outbound = (await transactions(w.id, '&transaction_type=outbound')).sort((a, b) => a.created_at.localeCompare(b.created_at));
    expect(outbound.map((t) => t.created_at)).toContain(threshold[0]![0]);
    // Nothing lost, nothing made twice: granted 110 credits = consumed + balance.
    const consumed = outbound.reduce((sum, t) => sum + Number(t.amount), 0);
    const balance = Number((await getWallet(w.id)).balance_cents);
    expect(consumed + balance).toBe(11_000);

    // Above the threshold again (a manual grant), a new consumption crossing it tops up again.
    await ok<WalletResource>(post(`/v1/wallets/${w.id}/top_up`, { granted_credits: '100' }));
    const before = Number((await getWallet(w.id)).credits_balance);
    const crossing = await oneOff(c.id, String(Math.round((before - 45) * 100)));
    await settled([crossing.id]);
    await eventually(async () => ((await bySource(w.id, 'threshold')).length === 2 ? true : undefined));
    // A smaller one afterwards, still below the threshold, does not.
    await settled([(await oneOff(c.id, '100')).id]);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await bySource(w.id, 'threshold')).map(([, status, credits]) => [status, credits])).toEqual([
      ['granted', '10'],
      ['granted', '10'],
    ]);
    // Each top-up's event is written right after its transaction: wait for both, then check there is no third.
    const thresholdEvents = async () =>
      (
        await stack.db.models.LifecycleEvent.find({
          organization_id: org.id,
          type: 'wallet_transaction.created',
          'object.wallet_id': w.id,
        }).lean()
      ).filter((e) => (e.object as { source: string }).source === 'threshold');
    await eventually(async () => ((await thresholdEvents()).length >= 2 ? true : undefined));
    expect(await thresholdEvents()).toHaveLength(2);
  }, 120_000);
});

describe('a rule top-up retried', () => {
  it('is made once per interval run and once per crossing', async () => {
    const c = await customer();
    const w = await wallet({
      customer_id: c.id,
      recurring_transaction_rules: [
        { trigger: 'interval', interval: 'monthly', granted_credits: '3', paid_credits: '2' },
        { trigger: 'threshold', threshold_credits: '1', granted_credits: '4' },
      ],
    });
    const [interval, threshold] = w.recurring_transaction_rules;
    const deps = { models: stack.db.models, temporal: stack.temporal };
    const creditInvoice: CreateCreditInvoice = (request) => createCreditInvoice(stack.db, deps, request);
    const at = new Date('2031-05-01T00:00:00Z');
    for (let i = 0; i < 3; i++) {
      expect(
        await applyIntervalTopUp(deps, { walletId: w.id, ruleId: interval!.id, at, createCreditInvoice: creditInvoice }),
      ).toMatchObject({
        outcome: 'applied',
      });
    }
    expect(await bySource(w.id, 'interval')).toEqual([
      ['2031-05-01T00:00:00.000Z', 'granted', '3'],
      ['2031-05-01T00:00:00.000Z', 'purchased', '2'],
    ]);
    // A rule that is gone tops up nothing.
    expect(await applyIntervalTopUp(deps, { walletId: w.id, ruleId: randomUUID(), at, createCreditInvoice: creditInvoice })).toEqual({
      outcome: 'rule_gone',
    });

    // A crossing parked twice by a retried signal: one top-up, then nothing is left parked.
    const crossing = { rule_id: threshold!.id, transaction_id: randomUUID(), at };
    await stack.db.models.Wallet.updateOne({ _id: w.id }, { $push: { threshold_crossings: crossing } });
    expect(await applyThresholdTopUps(deps, { walletId: w.id, createCreditInvoice: creditInvoice })).toBe(1);
    await stack.db.models.Wallet.updateOne({ _id: w.id }, { $push: { threshold_crossings: crossing } });
    await applyThresholdTopUps(deps, { walletId: w.id, createCreditInvoice: creditInvoice });
    expect(await bySource(w.id, 'threshold')).toEqual([['2031-05-01T00:00:00.000Z', 'granted', '4']]);
    expect((await stack.db.models.Wallet.findById(w.id).lean())!.threshold_crossings).toEqual([]);
    expect(await getWallet(w.id)).toMatchObject({ credits_balance: '7.0000' });
  });
});
