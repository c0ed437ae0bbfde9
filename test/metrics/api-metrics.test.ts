// GET /metrics of the API in one process (api-contract.md, "Conventions"): Prometheus text that a
// strict parser reads, without a key, with no tenant's id anywhere, moving as requests, events,
// invoices and payments happen. The registry is the process's, so every figure is read as the
// difference between two scrapes around the action. The API's cluster and the worker process are
// test/metrics/processes.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/api/app';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentResource } from '../../src/resources/payment';
import { insertMetric } from '../support/catalog-fixtures';
import { eventually, expectError, injectAs, ok } from '../support/http';
import { finalizedOneOff, manualOrganization } from '../support/payment-fixtures';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';
import { allSamples, type Exposition, parsePrometheusText, sampleValue } from './prometheus-text';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
const tenantIds: string[] = [];

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, { name: 'Metrics Org', events_rate_limit_per_minute: 100_000 });
  tenantIds.push(org.id, org.apiKey, org.apiKeyId);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

async function scrape(): Promise<{ text: string; metrics: Exposition }> {
  const res = await stack.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return { text: res.body, metrics: parsePrometheusText(res.body) };
}

/** The change of each probe between two scrapes around `action`. */
async function deltas<T>(
  probes: Record<string, [name: string, labels?: Record<string, string>]>,
  action: () => Promise<T>,
): Promise<{ result: T; delta: Record<string, number> }> {
  const before = (await scrape()).metrics;
  const result = await action();
  const after = (await scrape()).metrics;
  const delta = Object.fromEntries(
    Object.entries(probes).map(([key, [name, labels]]) => [key, sampleValue(after, name, labels) - sampleValue(before, name, labels)]),
  );
  return { result, delta };
}

describe('GET /metrics', () => {
  it('answers Prometheus text without a key: the billing families, process and Node.js metrics', async () => {
    const { metrics } = await scrape();
    for (const [name, type] of [
      ['billing_http_requests_total', 'counter'],
      ['billing_http_request_duration_seconds', 'histogram'],
      ['billing_events_ingested_total', 'counter'],
      ['billing_events_refused_total', 'counter'],
      ['billing_rate_limit_refusals_total', 'counter'],
      ['billing_invoices_issued_total', 'counter'],
      ['billing_invoices_issued_amount_cents_total', 'counter'],
      ['billing_invoices_finalized_total', 'counter'],
      ['billing_invoices_finalized_amount_cents_total', 'counter'],
      ['billing_payments_total', 'counter'],
      ['billing_webhook_delivery_attempts_total', 'counter'],
      ['billing_webhook_deliveries_total', 'counter'],
      ['process_cpu_user_seconds_total', 'counter'],
      ['process_resident_memory_bytes', 'gauge'],
      ['nodejs_eventloop_lag_seconds', 'gauge'],
      ['nodejs_heap_size_used_bytes', 'gauge'],
    ] as const) {
      expect(metrics.get(name)?.type, name).toBe(type);
      expect(metrics.get(name)?.help, name).toBeTruthy();
    }
  });

  it('counts requests by route pattern, method and status, with their durations', async () => {
    const customer = ok<CustomerResource>(
      await injectAs(stack.app, org, 'POST', '/v1/customers', { external_id: `cus_${randomUUID()}` }),
      201,
    );
    tenantIds.push(customer.id, customer.external_id);
    const byId = { method: 'GET', route: '/v1/customers/:id', status_code: '200' };
    const missing = { method: 'GET', route: '/v1/customers/:id', status_code: '404' };
    const unmatched = { method: 'GET', route: 'unmatched', status_code: '404' };
    const unauthorized = { method: 'GET', route: '/v1/customers', status_code: '401' };
    const { delta } = await deltas(
      {
        byId: ['billing_http_requests_total', byId],
        byIdTimed: ['billing_http_request_duration_seconds_count', byId],
        byIdInf: ['billing_http_request_duration_seconds_bucket', { ...byId, le: '+Inf' }],
        missing: ['billing_http_requests_total', missing],
        unmatched: ['billing_http_requests_total', unmatched],
        unauthorized: ['billing_http_requests_total', unauthorized],
      },
      async () => {
        for (let i = 0; i < 3; i++) ok(await injectAs(stack.app, org, 'GET', `/v1/customers/${customer.id}`));
        ok(await injectAs(stack.app, org, 'GET', `/v1/customers/${customer.external_id}/`));
        expectError(await injectAs(stack.app, org, 'GET', `/v1/customers/${randomUUID()}`), 404, 'customer_not_found');
        expectError(await injectAs(stack.app, org, 'GET', `/v1/no-such-thing/${randomUUID()}`), 404, 'not_found');
        expectError(await stack.app.inject({ method: 'GET', url: '/v1/customers' }), 401, 'unauthorized');
      },
    );
    // The trailing slash and the external id share the pattern: one series, not one per URL.
    expect(delta).toEqual({ byId: 4, byIdTimed: 4, byIdInf: 4, missing: 1, unmatched: 1, unauthorized: 1 });
    const { metrics } = await scrape();
    const routes = new Set(allSamples(metrics).flatMap((s) => (s.labels.route ? [s.labels.route] : [])));
    expect([...routes].filter((r) => r !== 'unmatched' && !r.startsWith('/'))).toEqual([]);
    expect([...routes].filter((r) => /[0-9a-f]{8}-[0-9a-f]{4}/.test(r))).toEqual([]);
    // Its own scrapes are requests too.
    expect(sampleValue(metrics, 'billing_http_requests_total', { route: '/metrics', status_code: '200' })).toBeGreaterThan(0);
  });

  it('counts events ingested and refused, by reason', async () => {
    await insertMetric(stack.db, org.id, { code: 'api_calls', aggregation_type: 'count' });
    const customer = ok<CustomerResource>(
      await injectAs(stack.app, org, 'POST', '/v1/customers', { external_id: `cus_${randomUUID()}` }),
      201,
    );
    tenantIds.push(customer.id, customer.external_id);
    const event = (fields: Record<string, unknown> = {}) => ({
      transaction_id: `tx-${randomUUID()}`,
      external_customer_id: customer.external_id,
      code: 'api_calls',
      ...fields,
    });
    const { delta } = await deltas(
      {
        ingested: ['billing_events_ingested_total'],
        duplicate: ['billing_events_refused_total', { reason: 'duplicate' }],
        validation: ['billing_events_refused_total', { reason: 'validation_error' }],
        metric: ['billing_events_refused_total', { reason: 'billable_metric_not_found' }],
        customer: ['billing_events_refused_total', { reason: 'customer_not_found' }],
      },
      async () => {
        const first = event();
        ok(await injectAs(stack.app, org, 'POST', '/v1/events', first), 201);
        expectError(await injectAs(stack.app, org, 'POST', '/v1/events', first), 409, 'already_exists', ['existing_event_id']);
        expectError(await injectAs(stack.app, org, 'POST', '/v1/events', event({ code: 'nope' })), 422, 'validation_error');
        expectError(await injectAs(stack.app, org, 'POST', '/v1/events', event({ transaction_id: undefined })), 422, 'validation_error');
        const batch = ok<{ ingested: number; duplicates: number; errors: unknown[] }>(
          await injectAs(stack.app, org, 'POST', '/v1/events/batch', {
            events: [event(), event(), { code: 'api_calls' }, event({ external_customer_id: 'nobody' }), first],
          }),
          201,
        );
        expect(batch).toMatchObject({ ingested: 2, duplicates: 1 });
        expect(batch.errors).toHaveLength(2);
      },
    );
    expect(delta).toEqual({ ingested: 3, duplicate: 2, validation: 2, metric: 1, customer: 1 });
  });

  it("counts the events rate limiter's refusals", async () => {
    const limited = await createOrganization(stack.app, { name: 'Limited Org', events_rate_limit_per_minute: 2 });
    tenantIds.push(limited.id, limited.apiKey, limited.apiKeyId);
    const { result: statuses, delta } = await deltas(
      {
        refusals: ['billing_rate_limit_refusals_total', { limiter: 'events' }],
        tooMany: ['billing_http_requests_total', { route: '/v1/events', status_code: '429' }],
      },
      async () => {
        const seen: number[] = [];
        for (let i = 0; i < 5; i++) seen.push((await injectAs(stack.app, limited, 'GET', '/v1/events')).statusCode);
        return seen;
      },
    );
    // (Two a minute: at least the last two are refused, even across a minute boundary.)
    const refused = statuses.filter((s) => s === 429).length;
    expect(refused).toBeGreaterThanOrEqual(2);
    expect(delta).toEqual({ refusals: refused, tooMany: refused });
  });

  it('counts invoices issued and finalized with their amounts by currency, and payments by provider and status', async () => {
    const manual = await manualOrganization(stack.app, 'Metrics Payments', 'metrics-manual-secret-0123456789');
    tenantIds.push(manual.id, manual.apiKey, manual.apiKeyId);
    const customer = ok<CustomerResource>(
      await injectAs(stack.app, manual, 'POST', '/v1/customers', {
        external_id: `cus_${randomUUID()}`,
        currency: 'EUR',
        payment_provider: 'manual',
      }),
      201,
    );
    tenantIds.push(customer.id, customer.external_id);
    const eur = { currency: 'EUR', invoice_type: 'one_off' };
    const { result: invoice, delta } = await deltas(
      {
        issued: ['billing_invoices_issued_total', eur],
        issuedCents: ['billing_invoices_issued_amount_cents_total', { currency: 'EUR' }],
        finalized: ['billing_invoices_finalized_total', eur],
        finalizedCents: ['billing_invoices_finalized_amount_cents_total', { currency: 'EUR' }],
        usd: ['billing_invoices_issued_total', { currency: 'USD' }],
      },
      () => finalizedOneOff(stack.app, manual, customer.id, 1234, 'EUR'),
    );
    tenantIds.push(invoice.id);
    expect(invoice.status).toBe('finalized');
    expect(delta).toEqual({ issued: 1, issuedCents: 1234, finalized: 1, finalizedCents: 1234, usd: 0 });

    // Finalizing again is refused by the state table and counts nothing.
    const again = await deltas({ finalized: ['billing_invoices_finalized_total', eur] }, async () =>
      expectError(await injectAs(stack.app, manual, 'POST', `/v1/invoices/${invoice.id}/finalize`), 400, 'invalid_state_transition'),
    );
    expect(again.delta).toEqual({ finalized: 0 });

    const paid = await deltas(
      {
        pending: ['billing_payments_total', { provider: 'manual', status: 'pending' }],
        succeeded: ['billing_payments_total', { provider: 'manual', status: 'succeeded' }],
      },
      async () => {
        const checkout = ok<{ payment_id: string }>(
          await injectAs(stack.app, manual, 'POST', '/v1/payments/checkout', {
            invoice_id: invoice.id,
            provider: 'manual',
            success_url: 'https://shop.example/paid',
            cancel_url: 'https://shop.example/canceled',
          }),
        );
        tenantIds.push(checkout.payment_id);
        ok(await injectAs(stack.app, manual, 'POST', `/v1/payments/${checkout.payment_id}/mark-paid`, { reference: 'WIRE-1' }));
        await eventually(
          async () => {
            worker.assertAlive();
            const payment = ok<PaymentResource>(await injectAs(stack.app, manual, 'GET', `/v1/payments/${checkout.payment_id}`));
            const current = ok<InvoiceResource>(await injectAs(stack.app, manual, 'GET', `/v1/invoices/${invoice.id}`));
            return payment.status === 'succeeded' && current.status === 'paid' ? true : undefined;
          },
          20_000,
          'the payment to succeed',
        );
      },
    );
    expect(paid.delta).toEqual({ pending: 1, succeeded: 1 });
  });

  it('never names a tenant: no organization, customer, key, invoice or payment id, no tenant label', async () => {
    const { text, metrics } = await scrape();
    expect(tenantIds.length).toBeGreaterThan(10);
    for (const id of tenantIds) expect(text).not.toContain(id);
    const labelNames = new Set(allSamples(metrics).flatMap((s) => Object.keys(s.labels)));
    expect([...labelNames].filter((name) => /organi[sz]ation|customer|tenant|subscription|invoice_id|api_key/.test(name))).toEqual([]);
  });

  it('is not part of the OpenAPI document', async () => {
    const doc = ok<{ paths: Record<string, unknown> }>(await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' }));
    expect(Object.keys(doc.paths)).not.toContain('/metrics');
    expect(Object.keys(doc.paths).length).toBeGreaterThan(50);
  });
});

describe('METRICS_ENABLED=false', () => {
  it('answers 404 on /metrics and counts nothing', async () => {
    const app = await buildApp({
      config: { LOG_LEVEL: 'silent', BODY_LIMIT_BYTES: 1024 * 1024, METRICS_ENABLED: false },
      db: stack.db,
      temporal: stack.temporal,
      logger: false,
    });
    try {
      await app.ready();
      const { delta } = await deltas({ health: ['billing_http_requests_total', { route: '/health' }] }, async () => {
        expectError(await app.inject({ method: 'GET', url: '/metrics' }), 404, 'not_found');
        expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
      });
      expect(delta).toEqual({ health: 0 });
    } finally {
      await app.close();
    }
  });
});
