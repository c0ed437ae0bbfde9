// Add-ons (api-contract.md "Catalog"): CRUD by id and by code, amount_cents as Decimal(12,4), the
// USD default, soft delete with a reusable code, tenant isolation. (POST /v1/add_ons/apply creates
// an invoice and is tested with the invoices.)
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddOnResource } from '../../src/resources/add-on';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const nextCode = (label = 'addon') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  // A EUR organization: the add-on currency still defaults to USD (api-contract.md).
  org = await createOrganization(stack.app, { name: 'Add-on Org', default_currency: 'EUR' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, headers: Headers, payload?: unknown) =>
  stack.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
const api = {
  create: (payload: unknown, headers: Headers = org.headers) => inject('POST', '/v1/add_ons', headers, payload),
  get: (id: string, headers: Headers = org.headers) => inject('GET', `/v1/add_ons/${encodeURIComponent(id)}`, headers),
  list: (query = '', headers: Headers = org.headers) => inject('GET', `/v1/add_ons${query}`, headers),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    inject('PUT', `/v1/add_ons/${encodeURIComponent(id)}`, headers, payload),
  remove: (id: string, headers: Headers = org.headers) => inject('DELETE', `/v1/add_ons/${encodeURIComponent(id)}`, headers),
};

async function createAddOn(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<AddOnResource> {
  const res = await api.create({ code: nextCode(), name: 'Setup fee', amount_cents: 1000, ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<AddOnResource>();
}

describe('create and read', () => {
  it('creates an add-on with defaults: USD, nulls', async () => {
    const code = nextCode('defaults');
    const res = await api.create({ code, name: 'Setup fee', amount_cents: '1000' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      code,
      name: 'Setup fee',
      amount_cents: '1000.0000',
      amount_currency: 'USD',
      description: null,
      invoice_display_name: null,
      deleted_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
  });

  it.each([
    ['1000', '1000.0000'],
    [1500, '1500.0000'],
    ['12.5', '12.5000'],
    [0.0001, '0.0001'],
    ['0', '0.0000'],
    ['12345678.1234', '12345678.1234'],
    ['999999999999', '999999999999.0000'],
  ])('accepts amount_cents %j and answers %s', async (amount, expected) => {
    const addOn = await createAddOn({ amount_cents: amount });
    expect(addOn.amount_cents).toBe(expected);
    expect((await api.get(addOn.id)).json<AddOnResource>().amount_cents).toBe(expected);
  });

  it('stores amount_cents as Decimal128 and keeps every field', async () => {
    const payload = {
      code: nextCode('full'),
      name: 'Onboarding',
      amount_cents: '2500.25',
      amount_currency: 'eur',
      description: 'One-time onboarding',
      invoice_display_name: 'Onboarding (one-off)',
    };
    const res = await api.create(payload);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ ...payload, amount_cents: '2500.2500', amount_currency: 'EUR' });
    const stored = await stack.db.connection.collection('add_ons').findOne({ _id: res.json<AddOnResource>().id } as never);
    expect(stored?.amount_cents?._bsontype).toBe('Decimal128');
    expect(String(stored?.amount_cents)).toBe('2500.25');
    expect(stored).toMatchObject({ organization_id: org.id, amount_currency: 'EUR', deleted_at: null });
  });

  it('gets an add-on by id and by code, with or without a trailing slash', async () => {
    const addOn = await createAddOn();
    for (const url of [`/v1/add_ons/${addOn.id}`, `/v1/add_ons/${addOn.code}`, `/v1/add_ons/${addOn.code}/`]) {
      const res = await inject('GET', url, org.headers);
      expect(res.statusCode, url).toBe(200);
      expect(res.json()).toEqual(addOn);
    }
    expectError(await api.get(randomUUID()), 404, 'add_on_not_found');
    expectError(await api.get('no_such_add_on'), 404, 'add_on_not_found');
  });

  it('is 409 already_exists on a duplicate code, keeping the first', async () => {
    const first = await createAddOn({ name: 'First' });
    const body = expectError(await api.create({ code: first.code, name: 'Second', amount_cents: 1 }), 409, 'already_exists');
    expect(body.message).toContain(first.code);
    expect((await api.get(first.code)).json<AddOnResource>()).toMatchObject({ id: first.id, name: 'First' });
  });

  it('lists newest first with X-Total-Count, pages, and filters by currency', async () => {
    const own = await createOrganization(stack.app, { name: 'Add-on list org' });
    const made: AddOnResource[] = [];
    for (const currency of ['USD', 'EUR', 'USD', 'GBP']) {
      made.push(await createAddOn({ amount_currency: currency }, own.headers));
      await sleep(3);
    }
    for (const url of ['/v1/add_ons', '/v1/add_ons/']) {
      const res = await inject('GET', url, own.headers);
      expect(res.json<AddOnResource[]>().map((x) => x.id)).toEqual(made.map((x) => x.id).reverse());
      expect(res.headers['x-total-count']).toBe('4');
    }
    const page = await api.list('?skip=1&limit=2', own.headers);
    expect(page.json<AddOnResource[]>().map((x) => x.id)).toEqual([made[2]!.id, made[1]!.id]);
    expect(page.headers['x-total-count']).toBe('4');
    const usd = await api.list('?amount_currency=usd', own.headers);
    expect(usd.json<AddOnResource[]>().map((x) => x.id)).toEqual([made[2]!.id, made[0]!.id]);
    expect(usd.headers['x-total-count']).toBe('2');
    expectValidationError(await api.list('?amount_currency=ZZZ', own.headers), 'amount_currency');
  });
});

describe('validation', () => {
  it.each([
    ['5 fractional digits (string)', { amount_cents: '10.12345' }, 'amount_cents'],
    ['5 fractional digits (number)', { amount_cents: 10.12345 }, 'amount_cents'],
    ['13 digits in total', { amount_cents: '123456789.1234' }, 'amount_cents'],
    ['13 integer digits', { amount_cents: '1234567890123' }, 'amount_cents'],
    ['a comma decimal', { amount_cents: '12,50' }, 'amount_cents'],
    ['a negative amount', { amount_cents: '-1' }, 'amount_cents'],
    ['an exponent', { amount_cents: '1e3' }, 'amount_cents'],
    ['a missing amount', { amount_cents: undefined }, 'amount_cents'],
    ['an unknown currency', { amount_currency: 'ZZZ' }, 'amount_currency'],
    ['a missing code', { code: undefined }, 'code'],
    ['a missing name', { name: undefined }, 'name'],
    ['an invoice_display_name over 255 characters', { invoice_display_name: 'x'.repeat(256) }, 'invoice_display_name'],
  ])('is 422 with %s, naming the field, creating nothing', async (_name, payload, path) => {
    const before = await stack.db.models.AddOn.countDocuments({ organization_id: org.id });
    expectValidationError(await api.create({ code: nextCode('invalid'), name: 'Invalid', amount_cents: 1, ...payload }), path);
    expect(await stack.db.models.AddOn.countDocuments({ organization_id: org.id })).toBe(before);
  });

  it('is 422 naming each unknown field', async () => {
    const body = expectUnknownFields(await api.create({ code: nextCode(), name: 'x', amount_cents: 1, currency: 'USD', units: 2 }), [
      'currency',
      'units',
    ]);
    expect(body.errors.map((e) => e.path).sort()).toEqual(['currency', 'units']);
  });
});

describe('update', () => {
  it('changes the given fields by id or by code, keeping the others', async () => {
    const addOn = await createAddOn({ description: 'Old', invoice_display_name: 'Old name' });
    await sleep(5);
    const res = await api.update(addOn.code, { name: 'New', amount_cents: '99.99', amount_currency: 'gbp', description: null });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<AddOnResource>();
    expect(updated).toMatchObject({
      id: addOn.id,
      code: addOn.code,
      name: 'New',
      amount_cents: '99.9900',
      amount_currency: 'GBP',
      description: null,
      invoice_display_name: 'Old name',
      created_at: addOn.created_at,
    });
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(addOn.updated_at));
    expect((await api.get(addOn.id)).json()).toEqual(updated);
  });

  it('validates PUT bodies and changes nothing on 422', async () => {
    const addOn = await createAddOn();
    expectValidationError(await api.update(addOn.id, { amount_cents: '1.00001' }), 'amount_cents');
    expectValidationError(await api.update(addOn.id, { amount_currency: 'XYZ' }), 'amount_currency');
    expectUnknownFields(await api.update(addOn.id, { amount: 5 }), ['amount']);
    expect((await api.get(addOn.id)).json()).toEqual(addOn);
  });

  it('changes the code; 409 when it is taken; 404 for an unknown add-on', async () => {
    const addOn = await createAddOn();
    const other = await createAddOn();
    expectError(await api.update(addOn.id, { code: other.code }), 409, 'already_exists');
    const code = nextCode('recoded');
    expect((await api.update(addOn.id, { code })).statusCode).toBe(200);
    expect((await api.get(code)).json<AddOnResource>().id).toBe(addOn.id);
    expectError(await api.get(addOn.code), 404, 'add_on_not_found');
    expectError(await api.update(randomUUID(), { name: 'x' }), 404, 'add_on_not_found');
  });
});

describe('soft delete', () => {
  it('answers 200 with deleted_at, then the add-on is gone', async () => {
    const addOn = await createAddOn({ name: 'To delete' });
    const countBefore = Number((await api.list()).headers['x-total-count']);
    const res = await api.remove(addOn.code);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<AddOnResource>()).toMatchObject({ id: addOn.id, name: 'To delete', amount_cents: '1000.0000' });
    expect(res.json<AddOnResource>().deleted_at).toMatch(ISO_MS_UTC);
    expectError(await api.get(addOn.id), 404, 'add_on_not_found');
    expectError(await api.get(addOn.code), 404, 'add_on_not_found');
    const list = await api.list('?limit=1000');
    expect(list.json<AddOnResource[]>().map((x) => x.id)).not.toContain(addOn.id);
    expect(Number(list.headers['x-total-count'])).toBe(countBefore - 1);
    expect((await stack.db.models.AddOn.findById(addOn.id).lean())?.deleted_at).toBeInstanceOf(Date);
    expectError(await api.update(addOn.id, { name: 'zombie' }), 404, 'add_on_not_found');
    expectError(await api.remove(addOn.id), 404, 'add_on_not_found');
  });

  it('deletes with a trailing slash, and the code can be used again', async () => {
    const first = await createAddOn({ name: 'Gen 1' });
    expect((await inject('DELETE', `/v1/add_ons/${first.id}/`, org.headers)).statusCode).toBe(200);
    const second = await createAddOn({ code: first.code, name: 'Gen 2' });
    expect(second.id).not.toBe(first.id);
    expect((await api.get(first.code)).json<AddOnResource>()).toMatchObject({ id: second.id, name: 'Gen 2' });
    expectError(await api.create({ code: first.code, name: 'Gen 3', amount_cents: 1 }), 409, 'already_exists');
  });
});

describe('tenant isolation', () => {
  let a: TestOrganization;
  let b: TestOrganization;
  let addOnOfA: AddOnResource;

  beforeAll(async () => {
    a = await createOrganization(stack.app, { name: 'Tenant A' });
    b = await createOrganization(stack.app, { name: 'Tenant B' });
    addOnOfA = await createAddOn({ code: 'setup', name: 'Belongs to A' }, a.headers);
  });

  it("org B gets 404 for org A's add-on by id and by code, on every verb", async () => {
    for (const key of [addOnOfA.id, addOnOfA.code]) {
      expectError(await api.get(key, b.headers), 404, 'add_on_not_found');
      expectError(await api.update(key, { name: 'Hijacked' }, b.headers), 404, 'add_on_not_found');
      expectError(await api.remove(key, b.headers), 404, 'add_on_not_found');
    }
    expect((await api.get(addOnOfA.id, a.headers)).json()).toEqual(addOnOfA);
  });

  it("org B's list does not show A's add-ons, and B may use the same code", async () => {
    const empty = await api.list('', b.headers);
    expect(empty.json()).toEqual([]);
    expect(empty.headers['x-total-count']).toBe('0');
    const addOnOfB = await createAddOn({ code: addOnOfA.code }, b.headers);
    expect((await api.get(addOnOfA.code, b.headers)).json<AddOnResource>().id).toBe(addOnOfB.id);
    expect((await api.get(addOnOfA.code, a.headers)).json<AddOnResource>().id).toBe(addOnOfA.id);
  });
});

describe('OpenAPI document', () => {
  it('documents the add-on paths with the AddOn schema', async () => {
    const doc = (await inject('GET', '/docs/openapi.json', {})).json<{
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    }>();
    expect(Object.keys(doc.paths['/v1/add_ons']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/add_ons/{id}']!).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(doc.components.schemas.AddOn?.properties ?? {})).toContain('amount_cents');
  });
});
