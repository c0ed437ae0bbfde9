// Authentication (spec section 5, api-contract.md "Organizations and API keys"): every way a key is
// refused is a 401 with the uniform error body; keys are stored only as SHA-256.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ApiKeyResource, ApiKeyWithRawKey } from '../../src/resources/organization';
import { eventually, expectError, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

const RAW_KEY = /^bsk_live_[A-Za-z0-9_-]{43}$/;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const randomWellFormedKey = () => `bsk_live_${randomBytes(32).toString('base64url')}`;

// The API's clock: real time unless a test freezes it.
let frozenAt: number | null = null;
const now = () => new Date(frozenAt ?? Date.now());

let stack: TestStack;
let org: TestOrganization;

beforeAll(async () => {
  stack = await createTestStack({ now });
  org = await createOrganization(stack.app, { name: 'Auth Org' });
});
afterAll(async () => stack?.close());
afterEach(() => {
  frozenAt = null;
});

function get(url: string, headers: Record<string, string> = {}) {
  return stack.app.inject({ method: 'GET', url, headers });
}

async function createKey(body: Record<string, unknown> = {}, headers = org.headers): Promise<ApiKeyWithRawKey> {
  const res = await stack.app.inject({ method: 'POST', url: '/v1/organizations/current/api_keys', headers, payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function listKeys(headers = org.headers): Promise<ApiKeyResource[]> {
  const res = await get('/v1/organizations/current/api_keys?limit=1000', headers);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('401 on every authenticated endpoint', () => {
  const cases: [string, Record<string, string>][] = [
    ['no Authorization header', {}],
    ['an empty Authorization header', { authorization: '' }],
    ['a Basic scheme', { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` }],
    ['a key sent without a scheme', { authorization: 'bsk_live_' + 'a'.repeat(43) }],
    ['"Bearer" with no token', { authorization: 'Bearer ' }],
    ['a malformed key', { authorization: 'Bearer not-a-key' }],
    ['a key with the wrong product prefix', { authorization: `Bearer bsk_test_${randomBytes(32).toString('base64url')}` }],
    ['a key one character short', { authorization: `Bearer ${randomWellFormedKey().slice(0, -1)}` }],
    ['a key with a character outside the url-safe alphabet', { authorization: `Bearer bsk_live_${'a'.repeat(42)}+` }],
    ['a well-formed but unknown key', { authorization: `Bearer ${randomWellFormedKey()}` }],
  ];

  it.each(cases)('%s gives 401 unauthorized with the uniform body', async (_name, headers) => {
    for (const url of ['/v1/customers', '/v1/organizations/current', '/v1/organizations/current/api_keys']) {
      const res = await get(url, headers);
      expectError(res, 401, 'unauthorized');
    }
  });

  it('refuses writes too, and writes nothing', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/customers',
      headers: bearer(randomWellFormedKey()),
      payload: { external_id: 'intruder' },
    });
    expectError(res, 401, 'unauthorized');
    expect(await stack.db.models.Customer.countDocuments({ external_id: 'intruder' })).toBe(0);
  });

  it('accepts a valid key sent as "Bearer <key>" (the control for the cases above)', async () => {
    const res = await get('/v1/customers', org.headers);
    expect(res.statusCode).toBe(200);
  });

  it('scopes a key to its organization', async () => {
    const other = await createOrganization(stack.app, { name: 'Other Org' });
    const mine = await get('/v1/organizations/current', org.headers);
    const theirs = await get('/v1/organizations/current', other.headers);
    expect(mine.json<{ id: string }>().id).toBe(org.id);
    expect(theirs.json<{ id: string }>().id).toBe(other.id);
  });
});

describe('lookups', () => {
  it('shares one key lookup among the requests that arrive while it is on its way, and reads again after it', async () => {
    const key = await createKey({ name: 'burst' });
    const findOne = vi.spyOn(stack.db.models.ApiKey.collection, 'findOne');
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, () => get('/v1/customers', bearer(key.raw_key))));
      expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
      const burst = findOne.mock.calls.length;
      expect(burst).toBeGreaterThanOrEqual(1);
      expect(burst).toBeLessThan(20);
      // Nothing is kept once it answered: the next request reads the key again, and sees a revocation.
      await stack.app.inject({ method: 'DELETE', url: `/v1/organizations/current/api_keys/${key.id}`, headers: org.headers });
      const after = findOne.mock.calls.length;
      expectError(await get('/v1/customers', bearer(key.raw_key)), 401, 'unauthorized');
      expect(findOne.mock.calls.length).toBeGreaterThan(after);
    } finally {
      findOne.mockRestore();
    }
  });
});

describe('revocation', () => {
  it('revokes a key with DELETE and refuses it on the very next request', async () => {
    const key = await createKey({ name: 'to revoke' });
    expect((await get('/v1/customers', bearer(key.raw_key))).statusCode).toBe(200);

    const del = await stack.app.inject({ method: 'DELETE', url: `/v1/organizations/current/api_keys/${key.id}`, headers: org.headers });
    expect(del.statusCode, del.body).toBe(200);
    const revoked = del.json<ApiKeyResource>();
    expect(revoked).toMatchObject({ id: key.id, status: 'revoked', organization_id: org.id, key_prefix: key.key_prefix });
    expect(revoked).not.toHaveProperty('raw_key');
    expect(revoked).not.toHaveProperty('key_hash');

    const res = await get('/v1/customers', bearer(key.raw_key));
    expectError(res, 401, 'unauthorized');
    // The revoking key itself still works, and the list shows the revoked key as revoked.
    const listed = (await listKeys()).find((k) => k.id === key.id);
    expect(listed?.status).toBe('revoked');
  });

  it('a key can revoke itself; its next request is 401', async () => {
    const key = await createKey();
    const del = await stack.app.inject({
      method: 'DELETE',
      url: `/v1/organizations/current/api_keys/${key.id}`,
      headers: bearer(key.raw_key),
    });
    expect(del.statusCode, del.body).toBe(200);
    expect(del.json<ApiKeyResource>().status).toBe('revoked');
    expectError(await get('/v1/organizations/current', bearer(key.raw_key)), 401, 'unauthorized');
  });

  it("cannot revoke another organization's key (404), which keeps working", async () => {
    const other = await createOrganization(stack.app, { name: 'Victim Org' });
    const del = await stack.app.inject({
      method: 'DELETE',
      url: `/v1/organizations/current/api_keys/${other.apiKeyId}`,
      headers: org.headers,
    });
    expectError(del, 404, 'not_found');
    expect((await get('/v1/customers', other.headers)).statusCode).toBe(200);
    const stored = await stack.db.models.ApiKey.findById(other.apiKeyId).lean();
    expect(stored?.status).toBe('active');
  });

  it('an unknown key id is 404', async () => {
    const del = await stack.app.inject({
      method: 'DELETE',
      url: '/v1/organizations/current/api_keys/00000000-0000-4000-8000-000000000000',
      headers: org.headers,
    });
    expectError(del, 404, 'not_found');
  });
});

describe('expiry', () => {
  it('a key works until expires_at and is 401 after it', async () => {
    const base = Date.now();
    frozenAt = base;
    const expiresAt = new Date(base + 60 * 60 * 1000);
    const key = await createKey({ name: 'expiring', expires_at: expiresAt.toISOString() });
    expect(key.expires_at).toBe(expiresAt.toISOString());

    frozenAt = expiresAt.getTime() - 1;
    expect((await get('/v1/customers', bearer(key.raw_key))).statusCode).toBe(200);

    frozenAt = expiresAt.getTime() + 1;
    expectError(await get('/v1/customers', bearer(key.raw_key)), 401, 'unauthorized');

    frozenAt = expiresAt.getTime() + 24 * 60 * 60 * 1000;
    expectError(await get('/v1/customers', bearer(key.raw_key)), 401, 'unauthorized');
    // A key without expires_at is not affected by the passing of time.
    expect((await get('/v1/customers', org.headers)).statusCode).toBe(200);
  });

  it('accepts expires_at with any ISO 8601 offset and answers it in UTC', async () => {
    const key = await createKey({ expires_at: '2999-01-01T12:00:00+02:00' });
    expect(key.expires_at).toBe('2999-01-01T10:00:00.000Z');
  });

  it.each([
    ['in the past', () => new Date(Date.now() - 60_000).toISOString()],
    ['right now (by the API clock)', () => new Date(frozenAt!).toISOString()],
  ])('expires_at %s at creation is 422', async (_name, value) => {
    frozenAt = Date.now();
    const before = (await listKeys()).length;
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/organizations/current/api_keys',
      headers: org.headers,
      payload: { expires_at: value() },
    });
    expectValidationError(res, 'expires_at');
    expect((await listKeys()).length).toBe(before);
  });

  it('expires_at that is not a timestamp is 422', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/organizations/current/api_keys',
      headers: org.headers,
      payload: { expires_at: 'tomorrow' },
    });
    expectValidationError(res, 'expires_at');
  });
});

describe('last_used_at', () => {
  it('is null for a fresh key and set after a successful request', async () => {
    const key = await createKey({ name: 'usage' });
    expect(key.last_used_at).toBeNull();
    expect((await listKeys()).find((k) => k.id === key.id)?.last_used_at).toBeNull();

    const before = Date.now();
    expect((await get('/v1/customers', bearer(key.raw_key))).statusCode).toBe(200);
    // The write is fire-and-forget: poll through another key so that the polling does not count.
    const lastUsed = await eventually(
      async () => (await listKeys()).find((k) => k.id === key.id)?.last_used_at ?? undefined,
      3000,
      'last_used_at',
    );
    expect(lastUsed).toMatch(ISO_MS_UTC);
    expect(Date.parse(lastUsed)).toBeGreaterThanOrEqual(before - 5);
    expect(Date.parse(lastUsed)).toBeLessThanOrEqual(Date.now());
  });

  it('is not set by a refused request', async () => {
    const key = await createKey();
    await stack.app.inject({ method: 'DELETE', url: `/v1/organizations/current/api_keys/${key.id}`, headers: org.headers });
    expectError(await get('/v1/customers', bearer(key.raw_key)), 401, 'unauthorized');
    await new Promise((r) => setTimeout(r, 200));
    const stored = await stack.db.models.ApiKey.findById(key.id).lean();
    expect(stored?.last_used_at).toBeNull();
  });

  it('follows the API clock, advancing when the key is used again later', async () => {
    const key = await createKey();
    const t0 = Date.now() + 10 * 60 * 1000;
    frozenAt = t0;
    expect((await get('/v1/customers', bearer(key.raw_key))).statusCode).toBe(200);
    await eventually(
      async () => ((await stack.db.models.ApiKey.findById(key.id).lean())?.last_used_at?.getTime() === t0 ? true : undefined),
      3000,
      'last_used_at = t0',
    );

    const t1 = t0 + 5000;
    frozenAt = t1;
    expect((await get('/v1/customers', bearer(key.raw_key))).statusCode).toBe(200);
    const listed = await eventually(
      async () => {
        const k = (await listKeys()).find((x) => x.id === key.id);
        return k?.last_used_at === new Date(t1).toISOString() ? k : undefined;
      },
      3000,
      'last_used_at = t1',
    );
    expect(listed.last_used_at).toBe(new Date(t1).toISOString());
  });
});

describe('key storage and format', () => {
  it('creates keys as bsk_live_ + 43 url-safe characters, with a 6-character display prefix', async () => {
    const signup = await stack.app.inject({ method: 'POST', url: '/v1/organizations', payload: { name: 'Format Org' } });
    expect(signup.statusCode).toBe(201);
    const first = signup.json<{ api_key: ApiKeyWithRawKey }>().api_key;
    const second = await createKey({ name: 'second' });
    for (const key of [first, second]) {
      expect(key.raw_key).toMatch(RAW_KEY);
      expect(key.key_prefix).toBe(key.raw_key.slice(0, 'bsk_live_'.length + 6));
      expect(key.key_prefix).toMatch(/^bsk_live_[A-Za-z0-9_-]{6}$/);
      expect(key.id).toMatch(UUID);
      expect(key.status).toBe('active');
      expect(key).not.toHaveProperty('key_hash');
    }
    expect(second).toMatchObject({ name: 'second', organization_id: org.id, expires_at: null, last_used_at: null });
    expect(second.created_at).toMatch(ISO_MS_UTC);
    // 256 random bits: two keys never share their random part.
    expect(first.raw_key).not.toBe(second.raw_key);
    // A key created with POST api_keys authenticates.
    expect((await get('/v1/organizations/current', bearer(second.raw_key))).json<{ id: string }>().id).toBe(org.id);
  });

  it('stores only the SHA-256 hex of the key, never the raw key', async () => {
    const key = await createKey({ name: 'stored' });
    const stored = await stack.db.models.ApiKey.findById(key.id).lean();
    expect(stored).not.toBeNull();
    expect(stored!.key_hash).toBe(sha256(key.raw_key));
    expect(stored!.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(stored!.key_prefix).toBe(key.key_prefix);

    // No document of the collection holds any raw key or its random part, in any field.
    const everything = JSON.stringify(await stack.db.connection.collection('api_keys').find({}).toArray());
    for (const raw of [key.raw_key, org.apiKey]) {
      expect(everything).not.toContain(raw);
      expect(everything).not.toContain(raw.slice('bsk_live_'.length));
    }
    expect(everything).toContain(sha256(org.apiKey));
  });

  it('never returns raw_key or key_hash when listing keys', async () => {
    await createKey({ name: 'listed' });
    const res = await get('/v1/organizations/current/api_keys', org.headers);
    expect(res.statusCode).toBe(200);
    const keys = res.json<Record<string, unknown>[]>();
    expect(keys.length).toBeGreaterThanOrEqual(2);
    for (const k of keys) {
      expect(k).not.toHaveProperty('raw_key');
      expect(k).not.toHaveProperty('key_hash');
      expect(k.organization_id).toBe(org.id);
    }
    expect(res.body).not.toContain(org.apiKey);
    expect(res.body).not.toContain(sha256(org.apiKey));
  });

  it('does not list keys of other organizations', async () => {
    const other = await createOrganization(stack.app, { name: 'Lister Org' });
    const ids = (await listKeys(other.headers)).map((k) => k.id);
    expect(ids).toEqual([other.apiKeyId]);
    expect(ids).not.toContain(org.apiKeyId);
  });
});

describe('sign-up guarded by BILLING_SIGNUP_TOKEN', () => {
  const signupToken = 'a-signup-token-of-16+';
  let guarded: TestStack;
  beforeAll(async () => {
    guarded = await createTestStack({ signupToken });
  });
  afterAll(async () => guarded?.close());

  const signup = (headers: Record<string, string>) =>
    guarded.app.inject({ method: 'POST', url: '/v1/organizations', headers, payload: { name: 'Guarded Org' } });

  it.each([
    ['without a token', {}],
    ['with a wrong token', { authorization: 'Bearer a-wrong-token-of-16+-chars' }],
    ['with the token in another scheme', { authorization: `Basic ${signupToken}` }],
    ['with a prefix of the token', { authorization: `Bearer ${signupToken.slice(0, -1)}` }],
  ])('is 401 %s, and creates nothing', async (_name, headers) => {
    expectError(await signup(headers), 401, 'unauthorized');
    expect(await guarded.db.models.Organization.countDocuments({})).toBe(0);
  });

  it('is 201 with the token, and the new key then works (the token is not an API key)', async () => {
    const res = await signup({ authorization: `Bearer ${signupToken}` });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<{ id: string; api_key: { raw_key: string } }>();
    const me = await guarded.app.inject({ method: 'GET', url: '/v1/organizations/current', headers: bearer(body.api_key.raw_key) });
    expect(me.json<{ id: string }>().id).toBe(body.id);
    const withToken = await guarded.app.inject({ method: 'GET', url: '/v1/customers', headers: bearer(signupToken) });
    expectError(withToken, 401, 'unauthorized');
  });

  it('is open when no token is configured', async () => {
    const res = await stack.app.inject({ method: 'POST', url: '/v1/organizations', payload: { name: 'Open Org' } });
    expect(res.statusCode).toBe(201);
  });
});
