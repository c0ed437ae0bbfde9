// Organizations and API keys (api-contract.md "Organizations and API keys").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OrganizationResource } from '../../src/resources/organization';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await createTestStack();
});
afterAll(async () => stack?.close());

function signup(payload: unknown) {
  return stack.app.inject({ method: 'POST', url: '/v1/organizations', payload: payload as Record<string, unknown> });
}

describe('POST /v1/organizations', () => {
  it('creates an organization with the documented defaults and its first API key', async () => {
    const res = await signup({ name: 'Globex Industries' });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<OrganizationResource & { api_key: Record<string, unknown> }>();
    expect(body).toMatchObject({
      name: 'Globex Industries',
      default_currency: 'USD',
      timezone: 'UTC',
      net_payment_term: 30,
      invoice_grace_period: 0,
      document_number_prefix: 'GLO',
      events_rate_limit_per_minute: 1000,
      email: null,
      legal_name: null,
      address_line1: null,
      address_line2: null,
      city: null,
      zipcode: null,
      state: null,
      country: null,
    });
    expect(body.id).toMatch(UUID);
    expect(body.created_at).toMatch(ISO_MS_UTC);
    expect(body.updated_at).toMatch(ISO_MS_UTC);

    expect(Object.keys(body.api_key).sort()).toEqual(
      ['created_at', 'expires_at', 'id', 'key_prefix', 'last_used_at', 'name', 'organization_id', 'raw_key', 'status', 'updated_at'].sort(),
    );
    expect(body.api_key).toMatchObject({ organization_id: body.id, status: 'active', expires_at: null, last_used_at: null });

    // The organization is stored with those values.
    const stored = await stack.db.models.Organization.findById(body.id).lean();
    expect(stored).toMatchObject({ name: 'Globex Industries', default_currency: 'USD', timezone: 'UTC', document_number_prefix: 'GLO' });
  });

  it.each([
    ['acme', 'ACM'],
    ['Zy', 'ZY'],
    ['  hello world', 'HEL'],
    ['3M Company', 'MCO'],
  ])('defaults document_number_prefix from the letters of %j to %j', async (name, prefix) => {
    const res = await signup({ name });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json<OrganizationResource>().document_number_prefix).toBe(prefix);
  });

  it('keeps every given field', async () => {
    const payload = {
      name: 'Initech',
      default_currency: 'EUR',
      timezone: 'Europe/Paris',
      net_payment_term: 45,
      invoice_grace_period: 3,
      document_number_prefix: 'INI-2026',
      email: 'billing@initech.example',
      legal_name: 'Initech SAS',
      address_line1: '1 rue de la Paix',
      address_line2: 'Bâtiment B',
      city: 'Paris',
      zipcode: '75002',
      state: 'IDF',
      country: 'FR',
      events_rate_limit_per_minute: 250,
    };
    const res = await signup(payload);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject(payload);
  });

  it.each([
    ['a missing name', { default_currency: 'USD' }, 'name'],
    ['an empty name', { name: '' }, 'name'],
    ['a name over 255 characters', { name: 'x'.repeat(256) }, 'name'],
    ['an unknown currency', { name: 'Org', default_currency: 'XYZ' }, 'default_currency'],
    ['a currency that is not 3 letters', { name: 'Org', default_currency: 'US' }, 'default_currency'],
    ['a currency that is not a string', { name: 'Org', default_currency: 840 }, 'default_currency'],
    ['an unknown timezone', { name: 'Org', timezone: 'Mars/Olympus_Mons' }, 'timezone'],
    ['a UTC offset as timezone', { name: 'Org', timezone: '+02:00 Somewhere' }, 'timezone'],
    ['a negative net_payment_term', { name: 'Org', net_payment_term: -1 }, 'net_payment_term'],
    ['a fractional net_payment_term', { name: 'Org', net_payment_term: 1.5 }, 'net_payment_term'],
    ['a net_payment_term given as a string', { name: 'Org', net_payment_term: '30' }, 'net_payment_term'],
    ['a negative invoice_grace_period', { name: 'Org', invoice_grace_period: -3 }, 'invoice_grace_period'],
    ['an invalid email', { name: 'Org', email: 'not-an-email' }, 'email'],
    ['a zero events rate limit', { name: 'Org', events_rate_limit_per_minute: 0 }, 'events_rate_limit_per_minute'],
    ['a document_number_prefix over 20 characters', { name: 'Org', document_number_prefix: 'A'.repeat(21) }, 'document_number_prefix'],
  ])('is 422 with %s, naming the field', async (_name, payload, path) => {
    const before = await stack.db.models.Organization.countDocuments({});
    const res = await signup(payload);
    expectValidationError(res, path);
    expect(await stack.db.models.Organization.countDocuments({})).toBe(before);
  });

  it('is 422 with an unknown field, and the message names it', async () => {
    const before = await stack.db.models.Organization.countDocuments({});
    expectUnknownFields(await signup({ name: 'Org', plan: 'gold' }), ['plan']);
    expect(await stack.db.models.Organization.countDocuments({})).toBe(before);
  });

  it('lists each unknown field in errors with its own path', async () => {
    const body = expectUnknownFields(await signup({ name: 'Org', timezon: 'UTC', plan: 'gold' }), ['timezon', 'plan']);
    expect(body.errors.map((e) => e.path).sort()).toEqual(['plan', 'timezon']);
  });

  it('reports every invalid field at once', async () => {
    const body = expectError(await signup({ name: 'Org', default_currency: 'XYZ', net_payment_term: -1 }), 422, 'validation_error');
    expect(body.errors.map((e) => e.path).sort()).toEqual(['default_currency', 'net_payment_term']);
  });
});

describe('GET and PUT /v1/organizations/current', () => {
  it('answers the organization of the key, without its api key', async () => {
    const created = await signup({ name: 'Current Org', default_currency: 'GBP', timezone: 'Europe/London' });
    const { api_key: apiKey, ...organization } = created.json<OrganizationResource & { api_key: { raw_key: string } }>();
    const res = await stack.app.inject({
      method: 'GET',
      url: '/v1/organizations/current',
      headers: { authorization: `Bearer ${apiKey.raw_key}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(organization);
    expect(res.json()).not.toHaveProperty('api_key');
  });

  it('updates the given fields, keeps the others, and persists the change', async () => {
    const org = await createOrganization(stack.app, { name: 'Umbrella', email: 'a@umbrella.example', city: 'Raccoon City' });
    const before = (
      await stack.app.inject({ method: 'GET', url: '/v1/organizations/current', headers: org.headers })
    ).json<OrganizationResource>();
    await sleep(5);

    const changes = {
      name: 'Umbrella Corporation',
      default_currency: 'JPY',
      timezone: 'Asia/Tokyo',
      net_payment_term: 14,
      invoice_grace_period: 2,
      document_number_prefix: 'UMB',
      events_rate_limit_per_minute: 5000,
      email: null,
    };
    const res = await stack.app.inject({ method: 'PUT', url: '/v1/organizations/current', headers: org.headers, payload: changes });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<OrganizationResource>();
    expect(updated).toMatchObject({ ...changes, id: org.id, city: 'Raccoon City', created_at: before.created_at });
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));

    const after = await stack.app.inject({ method: 'GET', url: '/v1/organizations/current', headers: org.headers });
    expect(after.json()).toEqual(updated);
    const stored = await stack.db.models.Organization.findById(org.id).lean();
    expect(stored).toMatchObject({ name: 'Umbrella Corporation', default_currency: 'JPY', timezone: 'Asia/Tokyo', email: null });
  });

  it('an empty body changes nothing', async () => {
    const org = await createOrganization(stack.app, { name: 'Stable Org' });
    const before = (
      await stack.app.inject({ method: 'GET', url: '/v1/organizations/current', headers: org.headers })
    ).json<OrganizationResource>();
    const res = await stack.app.inject({ method: 'PUT', url: '/v1/organizations/current', headers: org.headers, payload: {} });
    expect(res.statusCode, res.body).toBe(200);
    const { updated_at: _u, ...rest } = res.json<OrganizationResource>();
    const { updated_at: _b, ...expected } = before;
    expect(rest).toEqual(expected);
  });

  it.each([
    ['an unknown currency', { default_currency: 'ABC' }, 'default_currency'],
    ['an unknown timezone', { timezone: 'Atlantis/Capital' }, 'timezone'],
    ['a negative net_payment_term', { net_payment_term: -5 }, 'net_payment_term'],
    ['an empty name', { name: '' }, 'name'],
    ['an unknown field', { api_key: 'x' }, 'api_key'],
  ])('is 422 with %s and changes nothing', async (name, payload, path) => {
    const org = await createOrganization(stack.app, { name: 'Guarded Values' });
    const res = await stack.app.inject({ method: 'PUT', url: '/v1/organizations/current', headers: org.headers, payload });
    if (name === 'an unknown field') expectUnknownFields(res, [path]);
    else expectValidationError(res, path);
    const stored = await stack.db.models.Organization.findById(org.id).lean();
    expect(stored).toMatchObject({ name: 'Guarded Values', default_currency: 'USD', timezone: 'UTC', net_payment_term: 30 });
  });

  it("changes only the key's own organization", async () => {
    const a = await createOrganization(stack.app, { name: 'Alpha' });
    const b = await createOrganization(stack.app, { name: 'Beta' });
    await stack.app.inject({ method: 'PUT', url: '/v1/organizations/current', headers: a.headers, payload: { name: 'Alpha Prime' } });
    const bNow = await stack.app.inject({ method: 'GET', url: '/v1/organizations/current', headers: b.headers });
    expect(bNow.json<OrganizationResource>().name).toBe('Beta');
  });

  it('needs an API key', async () => {
    expectError(await stack.app.inject({ method: 'GET', url: '/v1/organizations/current' }), 401, 'unauthorized');
    expectError(await stack.app.inject({ method: 'PUT', url: '/v1/organizations/current', payload: { name: 'x' } }), 401, 'unauthorized');
  });
});

describe('GET /v1/organizations/current/api_keys', () => {
  it('paginates with skip and limit, newest first, with X-Total-Count', async () => {
    const org = await createOrganization(stack.app, { name: 'Many Keys' });
    const created: string[] = [org.apiKeyId];
    for (let i = 1; i <= 4; i += 1) {
      await sleep(3); // distinct created_at, so newest-first is one order
      const res = await stack.app.inject({
        method: 'POST',
        url: '/v1/organizations/current/api_keys',
        headers: org.headers,
        payload: { name: `key ${i}` },
      });
      expect(res.statusCode).toBe(201);
      created.push(res.json<{ id: string }>().id);
    }
    const newestFirst = [...created].reverse();

    const all = await stack.app.inject({ method: 'GET', url: '/v1/organizations/current/api_keys', headers: org.headers });
    expect(all.statusCode).toBe(200);
    expect(all.headers['x-total-count']).toBe('5');
    expect(all.json<{ id: string }[]>().map((k) => k.id)).toEqual(newestFirst);

    const pages: string[] = [];
    for (const skip of [0, 2, 4]) {
      const page = await stack.app.inject({
        method: 'GET',
        url: `/v1/organizations/current/api_keys?skip=${skip}&limit=2`,
        headers: org.headers,
      });
      expect(page.statusCode).toBe(200);
      expect(page.headers['x-total-count']).toBe('5');
      const ids = page.json<{ id: string }[]>().map((k) => k.id);
      expect(ids.length).toBe(skip === 4 ? 1 : 2);
      pages.push(...ids);
    }
    expect(pages).toEqual(newestFirst);

    const beyond = await stack.app.inject({ method: 'GET', url: '/v1/organizations/current/api_keys?skip=10', headers: org.headers });
    expect(beyond.json()).toEqual([]);
    expect(beyond.headers['x-total-count']).toBe('5');
  });

  it.each(['limit=0', 'limit=1001', 'skip=-1', 'limit=abc'])('is 422 with %s', async (query) => {
    const org = await createOrganization(stack.app, { name: 'Bad Query' });
    const res = await stack.app.inject({ method: 'GET', url: `/v1/organizations/current/api_keys?${query}`, headers: org.headers });
    expectValidationError(res, query.split('=')[0]!);
  });

  it('POST api_keys rejects unknown fields', async () => {
    const org = await createOrganization(stack.app, { name: 'Strict Keys' });
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/organizations/current/api_keys',
      headers: org.headers,
      payload: { name: 'k', scopes: ['all'] },
    });
    expectUnknownFields(res, ['scopes']);
  });
});
