// Webhook endpoints (api-contract.md "Outgoing webhooks"): CRUD, the signing secret shown only at
// creation and rotation, soft delete, strict validation, tenant isolation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookEndpointResource, WebhookEndpointWithSecret } from '../../src/resources/webhook-endpoint';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

const SECRET = /^whsec_[A-Za-z0-9_-]{43}$/;

let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const nextUrl = (label = 'hook') => `https://example.com/${label}/${(seq += 1)}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Endpoint Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const api = {
  create: (payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: '/v1/webhook_endpoints', headers, payload: payload as Record<string, unknown> }),
  get: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'GET', url: `/v1/webhook_endpoints/${encodeURIComponent(id)}`, headers }),
  list: (query = '', headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url: `/v1/webhook_endpoints${query}`, headers }),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({
      method: 'PUT',
      url: `/v1/webhook_endpoints/${encodeURIComponent(id)}`,
      headers,
      payload: payload as Record<string, unknown>,
    }),
  remove: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'DELETE', url: `/v1/webhook_endpoints/${encodeURIComponent(id)}`, headers }),
  rotate: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: `/v1/webhook_endpoints/${encodeURIComponent(id)}/rotate_secret`, headers }),
};

async function createEndpoint(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<WebhookEndpointWithSecret> {
  const res = await api.create({ url: nextUrl(), ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<WebhookEndpointWithSecret>();
}

async function storedSecret(id: string): Promise<string | undefined> {
  const doc = await stack.db.models.WebhookEndpoint.findById(id).lean();
  return doc?.secret;
}

/** The response neither has a `secret` member nor carries the secret anywhere in its body. */
function expectNoSecret(body: string, secret: string) {
  expect(body).not.toContain(secret);
  expect(body).not.toContain('whsec_');
  const parsed = JSON.parse(body) as unknown;
  for (const item of Array.isArray(parsed) ? parsed : [parsed]) expect(item).not.toHaveProperty('secret');
}

describe('create', () => {
  it('answers 201 with the endpoint, its defaults and the signing secret', async () => {
    const url = nextUrl('create');
    const res = await api.create({ url });
    expect(res.statusCode, res.body).toBe(201);
    const endpoint = res.json<WebhookEndpointWithSecret>();
    expect(endpoint).toMatchObject({
      organization_id: org.id,
      url,
      signature_algo: 'hmac',
      status: 'active',
      event_types: [],
      deleted_at: null,
    });
    expect(endpoint.id).toMatch(UUID);
    expect(endpoint.created_at).toMatch(ISO_MS_UTC);
    expect(endpoint.updated_at).toMatch(ISO_MS_UTC);
    expect(endpoint.secret).toMatch(SECRET);
    // The secret given is the one that signs deliveries.
    expect(await storedSecret(endpoint.id)).toBe(endpoint.secret);
  });

  it('accepts an http URL, an explicit status, signature_algo and event_types (duplicates collapsed)', async () => {
    const url = 'http://127.0.0.1:9/receiver?x=1';
    const endpoint = await createEndpoint({
      url,
      status: 'inactive',
      signature_algo: 'hmac',
      event_types: ['invoice.finalized', 'invoice.paid', 'invoice.finalized'],
    });
    expect(endpoint).toMatchObject({ url, status: 'inactive', signature_algo: 'hmac' });
    expect([...endpoint.event_types].sort()).toEqual(['invoice.finalized', 'invoice.paid']);
  });

  it('accepts a URL of exactly 2048 characters', async () => {
    const base = 'https://example.com/';
    const url = base + 'a'.repeat(2048 - base.length);
    expect(url).toHaveLength(2048);
    const endpoint = await createEndpoint({ url });
    expect(endpoint.url).toBe(url);
  });

  it('gives each endpoint its own secret', async () => {
    const [a, b] = await Promise.all([createEndpoint(), createEndpoint()]);
    expect(a!.secret).toMatch(SECRET);
    expect(b!.secret).toMatch(SECRET);
    expect(a!.secret).not.toBe(b!.secret);
  });
});

describe('read: the secret is never shown again', () => {
  it('GET returns the endpoint without its secret', async () => {
    const created = await createEndpoint({ event_types: ['customer.created'] });
    const res = await api.get(created.id);
    expect(res.statusCode, res.body).toBe(200);
    const { secret, ...withoutSecret } = created;
    expect(res.json()).toEqual(withoutSecret);
    expectNoSecret(res.body, secret);
  });

  it('the list is newest first, carries X-Total-Count, pages with skip/limit, and shows no secret', async () => {
    const other = await createOrganization(stack.app, { name: 'Listing Org' });
    const created: WebhookEndpointWithSecret[] = [];
    for (let i = 0; i < 3; i += 1) created.push(await createEndpoint({}, other.headers));

    const res = await api.list('', other.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-total-count']).toBe('3');
    const items = res.json<WebhookEndpointResource[]>();
    expect(items.map((e) => e.id)).toEqual(created.map((e) => e.id).reverse());
    for (const e of created) expectNoSecret(res.body, e.secret);

    const page = await api.list('?skip=1&limit=1', other.headers);
    expect(page.statusCode, page.body).toBe(200);
    expect(page.headers['x-total-count']).toBe('3');
    expect(page.json<WebhookEndpointResource[]>().map((e) => e.id)).toEqual([created[1]!.id]);
  });

  it('is 404 webhook_endpoint_not_found for an unknown id', async () => {
    expectError(await api.get('00000000-0000-4000-8000-000000000000'), 404, 'webhook_endpoint_not_found');
  });
});

describe('update', () => {
  it('PUT changes url, status and event_types, and shows no secret', async () => {
    const created = await createEndpoint({ event_types: ['invoice.paid'] });
    const url = nextUrl('moved');
    const res = await api.update(created.id, { url, status: 'inactive', event_types: ['customer.created', 'payment.failed'] });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<WebhookEndpointResource>();
    expect(updated).toMatchObject({ id: created.id, url, status: 'inactive', signature_algo: 'hmac', deleted_at: null });
    expect([...updated.event_types].sort()).toEqual(['customer.created', 'payment.failed']);
    expectNoSecret(res.body, created.secret);

    const read = (await api.get(created.id)).json<WebhookEndpointResource>();
    expect(read).toMatchObject({ url, status: 'inactive' });
    expect([...read.event_types].sort()).toEqual(['customer.created', 'payment.failed']);
    // Updating does not change the secret.
    expect(await storedSecret(created.id)).toBe(created.secret);
  });

  it('PUT with only some fields leaves the others as they were; an empty event_types means all', async () => {
    const created = await createEndpoint({ event_types: ['invoice.paid'] });
    const deactivated = await api.update(created.id, { status: 'inactive' });
    expect(deactivated.statusCode, deactivated.body).toBe(200);
    expect(deactivated.json<WebhookEndpointResource>()).toMatchObject({
      url: created.url,
      status: 'inactive',
      event_types: ['invoice.paid'],
    });

    const back = await api.update(created.id, { status: 'active', event_types: [] });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json<WebhookEndpointResource>()).toMatchObject({ url: created.url, status: 'active', event_types: [] });
  });

  it('PUT is 404 for an unknown id', async () => {
    expectError(await api.update('00000000-0000-4000-8000-000000000000', { status: 'inactive' }), 404, 'webhook_endpoint_not_found');
  });
});

describe('delete', () => {
  it('soft-deletes: answers the endpoint with deleted_at, then it is 404 everywhere and not listed', async () => {
    const created = await createEndpoint();
    const keep = await createEndpoint();
    const res = await api.remove(created.id);
    expect(res.statusCode, res.body).toBe(200);
    const deleted = res.json<WebhookEndpointResource>();
    expect(deleted.id).toBe(created.id);
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expectNoSecret(res.body, created.secret);

    // Still stored (soft delete), with deleted_at set.
    const doc = await stack.db.models.WebhookEndpoint.findById(created.id).lean();
    expect(doc).not.toBeNull();
    expect(doc!.deleted_at).toBeInstanceOf(Date);

    expectError(await api.get(created.id), 404, 'webhook_endpoint_not_found');
    expectError(await api.update(created.id, { status: 'active' }), 404, 'webhook_endpoint_not_found');
    expectError(await api.rotate(created.id), 404, 'webhook_endpoint_not_found');
    expectError(await api.remove(created.id), 404, 'webhook_endpoint_not_found');

    const list = await api.list('?limit=1000');
    const ids = list.json<WebhookEndpointResource[]>().map((e) => e.id);
    expect(ids).not.toContain(created.id);
    expect(ids).toContain(keep.id);
    expect(Number(list.headers['x-total-count'])).toBe(ids.length);
  });
});

describe('rotate_secret', () => {
  it('returns a new, different secret; the stored secret is replaced; reads still hide it', async () => {
    const created = await createEndpoint();
    const res = await api.rotate(created.id);
    expect(res.statusCode, res.body).toBe(200);
    const rotated = res.json<WebhookEndpointWithSecret>();
    expect(rotated).toMatchObject({ id: created.id, url: created.url, status: 'active' });
    expect(rotated.secret).toMatch(SECRET);
    expect(rotated.secret).not.toBe(created.secret);
    expect(await storedSecret(created.id)).toBe(rotated.secret);

    const again = await api.rotate(created.id);
    expect(again.statusCode, again.body).toBe(200);
    const third = again.json<{ secret: string }>().secret;
    expect(third).not.toBe(rotated.secret);
    expect(await storedSecret(created.id)).toBe(third);

    const read = await api.get(created.id);
    expectNoSecret(read.body, third);
  });

  it('is 404 for an unknown id', async () => {
    expectError(await api.rotate('00000000-0000-4000-8000-000000000000'), 404, 'webhook_endpoint_not_found');
  });
});

describe('validation', () => {
  it('url missing is 422 naming url', async () => {
    expectValidationError(await api.create({ event_types: [] }), 'url');
  });

  it.each([
    ['not a URL', 'not a url'],
    ['an ftp:// URL', 'ftp://example.com/hooks'],
    ['a javascript: URL', 'javascript:alert(1)'],
    ['a number', 42],
    ['null', null],
  ])('url that is %s is 422 naming url', async (_name, url) => {
    expectValidationError(await api.create({ url }), 'url');
  });

  it('a url longer than 2048 characters is 422 naming url', async () => {
    const base = 'https://example.com/';
    const url = base + 'a'.repeat(2049 - base.length);
    expect(url).toHaveLength(2049);
    expectValidationError(await api.create({ url }), 'url');
  });

  it('an unknown event type in event_types is 422 naming event_types', async () => {
    const body = expectError(
      await api.create({ url: nextUrl(), event_types: ['customer.created', 'invoice.exploded'] }),
      422,
      'validation_error',
    );
    expect(body.errors.some((e) => e.path === 'event_types' || e.path.startsWith('event_types.'))).toBe(true);
    expect(body.message).toContain('event_types');
  });

  it('event_types that is not a list is 422 naming event_types', async () => {
    expectValidationError(await api.create({ url: nextUrl(), event_types: 'customer.created' }), 'event_types');
  });

  it('an unknown field is 422, named in message and errors', async () => {
    const res = await api.create({ url: nextUrl(), secret: 'whsec_mine', evnet_types: [] });
    const body = expectUnknownFields(res, ['secret', 'evnet_types']);
    expect(body.errors.map((e) => e.path).sort()).toEqual(['evnet_types', 'secret']);
  });

  it.each([['hmac-sha512'], ['HMAC'], ['none']])('signature_algo %s is 422 naming signature_algo', async (algo) => {
    expectValidationError(await api.create({ url: nextUrl(), signature_algo: algo }), 'signature_algo');
  });

  it.each([['paused'], ['deleted'], ['ACTIVE']])('status %s is 422 naming status', async (status) => {
    expectValidationError(await api.create({ url: nextUrl(), status }), 'status');
  });

  it('PUT validates the same way and changes nothing when refused', async () => {
    const created = await createEndpoint({ event_types: ['invoice.paid'] });
    expectValidationError(await api.update(created.id, { url: 'ftp://example.com/x' }), 'url');
    expectValidationError(await api.update(created.id, { url: 'https://example.com/' + 'a'.repeat(2030) }), 'url');
    expectValidationError(await api.update(created.id, { status: 'paused' }), 'status');
    expectValidationError(await api.update(created.id, { signature_algo: 'rsa' }), 'signature_algo');
    const badType = expectError(await api.update(created.id, { event_types: ['nope.nope'] }), 422, 'validation_error');
    expect(badType.errors.some((e) => e.path === 'event_types' || e.path.startsWith('event_types.'))).toBe(true);
    const unknown = expectUnknownFields(await api.update(created.id, { secret: 'whsec_x' }), ['secret']);
    expect(unknown.errors.map((e) => e.path)).toEqual(['secret']);

    const read = (await api.get(created.id)).json<WebhookEndpointResource>();
    expect(read).toMatchObject({ url: created.url, status: 'active', event_types: ['invoice.paid'] });
    expect(await storedSecret(created.id)).toBe(created.secret);
  });

  it('a refused create stores nothing', async () => {
    const other = await createOrganization(stack.app, { name: 'Refused Org' });
    expectValidationError(await api.create({ url: 'ftp://example.com/x' }, other.headers), 'url');
    expectValidationError(await api.create({ url: nextUrl(), status: 'paused' }, other.headers), 'status');
    expect(await stack.db.models.WebhookEndpoint.countDocuments({ organization_id: other.id })).toBe(0);
  });
});

describe('malformed bodies', () => {
  const send = (method: 'POST' | 'PUT', url: string, payload: string) =>
    stack.app.inject({ method, url, headers: { ...org.headers, 'content-type': 'application/json' }, payload });

  it.each([
    ['truncated JSON', '{"url": "https://example.com/x"'],
    ['a trailing comma', '{"url": "https://example.com/x",}'],
    ['single quotes', "{'url': 'https://example.com/x'}"],
  ])('%s is 400 invalid_json on create and update', async (_name, payload) => {
    const created = await createEndpoint();
    expectError(await send('POST', '/v1/webhook_endpoints', payload), 400, 'invalid_json');
    expectError(await send('PUT', `/v1/webhook_endpoints/${created.id}`, payload), 400, 'invalid_json');
  });
});

describe('authentication', () => {
  it('every endpoint is 401 unauthorized without a key, and writes nothing', async () => {
    const created = await createEndpoint();
    const before = await stack.db.models.WebhookEndpoint.countDocuments({});
    const none: Headers = {};
    expectError(await api.create({ url: nextUrl() }, none), 401, 'unauthorized');
    expectError(await api.list('', none), 401, 'unauthorized');
    expectError(await api.get(created.id, none), 401, 'unauthorized');
    expectError(await api.update(created.id, { status: 'inactive' }, none), 401, 'unauthorized');
    expectError(await api.remove(created.id, none), 401, 'unauthorized');
    expectError(await api.rotate(created.id, none), 401, 'unauthorized');
    expectError(await api.get(created.id, { authorization: 'Bearer not-a-key' }), 401, 'unauthorized');

    expect(await stack.db.models.WebhookEndpoint.countDocuments({})).toBe(before);
    const doc = await stack.db.models.WebhookEndpoint.findById(created.id).lean();
    expect(doc).toMatchObject({ status: 'active', deleted_at: null, secret: created.secret });
  });
});

describe('tenant isolation', () => {
  it("another organization gets 404 for this organization's endpoint on GET, PUT, DELETE and rotate, and does not list it", async () => {
    const created = await createEndpoint({ event_types: ['invoice.paid'] });
    const orgB = await createOrganization(stack.app, { name: 'Other Org' });
    const ownB = await createEndpoint({}, orgB.headers);

    expectError(await api.get(created.id, orgB.headers), 404, 'webhook_endpoint_not_found');
    expectError(
      await api.update(created.id, { status: 'inactive', url: nextUrl('hijack') }, orgB.headers),
      404,
      'webhook_endpoint_not_found',
    );
    expectError(await api.rotate(created.id, orgB.headers), 404, 'webhook_endpoint_not_found');
    expectError(await api.remove(created.id, orgB.headers), 404, 'webhook_endpoint_not_found');

    const listB = await api.list('?limit=1000', orgB.headers);
    expect(listB.statusCode).toBe(200);
    expect(listB.headers['x-total-count']).toBe('1');
    expect(listB.json<WebhookEndpointResource[]>().map((e) => e.id)).toEqual([ownB.id]);

    // Nothing changed for the owner.
    const read = await api.get(created.id);
    expect(read.statusCode).toBe(200);
    expect(read.json<WebhookEndpointResource>()).toMatchObject({
      url: created.url,
      status: 'active',
      deleted_at: null,
      event_types: ['invoice.paid'],
    });
    expect(await storedSecret(created.id)).toBe(created.secret);

    // And the other way round.
    expectError(await api.get(ownB.id), 404, 'webhook_endpoint_not_found');
    expect((await api.list('?limit=1000')).json<WebhookEndpointResource[]>().map((e) => e.id)).not.toContain(ownB.id);
  });
});
