// Coupons and applied coupons (api-contract.md "Catalog: Coupons, Applied coupons"; billing-rules.md
// Invoice pipeline 4): CRUD by id and code, the cross-field rules of each type, termination,
// applying with overrides, the currency rule, non-reusable coupons, tenant isolation, pagination.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppliedCouponResource, CouponResource } from '../../src/resources/coupon';
import type { CustomerResource } from '../../src/resources/customer';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let other: TestOrganization;
let seq = 0;
const nextCode = (label = 'coupon') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Coupon Org', default_currency: 'USD' });
  other = await createOrganization(stack.app, { name: 'Other Coupon Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
const api = {
  create: (payload: unknown, headers?: Headers) => inject('POST', '/v1/coupons', payload, headers),
  get: (id: string, headers?: Headers) => inject('GET', `/v1/coupons/${encodeURIComponent(id)}`, undefined, headers),
  list: (query = '', headers?: Headers) => inject('GET', `/v1/coupons${query}`, undefined, headers),
  update: (id: string, payload: unknown, headers?: Headers) => inject('PUT', `/v1/coupons/${encodeURIComponent(id)}`, payload, headers),
  remove: (id: string, headers?: Headers) => inject('DELETE', `/v1/coupons/${encodeURIComponent(id)}`, undefined, headers),
  apply: (payload: unknown, headers?: Headers) => inject('POST', '/v1/coupons/apply', payload, headers),
  applied: (customer: string, query = '', headers?: Headers) =>
    inject('GET', `/v1/customers/${encodeURIComponent(customer)}/applied_coupons${query}`, undefined, headers),
  unapply: (id: string, headers?: Headers) => inject('DELETE', `/v1/coupons/applied/${id}`, undefined, headers),
};

const percentage = { coupon_type: 'percentage', percentage_rate: '10', frequency: 'forever' };
const fixed = { coupon_type: 'fixed_amount', amount_cents: 1000, amount_currency: 'USD', frequency: 'once' };

async function createCoupon(payload: Record<string, unknown> = percentage, headers: Headers = org.headers): Promise<CouponResource> {
  const res = await api.create({ code: nextCode(), name: 'Coupon', ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CouponResource>();
}

async function createCustomer(currency = 'USD', headers: Headers = org.headers): Promise<CustomerResource> {
  const res = await inject('POST', '/v1/customers', { external_id: nextCode('cus'), currency }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

async function apply(couponCode: string, customerId: string, overrides: Record<string, unknown> = {}): Promise<AppliedCouponResource> {
  const res = await api.apply({ coupon_code: couponCode, customer_id: customerId, ...overrides });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<AppliedCouponResource>();
}

describe('coupons: create and read', () => {
  it('creates a percentage coupon with the defaults', async () => {
    const code = nextCode('pct');
    const res = await api.create({ code, name: 'Ten off', coupon_type: 'percentage', percentage_rate: 12.5 });
    expect(res.statusCode, res.body).toBe(201);
    const coupon = res.json<CouponResource>();
    expect(coupon).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      code,
      name: 'Ten off',
      description: null,
      coupon_type: 'percentage',
      amount_cents: null,
      amount_currency: null,
      percentage_rate: '12.5',
      frequency: 'once',
      frequency_duration: null,
      reusable: true,
      expiration_at: null,
      status: 'active',
      terminated_at: null,
      deleted_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
    const stored = await stack.db.connection.collection('coupons').findOne({ _id: coupon.id as never });
    expect(stored!.percentage_rate.constructor.name).toBe('Decimal128');
  });

  it('creates a fixed-amount recurring coupon with every field', async () => {
    const expiration = new Date(Date.now() + 86_400_000);
    const payload = {
      code: nextCode('fixed'),
      name: 'Welcome',
      description: 'First three months',
      coupon_type: 'fixed_amount',
      amount_cents: '2500.5',
      amount_currency: 'eur',
      frequency: 'recurring',
      frequency_duration: 3,
      reusable: false,
      expiration_at: expiration.toISOString().replace('Z', '+00:00'),
    };
    const coupon = await createCoupon(payload);
    expect(coupon).toMatchObject({
      ...payload,
      amount_cents: '2500.5000',
      amount_currency: 'EUR',
      percentage_rate: null,
      expiration_at: expiration.toISOString(),
      status: 'active',
    });
  });

  it('gets a coupon by id and by code, with or without a trailing slash', async () => {
    const coupon = await createCoupon();
    for (const url of [`/v1/coupons/${coupon.id}`, `/v1/coupons/${coupon.code}`, `/v1/coupons/${coupon.code}/`]) {
      const res = await inject('GET', url);
      expect(res.statusCode, url).toBe(200);
      expect(res.json()).toEqual(coupon);
    }
    expectError(await api.get('no_such_coupon'), 404, 'coupon_not_found');
    expectError(await api.get(randomUUID()), 404, 'coupon_not_found');
  });

  it('is 409 already_exists on a duplicate code; another organization may use it', async () => {
    const coupon = await createCoupon();
    expectError(await api.create({ code: coupon.code, name: 'x', ...percentage }), 409, 'already_exists');
    expect((await createCoupon({ code: coupon.code, ...percentage }, other.headers)).organization_id).toBe(other.id);
  });

  it('lists coupons newest first with paging and a status filter', async () => {
    const own = await createOrganization(stack.app, { name: 'Coupon Paging Org' });
    const made: CouponResource[] = [];
    for (let i = 0; i < 4; i++) {
      made.push(await createCoupon(percentage, own.headers));
      await sleep(5);
    }
    expect((await api.remove(made[1]!.id, own.headers)).statusCode).toBe(200);
    const ids = made.map((c) => c.id).reverse();
    const all = await api.list('', own.headers);
    expect(all.json<CouponResource[]>().map((c) => c.id)).toEqual(ids);
    expect(all.headers['x-total-count']).toBe('4');
    const page = await api.list('?skip=2&limit=1', own.headers);
    expect(page.json<CouponResource[]>().map((c) => c.id)).toEqual([ids[2]]);
    expect(page.headers['x-total-count']).toBe('4');
    const terminated = await api.list('?status=terminated', own.headers);
    expect(terminated.json<CouponResource[]>().map((c) => c.id)).toEqual([made[1]!.id]);
    expect((await api.list('?status=active', own.headers)).headers['x-total-count']).toBe('3');
    expectError(await api.list('?limit=1001', own.headers), 422, 'validation_error');
    expectError(await api.list('?status=expired', own.headers), 422, 'validation_error');
  });
});

describe('coupons: validation', () => {
  it.each([
    ['a fixed_amount coupon without amount_cents', { ...fixed, amount_cents: undefined }, 'amount_cents'],
    ['a fixed_amount coupon without amount_currency', { ...fixed, amount_currency: undefined }, 'amount_currency'],
    ['a fixed_amount coupon with a percentage_rate', { ...fixed, percentage_rate: '5' }, 'percentage_rate'],
    ['a percentage coupon without percentage_rate', { ...percentage, percentage_rate: undefined }, 'percentage_rate'],
    ['a percentage coupon with amount_cents', { ...percentage, amount_cents: 100 }, 'amount_cents'],
    ['a percentage coupon with amount_currency', { ...percentage, amount_currency: 'USD' }, 'amount_currency'],
    ['a recurring coupon without frequency_duration', { ...percentage, frequency: 'recurring' }, 'frequency_duration'],
    ['a forever coupon with frequency_duration', { ...percentage, frequency_duration: 2 }, 'frequency_duration'],
    ['a frequency_duration of 0', { ...percentage, frequency: 'recurring', frequency_duration: 0 }, 'frequency_duration'],
    ['a percentage_rate of 0', { ...percentage, percentage_rate: '0' }, 'percentage_rate'],
    ['a percentage_rate above 100', { ...percentage, percentage_rate: '100.01' }, 'percentage_rate'],
    ['a percentage_rate with 5 fractional digits', { ...percentage, percentage_rate: '1.00001' }, 'percentage_rate'],
    ['an amount_cents of 0', { ...fixed, amount_cents: 0 }, 'amount_cents'],
    ['an amount_cents with 5 fractional digits', { ...fixed, amount_cents: '1.00001' }, 'amount_cents'],
    ['an unknown currency', { ...fixed, amount_currency: 'ZZZ' }, 'amount_currency'],
    ['an unknown coupon_type', { ...percentage, coupon_type: 'free_months' }, 'coupon_type'],
    ['a missing coupon_type', { ...percentage, coupon_type: undefined }, 'coupon_type'],
    ['an unknown frequency', { ...percentage, frequency: 'daily' }, 'frequency'],
    ['a missing code', { ...percentage, code: '' }, 'code'],
    ['an expiration_at in the past', { ...percentage, expiration_at: '2020-01-01T00:00:00Z' }, 'expiration_at'],
    ['an expiration_at that is not a timestamp', { ...percentage, expiration_at: 'tomorrow' }, 'expiration_at'],
  ])('is 422 with %s, and creates nothing', async (_what, payload, path) => {
    const code = nextCode('invalid');
    expectValidationError(await api.create({ code, name: 'x', ...payload }), path);
    expectError(await api.get(code), 404, 'coupon_not_found');
  });

  it('accepts a percentage_rate of exactly 100', async () => {
    expect((await createCoupon({ ...percentage, percentage_rate: 100 })).percentage_rate).toBe('100');
  });

  it('is 422 with an unknown field', async () => {
    const body = expectUnknownFields(await api.create({ code: nextCode(), name: 'x', ...percentage, expiration: 'no_expiration' }), [
      'expiration',
    ]);
    expect(body.errors.map((e) => e.path)).toEqual(['expiration']);
  });
});

describe('coupons: update and terminate', () => {
  it('updates by code, keeping what is left out', async () => {
    const coupon = await createCoupon();
    await sleep(5);
    const res = await api.update(coupon.code, { name: 'Renamed', percentage_rate: '15', description: 'd' });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<CouponResource>();
    expect(updated).toMatchObject({
      id: coupon.id,
      name: 'Renamed',
      percentage_rate: '15',
      description: 'd',
      frequency: 'forever',
      coupon_type: 'percentage',
    });
    expect(updated.created_at).toBe(coupon.created_at);
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(coupon.updated_at));
    expect((await api.get(coupon.id)).json()).toEqual(updated);
  });

  it('drops the terms of the old type or frequency when they change', async () => {
    const coupon = await createCoupon({ ...percentage, frequency: 'recurring', frequency_duration: 3 });
    const res = await api.update(coupon.id, {
      coupon_type: 'fixed_amount',
      amount_cents: 500,
      amount_currency: 'USD',
      frequency: 'forever',
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      coupon_type: 'fixed_amount',
      amount_cents: '500.0000',
      amount_currency: 'USD',
      percentage_rate: null,
      frequency: 'forever',
      frequency_duration: null,
    });
  });

  it('is 422 when the update breaks a cross-field rule, and changes nothing', async () => {
    const coupon = await createCoupon();
    expectValidationError(await api.update(coupon.id, { coupon_type: 'fixed_amount' }), 'amount_cents');
    expectValidationError(await api.update(coupon.id, { amount_cents: 100 }), 'amount_cents');
    expectValidationError(await api.update(coupon.id, { frequency: 'recurring' }), 'frequency_duration');
    expectValidationError(await api.update(coupon.id, { expiration_at: '2001-01-01T00:00:00.000Z' }), 'expiration_at');
    expect((await api.get(coupon.id)).json()).toEqual(coupon);
  });

  it('is 409 when the new code is taken by an active coupon', async () => {
    const a = await createCoupon();
    const b = await createCoupon();
    expectError(await api.update(b.id, { code: a.code }), 409, 'already_exists');
  });

  it('terminates on DELETE: 200 with status terminated, still readable, code free again', async () => {
    const coupon = await createCoupon();
    const res = await api.remove(coupon.code);
    expect(res.statusCode, res.body).toBe(200);
    const terminated = res.json<CouponResource>();
    expect(terminated).toMatchObject({ id: coupon.id, status: 'terminated', deleted_at: null });
    expect(terminated.terminated_at).toMatch(ISO_MS_UTC);
    expect((await api.get(coupon.id)).json()).toEqual(terminated);
    expect((await api.get(coupon.code)).json()).toEqual(terminated);
    // Idempotent.
    expect((await api.remove(coupon.id)).json()).toEqual(terminated);
    expectError(await api.update(coupon.id, { name: 'x' }), 400, 'coupon_terminated');
    // The code names the new active coupon; the terminated one stays readable by id.
    const again = await createCoupon({ code: coupon.code, ...percentage });
    expect((await api.get(coupon.code)).json<CouponResource>().id).toBe(again.id);
    expect((await api.get(coupon.id)).json<CouponResource>().status).toBe('terminated');
  });
});

describe('apply', () => {
  it('applies a coupon to a customer by id or external_id, copying its terms', async () => {
    const coupon = await createCoupon({ ...percentage, percentage_rate: '20' });
    const customer = await createCustomer();
    const res = await api.apply({ coupon_code: coupon.code, customer_id: customer.external_id });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      coupon_id: coupon.id,
      coupon_code: coupon.code,
      coupon_type: 'percentage',
      customer_id: customer.id,
      amount_cents: null,
      amount_currency: null,
      percentage_rate: '20',
      frequency: 'forever',
      frequency_duration: null,
      frequency_duration_remaining: null,
      status: 'active',
      terminated_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
    const byId = await apply(coupon.code, customer.id);
    expect(byId.customer_id).toBe(customer.id);
  });

  it('applies a fixed recurring coupon with overrides', async () => {
    const coupon = await createCoupon({ ...fixed, frequency: 'recurring', frequency_duration: 6 });
    const customer = await createCustomer();
    const plain = await apply(coupon.code, customer.id);
    expect(plain).toMatchObject({
      amount_cents: '1000.0000',
      amount_currency: 'USD',
      percentage_rate: null,
      frequency: 'recurring',
      frequency_duration: 6,
      frequency_duration_remaining: 6,
    });
    const custom = await apply(coupon.code, customer.id, { amount_cents: '250.25', frequency_duration: 2 });
    expect(custom).toMatchObject({
      amount_cents: '250.2500',
      amount_currency: 'USD',
      frequency_duration: 2,
      frequency_duration_remaining: 2,
    });
    const stored = await stack.db.connection.collection('applied_coupons').findOne({ _id: custom.id as never });
    expect(stored!.amount_cents.constructor.name).toBe('Decimal128');
  });

  it('applies a percentage coupon with its own rate', async () => {
    const coupon = await createCoupon(percentage);
    expect((await apply(coupon.code, (await createCustomer()).id, { percentage_rate: 33.3 })).percentage_rate).toBe('33.3');
  });

  it.each([
    ['a percentage_rate on a fixed coupon', fixed, { percentage_rate: '5' }, 'percentage_rate'],
    ['an amount_cents on a percentage coupon', percentage, { amount_cents: 100 }, 'amount_cents'],
    ['an amount_currency on a percentage coupon', percentage, { amount_currency: 'USD' }, 'amount_currency'],
    ['a frequency_duration on a once coupon', fixed, { frequency_duration: 2 }, 'frequency_duration'],
    ['a percentage_rate above 100', percentage, { percentage_rate: 101 }, 'percentage_rate'],
    ['an amount_cents of 0', fixed, { amount_cents: 0 }, 'amount_cents'],
    [
      'a frequency_duration of 0',
      { ...percentage, frequency: 'recurring', frequency_duration: 1 },
      { frequency_duration: 0 },
      'frequency_duration',
    ],
  ])('is 422 for an override that does not fit: %s', async (_what, couponPayload, overrides, path) => {
    const coupon = await createCoupon(couponPayload);
    const customer = await createCustomer();
    expectValidationError(await api.apply({ coupon_code: coupon.code, customer_id: customer.id, ...overrides }), path);
    expect((await api.applied(customer.id)).headers['x-total-count']).toBe('0');
  });

  it("is 422 for a fixed amount in another currency than the customer's, also through an override", async () => {
    const coupon = await createCoupon(fixed);
    const euro = await createCustomer('EUR');
    const body = expectValidationError(await api.apply({ coupon_code: coupon.code, customer_id: euro.id }), 'amount_currency');
    expect(body.message).toContain('EUR');
    expectValidationError(
      await api.apply({ coupon_code: coupon.code, customer_id: (await createCustomer()).id, amount_currency: 'EUR' }),
      'amount_currency',
    );
    // An override to the customer's currency makes it fit; a percentage coupon has no currency.
    expect((await apply(coupon.code, euro.id, { amount_currency: 'EUR' })).amount_currency).toBe('EUR');
    expect((await apply((await createCoupon(percentage)).code, euro.id)).status).toBe('active');
  });

  it('is 400 coupon_terminated for a terminated coupon', async () => {
    const coupon = await createCoupon();
    await api.remove(coupon.id);
    const customer = await createCustomer();
    expectError(await api.apply({ coupon_code: coupon.code, customer_id: customer.id }), 400, 'coupon_terminated');
    expect((await api.applied(customer.id)).json()).toEqual([]);
  });

  it('is 400 coupon_expired once expiration_at has passed', async () => {
    const coupon = await createCoupon({ ...percentage, expiration_at: new Date(Date.now() + 60_000).toISOString() });
    const customer = await createCustomer();
    await apply(coupon.code, customer.id);
    await stack.db.models.Coupon.updateOne({ _id: coupon.id }, { $set: { expiration_at: new Date(Date.now() - 1000) } });
    expectError(await api.apply({ coupon_code: coupon.code, customer_id: (await createCustomer()).id }), 400, 'coupon_expired');
  });

  it('is 404 for an unknown coupon or customer', async () => {
    const coupon = await createCoupon();
    const customer = await createCustomer();
    expectError(await api.apply({ coupon_code: 'no_such_coupon', customer_id: customer.id }), 404, 'coupon_not_found');
    expectError(await api.apply({ coupon_code: coupon.code, customer_id: 'no_such_customer' }), 404, 'customer_not_found');
    expectValidationError(await api.apply({ customer_id: customer.id }), 'coupon_code');
    expectUnknownFields(await api.apply({ coupon_code: coupon.code, customer_id: customer.id, frequency: 'once' }), ['frequency']);
  });

  it('applies a reusable coupon to several customers, and to one customer more than once', async () => {
    const coupon = await createCoupon();
    const a = await createCustomer();
    const b = await createCustomer();
    await apply(coupon.code, a.id);
    await apply(coupon.code, b.id);
    await apply(coupon.code, a.id);
    expect((await api.applied(a.id)).headers['x-total-count']).toBe('2');
  });

  it('is 409 for a second application of a coupon that is not reusable, to anyone, until the first is removed', async () => {
    const coupon = await createCoupon({ ...percentage, reusable: false });
    const a = await createCustomer();
    const b = await createCustomer();
    const first = await apply(coupon.code, a.id);
    expectError(await api.apply({ coupon_code: coupon.code, customer_id: b.id }), 409, 'already_exists');
    expectError(await api.apply({ coupon_code: coupon.code, customer_id: a.id }), 409, 'already_exists');
    expect((await api.unapply(first.id)).statusCode).toBe(200);
    const second = await apply(coupon.code, b.id);
    expect(second.customer_id).toBe(b.id);
  });

  it('applies a coupon that is not reusable exactly once under concurrent requests', async () => {
    const coupon = await createCoupon({ ...percentage, reusable: false });
    const customers = await Promise.all(Array.from({ length: 5 }, () => createCustomer()));
    const results = await Promise.all(customers.map((c) => api.apply({ coupon_code: coupon.code, customer_id: c.id })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409]);
    expect(await stack.db.models.AppliedCoupon.countDocuments({ coupon_id: coupon.id })).toBe(1);
  });

  it('holds the coupon in a unique key while its application is active, so a racing second one is a duplicate', async () => {
    const coupon = await createCoupon({ ...percentage, reusable: false });
    const first = await apply(coupon.code, (await createCustomer()).id);
    const collection = stack.db.connection.collection('applied_coupons');
    expect((await collection.findOne({ _id: first.id as never }))!.exclusive_key).toBe(coupon.id);
    const { _id, ...copy } = (await collection.findOne({ _id: first.id as never }))!;
    await expect(collection.insertOne({ ...copy, _id: randomUUID() as never })).rejects.toMatchObject({ code: 11000 });
    await api.unapply(first.id);
    expect((await collection.findOne({ _id: first.id as never }))!.exclusive_key).toBe(first.id);
    expect(_id).toBe(first.id);
    // A reusable coupon's applications each hold their own key.
    const reusable = await apply((await createCoupon()).code, (await createCustomer()).id);
    expect((await collection.findOne({ _id: reusable.id as never }))!.exclusive_key).toBe(reusable.id);
  });

  it('frees a coupon that is not reusable when its application was terminated elsewhere (invoicing)', async () => {
    const coupon = await createCoupon({ ...percentage, reusable: false });
    const first = await apply(coupon.code, (await createCustomer()).id);
    await stack.db.models.AppliedCoupon.updateOne({ _id: first.id }, { $set: { status: 'terminated', terminated_at: new Date() } });
    const second = await apply(coupon.code, (await createCustomer()).id);
    expect(second.id).not.toBe(first.id);
  });
});

describe('applied coupons of a customer', () => {
  it('lists them newest first with paging and a status filter, by customer id or external_id', async () => {
    const customer = await createCustomer();
    const made: AppliedCouponResource[] = [];
    for (let i = 0; i < 3; i++) {
      made.push(await apply((await createCoupon()).code, customer.id));
      await sleep(5);
    }
    await apply((await createCoupon()).code, (await createCustomer()).id);
    const ids = made.map((a) => a.id).reverse();
    const all = await api.applied(customer.external_id);
    expect(all.statusCode, all.body).toBe(200);
    expect(all.json<AppliedCouponResource[]>().map((a) => a.id)).toEqual(ids);
    expect(all.headers['x-total-count']).toBe('3');
    const page = await api.applied(customer.id, '?skip=1&limit=1');
    expect(page.json<AppliedCouponResource[]>().map((a) => a.id)).toEqual([ids[1]]);
    expect(page.headers['x-total-count']).toBe('3');
    await api.unapply(made[0]!.id);
    expect((await api.applied(customer.id, '?status=active')).json<AppliedCouponResource[]>().map((a) => a.id)).toEqual(ids.slice(0, 2));
    expect((await api.applied(customer.id, '?status=terminated')).json<AppliedCouponResource[]>().map((a) => a.id)).toEqual([made[0]!.id]);
    const slash = await inject('GET', `/v1/customers/${customer.id}/applied_coupons/`);
    expect(slash.json<AppliedCouponResource[]>()).toHaveLength(3);
    expectError(await api.applied('no_such_customer'), 404, 'customer_not_found');
    expectError(await api.applied(customer.id, '?limit=0'), 422, 'validation_error');
  });

  it('terminates an applied coupon on DELETE, idempotently', async () => {
    const customer = await createCustomer();
    const applied = await apply((await createCoupon()).code, customer.id);
    const res = await api.unapply(applied.id);
    expect(res.statusCode, res.body).toBe(200);
    const terminated = res.json<AppliedCouponResource>();
    expect(terminated).toMatchObject({ id: applied.id, status: 'terminated', coupon_id: applied.coupon_id });
    expect(terminated.terminated_at).toMatch(ISO_MS_UTC);
    expect((await api.unapply(applied.id)).json()).toEqual(terminated);
    expect((await inject('DELETE', `/v1/coupons/applied/${applied.id}/`)).statusCode).toBe(200);
    expectError(await api.unapply(randomUUID()), 404, 'applied_coupon_not_found');
  });

  it('keeps existing applications when the coupon is edited or terminated', async () => {
    const coupon = await createCoupon();
    const customer = await createCustomer();
    const applied = await apply(coupon.code, customer.id);
    await api.update(coupon.id, { percentage_rate: '50' });
    await api.remove(coupon.id);
    expect((await api.applied(customer.id)).json()).toEqual([applied]);
  });
});

describe('tenant isolation', () => {
  it("is 404 for another organization's coupon, by id and by code", async () => {
    const coupon = await createCoupon();
    for (const ref of [coupon.id, coupon.code]) {
      expectError(await api.get(ref, other.headers), 404, 'coupon_not_found');
      expectError(await api.update(ref, { name: 'hijacked' }, other.headers), 404, 'coupon_not_found');
      expectError(await api.remove(ref, other.headers), 404, 'coupon_not_found');
    }
    expect((await api.list('?limit=1000', other.headers)).json<CouponResource[]>().map((c) => c.id)).not.toContain(coupon.id);
    expect((await api.get(coupon.id)).json()).toEqual(coupon);
  });

  it("is 404 for another organization's coupon or customer in apply, and for its applied coupons", async () => {
    const coupon = await createCoupon();
    const customer = await createCustomer();
    const applied = await apply(coupon.code, customer.id);
    const theirCoupon = await createCoupon(percentage, other.headers);
    const theirCustomer = await createCustomer('USD', other.headers);
    expectError(await api.apply({ coupon_code: coupon.code, customer_id: theirCustomer.id }, other.headers), 404, 'coupon_not_found');
    expectError(await api.apply({ coupon_code: theirCoupon.code, customer_id: customer.id }, other.headers), 404, 'customer_not_found');
    expectError(await api.applied(customer.id, '', other.headers), 404, 'customer_not_found');
    expectError(await api.unapply(applied.id, other.headers), 404, 'applied_coupon_not_found');
    expect((await api.applied(customer.id)).json()).toEqual([applied]);
    expect((await api.applied(theirCustomer.id, '', other.headers)).json()).toEqual([]);
  });
});
