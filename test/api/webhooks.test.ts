// Webhook deliveries through the API (api-contract.md "Outgoing webhooks"): an API write emits a
// lifecycle event that a worker on the run's Temporal dev server delivers to a real local receiver;
// GET /v1/webhooks lists and shows deliveries; POST /v1/webhooks/{id}/retry starts a failed one again.
// The dev server runs in real time: every receiver here answers 200 (the retry schedule is covered
// by test/workflows/webhook-delivery.test.ts on the time-skipping server).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { toLifecycleEventPayload } from '../../src/resources/lifecycle-event';
import { deliveryIdFor } from '../../src/webhooks/emit-event';
import { generateWebhookSecret, verifyWebhookSignature } from '../../src/webhooks/signature';
import type { CustomerResource } from '../../src/resources/customer';
import type { WebhookResource } from '../../src/resources/webhook';
import { eventually, expectError, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { startReceiver, type ReceivedRequest, type Receiver } from '../support/receiver';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let receiver: Receiver;
let worker: StackWorker;

function assertWorkerAlive() {
  worker.assertAlive();
}

beforeAll(async () => {
  [stack, receiver] = await Promise.all([createTestStack(), startReceiver()]);
  worker = await startStackWorker(stack);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await stack?.close();
});

type Headers = Record<string, string>;
let seq = 0;
const uniquePath = (label: string) => `/${label}/${(seq += 1)}-${randomUUID().slice(0, 8)}`;

async function createEndpoint(
  org: TestOrganization,
  path: string,
  extra: Record<string, unknown> = {},
): Promise<{ id: string; secret: string; path: string }> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/webhook_endpoints',
    headers: org.headers,
    payload: { url: receiver.url(path), ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  const body = res.json<{ id: string; secret: string }>();
  return { id: body.id, secret: body.secret, path };
}

async function createCustomer(org: TestOrganization): Promise<CustomerResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: org.headers,
    payload: { external_id: `wh-${randomUUID()}`, name: 'Webhook Customer' },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

const getWebhook = (id: string, headers: Headers) =>
  stack.app.inject({ method: 'GET', url: `/v1/webhooks/${encodeURIComponent(id)}`, headers });
const listWebhooks = (query: string, headers: Headers) => stack.app.inject({ method: 'GET', url: `/v1/webhooks${query}`, headers });
const retryWebhook = (id: string, headers: Headers) =>
  stack.app.inject({ method: 'POST', url: `/v1/webhooks/${encodeURIComponent(id)}/retry`, headers });

async function waitForRequests(path: string, count: number, timeoutMs = 20_000): Promise<ReceivedRequest[]> {
  return eventually(
    async () => {
      assertWorkerAlive();
      return receiver.requests(path).length >= count ? receiver.requests(path) : undefined;
    },
    timeoutMs,
    `${count} request(s) on ${path}`,
  );
}

async function waitForStatus(
  id: string,
  headers: Headers,
  status: WebhookResource['status'],
  timeoutMs = 20_000,
): Promise<WebhookResource> {
  return eventually(
    async () => {
      assertWorkerAlive();
      const res = await getWebhook(id, headers);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json<WebhookResource>();
      return body.status === status ? body : undefined;
    },
    timeoutMs,
    `webhook ${id} to be ${status}`,
  );
}

/** A delivery document written directly: a failed or pending one without waiting 3 hours. */
async function insertDelivery(
  org: TestOrganization,
  endpointId: string,
  fields: { status: 'pending' | 'failed'; attempts: number; type?: string },
): Promise<string> {
  const eventId = randomUUID();
  const id = deliveryIdFor(eventId, endpointId);
  const type = fields.type ?? 'invoice.finalized';
  const attemptLog = Array.from({ length: fields.attempts }, (_, i) => ({
    attempt: i + 1,
    attempted_at: new Date(Date.now() - (fields.attempts - i) * 60_000),
    http_status: 503,
    error: 'HTTP 503',
    duration_ms: 5,
  }));
  await stack.db.models.Webhook.create({
    _id: id,
    organization_id: org.id,
    webhook_endpoint_id: endpointId,
    event_id: eventId,
    webhook_type: type,
    payload: toLifecycleEventPayload({
      _id: eventId,
      type,
      occurred_at: new Date('2026-11-21T10:00:00.000Z'),
      organization_id: org.id,
      object: { id: `inv-${eventId}`, status: 'finalized', total: '1200.0000' },
    }),
    status: fields.status,
    attempts: fields.attempts,
    retries: Math.max(fields.attempts - 1, 0),
    http_status: fields.attempts > 0 ? 503 : null,
    last_error: fields.attempts > 0 ? 'HTTP 503' : null,
    last_attempt_at: attemptLog.at(-1)?.attempted_at ?? null,
    attempt_log: attemptLog,
  });
  return id;
}

describe('customer.created is delivered', () => {
  it('POST /v1/customers makes the endpoint receive a signed customer.created, and the delivery ends succeeded', async () => {
    const org = await createOrganization(stack.app, { name: 'Delivered Org' });
    const endpoint = await createEndpoint(org, uniquePath('all'));
    const customer = await createCustomer(org);

    const [request] = await waitForRequests(endpoint.path, 1);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-billing-event-type']).toBe('customer.created');
    const deliveryId = String(request!.headers['x-billing-delivery-id']);
    const eventId = String(request!.headers['x-billing-event-id']);
    expect(deliveryId).toMatch(UUID);
    expect(eventId).toMatch(UUID);
    expect(
      verifyWebhookSignature(
        endpoint.secret,
        request!.body,
        String(request!.headers['x-billing-signature']),
        Math.floor(Date.now() / 1000),
      ),
    ).toBe(true);
    expect(JSON.parse(request!.body)).toEqual({
      id: eventId,
      type: 'customer.created',
      created_at: customer.created_at,
      organization_id: org.id,
      data: { object: customer },
    });

    const delivery = await waitForStatus(deliveryId, org.headers, 'succeeded');
    expect(delivery).toMatchObject({
      id: deliveryId,
      organization_id: org.id,
      webhook_endpoint_id: endpoint.id,
      event_id: eventId,
      webhook_type: 'customer.created',
      status: 'succeeded',
      attempts: 1,
      retries: 0,
      http_status: 200,
      last_error: null,
    });
    expect(delivery.payload).toEqual(JSON.parse(request!.body));
    expect(delivery.last_attempt_at).toMatch(ISO_MS_UTC);
    expect(delivery.created_at).toMatch(ISO_MS_UTC);
    expect(delivery.attempt_log).toHaveLength(1);
    expect(delivery.attempt_log[0]).toMatchObject({ attempt: 1, http_status: 200, error: null });
    expect(delivery.attempt_log[0]!.attempted_at).toMatch(ISO_MS_UTC);
    expect(delivery.attempt_log[0]!.attempted_at).toBe(delivery.last_attempt_at);
    expect(delivery.attempt_log[0]!.duration_ms).toBeGreaterThanOrEqual(0);

    // The delivery is the workflow webhook/<id>, completed.
    const handle = stack.temporal.client.workflow.getHandle(workflowIds.webhook(deliveryId));
    expect(await handle.result()).toEqual({ status: 'succeeded', attempts: 1 });
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    // Exactly one request: nothing is sent again once the workflow has ended.
    await sleep(300);
    expect(receiver.requests(endpoint.path)).toHaveLength(1);
  });

  it('an endpoint subscribed only to other event types, and an inactive endpoint, receive nothing', async () => {
    const org = await createOrganization(stack.app, { name: 'Selective Org' });
    const subscribed = await createEndpoint(org, uniquePath('subscribed'), { event_types: ['customer.created'] });
    const others = await createEndpoint(org, uniquePath('others'), { event_types: ['invoice.finalized', 'payment.failed'] });
    const inactive = await createEndpoint(org, uniquePath('inactive'), { status: 'inactive' });
    const deactivated = await createEndpoint(org, uniquePath('deactivated'));
    const put = await stack.app.inject({
      method: 'PUT',
      url: `/v1/webhook_endpoints/${deactivated.id}`,
      headers: org.headers,
      payload: { status: 'inactive' },
    });
    expect(put.statusCode, put.body).toBe(200);
    const deleted = await createEndpoint(org, uniquePath('deleted'));
    const del = await stack.app.inject({ method: 'DELETE', url: `/v1/webhook_endpoints/${deleted.id}`, headers: org.headers });
    expect(del.statusCode, del.body).toBe(200);

    await createCustomer(org);

    // Deliveries are recorded before POST /v1/customers answers: only the subscribed endpoint has one.
    const all = await listWebhooks('', org.headers);
    expect(all.headers['x-total-count']).toBe('1');
    expect(all.json<WebhookResource[]>().map((w) => w.webhook_endpoint_id)).toEqual([subscribed.id]);

    // Once the subscribed endpoint has its request, give any stray delivery time to arrive too.
    await waitForRequests(subscribed.path, 1);
    await sleep(500);
    expect(receiver.requests(subscribed.path)).toHaveLength(1);
    for (const silent of [others, inactive, deactivated, deleted]) {
      expect(receiver.requests(silent.path), silent.path).toHaveLength(0);
      const listed = await listWebhooks(`?webhook_endpoint_id=${silent.id}`, org.headers);
      expect(listed.headers['x-total-count']).toBe('0');
    }
    expect(await stack.db.models.Webhook.countDocuments({ organization_id: org.id })).toBe(1);
  });
});

describe('GET /v1/webhooks', () => {
  let org: TestOrganization;
  let endpointA: { id: string; path: string };
  let endpointB: { id: string; path: string };
  let deliveredA: string;
  let deliveredB: string;
  let failedA: string;
  let pendingB: string;

  beforeAll(async () => {
    org = await createOrganization(stack.app, { name: 'Listing Org' });
    endpointA = await createEndpoint(org, uniquePath('list-a'));
    endpointB = await createEndpoint(org, uniquePath('list-b'), { event_types: ['customer.created', 'invoice.finalized'] });
    // Direct inserts that no workflow runs: one failed on A, one pending on B (invoice.finalized).
    failedA = await insertDelivery(org, endpointA.id, { status: 'failed', attempts: 10 });
    pendingB = await insertDelivery(org, endpointB.id, { status: 'pending', attempts: 0 });
    await sleep(5);
    await createCustomer(org);
    const [a] = await waitForRequests(endpointA.path, 1);
    const [b] = await waitForRequests(endpointB.path, 1);
    deliveredA = String(a!.headers['x-billing-delivery-id']);
    deliveredB = String(b!.headers['x-billing-delivery-id']);
    await waitForStatus(deliveredA, org.headers, 'succeeded');
    await waitForStatus(deliveredB, org.headers, 'succeeded');
  }, 60_000);

  const ids = (res: { json: <T>() => T }) => res.json<WebhookResource[]>().map((w) => w.id);

  it('lists every delivery of the organization, newest first, with X-Total-Count', async () => {
    const res = await listWebhooks('', org.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-total-count']).toBe('4');
    const listed = ids(res);
    expect([...listed].sort()).toEqual([deliveredA, deliveredB, failedA, pendingB].sort());
    // The two customer.created deliveries were created after the inserted ones.
    expect(listed.slice(2).sort()).toEqual([failedA, pendingB].sort());
    const createdAt = res.json<WebhookResource[]>().map((w) => w.created_at);
    expect([...createdAt].sort().reverse()).toEqual(createdAt);
  });

  it('filters by webhook_endpoint_id', async () => {
    const res = await listWebhooks(`?webhook_endpoint_id=${endpointA.id}`, org.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-total-count']).toBe('2');
    expect(ids(res).sort()).toEqual([deliveredA, failedA].sort());
    for (const w of res.json<WebhookResource[]>()) expect(w.webhook_endpoint_id).toBe(endpointA.id);

    const unknown = await listWebhooks(`?webhook_endpoint_id=${randomUUID()}`, org.headers);
    expect(unknown.statusCode).toBe(200);
    expect(unknown.headers['x-total-count']).toBe('0');
    expect(unknown.json()).toEqual([]);
  });

  it('filters by webhook_type', async () => {
    const created = await listWebhooks('?webhook_type=customer.created', org.headers);
    expect(created.headers['x-total-count']).toBe('2');
    expect(ids(created).sort()).toEqual([deliveredA, deliveredB].sort());

    const finalized = await listWebhooks('?webhook_type=invoice.finalized', org.headers);
    expect(finalized.headers['x-total-count']).toBe('2');
    expect(ids(finalized).sort()).toEqual([failedA, pendingB].sort());
  });

  it('filters by status', async () => {
    const succeeded = await listWebhooks('?status=succeeded', org.headers);
    expect(succeeded.headers['x-total-count']).toBe('2');
    expect(ids(succeeded).sort()).toEqual([deliveredA, deliveredB].sort());

    const failed = await listWebhooks('?status=failed', org.headers);
    expect(failed.headers['x-total-count']).toBe('1');
    expect(ids(failed)).toEqual([failedA]);

    const pending = await listWebhooks('?status=pending', org.headers);
    expect(pending.headers['x-total-count']).toBe('1');
    expect(ids(pending)).toEqual([pendingB]);
  });

  it('combines filters, and pages with skip/limit while X-Total-Count stays the total', async () => {
    const combined = await listWebhooks(`?webhook_endpoint_id=${endpointB.id}&status=succeeded&webhook_type=customer.created`, org.headers);
    expect(combined.headers['x-total-count']).toBe('1');
    expect(ids(combined)).toEqual([deliveredB]);

    const none = await listWebhooks(`?webhook_endpoint_id=${endpointB.id}&status=failed`, org.headers);
    expect(none.headers['x-total-count']).toBe('0');
    expect(none.json()).toEqual([]);

    const all = ids(await listWebhooks('', org.headers));
    const page = await listWebhooks('?skip=1&limit=2', org.headers);
    expect(page.headers['x-total-count']).toBe('4');
    expect(ids(page)).toEqual(all.slice(1, 3));
  });

  it('GET /v1/webhooks/{id} shows a failed delivery with its attempts', async () => {
    const res = await getWebhook(failedA, org.headers);
    expect(res.statusCode, res.body).toBe(200);
    const w = res.json<WebhookResource>();
    expect(w).toMatchObject({ id: failedA, status: 'failed', attempts: 10, retries: 9, http_status: 503, last_error: 'HTTP 503' });
    expect(w.attempt_log.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    for (const a of w.attempt_log) expect(a.attempted_at).toMatch(ISO_MS_UTC);
  });

  it('is 422 for a status filter outside pending/succeeded/failed, and for a bad limit', async () => {
    expectValidationError(await listWebhooks('?status=bogus', org.headers), 'status');
    expectValidationError(await listWebhooks('?status=SUCCEEDED', org.headers), 'status');
    expectValidationError(await listWebhooks('?limit=0', org.headers), 'limit');
  });

  it('is 401 without a key', async () => {
    expectError(await listWebhooks('', {}), 401, 'unauthorized');
    expectError(await getWebhook(deliveredA, {}), 401, 'unauthorized');
    expectError(await retryWebhook(failedA, {}), 401, 'unauthorized');
    expect((await stack.db.models.Webhook.findById(failedA).lean())!.status).toBe('failed');
  });

  it("another organization neither lists nor reads this organization's deliveries, nor retries them", async () => {
    const other = await createOrganization(stack.app, { name: 'Nosy Org' });
    const list = await listWebhooks('', other.headers);
    expect(list.statusCode).toBe(200);
    expect(list.headers['x-total-count']).toBe('0');
    expect(list.json()).toEqual([]);
    const filtered = await listWebhooks(`?webhook_endpoint_id=${endpointA.id}`, other.headers);
    expect(filtered.headers['x-total-count']).toBe('0');

    expectError(await getWebhook(deliveredA, other.headers), 404, 'webhook_not_found');
    expectError(await getWebhook(failedA, other.headers), 404, 'webhook_not_found');
    expectError(await retryWebhook(failedA, other.headers), 404, 'webhook_not_found');
    // The refused retry did not reopen it.
    expect((await stack.db.models.Webhook.findById(failedA).lean())!.status).toBe('failed');
  });

  it('is 404 webhook_not_found for an unknown id', async () => {
    expectError(await getWebhook(randomUUID(), org.headers), 404, 'webhook_not_found');
    expectError(await retryWebhook(randomUUID(), org.headers), 404, 'webhook_not_found');
  });
});

describe('POST /v1/webhooks/{id}/retry', () => {
  it('is 400 invalid_state_transition for a succeeded delivery, and changes nothing', async () => {
    const org = await createOrganization(stack.app, { name: 'Retry Succeeded Org' });
    const endpoint = await createEndpoint(org, uniquePath('retry-ok'));
    await createCustomer(org);
    const [request] = await waitForRequests(endpoint.path, 1);
    const id = String(request!.headers['x-billing-delivery-id']);
    const before = await waitForStatus(id, org.headers, 'succeeded');

    expectError(await retryWebhook(id, org.headers), 400, 'invalid_state_transition');
    const after = (await getWebhook(id, org.headers)).json<WebhookResource>();
    expect(after).toEqual(before);
    await sleep(300);
    expect(receiver.requests(endpoint.path)).toHaveLength(1);
  });

  it('is 400 invalid_state_transition for a pending delivery, and changes nothing', async () => {
    const org = await createOrganization(stack.app, { name: 'Retry Pending Org' });
    const endpoint = await createEndpoint(org, uniquePath('retry-pending'));
    const id = await insertDelivery(org, endpoint.id, { status: 'pending', attempts: 2 });

    expectError(await retryWebhook(id, org.headers), 400, 'invalid_state_transition');
    const doc = await stack.db.models.Webhook.findById(id).lean();
    expect(doc).toMatchObject({ status: 'pending', attempts: 2 });
    expect(receiver.requests(endpoint.path)).toHaveLength(0);
  });

  it('reopens a failed delivery: answers 200 pending, and a new run delivers it as attempt 11', async () => {
    const org = await createOrganization(stack.app, { name: 'Retry Failed Org' });
    const endpoint = await createEndpoint(org, uniquePath('retry-failed'));
    receiver.on(endpoint.path, () => 200);
    const id = await insertDelivery(org, endpoint.id, { status: 'failed', attempts: 10 });

    const res = await retryWebhook(id, org.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<WebhookResource>()).toMatchObject({ id, status: 'pending', attempts: 10, webhook_endpoint_id: endpoint.id });

    const [request] = await waitForRequests(endpoint.path, 1);
    expect(request!.headers['x-billing-delivery-id']).toBe(id);
    const delivered = await waitForStatus(id, org.headers, 'succeeded');
    expect(delivered).toMatchObject({ attempts: 11, retries: 10, http_status: 200, last_error: null });
    expect(delivered.attempt_log).toHaveLength(11);
    expect(delivered.attempt_log.at(-1)).toMatchObject({ attempt: 11, http_status: 200, error: null });
    expect(delivered.last_attempt_at).toBe(delivered.attempt_log.at(-1)!.attempted_at);
    expect(JSON.parse(request!.body)).toEqual(delivered.payload);
    expect(
      verifyWebhookSignature(
        endpoint.secret,
        request!.body,
        String(request!.headers['x-billing-signature']),
        Math.floor(Date.now() / 1000),
      ),
    ).toBe(true);

    // The new run continued the count: it made attempt 11 only.
    const handle = stack.temporal.client.workflow.getHandle(workflowIds.webhook(id));
    expect(await handle.result()).toEqual({ status: 'succeeded', attempts: 11 });
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    await sleep(300);
    expect(receiver.requests(endpoint.path)).toHaveLength(1);

    // Once succeeded, another retry is refused.
    expectError(await retryWebhook(id, org.headers), 400, 'invalid_state_transition');
  });

  it('two concurrent retries of one failed delivery: one answers 200, the other 400, and it is delivered once', async () => {
    const org = await createOrganization(stack.app, { name: 'Retry Twice Org' });
    const endpoint = await createEndpoint(org, uniquePath('retry-twice'));
    const id = await insertDelivery(org, endpoint.id, { status: 'failed', attempts: 10 });

    const answers = await Promise.all([retryWebhook(id, org.headers), retryWebhook(id, org.headers)]);
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 400]);
    expectError(
      answers.find((r) => r.statusCode === 400)!,
      400,
      'invalid_state_transition',
    );

    const delivered = await waitForStatus(id, org.headers, 'succeeded');
    expect(delivered).toMatchObject({ attempts: 11 });
    await sleep(500);
    expect(receiver.requests(endpoint.path)).toHaveLength(1);
  });

  it('a retried delivery whose endpoint was deleted meanwhile sends nothing and ends failed again', async () => {
    const org = await createOrganization(stack.app, { name: 'Retry Deleted Org' });
    const endpoint = await createEndpoint(org, uniquePath('retry-deleted'));
    const id = await insertDelivery(org, endpoint.id, { status: 'failed', attempts: 10 });
    const del = await stack.app.inject({ method: 'DELETE', url: `/v1/webhook_endpoints/${endpoint.id}`, headers: org.headers });
    expect(del.statusCode, del.body).toBe(200);

    const res = await retryWebhook(id, org.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<WebhookResource>().status).toBe('pending');
    const handle = stack.temporal.client.workflow.getHandle(workflowIds.webhook(id));
    expect(await handle.result()).toEqual({ status: 'abandoned', attempts: 10 });
    const after = (await getWebhook(id, org.headers)).json<WebhookResource>();
    expect(after).toMatchObject({ status: 'failed', attempts: 10, last_error: 'endpoint deleted' });
    expect(after.attempt_log).toHaveLength(10);
    expect(receiver.requests(endpoint.path)).toHaveLength(0);
  });

  it('a retried delivery is signed with the endpoint secret as rotated since', async () => {
    const org = await createOrganization(stack.app, { name: 'Retry Rotated Org' });
    const endpoint = await createEndpoint(org, uniquePath('retry-rotated'));
    const id = await insertDelivery(org, endpoint.id, { status: 'failed', attempts: 10 });
    const rotate = await stack.app.inject({
      method: 'POST',
      url: `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`,
      headers: org.headers,
    });
    expect(rotate.statusCode, rotate.body).toBe(200);
    const newSecret = rotate.json<{ secret: string }>().secret;

    expect((await retryWebhook(id, org.headers)).statusCode).toBe(200);
    const [request] = await waitForRequests(endpoint.path, 1);
    const header = String(request!.headers['x-billing-signature']);
    const now = Math.floor(Date.now() / 1000);
    expect(verifyWebhookSignature(newSecret, request!.body, header, now)).toBe(true);
    expect(verifyWebhookSignature(endpoint.secret, request!.body, header, now)).toBe(false);
    expect(verifyWebhookSignature(generateWebhookSecret(), request!.body, header, now)).toBe(false);
    await waitForStatus(id, org.headers, 'succeeded');
  });
});
