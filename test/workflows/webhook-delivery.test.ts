// webhookDeliveryWorkflow on Temporal's time-skipping test server, with real activities against
// the MongoDB stand-in and a real local HTTP receiver.
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import type { Db } from '../../src/db';
import { webhookRetryDelayMs } from '../../src/domain/webhook-schedule';
import { wrapClient, type TemporalClient } from '../../src/temporal/client';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { emitEvent } from '../../src/webhooks/emit-event';
import { generateWebhookSecret } from '../../src/webhooks/signature';
import { startReceiver, type Receiver } from '../support/receiver';
import { createTestDb } from '../support/stack';
import { bundleWorkflows, createTimeSkippingEnv, waitForTimers } from '../support/temporal';

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;
let db: Db;
let receiver: Receiver;
let temporal: TemporalClient;
const taskQueue = `webhooks-${randomUUID()}`;
/** Each test uses its own organization, so it sees only its own endpoints. */
let organizationId = randomUUID();

beforeAll(async () => {
  [env, bundle, db, receiver] = await Promise.all([createTimeSkippingEnv(), bundleWorkflows(), createTestDb(), startReceiver()]);
  temporal = wrapClient(env.client, taskQueue);
});

beforeEach(() => {
  organizationId = randomUUID();
});

afterAll(async () => {
  await receiver?.close();
  await env?.teardown();
  await db?.connection.dropDatabase().catch(() => undefined);
  await db?.close();
});

async function endpoint(path: string, extra: Record<string, unknown> = {}) {
  const secret = generateWebhookSecret();
  const doc = await db.models.WebhookEndpoint.create({ organization_id: organizationId, url: receiver.url(path), secret, ...extra });
  return { id: doc._id, secret };
}

/**
 * Emits one event and runs the worker until every delivery it started has ended. Time is driven
 * explicitly: each time the workflow starts its backoff timer, the clock moves by exactly that
 * backoff (see waitForTimers).
 */
async function emitAndDeliver(key: string) {
  const emitted = await emitEvent(
    { models: db.models, temporal },
    {
      organizationId,
      type: 'invoice.finalized',
      idempotencyKey: key,
      object: { id: key, status: 'finalized', total: '1200.0000' },
      occurredAt: new Date('2026-11-21T10:00:00.000Z'),
    },
  );
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: createActivities({ db, temporal }),
  });
  const results = await worker.runUntil(async () => {
    for (const id of emitted.deliveryIds) {
      const workflowId = workflowIds.webhook(id);
      for (let attempt = 1; (await waitForTimers(env, workflowId, attempt)) === 'timer'; attempt++) {
        await env.sleep(webhookRetryDelayMs(attempt));
      }
    }
    return Promise.all(emitted.deliveryIds.map((id) => env.client.workflow.getHandle(workflowIds.webhook(id)).result()));
  });
  const deliveries = await Promise.all(emitted.deliveryIds.map((id) => db.models.Webhook.findById(id).lean()));
  return { emitted, results, deliveries: deliveries.map((d) => d!) };
}

function gapsSeconds(attemptLog: { attempted_at: Date }[]): number[] {
  return attemptLog.slice(1).map((a, i) => (a.attempted_at.getTime() - attemptLog[i]!.attempted_at.getTime()) / 1000);
}

/**
 * Each gap is its backoff, plus the attempt's own run time: the test server's clock also moves in
 * real time while an attempt runs (up to two seconds allowed, for a loaded machine).
 */
function expectBackoffs(attemptLog: { attempted_at: Date }[], seconds: number[]): void {
  const gaps = gapsSeconds(attemptLog);
  expect(gaps).toHaveLength(seconds.length);
  gaps.forEach((gap, i) => {
    expect(gap, `gap ${i + 1}`).toBeGreaterThanOrEqual(seconds[i]!);
    expect(gap, `gap ${i + 1}`).toBeLessThan(seconds[i]! + 2);
  });
}

describe('webhookDeliveryWorkflow', () => {
  it('a receiver that fails three times then answers 200 ends succeeded with retries = 3, attempts 30 s, 60 s, 120 s apart', async () => {
    await endpoint('/flaky');
    receiver.on('/flaky', (n) => (n <= 3 ? 500 : 200));
    const { results, deliveries } = await emitAndDeliver(`flaky-${randomUUID()}`);

    expect(results).toEqual([{ status: 'succeeded', attempts: 4 }]);
    const delivery = deliveries[0]!;
    expect(delivery).toMatchObject({ status: 'succeeded', retries: 3, attempts: 4, http_status: 200, last_error: null });
    expect(delivery.attempt_log.map((a) => a.http_status)).toEqual([500, 500, 500, 200]);
    expectBackoffs(delivery.attempt_log, [30, 60, 120]);
    expect(receiver.requests('/flaky')).toHaveLength(4);
  });

  it('a receiver that always fails ends failed after exactly 10 attempts on the documented schedule', async () => {
    await endpoint('/down');
    receiver.on('/down', () => 503);
    const { results, deliveries } = await emitAndDeliver(`down-${randomUUID()}`);

    expect(results).toEqual([{ status: 'failed', attempts: 10 }]);
    const delivery = deliveries[0]!;
    expect(delivery).toMatchObject({ status: 'failed', attempts: 10, retries: 9, http_status: 503, last_error: 'HTTP 503' });
    expectBackoffs(delivery.attempt_log, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => webhookRetryDelayMs(n) / 1000)).toEqual([30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
    expect(receiver.requests('/down')).toHaveLength(10);
  });

  it('a receiver that hangs counts as a failed attempt after 10 s', async () => {
    await endpoint('/slow');
    receiver.on('/slow', (n) => (n === 1 ? 'hang' : 200));
    const { deliveries } = await emitAndDeliver(`slow-${randomUUID()}`);

    const [first, second] = deliveries[0]!.attempt_log;
    expect(first).toMatchObject({ attempt: 1, http_status: null, error: 'timeout after 10000 ms' });
    expect(first!.duration_ms).toBeGreaterThanOrEqual(10_000);
    expect(first!.duration_ms).toBeLessThan(15_000);
    expect(second).toMatchObject({ attempt: 2, http_status: 200, error: null });
    expect(deliveries[0]).toMatchObject({ status: 'succeeded', retries: 1 });
  }, 60_000);

  it('signs each delivery so that the snippet of docs/webhooks.md verifies it, with the documented headers and payload', async () => {
    const { id: endpointId, secret } = await endpoint('/signed');
    const key = `signed-${randomUUID()}`;
    const { emitted, deliveries } = await emitAndDeliver(key);

    // Run the documentation's own snippet, as a receiver would copy it.
    const docs = readFileSync(join(__dirname, '..', '..', 'docs', 'webhooks.md'), 'utf8');
    const snippet = /<!-- verify-signature:start -->\s*```js\n([\s\S]*?)```/.exec(docs)?.[1];
    expect(snippet).toBeTruthy();
    const file = join(tmpdir(), `verify-${randomUUID()}.js`);
    writeFileSync(file, snippet!);
    const loadModule = createRequire(__filename);
    const { verifyBillingSignature } = loadModule(file) as {
      verifyBillingSignature: (secret: string, body: string, header: string) => boolean;
    };

    const [request] = receiver.requests('/signed');
    expect(request).toBeDefined();
    const header = String(request!.headers['x-billing-signature']);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyBillingSignature(secret, request!.body, header)).toBe(true);
    expect(verifyBillingSignature(secret, request!.body.replace('1200', '1300'), header)).toBe(false);
    expect(verifyBillingSignature(generateWebhookSecret(), request!.body, header)).toBe(false);

    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-billing-event-id']).toBe(emitted.eventId);
    expect(request!.headers['x-billing-event-type']).toBe('invoice.finalized');
    expect(request!.headers['x-billing-delivery-id']).toBe(deliveries[0]!._id);
    expect(JSON.parse(request!.body)).toEqual({
      id: emitted.eventId,
      type: 'invoice.finalized',
      created_at: '2026-11-21T10:00:00.000Z',
      organization_id: organizationId,
      data: { object: { id: key, status: 'finalized', total: '1200.0000' } },
    });
    expect(deliveries[0]!.webhook_endpoint_id).toBe(endpointId);
  });
});
