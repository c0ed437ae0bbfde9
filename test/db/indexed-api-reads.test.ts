// Every GET of the API, with each of its filters, alone, in pairs and all together, is answered from
// an index (issue 17: tenant-scoped queries use the indexes the models declare). The stand-in runs
// as under npm start (H2) with its scan log on from the first document, the API and a worker on
// it; one organization gets one or more of everything the GETs read (through the API, the worker
// finishing what it starts), then every GET of the OpenAPI document is called. Any query the
// stand-in answers by reading a whole collection, and any lookup of one document that reads all of
// an organization's (a customer by id or external_id, say, when a branch of its $or has no index),
// from the API or the worker, is reported and fails the test, so a new filter or lookup without
// its index cannot land unnoticed.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, injectAs, ok } from '../support/http';
import { manualCustomerWithInvoices } from '../support/payment-fixtures';
import { startReceiver, type Receiver } from '../support/receiver';
import { scanLogReports, startMongoStandIn, type RunningServer } from '../support/servers';
import { createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

const dir = mkdtempSync(join(tmpdir(), 'indexed-api-reads-'));
const reports = join(dir, 'scans.log');
let server: RunningServer;
let stack: TestStack;
let worker: StackWorker;
let receiver: Receiver;
let org: TestOrganization;

const reported = (): string[] => scanLogReports(reports);

/** The seeded resources' ids by kind, and the values the GETs' filters are given. */
const ids: Record<string, string> = {};
const values: Record<string, string> = {};

const post = async <T extends { id: string }>(url: string, payload: unknown, status = 201): Promise<T> =>
  ok<T>(await injectAs(stack.app, org, 'POST', url, payload), status);
const get = async <T>(url: string): Promise<T> => ok<T>(await injectAs(stack.app, org, 'GET', url));

beforeAll(async () => {
  server = await startMongoStandIn({
    storage: join(dir, 'data.mv'),
    env: { MONGO_STAND_IN_SCAN_LOG: '1', MONGO_STAND_IN_SCAN_LOG_FILE: reports },
  });
  stack = await createTestStack({ mongoUrl: server.address });
  [worker, receiver] = await Promise.all([startStackWorker(stack), startReceiver()]);

  // A manual-provider organization and customer with two finalized invoices.
  const seeded = await manualCustomerWithInvoices(stack.app, 'whsec_indexed_reads', [1_000, 2_000]);
  org = seeded.org;
  const customer = seeded.customer;
  const [first, second] = seeded.invoices;
  Object.assign(ids, { customer: customer.id, invoice: first!.id });
  values.external_customer_id = customer.external_id;

  ids.webhook_endpoint = (await post('/v1/webhook_endpoints', { url: receiver.url('/hooks') })).id;
  ids.metric = (await post('/v1/billable_metrics', { name: 'Calls', code: 'calls', aggregation_type: 'count' })).id;
  ids.plan = (
    await post('/v1/plans', {
      name: 'Plan',
      code: 'plan',
      interval: 'monthly',
      amount_cents: 1_000,
      currency: 'USD',
      charges: [{ billable_metric_id: ids.metric, charge_model: 'standard', properties: { amount: '1' } }],
    })
  ).id;
  await post(`/v1/plans/${ids.plan}/commitments`, { amount_cents: '100' });
  await post(`/v1/plans/${ids.plan}/usage_thresholds`, { amount_cents: '100000' });
  values.subscription_external_id = `sub_${randomUUID()}`;
  ids.subscription = (
    await post('/v1/subscriptions', { customer_id: customer.id, plan_id: ids.plan, external_id: values.subscription_external_id })
  ).id;
  ids.tax = (await post('/v1/taxes', { name: 'VAT', code: 'vat', rate: '0.1' })).id;
  await post('/v1/taxes/apply', { tax_code: 'vat', taxable_type: 'customer', taxable_id: customer.id });
  ids.add_on = (await post('/v1/add_ons', { name: 'Setup', code: 'setup', amount_cents: 500, amount_currency: 'USD' })).id;
  ids.coupon = (
    await post('/v1/coupons', {
      name: 'Ten',
      code: 'ten',
      coupon_type: 'fixed_amount',
      amount_cents: 100,
      amount_currency: 'USD',
      frequency: 'once',
    })
  ).id;
  await post('/v1/coupons/apply', { customer_id: customer.id, coupon_code: 'ten' });
  ids.wallet = (await post('/v1/wallets', { customer_id: customer.id, currency: 'USD', rate_amount: '1', granted_credits: '10' })).id;
  ids.feature = (await post('/v1/features', { code: 'sso', name: 'SSO', feature_type: 'boolean' })).id;
  ids.entitlement = (await post('/v1/entitlements', { plan_id: ids.plan, feature_id: ids.feature, value: true })).id;
  ids.usage_alert = (
    await post('/v1/usage_alerts', { subscription_id: ids.subscription, alert_type: 'current_usage_amount', threshold: '100' })
  ).id;
  ids.test_clock = (await post('/v1/test_clocks', { name: 'Clock', frozen_time: new Date().toISOString() })).id;
  ids.dunning_campaign = (
    await post('/v1/dunning_campaigns', {
      name: 'Dunning',
      code: 'dunning',
      max_attempts: 2,
      days_between_attempts: 1,
      thresholds: [{ currency: 'USD', amount_cents: 1 }],
    })
  ).id;
  ids.integration = (await get<Array<{ id: string }>>('/v1/integrations'))[0]!.id;
  values.transaction_id = randomUUID();
  await post('/v1/events', {
    transaction_id: values.transaction_id,
    external_customer_id: customer.external_id,
    code: 'calls',
    timestamp: new Date().toISOString(),
  });
  ids.fee = (await get<{ fees: Array<{ id: string }> }>(`/v1/invoices/${first!.id}`)).fees[0]!.id;
  ids.credit_note = (
    await post('/v1/credit_notes', { invoice_id: first!.id, reason: 'other', items: [{ fee_id: ids.fee, amount_cents: 1 }] })
  ).id;
  ids.payment_request = (await post('/v1/payment_requests', { customer_id: customer.id, invoice_ids: [second!.id] })).id;
  ids.payment = (
    await eventually(
      async () => (await get<Array<{ id: string }>>(`/v1/payments?payment_request_id=${ids.payment_request}`))[0],
      20_000,
      'a payment',
    )
  ).id;
  ids.webhook = (await eventually(async () => (await get<Array<{ id: string }>>('/v1/webhooks'))[0], 20_000, 'a webhook')).id;
  worker.assertAlive();
}, 180_000);

afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await stack?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Parameter {
  name: string;
  in: string;
  schema: { enum?: string[]; format?: string; type?: string };
}

/** The id a path parameter gets: the seeded resource of the path's collection. */
function pathId(name: string, path: string): string {
  if (name === 'transaction_id') return values.transaction_id!;
  if (name === 'simulation_id') return randomUUID(); // a workflow's; the route reads its plan first
  const kind: Record<string, string> = {
    customers: 'customer',
    plans: 'plan',
    subscriptions: 'subscription',
    coupons: 'coupon',
    billable_metrics: 'metric',
    taxes: 'tax',
    add_ons: 'add_on',
    wallets: 'wallet',
    webhook_endpoints: 'webhook_endpoint',
    webhooks: 'webhook',
    invoices: 'invoice',
    fees: 'fee',
    usage_alerts: 'usage_alert',
    credit_notes: 'credit_note',
    test_clocks: 'test_clock',
    payments: 'payment',
    payment_requests: 'payment_request',
    dunning_campaigns: 'dunning_campaign',
    features: 'feature',
    entitlements: 'entitlement',
    integrations: 'integration',
  };
  const id = ids[kind[path.split('/')[2]!]!];
  if (!id) throw new Error(`no seeded id for ${name} in ${path}`);
  return id;
}

/** A value of the filter that names something seeded, where it names anything. */
function filterValue({ name, schema }: Parameter, path: string): string {
  if (schema.enum) return schema.enum[0]!;
  if (name === 'skip') return '1';
  if (name === 'limit') return '5';
  if (schema.format === 'date-time') return new Date(Date.now() - 86_400_000).toISOString();
  if (schema.format === 'date') return '2026-01-01';
  const named: Record<string, string> = {
    external_customer_id: values.external_customer_id!,
    external_id: path === '/v1/subscriptions' ? values.subscription_external_id! : values.external_customer_id!,
    code: 'calls',
    tax_code: 'vat',
    taxable_id: ids.customer!,
    currency: 'USD',
    amount_currency: 'USD',
    provider_type: 'manual',
    webhook_type: 'invoice.created',
  };
  if (named[name]) return named[name];
  const id = ids[name.replace(/_id$/, '')];
  if (!id) throw new Error(`no value for the filter ${name} of ${path}`);
  return id;
}

describe('the API reads through indexes', () => {
  it('every GET of the OpenAPI document, with each filter, alone, in pairs and together, reads no whole collection', async () => {
    const doc = ok<{ paths: Record<string, { get?: { parameters?: Parameter[] } }> }>(
      await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' }),
    );
    // The providers' redirects back (a payment's return and done pages) answer HTML, not JSON: out of scope.
    const paths = Object.entries(doc.paths).filter(([path, ops]) => ops.get && !/\/payments\/\{id\}\/(return|done)$/.test(path));
    expect(paths.length).toBeGreaterThan(55);
    let calls = 0;
    for (const [path, ops] of paths) {
      const url = path.replace(/\{(\w+)\}/g, (_, name: string) => pathId(name, path));
      const query = (ops.get!.parameters ?? []).filter((p) => p.in === 'query');
      const filters = query.filter((p) => p.name !== 'skip' && p.name !== 'limit');
      const sets: Parameter[][] = [[], ...query.map((p) => [p])];
      for (let i = 0; i < filters.length; i++) for (let j = i + 1; j < filters.length; j++) sets.push([filters[i]!, filters[j]!]);
      if (query.length > 1) sets.push(query);
      for (const set of sets) {
        const qs = new URLSearchParams(set.map((p): [string, string] => [p.name, filterValue(p, path)])).toString();
        const res = await injectAs(stack.app, org, 'GET', qs ? `${url}?${qs}` : url);
        calls++;
        // Everything named is seeded, so each GET finds it; only the simulation (a workflow) is not.
        expect(res.statusCode, `GET ${url}?${qs}: ${res.body}`).toBe(path.endsWith('{simulation_id}') ? 404 : 200);
      }
    }
    expect(calls).toBeGreaterThan(250);
    worker.assertAlive();
    expect(reported()).toEqual([]);
  }, 120_000);

  it('a read that no index answers is reported (so the test above can fail)', async () => {
    await stack.db.connection
      .collection('invoices')
      .find({ total_amount_cents: { $exists: true } })
      .toArray();
    expect(reported()).toEqual([expect.stringMatching(/invoices \{total_amount_cents: \{\$exists\}\}/)]);
  });
});
