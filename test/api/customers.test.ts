import { randomUUID } from 'node:crypto';
// Customers (api-contract.md "Customers"): CRUD, lookups by id and external_id, tenant isolation,
// strict validation, immutable external_id, soft delete.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const nextExternalId = (label = 'cus') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Customer Org', default_currency: 'EUR', timezone: 'Europe/Berlin' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const api = {
  create: (payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: '/v1/customers', headers, payload: payload as Record<string, unknown> }),
  get: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'GET', url: `/v1/customers/${encodeURIComponent(id)}`, headers }),
  list: (query = '', headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url: `/v1/customers${query}`, headers }),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({
      method: 'PUT',
      url: `/v1/customers/${encodeURIComponent(id)}`,
      headers,
      payload: payload as Record<string, unknown>,
    }),
  remove: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'DELETE', url: `/v1/customers/${encodeURIComponent(id)}`, headers }),
};

async function createCustomer(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<CustomerResource> {
  const res = await api.create({ external_id: nextExternalId(), ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

describe('create and read', () => {
  it('creates a customer with defaults: the organization currency, nulls for the overrides', async () => {
    const externalId = nextExternalId('defaults');
    const res = await api.create({ external_id: externalId });
    expect(res.statusCode, res.body).toBe(201);
    const customer = res.json<CustomerResource>();
    expect(customer).toMatchObject({
      organization_id: org.id,
      external_id: externalId,
      name: null,
      email: null,
      currency: 'EUR',
      billing_metadata: {},
      net_payment_term: null,
      invoice_grace_period: null,
      timezone: null,
      deleted_at: null,
    });
    expect(customer.id).toMatch(UUID);
    expect(customer.created_at).toMatch(ISO_MS_UTC);
    expect(customer.updated_at).toMatch(ISO_MS_UTC);
  });

  it('follows the organization currency when it changes later', async () => {
    const other = await createOrganization(stack.app, { name: 'Yen Org', default_currency: 'JPY' });
    expect((await createCustomer({}, other.headers)).currency).toBe('JPY');
    await stack.app.inject({
      method: 'PUT',
      url: '/v1/organizations/current',
      headers: other.headers,
      payload: { default_currency: 'CHF' },
    });
    expect((await createCustomer({}, other.headers)).currency).toBe('CHF');
  });

  it('keeps every given field', async () => {
    const payload = {
      external_id: nextExternalId('full'),
      name: 'Jane Doe',
      email: 'jane@example.com',
      currency: 'GBP',
      billing_metadata: { plan_tier: 'gold', seats: 12, vip: true },
      net_payment_term: 15,
      invoice_grace_period: 2,
      timezone: 'America/New_York',
    };
    const res = await api.create(payload);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject(payload);
    const stored = await stack.db.models.Customer.findById(res.json<CustomerResource>().id).lean();
    expect(stored).toMatchObject({ ...payload, organization_id: org.id });
  });

  it('gets a customer by id and by external_id', async () => {
    const customer = await createCustomer({ name: 'Lookup', external_id: nextExternalId('lookup') });
    const byId = await api.get(customer.id);
    expect(byId.statusCode).toBe(200);
    expect(byId.json()).toEqual(customer);
    const byExternalId = await api.get(customer.external_id);
    expect(byExternalId.statusCode).toBe(200);
    expect(byExternalId.json()).toEqual(customer);
  });

  it('finds an external_id that contains URL-reserved characters', async () => {
    const customer = await createCustomer({ external_id: `acct/42 #${seq}` });
    const res = await api.get(customer.external_id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<CustomerResource>().id).toBe(customer.id);
  });

  it('filters the list by external_id', async () => {
    const customer = await createCustomer();
    await createCustomer();
    const res = await api.list(`?external_id=${encodeURIComponent(customer.external_id)}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([customer]);
    expect(res.headers['x-total-count']).toBe('1');
    const none = await api.list('?external_id=nobody');
    expect(none.json()).toEqual([]);
    expect(none.headers['x-total-count']).toBe('0');
  });

  it('is 404 customer_not_found for an unknown id', async () => {
    expectError(await api.get('00000000-0000-4000-8000-000000000000'), 404, 'customer_not_found');
    expectError(await api.get('no-such-external-id'), 404, 'customer_not_found');
  });

  it('is 409 already_exists on a duplicate external_id, and keeps the first', async () => {
    const first = await createCustomer({ name: 'First' });
    const res = await api.create({ external_id: first.external_id, name: 'Second' });
    const body = expectError(res, 409, 'already_exists', ['existing_customer_id']);
    expect(body.message).toContain(first.external_id);
    expect(body.existing_customer_id).toBe(first.id);
    const list = await api.list(`?external_id=${encodeURIComponent(first.external_id)}`);
    expect(list.json<CustomerResource[]>().map((c) => c.name)).toEqual(['First']);
  });

  it('allows the same external_id in two organizations', async () => {
    const other = await createOrganization(stack.app, { name: 'Twin Org' });
    const mine = await createCustomer({ external_id: 'shared-external-id' });
    const theirs = await createCustomer({ external_id: 'shared-external-id' }, other.headers);
    expect(theirs.id).not.toBe(mine.id);
    expect(theirs.organization_id).toBe(other.id);
  });

  it('answers 409 to concurrent creations of one external_id, creating exactly one', async () => {
    const externalId = nextExternalId('race');
    const results = await Promise.all(Array.from({ length: 8 }, () => api.create({ external_id: externalId })));
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    expect(await stack.db.models.Customer.countDocuments({ organization_id: org.id, external_id: externalId })).toBe(1);
  });
});

describe('validation', () => {
  it.each([
    ['a missing external_id', { name: 'x', external_id: undefined }, 'external_id'],
    ['an empty external_id', { external_id: '' }, 'external_id'],
    ['an external_id over 255 characters', { external_id: 'e'.repeat(256) }, 'external_id'],
    ['an invalid email', { email: 'not-an-email' }, 'email'],
    ['an email without a domain', { email: 'jane@' }, 'email'],
    ['an unknown currency', { currency: 'ZZZ' }, 'currency'],
    ['an unknown timezone', { timezone: 'Nowhere/Land' }, 'timezone'],
    ['a negative net_payment_term', { net_payment_term: -1 }, 'net_payment_term'],
    ['a fractional invoice_grace_period', { invoice_grace_period: 0.5 }, 'invoice_grace_period'],
    ['billing_metadata that is an array', { billing_metadata: ['a'] }, 'billing_metadata'],
    ['a nested billing_metadata value', { billing_metadata: { address: { city: 'Paris' } } }, 'billing_metadata.address'],
    ['a null billing_metadata value', { billing_metadata: { gone: null } }, 'billing_metadata.gone'],
  ])('is 422 with %s, naming the field', async (_name, payload, path) => {
    const before = await stack.db.models.Customer.countDocuments({ organization_id: org.id });
    const body = { external_id: nextExternalId('invalid'), ...payload };
    expectValidationError(await api.create(body), path);
    expect(await stack.db.models.Customer.countDocuments({ organization_id: org.id })).toBe(before);
  });

  it('is 422 with an unknown field, and the message names it', async () => {
    expectUnknownFields(await api.create({ external_id: nextExternalId(), externalId: 'typo' }), ['externalId']);
  });

  it('lists each unknown field in errors with its own path', async () => {
    const body = expectUnknownFields(await api.create({ external_id: nextExternalId(), nmae: 'x', emial: 'y' }), ['nmae', 'emial']);
    expect(body.errors.map((e) => e.path).sort()).toEqual(['emial', 'nmae']);
  });

  it('accepts billing_metadata with 50 keys and refuses 51', async () => {
    const metadata = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`key_${i}`, i % 2 === 0 ? `v${i}` : i]));
    const ok = await api.create({ external_id: nextExternalId('meta50'), billing_metadata: metadata(50) });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(Object.keys(ok.json<CustomerResource>().billing_metadata)).toHaveLength(50);

    expectValidationError(await api.create({ external_id: nextExternalId('meta51'), billing_metadata: metadata(51) }), 'billing_metadata');
    const customer = await createCustomer();
    expectValidationError(await api.update(customer.id, { billing_metadata: metadata(51) }), 'billing_metadata');
  });

  it('validates PUT bodies the same way', async () => {
    const customer = await createCustomer({ email: 'ok@example.com' });
    expectValidationError(await api.update(customer.id, { email: 'broken' }), 'email');
    expectUnknownFields(await api.update(customer.id, { colour: 'blue' }), ['colour']);
    expect((await api.get(customer.id)).json<CustomerResource>().email).toBe('ok@example.com');
  });
});

describe('update', () => {
  it('changes the given fields, keeps the others, and persists', async () => {
    const customer = await createCustomer({ name: 'Before', email: 'before@example.com', billing_metadata: { a: 1 } });
    await sleep(5);
    const res = await api.update(customer.id, {
      name: 'After',
      billing_metadata: { b: 'two' },
      net_payment_term: 7,
      timezone: 'Asia/Kolkata',
    });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<CustomerResource>();
    expect(updated).toMatchObject({
      id: customer.id,
      external_id: customer.external_id,
      name: 'After',
      email: 'before@example.com',
      currency: 'EUR',
      billing_metadata: { b: 'two' },
      net_payment_term: 7,
      timezone: 'Asia/Kolkata',
      created_at: customer.created_at,
    });
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(customer.updated_at));
    expect((await api.get(customer.id)).json()).toEqual(updated);
  });

  it('sets nullable fields back to null', async () => {
    const customer = await createCustomer({ name: 'Named', net_payment_term: 10, timezone: 'Europe/Rome' });
    const res = await api.update(customer.id, { name: null, net_payment_term: null, timezone: null });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ name: null, net_payment_term: null, timezone: null });
  });

  it('addresses a customer by external_id too', async () => {
    const customer = await createCustomer();
    const res = await api.update(customer.external_id, { name: 'Via external id' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<CustomerResource>()).toMatchObject({ id: customer.id, name: 'Via external id' });
  });

  it('keeps external_id immutable: 422 when changed, 200 when the same', async () => {
    const customer = await createCustomer({ name: 'Immutable' });
    expectValidationError(await api.update(customer.id, { external_id: 'something-else', name: 'Changed' }), 'external_id');
    const unchanged = await api.get(customer.id);
    expect(unchanged.json()).toMatchObject({ external_id: customer.external_id, name: 'Immutable' });

    const same = await api.update(customer.id, { external_id: customer.external_id, name: 'Renamed' });
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json()).toMatchObject({ external_id: customer.external_id, name: 'Renamed' });
  });

  it('is 404 for an unknown customer', async () => {
    expectError(await api.update('00000000-0000-4000-8000-000000000000', { name: 'x' }), 404, 'customer_not_found');
  });
});

describe('tenant isolation', () => {
  let a: TestOrganization;
  let b: TestOrganization;
  let customerOfA: CustomerResource;

  beforeAll(async () => {
    a = await createOrganization(stack.app, { name: 'Tenant A' });
    b = await createOrganization(stack.app, { name: 'Tenant B' });
    customerOfA = await createCustomer({ name: 'Belongs to A', external_id: 'tenant-a-customer' }, a.headers);
  });

  it("org B gets 404 for org A's customer by id and by external_id", async () => {
    expectError(await api.get(customerOfA.id, b.headers), 404, 'customer_not_found');
    expectError(await api.get(customerOfA.external_id, b.headers), 404, 'customer_not_found');
  });

  it("org B cannot update or delete org A's customer", async () => {
    expectError(await api.update(customerOfA.id, { name: 'Hijacked' }, b.headers), 404, 'customer_not_found');
    expectError(await api.update(customerOfA.external_id, { name: 'Hijacked' }, b.headers), 404, 'customer_not_found');
    expectError(await api.remove(customerOfA.id, b.headers), 404, 'customer_not_found');
    expectError(await api.remove(customerOfA.external_id, b.headers), 404, 'customer_not_found');
    const res = await api.get(customerOfA.id, a.headers);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ name: 'Belongs to A', deleted_at: null });
  });

  it("org B's list does not show org A's customers", async () => {
    const customerOfB = await createCustomer({}, b.headers);
    const res = await api.list('', b.headers);
    expect(res.json<CustomerResource[]>().map((c) => c.id)).toEqual([customerOfB.id]);
    expect(res.headers['x-total-count']).toBe('1');
    const filtered = await api.list(`?external_id=${customerOfA.external_id}`, b.headers);
    expect(filtered.json()).toEqual([]);
    expect(filtered.headers['x-total-count']).toBe('0');
  });

  it('org B can use the same external_id for its own customer', async () => {
    const customerOfB = await createCustomer({ external_id: customerOfA.external_id }, b.headers);
    expect((await api.get(customerOfA.external_id, b.headers)).json<CustomerResource>().id).toBe(customerOfB.id);
    expect((await api.get(customerOfA.external_id, a.headers)).json<CustomerResource>().id).toBe(customerOfA.id);
  });

  it('refuses an organization_id in the body (422), creating nothing in the other organization', async () => {
    const res = await api.create({ external_id: nextExternalId('spoof'), organization_id: a.id }, b.headers);
    expectUnknownFields(res, ['organization_id']);
    expect(await stack.db.models.Customer.countDocuments({ organization_id: a.id, external_id: /^spoof/ })).toBe(0);
  });
});

describe('soft delete', () => {
  it('answers 200 with deleted_at, then the customer is gone from GET and the list', async () => {
    const customer = await createCustomer({ name: 'To delete' });
    const countBefore = Number((await api.list()).headers['x-total-count']);

    const before = Date.now();
    const res = await api.remove(customer.id);
    expect(res.statusCode, res.body).toBe(200);
    const deleted = res.json<CustomerResource>();
    expect(deleted).toMatchObject({ id: customer.id, external_id: customer.external_id, name: 'To delete' });
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expect(Date.parse(deleted.deleted_at!)).toBeGreaterThanOrEqual(before - 5);

    expectError(await api.get(customer.id), 404, 'customer_not_found');
    expectError(await api.get(customer.external_id), 404, 'customer_not_found');
    const list = await api.list('?limit=1000');
    expect(list.json<CustomerResource[]>().map((c) => c.id)).not.toContain(customer.id);
    expect(Number(list.headers['x-total-count'])).toBe(countBefore - 1);
    expect((await api.list(`?external_id=${encodeURIComponent(customer.external_id)}`)).json()).toEqual([]);

    // A status change, not removal of the record (spec section 2).
    const stored = await stack.db.models.Customer.findById(customer.id).lean();
    expect(stored?.deleted_at).toBeInstanceOf(Date);
  });

  it('a deleted customer cannot be updated or deleted again', async () => {
    const customer = await createCustomer();
    expect((await api.remove(customer.id)).statusCode).toBe(200);
    expectError(await api.update(customer.id, { name: 'zombie' }), 404, 'customer_not_found');
    expectError(await api.remove(customer.id), 404, 'customer_not_found');
  });

  it('frees the external_id: it can be created again, and then it names the new customer', async () => {
    const first = await createCustomer({ name: 'Gen 1' });
    expect((await api.remove(first.id)).statusCode).toBe(200);
    const second = await createCustomer({ external_id: first.external_id, name: 'Gen 2' });
    expect(second.id).not.toBe(first.id);
    expect((await api.get(first.external_id)).json<CustomerResource>()).toMatchObject({ id: second.id, name: 'Gen 2' });
    // ...and deleted again, and created a third time.
    expect((await api.remove(second.external_id)).statusCode).toBe(200);
    const third = await createCustomer({ external_id: first.external_id, name: 'Gen 3' });
    expect((await api.get(first.external_id)).json<CustomerResource>().id).toBe(third.id);
    const dup = await api.create({ external_id: first.external_id });
    expectError(dup, 409, 'already_exists', ['existing_customer_id']);
  });

  describe('with subscriptions', () => {
    const subscriptions = () => stack.db.connection.collection('subscriptions');

    it.each(['active', 'pending'])('is refused with 400 customer_has_active_subscriptions while one is %s', async (status) => {
      const customer = await createCustomer();
      await subscriptions().insertOne({ external_id: randomUUID(), organization_id: org.id, customer_id: customer.id, status } as never);
      const res = await api.remove(customer.id);
      expectError(res, 400, 'customer_has_active_subscriptions');
      const still = await api.get(customer.id);
      expect(still.statusCode).toBe(200);
      expect(still.json<CustomerResource>().deleted_at).toBeNull();
    });

    it('is allowed once the subscription is terminated, and ignores other customers', async () => {
      const customer = await createCustomer();
      const neighbour = await createCustomer();
      await subscriptions().insertMany([
        { external_id: randomUUID(), organization_id: org.id, customer_id: customer.id, status: 'terminated' },
        { external_id: randomUUID(), organization_id: org.id, customer_id: customer.id, status: 'canceled' },
        { external_id: randomUUID(), organization_id: org.id, customer_id: neighbour.id, status: 'active' },
      ] as never[]);
      const res = await api.remove(customer.id);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json<CustomerResource>().deleted_at).not.toBeNull();
    });
  });
});
