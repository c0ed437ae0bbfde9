// GET /metrics of the real processes, started as `npm start` starts them (the TypeScript sources,
// compiled on load by test/metrics/register-ts.cjs): the API with API_WORKERS=2 under node:cluster,
// whose scrape is the sum over both workers, and the worker, whose own endpoint on
// WORKER_METRICS_PORT adds the Temporal SDK's worker metrics to its billing counters. Both parse as
// Prometheus text, move as requests and invoices happen, never go down, and name no tenant.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { get } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { InvoiceResource } from '../../src/resources/invoice';
import { eventually } from '../support/http';
import { startReceiver, type Receiver } from '../support/receiver';
import { freePort } from '../support/servers';
import { TEST_SECRETS_KEY, testDbUri } from '../support/stack';
import { allSamples, type Exposition, parsePrometheusText, sampleValue } from './prometheus-text';

const ROOT = join(__dirname, '..', '..');

interface Started {
  child: ChildProcess;
  log(): string;
  /** How many times `text` appeared in its output so far. */
  count(text: string): number;
  stop(): Promise<void>;
}

/** `node src/<entry>.ts` with the stack's settings plus `env`; its output kept for failure messages. */
function startProcess(entry: 'server' | 'worker', env: Record<string, string>): Started {
  const child = spawn(process.execPath, ['--require', join(__dirname, 'register-ts.cjs'), join(ROOT, 'src', `${entry}.ts`)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'warn', SECRETS_KEY: TEST_SECRETS_KEY, ...env },
  });
  let output = '';
  let all = '';
  const keep = (chunk: Buffer) => {
    all += chunk.toString();
    output = all.slice(-8000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return {
    child,
    log: () => output,
    count: (text) => all.split(text).length - 1,
    stop: () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.once('exit', () => {
          clearTimeout(timer);
          done();
        });
        child.kill('SIGTERM');
      }),
  };
}

/** Resolves once `url` answers `status`; fails at once if the process exits. */
async function waitForAnswer(started: Started, url: string, status: number, what: string, timeoutMs = 90_000): Promise<void> {
  await eventually(
    async () => {
      if (started.child.exitCode !== null) throw new Error(`${what} exited with ${started.child.exitCode}:\n${started.log()}`);
      const res = await fetch(url).catch(() => null);
      return res?.status === status ? true : undefined;
    },
    timeoutMs,
    `${what} (${url} answering ${status}):\n${started.log()}`,
  );
}

/**
 * A GET on a connection of its own (fetch would keep one alive): node:cluster hands each new
 * connection to the next API worker, so successive calls are served by different workers.
 */
function freshGet(url: string): Promise<{ status: number; contentType: string | undefined; text: string }> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], text: Buffer.concat(chunks).toString() }),
      );
      res.on('error', reject);
    }).on('error', reject);
  });
}

async function scrape(url: string): Promise<{ text: string; metrics: Exposition }> {
  const res = await freshGet(url);
  expect(res.status, res.text).toBe(200);
  expect(res.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
  return { text: res.text, metrics: parsePrometheusText(res.text) };
}

const settings = () => ({
  MONGODB_URI: testDbUri(),
  TEMPORAL_ADDRESS: inject('temporalAddress'),
  TEMPORAL_NAMESPACE: 'default',
  TEMPORAL_TASK_QUEUE: `test-${randomUUID()}`,
  HOST: '127.0.0.1',
});

describe('the API (API_WORKERS=2) and the worker', () => {
  let api: Started;
  let worker: Started;
  let receiver: Receiver;
  let apiUrl: string;
  let workerMetricsUrl: string;
  const tenantIds: string[] = [];

  beforeAll(async () => {
    const [apiPort, workerMetricsPort] = [await freePort(), await freePort()];
    const common = settings();
    apiUrl = `http://127.0.0.1:${apiPort}`;
    workerMetricsUrl = `http://127.0.0.1:${workerMetricsPort}/metrics`;
    receiver = await startReceiver();
    // LOG_LEVEL=info: each API worker says when it listens.
    api = startProcess('server', { ...common, PORT: String(apiPort), API_WORKERS: '2', PUBLIC_URL: apiUrl, LOG_LEVEL: 'info' });
    worker = startProcess('worker', { ...common, WORKER_METRICS_PORT: String(workerMetricsPort), PUBLIC_URL: apiUrl });
    await Promise.all([waitForAnswer(api, `${apiUrl}/health`, 200, 'the API'), waitForAnswer(worker, workerMetricsUrl, 200, 'the worker')]);
    // Both API workers listening (each joined the cluster's metrics before), and the worker polling
    // (its metrics server starts before it does).
    await eventually(async () => (api.count('Server listening at') >= 2 ? true : undefined), 90_000, `two API workers:\n${api.log()}`);
    await eventually(
      async () => (worker.log().includes('worker polling') ? true : undefined),
      90_000,
      `the worker to poll:\n${worker.log()}`,
    );
  }, 180_000);

  afterAll(async () => {
    await Promise.all([api?.stop(), worker?.stop()]);
    await receiver?.close();
  });

  async function call<T>(method: string, path: string, apiKey: string | null, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await fetch(`${apiUrl}${path}`, {
      method,
      headers: { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }

  it("the API's scrape is the sum over its cluster workers: every request counted once, whichever worker served it", async () => {
    const before = await scrape(`${apiUrl}/metrics`);
    const n = 24;
    for (let i = 0; i < n; i++) expect((await freshGet(`${apiUrl}/health`)).status).toBe(200);
    const after = await scrape(`${apiUrl}/metrics`);
    const health = { method: 'GET', route: '/health', status_code: '200' };
    // The workers take connections in turn (each request and scrape on a new one): without the sum,
    // a scrape would see about half, and not the same half twice.
    expect(
      sampleValue(after.metrics, 'billing_http_requests_total', health) -
        sampleValue(before.metrics, 'billing_http_requests_total', health),
    ).toBe(n);
    expect(
      sampleValue(after.metrics, 'billing_http_request_duration_seconds_count', health) -
        sampleValue(before.metrics, 'billing_http_request_duration_seconds_count', health),
    ).toBe(n);
    expect(after.metrics.get('process_cpu_user_seconds_total')?.type).toBe('counter');
    expect(after.metrics.get('nodejs_heap_size_used_bytes')?.type).toBe('gauge');
  });

  it('an invoice moves the counters of both processes: issued in the API, finalized and delivered by the worker; the SDK metrics are there', async () => {
    const org = await call<{ id: string; api_key: { id: string; raw_key: string } }>('POST', '/v1/organizations', null, {
      name: 'Metrics Processes',
      timezone: 'UTC',
    });
    expect(org.status, JSON.stringify(org.body)).toBe(201);
    const key = org.body.api_key.raw_key;
    tenantIds.push(org.body.id, org.body.api_key.id, key);
    const customer = await call<{ id: string; external_id: string }>('POST', '/v1/customers', key, {
      external_id: `cus_${randomUUID()}`,
      currency: 'EUR',
    });
    expect(customer.status, JSON.stringify(customer.body)).toBe(201);
    tenantIds.push(customer.body.id, customer.body.external_id);

    const eur = { currency: 'EUR', invoice_type: 'one_off' };
    const [apiBefore, workerBefore] = [await scrape(`${apiUrl}/metrics`), await scrape(workerMetricsUrl)];
    // After the first scrapes: every delivery to it is one the worker counts between the two.
    const endpoint = await call<{ id: string }>('POST', '/v1/webhook_endpoints', key, { url: receiver.url('/metrics-hooks') });
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
    tenantIds.push(endpoint.body.id);
    const draft = await call<InvoiceResource>('POST', '/v1/invoices/one_off', key, {
      customer_id: customer.body.id,
      currency: 'EUR',
      line_items: [{ description: 'Setup', unit_price: '2500' }],
    });
    expect(draft.status, JSON.stringify(draft.body)).toBe(201);
    tenantIds.push(draft.body.id);
    const finalized =
      draft.body.status === 'finalized' ? draft : await call<InvoiceResource>('POST', `/v1/invoices/${draft.body.id}/finalize`, key);
    expect(finalized.status, JSON.stringify(finalized.body)).toBe(200);
    expect(finalized.body.status).toBe('finalized');
    // invoice.created and invoice.finalized, delivered by the worker.
    await eventually(async () => (receiver.requests('/metrics-hooks').length >= 2 ? true : undefined), 30_000, 'two webhook deliveries');

    const apiAfter = await scrape(`${apiUrl}/metrics`);
    const moved = (before: Exposition, after: Exposition, name: string, labels: Record<string, string>) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    // Each delivery is counted once its attempt is recorded, a moment after the receiver answered.
    const delivered = receiver.requests('/metrics-hooks').length;
    const workerAfter = await eventually(async () => {
      const current = await scrape(workerMetricsUrl);
      return moved(workerBefore.metrics, current.metrics, 'billing_webhook_deliveries_total', { outcome: 'succeeded' }) >= delivered
        ? current
        : undefined;
    }, 10_000);

    // The one-off invoice is created by the API's request, finalized by the worker's activity.
    expect(moved(apiBefore.metrics, apiAfter.metrics, 'billing_invoices_issued_total', eur)).toBe(1);
    expect(moved(apiBefore.metrics, apiAfter.metrics, 'billing_invoices_issued_amount_cents_total', { currency: 'EUR' })).toBe(2500);
    expect(moved(workerBefore.metrics, workerAfter.metrics, 'billing_invoices_finalized_total', eur)).toBe(1);
    expect(moved(workerBefore.metrics, workerAfter.metrics, 'billing_invoices_finalized_amount_cents_total', { currency: 'EUR' })).toBe(
      2500,
    );
    expect(moved(workerBefore.metrics, workerAfter.metrics, 'billing_webhook_delivery_attempts_total', { outcome: 'succeeded' })).toBe(
      delivered,
    );
    expect(moved(workerBefore.metrics, workerAfter.metrics, 'billing_webhook_deliveries_total', { outcome: 'succeeded' })).toBe(delivered);
    expect(
      moved(apiBefore.metrics, apiAfter.metrics, 'billing_http_requests_total', { route: '/v1/invoices/:id/finalize', status_code: '200' }),
    ).toBe(draft.body.status === 'finalized' ? 0 : 1);

    // The Temporal SDK's worker metrics, from its runtime's exporter, in the same answer.
    const temporalFamilies = [...workerAfter.metrics.keys()].filter((name) => name.startsWith('temporal_'));
    expect(temporalFamilies.length, workerAfter.text.slice(-3000)).toBeGreaterThan(5);
    expect(sampleValue(workerAfter.metrics, 'temporal_activity_execution_latency_count')).toBeGreaterThan(0);
    expect(workerAfter.metrics.get('process_cpu_user_seconds_total')?.type).toBe('counter');

    for (const { text } of [apiAfter, workerAfter]) for (const id of tenantIds) expect(text).not.toContain(id);
  });

  it('counters never go down between scrapes, whichever worker answers', async () => {
    const scrapes: Exposition[] = [];
    for (let i = 0; i < 8; i++) {
      await freshGet(`${apiUrl}/v1/customers`); // a 401, so something moves in between
      scrapes.push((await scrape(`${apiUrl}/metrics`)).metrics);
    }
    const counters = (e: Exposition) =>
      new Map(
        [...e.values()]
          .filter((f) => f.type === 'counter' || f.type === 'histogram')
          .flatMap((f) => f.samples.filter((s) => !s.name.endsWith('_sum') || f.type === 'counter'))
          .map((s) => [`${s.name}${JSON.stringify(s.labels)}`, s.value]),
      );
    for (let i = 1; i < scrapes.length; i++) {
      const [previous, current] = [counters(scrapes[i - 1]!), counters(scrapes[i]!)];
      for (const [series, value] of previous) {
        expect(current.has(series), series).toBe(true);
        expect(current.get(series)!, series).toBeGreaterThanOrEqual(value);
      }
    }
    expect(allSamples(scrapes.at(-1)!).length).toBeGreaterThan(50);
  });
});

describe('METRICS_ENABLED=false', () => {
  it('the API answers 404 on /metrics (API_WORKERS=1) and the worker serves nothing on WORKER_METRICS_PORT', async () => {
    const [apiPort, workerMetricsPort] = [await freePort(), await freePort()];
    const common = { ...settings(), METRICS_ENABLED: 'false' };
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    const api = startProcess('server', { ...common, PORT: String(apiPort), API_WORKERS: '1' });
    const worker = startProcess('worker', { ...common, WORKER_METRICS_PORT: String(workerMetricsPort) });
    try {
      await waitForAnswer(api, `${apiUrl}/health`, 200, 'the API');
      await eventually(
        async () => {
          if (worker.child.exitCode !== null) throw new Error(`the worker exited:\n${worker.log()}`);
          return worker.log().includes('worker polling') ? true : undefined;
        },
        90_000,
        `the worker to poll:\n${worker.log()}`,
      );
      const res = await fetch(`${apiUrl}/metrics`);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { code: string }).code).toBe('not_found');
      await expect(fetch(`http://127.0.0.1:${workerMetricsPort}/metrics`)).rejects.toThrow();
    } finally {
      await Promise.all([api.stop(), worker.stop()]);
    }
  }, 180_000);
});
