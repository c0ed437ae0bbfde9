// The one door for lifecycle events (src/webhooks/emit-event.ts): emitting is idempotent on the
// idempotency key, so a retried activity records one event, one delivery and one delivery workflow
// per matching endpoint, and never sends a completed delivery again. Runs on the run's Temporal dev
// server (real time) with a real local receiver answering 200; no retry backoff is waited for.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../activities';
import type { WebhookEventType } from '../../src/domain/webhook-schedule';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { deliveryIdFor, emitEvent, type EmitDeps, type EmitEventInput, type EmittedEvent } from '../../src/webhooks/emit-event';
import { generateWebhookSecret } from '../../src/webhooks/signature';
import type { WebhookDeliveryResult } from '../../workflows/webhook-delivery';
import { eventually, sleep, UUID } from '../support/http';
import { startReceiver, type Receiver } from '../support/receiver';
import { createTestStack, type TestStack } from '../support/stack';
import { bundleWorkflows } from '../support/temporal';

let stack: TestStack;
let connection: NativeConnection;
let receiver: Receiver;
let bundle: WorkflowBundleWithSourceMap;
let deps: EmitDeps;

beforeAll(async () => {
  [stack, connection, receiver, bundle] = await Promise.all([
    createTestStack(),
    NativeConnection.connect({ address: inject('temporalAddress') }),
    startReceiver(),
    bundleWorkflows(),
  ]);
  deps = { models: stack.db.models, temporal: stack.temporal };
}, 120_000);

afterAll(async () => {
  await connection?.close();
  await receiver?.close();
  await stack?.close();
});

/** Runs a worker on the stack's task queue while `fn` runs. */
async function withWorker<T>(fn: () => Promise<T>): Promise<T> {
  const worker = await Worker.create({
    connection,
    taskQueue: stack.taskQueue,
    workflowBundle: bundle,
    activities: createActivities({ db: stack.db, temporal: stack.temporal }),
  });
  return worker.runUntil(fn);
}

/** Runs a worker until every given delivery workflow has ended, and returns their results. */
function deliver(deliveryIds: string[]): Promise<WebhookDeliveryResult[]> {
  return withWorker(() =>
    Promise.all(
      deliveryIds.map((id) => stack.temporal.client.workflow.getHandle(workflowIds.webhook(id)).result() as Promise<WebhookDeliveryResult>),
    ),
  );
}

let seq = 0;
const uniquePath = (label: string) => `/${label}/${(seq += 1)}-${randomUUID().slice(0, 8)}`;

async function endpoint(organizationId: string, label: string, extra: Record<string, unknown> = {}) {
  const path = uniquePath(label);
  const doc = await stack.db.models.WebhookEndpoint.create({
    organization_id: organizationId,
    url: receiver.url(path),
    secret: generateWebhookSecret(),
    ...extra,
  });
  return { id: doc._id, path };
}

function invoiceEvent(organizationId: string, type: WebhookEventType = 'invoice.finalized'): EmitEventInput {
  const invoiceId = randomUUID();
  return {
    organizationId,
    type,
    idempotencyKey: `invoice/${invoiceId}/${type}`,
    object: { id: invoiceId, status: 'finalized', total_amount_cents: 120000 },
    occurredAt: new Date('2026-11-21T10:00:00.000Z'),
  };
}

const describeDelivery = (deliveryId: string) => stack.temporal.client.workflow.getHandle(workflowIds.webhook(deliveryId)).describe();

/** Workflow executions (every run) that visibility lists for a query, once it has caught up to `expected`. */
async function listExecutions(query: string, expected: number): Promise<{ workflowId: string; runId: string }[]> {
  const collect = async () => {
    const found: { workflowId: string; runId: string }[] = [];
    for await (const wf of stack.temporal.client.workflow.list({ query })) found.push({ workflowId: wf.workflowId, runId: wf.runId });
    return found;
  };
  // Visibility is eventually consistent: wait until it shows at least what is expected, then
  // look once more so that a late extra execution is caught too.
  await eventually(
    async () => ((await collect()).length >= expected ? true : undefined),
    10_000,
    `${expected} execution(s) for ${query}`,
  ).catch(() => undefined);
  await sleep(300);
  return collect();
}

describe('emitEvent: idempotent on the idempotency key', () => {
  it('emitting twice records one event, one delivery and one workflow per matching endpoint, and returns the same ids', async () => {
    const org = randomUUID();
    const otherOrg = randomUUID();
    const all = await endpoint(org, 'all');
    const subscribed = await endpoint(org, 'subscribed', { event_types: ['invoice.finalized', 'invoice.paid'] });
    const otherTypes = await endpoint(org, 'other-types', { event_types: ['invoice.paid', 'customer.created'] });
    const inactive = await endpoint(org, 'inactive', { status: 'inactive' });
    const deleted = await endpoint(org, 'deleted', { deleted_at: new Date(), status: 'inactive' });
    const foreign = await endpoint(otherOrg, 'foreign');
    const input = invoiceEvent(org);

    const first = await emitEvent(deps, input);
    expect(first.eventId).toMatch(UUID);
    expect([...first.deliveryIds].sort()).toEqual(
      [deliveryIdFor(first.eventId, all.id), deliveryIdFor(first.eventId, subscribed.id)].sort(),
    );
    const runIds = new Map<string, string>();
    for (const id of first.deliveryIds) {
      const description = await describeDelivery(id);
      expect(description.status.name).toBe('RUNNING');
      runIds.set(id, description.runId);
    }

    // The retried activity: same input, while the first deliveries still wait for a worker.
    const second = await emitEvent(deps, input);
    expect(second.eventId).toBe(first.eventId);
    expect([...second.deliveryIds].sort()).toEqual([...first.deliveryIds].sort());

    const { LifecycleEvent, Webhook } = stack.db.models;
    expect(await LifecycleEvent.countDocuments({ organization_id: org })).toBe(1);
    expect(await LifecycleEvent.countDocuments({ _id: first.eventId })).toBe(1);
    expect(await Webhook.countDocuments({ event_id: first.eventId })).toBe(2);
    expect(await Webhook.countDocuments({ organization_id: org })).toBe(2);
    for (const ep of [all, subscribed]) expect(await Webhook.countDocuments({ webhook_endpoint_id: ep.id }), ep.path).toBe(1);
    for (const ep of [otherTypes, inactive, deleted, foreign])
      expect(await Webhook.countDocuments({ webhook_endpoint_id: ep.id }), ep.path).toBe(0);
    expect(await LifecycleEvent.countDocuments({ organization_id: otherOrg })).toBe(0);
    expect(await Webhook.countDocuments({ organization_id: otherOrg })).toBe(0);

    // Still the very same workflow runs: the second emission started nothing.
    for (const id of first.deliveryIds) {
      const description = await describeDelivery(id);
      expect(description.runId).toBe(runIds.get(id));
      expect(description.status.name).toBe('RUNNING');
    }
    const executions = await listExecutions(`BillingOrganizationId = "${org}" AND BillingEntityType = "webhook"`, 2);
    expect(executions.map((e) => e.workflowId).sort()).toEqual(first.deliveryIds.map((id) => workflowIds.webhook(id)).sort());
    expect(await listExecutions(`BillingOrganizationId = "${otherOrg}"`, 0)).toEqual([]);

    // Once a worker runs: each matching endpoint receives the event exactly once, the others nothing.
    const results = await deliver(first.deliveryIds);
    expect(results).toEqual([
      { status: 'succeeded', attempts: 1 },
      { status: 'succeeded', attempts: 1 },
    ]);
    expect(receiver.requests(all.path)).toHaveLength(1);
    expect(receiver.requests(subscribed.path)).toHaveLength(1);
    for (const ep of [otherTypes, inactive, deleted, foreign]) expect(receiver.requests(ep.path), ep.path).toHaveLength(0);
    for (const ep of [all, subscribed]) {
      const [request] = receiver.requests(ep.path);
      expect(request!.headers['x-billing-event-id']).toBe(first.eventId);
      expect(JSON.parse(request!.body)).toMatchObject({
        id: first.eventId,
        type: 'invoice.finalized',
        organization_id: org,
        data: { object: input.object },
      });
    }
  });

  it('after a delivery has completed, emitting again sends nothing more', async () => {
    const org = randomUUID();
    const ep = await endpoint(org, 'completed');
    const input = invoiceEvent(org, 'invoice.paid');

    const first = await emitEvent(deps, input);
    expect(first.deliveryIds).toEqual([deliveryIdFor(first.eventId, ep.id)]);
    const deliveryId = first.deliveryIds[0]!;
    expect(await deliver([deliveryId])).toEqual([{ status: 'succeeded', attempts: 1 }]);
    expect(receiver.requests(ep.path)).toHaveLength(1);
    const completed = await describeDelivery(deliveryId);
    expect(completed.status.name).toBe('COMPLETED');

    const again = await emitEvent(deps, input);
    expect(again).toEqual(first);
    const after = await describeDelivery(deliveryId);
    expect(after.runId).toBe(completed.runId);
    expect(after.status.name).toBe('COMPLETED');

    // Give a wrongly started run every chance to deliver.
    await withWorker(() => sleep(1500));
    expect(receiver.requests(ep.path)).toHaveLength(1);
    const delivery = await stack.db.models.Webhook.findById(deliveryId).lean();
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1, retries: 0 });
    expect(delivery!.attempt_log).toHaveLength(1);
    expect(await stack.db.models.Webhook.countDocuments({ organization_id: org })).toBe(1);
    expect(await stack.db.models.LifecycleEvent.countDocuments({ organization_id: org })).toBe(1);
    expect(await listExecutions(`WorkflowId = "${workflowIds.webhook(deliveryId)}"`, 1)).toHaveLength(1);
  });

  it('a retry that carries a changed object keeps the payload of the first emission', async () => {
    const org = randomUUID();
    const ep = await endpoint(org, 'first-payload');
    const input = invoiceEvent(org);

    const first = await emitEvent(deps, input);
    const second = await emitEvent(deps, {
      ...input,
      object: { ...input.object, status: 'voided' },
      occurredAt: new Date('2026-11-22T10:00:00.000Z'),
    });
    expect(second).toEqual(first);

    const event = await stack.db.models.LifecycleEvent.findById(first.eventId).lean();
    expect(event!.object).toEqual(input.object);
    expect(event!.occurred_at.toISOString()).toBe('2026-11-21T10:00:00.000Z');
    await deliver(first.deliveryIds);
    const requests = receiver.requests(ep.path);
    expect(requests).toHaveLength(1);
    expect(JSON.parse(requests[0]!.body)).toMatchObject({
      created_at: '2026-11-21T10:00:00.000Z',
      data: { object: { status: 'finalized' } },
    });
  });

  it('concurrent emissions of one event (a retry overlapping a timed-out attempt) still record one of each', async () => {
    const org = randomUUID();
    const a = await endpoint(org, 'concurrent-a');
    const b = await endpoint(org, 'concurrent-b', { event_types: ['invoice.finalized'] });
    const input = invoiceEvent(org);

    const results = await Promise.all([emitEvent(deps, input), emitEvent(deps, input), emitEvent(deps, input)]);
    const [first] = results;
    for (const r of results) {
      expect(r.eventId).toBe(first!.eventId);
      expect([...r.deliveryIds].sort()).toEqual([deliveryIdFor(first!.eventId, a.id), deliveryIdFor(first!.eventId, b.id)].sort());
    }
    expect(await stack.db.models.LifecycleEvent.countDocuments({ organization_id: org })).toBe(1);
    expect(await stack.db.models.Webhook.countDocuments({ organization_id: org })).toBe(2);

    expect(await deliver(first!.deliveryIds)).toEqual([
      { status: 'succeeded', attempts: 1 },
      { status: 'succeeded', attempts: 1 },
    ]);
    await sleep(300);
    expect(receiver.requests(a.path)).toHaveLength(1);
    expect(receiver.requests(b.path)).toHaveLength(1);
  });

  it('the same idempotency key in two organizations is two events, each delivered only to its own endpoints', async () => {
    const orgA = randomUUID();
    const orgB = randomUUID();
    const epA = await endpoint(orgA, 'org-a');
    const epB = await endpoint(orgB, 'org-b');
    const key = `customer/${randomUUID()}/created`;
    const common = { type: 'customer.created' as const, idempotencyKey: key, occurredAt: new Date('2026-11-21T10:00:00.000Z') };

    const emittedA = await emitEvent(deps, { ...common, organizationId: orgA, object: { id: 'cus-a' } });
    const emittedB = await emitEvent(deps, { ...common, organizationId: orgB, object: { id: 'cus-b' } });
    expect(emittedA.eventId).not.toBe(emittedB.eventId);
    expect(emittedA.deliveryIds).toEqual([deliveryIdFor(emittedA.eventId, epA.id)]);
    expect(emittedB.deliveryIds).toEqual([deliveryIdFor(emittedB.eventId, epB.id)]);

    await deliver([...emittedA.deliveryIds, ...emittedB.deliveryIds]);
    const [toA] = receiver.requests(epA.path);
    const [toB] = receiver.requests(epB.path);
    expect(receiver.requests(epA.path)).toHaveLength(1);
    expect(receiver.requests(epB.path)).toHaveLength(1);
    expect(JSON.parse(toA!.body)).toMatchObject({ id: emittedA.eventId, organization_id: orgA, data: { object: { id: 'cus-a' } } });
    expect(JSON.parse(toB!.body)).toMatchObject({ id: emittedB.eventId, organization_id: orgB, data: { object: { id: 'cus-b' } } });
  });
});

describe('emitLifecycleEvent activity', () => {
  it('run twice (a retried activity) gives the same ids, one event, one delivery and one workflow per endpoint', async () => {
    const org = randomUUID();
    const customerId = randomUUID();
    const ep = await endpoint(org, 'activity');
    const quiet = await endpoint(org, 'activity-quiet', { event_types: ['payment.failed'] });
    const activities = createActivities({ db: stack.db, temporal: stack.temporal });
    const input = {
      organizationId: org,
      type: 'subscription.started' as const,
      idempotencyKey: `subscription/${randomUUID()}/started`,
      object: { id: randomUUID(), status: 'active' },
      occurredAt: '2026-11-21T10:00:00.000Z',
      customerId,
    };
    // Each call is one attempt of the activity, in its own activity context.
    const runActivity = (attempt: number): Promise<EmittedEvent> =>
      new MockActivityEnvironment({ attempt }).run(activities.emitLifecycleEvent, input);

    const first = await runActivity(1);
    expect(first.deliveryIds).toEqual([deliveryIdFor(first.eventId, ep.id)]);
    const deliveryId = first.deliveryIds[0]!;
    const started = await describeDelivery(deliveryId);

    const second = await runActivity(2);
    expect(second).toEqual(first);

    expect(await stack.db.models.LifecycleEvent.countDocuments({ organization_id: org })).toBe(1);
    expect(await stack.db.models.Webhook.countDocuments({ organization_id: org })).toBe(1);
    expect(await stack.db.models.Webhook.countDocuments({ webhook_endpoint_id: quiet.id })).toBe(0);
    const event = await stack.db.models.LifecycleEvent.findById(first.eventId).lean();
    expect(event).toMatchObject({ type: 'subscription.started', organization_id: org });
    expect(event!.occurred_at.toISOString()).toBe('2026-11-21T10:00:00.000Z');

    const description = await describeDelivery(deliveryId);
    expect(description.runId).toBe(started.runId);
    const executions = await listExecutions(`BillingCustomerId = "${customerId}"`, 1);
    expect(executions.map((e) => e.workflowId)).toEqual([workflowIds.webhook(deliveryId)]);

    expect(await deliver([deliveryId])).toEqual([{ status: 'succeeded', attempts: 1 }]);
    // A third attempt of the activity after the delivery completed sends nothing more.
    expect(await runActivity(3)).toEqual(first);
    const afterThird = await describeDelivery(deliveryId);
    expect(afterThird.runId).toBe(started.runId);
    expect(afterThird.status.name).toBe('COMPLETED');
    await withWorker(() => sleep(1000));
    expect(receiver.requests(ep.path)).toHaveLength(1);
    expect(receiver.requests(quiet.path)).toHaveLength(0);
    expect(JSON.parse(receiver.requests(ep.path)[0]!.body)).toMatchObject({
      id: first.eventId,
      type: 'subscription.started',
      created_at: input.occurredAt,
    });
  });
});
