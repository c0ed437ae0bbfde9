// Conventions for every endpoint (api-contract.md): pagination, malformed bodies, unknown routes,
// trailing slashes, request ids, the 500 body, health and readiness, the OpenAPI document.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import { expectError, expectValidationError, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Conventions Org' });
});
afterAll(async () => stack?.close());

const BASE = Date.parse('2026-01-01T00:00:00.000Z');

/** Customers written straight to the collection, with created_at chosen by the test. */
async function seedCustomers(organizationId: string, rows: { id?: string; externalId: string; createdAt: Date }[]) {
  await stack.db.models.Customer.collection.insertMany(
    rows.map((r) => ({
      _id: (r.id ?? randomUUID()) as never,
      organization_id: organizationId,
      external_id: r.externalId,
      name: null,
      email: null,
      currency: 'USD',
      billing_metadata: {},
      net_payment_term: null,
      invoice_grace_period: null,
      timezone: null,
      test_clock_id: null,
      deleted_at: null,
      created_at: r.createdAt,
      updated_at: r.createdAt,
    })),
  );
}

function get(url: string, headers: Record<string, string> = org.headers) {
  return stack.app.inject({ method: 'GET', url, headers });
}

describe('pagination', () => {
  let paged: TestOrganization;
  const total = 105;

  beforeAll(async () => {
    paged = await createOrganization(stack.app, { name: 'Paged Org' });
    // Inserted in shuffled order so that only the sort can produce newest-first.
    // (37 is coprime with 105, so k -> 37k mod 105 visits every index once.)
    const rows = Array.from({ length: total }, (_, k) => {
      const i = (k * 37) % total;
      return { externalId: `seq-${i}`, createdAt: new Date(BASE + i * 1000) };
    });
    await seedCustomers(paged.id, rows);
  });

  const newestFirst = () => Array.from({ length: total }, (_, i) => `seq-${total - 1 - i}`);

  it('defaults to skip 0 and limit 100, newest first, with X-Total-Count', async () => {
    const res = await get('/v1/customers', paged.headers);
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-total-count']).toBe(String(total));
    const ids = res.json<CustomerResource[]>().map((c) => c.external_id);
    expect(ids).toEqual(newestFirst().slice(0, 100));
  });

  it('pages with skip and limit; X-Total-Count is the total, not the page', async () => {
    const pages: string[] = [];
    for (let skip = 0; skip < total; skip += 40) {
      const res = await get(`/v1/customers?skip=${skip}&limit=40`, paged.headers);
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-total-count']).toBe(String(total));
      pages.push(...res.json<CustomerResource[]>().map((c) => c.external_id));
    }
    expect(pages).toEqual(newestFirst());
  });

  it.each([
    ['limit=1', 1],
    ['limit=1000', total],
    ['skip=100', 5],
    ['skip=104&limit=10', 1],
    ['skip=105', 0],
    ['skip=100000', 0],
  ])('answers %s with %i items', async (query, count) => {
    const res = await get(`/v1/customers?${query}`, paged.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<unknown[]>()).toHaveLength(count);
    expect(res.headers['x-total-count']).toBe(String(total));
  });

  it('breaks created_at ties by id, the same way on every page', async () => {
    const tied = await createOrganization(stack.app, { name: 'Tied Org' });
    const at = new Date(BASE);
    const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await seedCustomers(tied.id, [
      ...ids.map((id, i) => ({ id, externalId: `tie-${i}`, createdAt: at })),
      { externalId: 'newer', createdAt: new Date(BASE + 1) },
      { externalId: 'older', createdAt: new Date(BASE - 1) },
    ]);
    const all = (await get('/v1/customers', tied.headers)).json<CustomerResource[]>();
    expect(all[0]?.external_id).toBe('newer');
    expect(all[5]?.external_id).toBe('older');
    const tiedIds = all.slice(1, 5).map((c) => c.id);
    const ascending = [...ids].sort();
    expect([ascending, [...ascending].reverse()]).toContainEqual(tiedIds);

    const onePerPage: string[] = [];
    for (let skip = 0; skip < 6; skip += 1) {
      onePerPage.push(...(await get(`/v1/customers?skip=${skip}&limit=1`, tied.headers)).json<CustomerResource[]>().map((c) => c.id));
    }
    expect(onePerPage).toEqual(all.map((c) => c.id));
  });

  it('lists customers created through the API newest first', async () => {
    const fresh = await createOrganization(stack.app, { name: 'Fresh Org' });
    const created: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      await new Promise((r) => setTimeout(r, 3));
      const res = await stack.app.inject({
        method: 'POST',
        url: '/v1/customers',
        headers: fresh.headers,
        payload: { external_id: `api-${i}` },
      });
      created.push(res.json<CustomerResource>().external_id);
    }
    const res = await get('/v1/customers', fresh.headers);
    expect(res.json<CustomerResource[]>().map((c) => c.external_id)).toEqual(created.reverse());
  });

  it.each(['limit=0', 'limit=1001', 'limit=-5', 'skip=-1', 'limit=abc', 'skip=abc', 'limit=1.5', 'limit='])(
    '%s is 422 naming the parameter',
    async (query) => {
      const res = await get(`/v1/customers?${query}`, paged.headers);
      expectValidationError(res, query.split('=')[0]!);
    },
  );

  it('reports both bad parameters at once', async () => {
    const body = expectError(await get('/v1/customers?skip=-1&limit=0', paged.headers), 422, 'validation_error');
    expect(body.errors.map((e) => e.path).sort()).toEqual(['limit', 'skip']);
  });
});

describe('request bodies', () => {
  const send = (method: 'POST' | 'PUT', url: string, payload: string) =>
    stack.app.inject({ method, url, headers: { ...org.headers, 'content-type': 'application/json' }, payload });

  it.each([
    ['truncated JSON', '{"external_id": "abc"'],
    ['a trailing comma', '{"external_id": "abc",}'],
    ['single quotes', "{'external_id': 'abc'}"],
    ['plain text', 'external_id=abc'],
  ])('%s is 400 invalid_json', async (_name, payload) => {
    expectError(await send('POST', '/v1/customers', payload), 400, 'invalid_json');
  });

  it.each([
    ['an array', '[{"external_id": "abc"}]'],
    ['a string', '"abc"'],
    ['a number', '42'],
    ['a boolean', 'true'],
  ])('a JSON body that is %s is 400 invalid_json', async (_name, payload) => {
    expectError(await send('POST', '/v1/customers', payload), 400, 'invalid_json');
    expectError(await send('PUT', '/v1/organizations/current', payload), 400, 'invalid_json');
  });

  it('a JSON null body is 400 invalid_json (not an object)', async () => {
    expectError(await send('POST', '/v1/customers', 'null'), 400, 'invalid_json');
    expectError(await send('PUT', '/v1/organizations/current', 'null'), 400, 'invalid_json');
  });

  it('creates nothing from a malformed body', async () => {
    await send('POST', '/v1/customers', '[{"external_id": "from-array"}]');
    expect(await stack.db.models.Customer.countDocuments({ external_id: 'from-array' })).toBe(0);
  });
});

describe('routing', () => {
  it.each([
    ['GET', '/v1/nope'],
    ['GET', '/v2/customers'],
    ['GET', '/v1/customers/abc/def'],
    ['POST', '/v1/customers/abc'],
    ['PATCH', '/v1/customers'],
    ['GET', '/nope'],
  ] as const)('%s %s is 404 not_found with the uniform body', async (method, url) => {
    const res = await stack.app.inject({ method, url, headers: org.headers });
    const body = expectError(res, 404, 'not_found');
    expect(body.errors).toEqual([]);
  });

  it('an unknown route is 404 even without an API key', async () => {
    expectError(await stack.app.inject({ method: 'GET', url: '/v1/does-not-exist' }), 404, 'not_found');
  });

  it('answers every path with or without a trailing slash', async () => {
    const created = await stack.app.inject({
      method: 'POST',
      url: '/v1/customers/',
      headers: org.headers,
      payload: { external_id: 'slash' },
    });
    expect(created.statusCode, created.body).toBe(201);
    const customer = created.json<CustomerResource>();

    const list = await get('/v1/customers/');
    expect(list.statusCode).toBe(200);
    expect(list.json<CustomerResource[]>().map((c) => c.id)).toContain(customer.id);
    expect(list.headers['x-total-count']).toBeDefined();

    const one = await get(`/v1/customers/${customer.id}/`);
    expect(one.statusCode).toBe(200);
    expect(one.json<CustomerResource>().id).toBe(customer.id);

    const put = await stack.app.inject({
      method: 'PUT',
      url: `/v1/customers/${customer.id}/`,
      headers: org.headers,
      payload: { name: 'S' },
    });
    expect(put.statusCode, put.body).toBe(200);

    expect((await get('/v1/organizations/current/')).statusCode).toBe(200);
    expect((await get('/v1/organizations/current/api_keys/')).statusCode).toBe(200);
    expect((await get('/health/', {})).statusCode).toBe(200);

    const del = await stack.app.inject({ method: 'DELETE', url: `/v1/customers/${customer.id}/`, headers: org.headers });
    expect(del.statusCode, del.body).toBe(200);
  });

  it('POST /v1/organizations/ signs up too', async () => {
    const res = await stack.app.inject({ method: 'POST', url: '/v1/organizations/', payload: { name: 'Slashed' } });
    expect(res.statusCode, res.body).toBe(201);
  });
});

describe('request ids', () => {
  it('every response carries an x-request-id; errors repeat it as request_id', async () => {
    const ok = await get('/v1/customers');
    expect(ok.headers['x-request-id']).toMatch(UUID);

    const responses = [
      await get('/v1/customers', {}),
      await get('/v1/customers?limit=0'),
      await get('/v1/customers/00000000-0000-4000-8000-000000000000'),
      await get('/v1/nowhere'),
      await stack.app.inject({
        method: 'POST',
        url: '/v1/customers',
        headers: { ...org.headers, 'content-type': 'application/json' },
        payload: '{',
      }),
    ];
    const ids = responses.map((res) => {
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      const body = res.json<{ request_id: string }>();
      expect(body.request_id).toMatch(UUID);
      expect(res.headers['x-request-id']).toBe(body.request_id);
      return body.request_id;
    });
    expect(new Set([ok.headers['x-request-id'], ...ids]).size).toBe(ids.length + 1);
  });

  it('echoes a request id sent by the caller', async () => {
    const requestId = `caller-${randomUUID()}`;
    const ok = await get('/v1/customers', { ...org.headers, 'x-request-id': requestId });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-request-id']).toBe(requestId);

    const notFound = await get('/v1/customers/nobody', { ...org.headers, 'x-request-id': requestId });
    expect(expectError(notFound, 404, 'customer_not_found').request_id).toBe(requestId);

    const unauthorized = await get('/v1/customers', { 'x-request-id': requestId });
    expect(expectError(unauthorized, 401, 'unauthorized').request_id).toBe(requestId);
  });
});

describe('health, readiness and a broken database', () => {
  it('GET /health is 200 without auth', async () => {
    const res = await get('/health', {});
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('GET /ready is 200 with mongodb ok and temporal ok', async () => {
    const res = await get('/ready', {});
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ status: 'ok', mongodb: 'ok', temporal: 'ok' });
  });

  describe('with MongoDB closed', () => {
    let broken: TestStack;
    let brokenOrg: TestOrganization;
    beforeAll(async () => {
      broken = await createTestStack();
      brokenOrg = await createOrganization(broken.app, { name: 'Broken Org' });
      await broken.db.connection.close();
    });
    afterAll(async () => broken?.close());

    it('a request is 500 internal_error, and the body leaks no stack or driver detail', async () => {
      for (const res of [
        await broken.app.inject({ method: 'GET', url: '/v1/customers', headers: brokenOrg.headers }),
        await broken.app.inject({ method: 'POST', url: '/v1/organizations', payload: { name: 'Doomed' } }),
      ]) {
        const body = expectError(res, 500, 'internal_error');
        expect(body.errors).toEqual([]);
        expect(body.message).toBe('Internal server error');
        expect(res.body).not.toMatch(/stack/i);
        expect(res.body).not.toMatch(/\bat /);
        expect(res.body).not.toMatch(/mongo|client|connect|\.ts\b|\.js\b/i);
      }
    });

    it('GET /ready is 503 naming MongoDB unavailable, Temporal still ok', async () => {
      const res = await broken.app.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      const body = res.json<{ status: string; mongodb: string; temporal: string }>();
      expect(body.status).toBe('unavailable');
      expect(body.mongodb).toMatch(/^unavailable/);
      expect(body.temporal).toBe('ok');
    });

    it('GET /health stays 200 (liveness does not depend on MongoDB)', async () => {
      expect((await broken.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    });
  });
});

describe('OpenAPI document', () => {
  interface OpenApiDoc {
    openapi: string;
    paths: Record<string, Record<string, { security?: unknown[]; parameters?: { name: string; in: string }[] }>>;
    components: { securitySchemes: Record<string, { type: string; scheme?: string }> };
    security?: Record<string, unknown[]>[];
  }

  let doc: OpenApiDoc;
  beforeAll(async () => {
    const res = await get('/docs/openapi.json', {});
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    doc = res.json<OpenApiDoc>();
  });

  it('is OpenAPI 3.1 and needs no auth', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
  });

  it('documents the resource paths', () => {
    for (const path of [
      '/v1/customers',
      '/v1/customers/{id}',
      '/v1/organizations',
      '/v1/organizations/current',
      '/v1/organizations/current/api_keys',
    ]) {
      expect(Object.keys(doc.paths)).toContain(path);
    }
    expect(Object.keys(doc.paths['/v1/customers/{id}']!).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(doc.paths['/v1/customers']!).sort()).toEqual(['get', 'post']);
    const listParams = doc.paths['/v1/customers']!.get!.parameters!.filter((p) => p.in === 'query').map((p) => p.name);
    expect(listParams).toEqual(expect.arrayContaining(['skip', 'limit', 'external_id']));
  });

  it('declares a bearer security scheme, required everywhere but sign-up', () => {
    const bearer = Object.entries(doc.components.securitySchemes).filter(([, s]) => s.type === 'http' && s.scheme === 'bearer');
    expect(bearer).toHaveLength(1);
    const [name] = bearer[0]!;
    expect(doc.security).toEqual([{ [name]: [] }]);
    expect(doc.paths['/v1/organizations']!.post!.security).toEqual([]);
    expect(doc.paths['/v1/customers']!.get!.security).toBeUndefined();
  });

  it('GET /docs answers with the interactive reference', async () => {
    let res = await get('/docs', {});
    for (let hops = 0; res.statusCode >= 300 && res.statusCode < 400 && hops < 3; hops += 1) {
      res = await get(new URL(String(res.headers.location), 'http://localhost/docs').pathname, {});
    }
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toMatch(/<html/i);
  });
});
