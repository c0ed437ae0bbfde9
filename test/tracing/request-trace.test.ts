// One POST /v1/subscriptions, one trace (docs/operations.md "Tracing"): the API (listening on a real
// port) and a worker run in this process with the service's tracing (src/tracing), an in-memory
// exporter in place of OTLP. The trace goes from the HTTP server span through fastify's handler and
// the Temporal client's StartWorkflow to the workflow's RunWorkflow (sandbox spans, through the
// worker's sink), its StartActivity, the worker's RunActivity and the MongoDB commands under it.
import { randomUUID } from 'node:crypto';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { Db } from '../../src/db';
import type { TemporalClient } from '../../src/temporal/client';
import { startTracing, type Tracing } from '../../src/tracing';

// Vitest loads packages with import(), which the instrumentations' require hooks do not see; the
// service's compiled entry points load fastify with require(), after src/tracing/api-process.ts.
// This file's fastify goes through require() too, so the app is built by the patched factory.
vi.mock('fastify', async () => {
  const { createRequire } = await import('node:module');
  const fastify = createRequire(__filename)('fastify') as Record<string, unknown>;
  return { ...fastify, default: fastify };
});

let exporter: InMemorySpanExporter;
let tracing: Tracing;
let db: Db;
let temporal: TemporalClient;
let app: FastifyInstance;
let worker: Worker;
let run: Promise<void>;
let stopWorker: () => void;
let base: string;
let headers: Record<string, string>;
/** The traced subscription's workflow, ended by the first test. */
let tracedWorkflowId: string | undefined;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    // @fastify/under-pressure sheds load while the event loop lags (bundling, a busy machine).
    if (res.status === 503 && attempt < 10) {
      await new Promise((r) => setTimeout(r, 500));
      continue;
    }
    return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }
}

beforeAll(async () => {
  exporter = new InMemorySpanExporter();
  // Before anything loads fastify: the modules below are imported only now.
  tracing = startTracing({ serviceName: 'billing-test', spanProcessors: [new SimpleSpanProcessor(exporter)] });

  const { connectDb } = await import('../../src/db/index.js');
  const { buildApp } = await import('../../src/api/app.js');
  const { connectTemporal } = await import('../../src/temporal/client.js');
  const { createWorker, NativeConnection } = await import('../../src/temporal/worker.js');
  const { createActivities } = await import('../../activities/index.js');
  const { testDbUri, TEST_SECRETS_KEY } = await import('../support/stack.js');

  const taskQueue = `test-${randomUUID()}`;
  db = await connectDb(testDbUri(), { maxPoolSize: 10, tracer: tracing.tracer });
  await db.ensureIndexes();
  temporal = await connectTemporal({ address: inject('temporalAddress'), namespace: 'default', taskQueue, tracing });
  // createWorker bundles the workflows with the tracing interceptors module, as the worker process does.
  const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
  worker = await createWorker({
    connection,
    namespace: 'default',
    taskQueue,
    activities: createActivities({ db, temporal, secretsKey: TEST_SECRETS_KEY }),
    tracing,
  });
  const stopped = new Promise<void>((resolve) => {
    stopWorker = resolve;
  });
  run = worker.runUntil(stopped).finally(() => connection.close());

  app = await buildApp({
    config: { LOG_LEVEL: 'silent', BODY_LIMIT_BYTES: 1024 * 1024, SECRETS_KEY: TEST_SECRETS_KEY, METRICS_ENABLED: false },
    db,
    temporal,
    logger: false,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

  headers = {};
  const org = await call('POST', '/v1/organizations', { name: 'Traced Org', default_currency: 'USD', timezone: 'UTC' });
  expect(org.status).toBe(201);
  headers = { authorization: `Bearer ${(org.json.api_key as { raw_key: string }).raw_key}` };
}, 120_000);

afterAll(async () => {
  stopWorker?.();
  await run;
  await app?.close();
  await db?.connection.dropDatabase().catch(() => undefined);
  await db?.close();
  await temporal?.close();
  await tracing?.shutdown();
});

/** Waits for the spans of one trace until `done` holds of them. */
async function traceSpans(traceId: string, done: (spans: ReadableSpan[]) => boolean, timeoutMs = 30_000): Promise<ReadableSpan[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    if (done(spans)) return spans;
    if (Date.now() > deadline) throw new Error(`trace ${traceId} incomplete:\n${spans.map((s) => `  ${s.name}`).join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const named = (spans: ReadableSpan[], name: string | RegExp) =>
  spans.filter((s) => (typeof name === 'string' ? s.name === name : name.test(s.name)));
const one = (spans: ReadableSpan[], name: string | RegExp) => {
  const found = named(spans, name);
  expect(
    found.map((s) => s.name),
    String(name),
  ).toHaveLength(1);
  return found[0]!;
};
const isMongo = (s: ReadableSpan) => s.attributes['db.system.name'] === 'mongodb';

describe('tracing', () => {
  it('follows one POST /v1/subscriptions into the workflow, its activities and their MongoDB commands', async () => {
    const customer = await call('POST', '/v1/customers', { external_id: `cus-${randomUUID().slice(0, 8)}`, name: 'Traced' });
    expect(customer.status).toBe(201);
    const plan = await call('POST', '/v1/plans', {
      code: `plan-${randomUUID().slice(0, 8)}`,
      name: 'Plan',
      interval: 'monthly',
      amount_cents: 1000,
      currency: 'USD',
    });
    expect(plan.status).toBe(201);

    exporter.reset();
    const externalId = `sub-${randomUUID().slice(0, 8)}`;
    const created = await call('POST', '/v1/subscriptions', {
      external_id: externalId,
      customer_id: customer.json.external_id,
      plan_id: plan.json.code,
    });
    expect(created.status, JSON.stringify(created.json)).toBe(201);

    const server = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /v1/subscriptions');
    expect(
      server,
      exporter
        .getFinishedSpans()
        .map((s) => s.name)
        .join(', '),
    ).toBeDefined();
    const traceId = server!.spanContext().traceId;
    expect(server!.parentSpanId).toBeUndefined();
    expect(server!.attributes['http.route']).toBe('/v1/subscriptions');

    // The workflow's span ends with the run: end the subscription (another request, another trace).
    const deleted = await call('DELETE', `/v1/subscriptions/${created.json.id as string}`);
    expect(deleted.status, JSON.stringify(deleted.json)).toBe(200);

    const spans = await traceSpans(
      traceId,
      (all) => named(all, 'RunWorkflow:subscriptionWorkflow').length > 0 && named(all, /^RunActivity:/).length > 0,
    );
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const parentOf = (s: ReadableSpan) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);
    const ancestors = (s: ReadableSpan) => {
      const chain: string[] = [];
      for (let p = parentOf(s); p; p = parentOf(p)) chain.push(p.name);
      return chain;
    };

    // API side: fastify's route handler (under its hooks' spans), the route's MongoDB commands under it.
    const handler = one(spans, 'request handler - subscriptionRoutes');
    expect(ancestors(handler)).toContain('POST /v1/subscriptions');
    expect(handler.attributes['http.route']).toBe('/v1/subscriptions');
    expect(named(spans, 'insert subscriptions').map(parentOf)).toContain(handler);

    // Temporal: the client's StartWorkflow in the request, the run under it (from the sandbox).
    const start = one(spans, 'StartWorkflow:subscriptionWorkflow');
    expect(ancestors(start)).toContain('POST /v1/subscriptions');
    const runWorkflow = one(spans, 'RunWorkflow:subscriptionWorkflow');
    expect(parentOf(runWorkflow)).toBe(start);
    expect(runWorkflow.attributes.workflowId).toBe(start.attributes.temporalWorkflowId);
    tracedWorkflowId = String(start.attributes.temporalWorkflowId);
    expect(runWorkflow.resource.attributes['service.name']).toBe('billing-test');

    // Each activity the run scheduled: StartActivity in the sandbox, RunActivity in the worker.
    const runActivities = named(spans, /^RunActivity:/);
    expect(runActivities.map((s) => s.name)).toContain('RunActivity:activateSubscription');
    for (const activity of runActivities) {
      const scheduled = parentOf(activity);
      expect(scheduled?.name).toBe(activity.name.replace('RunActivity', 'StartActivity'));
      expect(ancestors(activity)).toContain('RunWorkflow:subscriptionWorkflow');
    }
    // ...and the MongoDB commands of at least one of them under it.
    const activityCommands = spans.filter((s) => isMongo(s) && parentOf(s)?.name.startsWith('RunActivity:'));
    expect(activityCommands.length).toBeGreaterThan(0);
    const command = activityCommands[0]!;
    expect(command.kind).toBe(SpanKind.CLIENT);
    expect(command.attributes).toMatchObject({ 'db.namespace': db.connection.name, 'db.operation.name': expect.any(String) as unknown });
    expect(command.name).toMatch(/^\w+ \w+/);
  });

  it('leaves the metrics and health endpoints untraced', async () => {
    exporter.reset();
    expect((await call('GET', '/health')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 100));
    expect(exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER)).toEqual([]);
  });

  it('leaves a history that replays without the interceptors (tracing can be turned off again)', async () => {
    expect(tracedWorkflowId).toBeDefined();
    const history = await temporal.client.workflow.getHandle(tracedWorkflowId!).fetchHistory();
    const { bundleWorkflowCode, Worker } = await import('@temporalio/worker');
    const { workflowsPath } = await import('../../src/temporal/worker.js');
    const untraced = await bundleWorkflowCode({ workflowsPath: workflowsPath() });
    await expect(Worker.runReplayHistory({ workflowBundle: untraced }, history, tracedWorkflowId)).resolves.toBeUndefined();
  });
});
