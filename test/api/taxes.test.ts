// Taxes (api-contract.md "Catalog"): CRUD by id and by code, the rate as a fraction with at most 4
// decimals, tax application to customers, plans, charges and add-ons (AppliedTax), resource_in_use on
// delete, tenant isolation.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppliedTaxResource, TaxResource } from '../../src/resources/tax';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const nextCode = (label = 'tax') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Tax Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, headers: Headers, payload?: unknown) =>
  stack.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
const api = {
  create: (payload: unknown, headers: Headers = org.headers) => inject('POST', '/v1/taxes', headers, payload),
  get: (id: string, headers: Headers = org.headers) => inject('GET', `/v1/taxes/${encodeURIComponent(id)}`, headers),
  list: (query = '', headers: Headers = org.headers) => inject('GET', `/v1/taxes${query}`, headers),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    inject('PUT', `/v1/taxes/${encodeURIComponent(id)}`, headers, payload),
  remove: (id: string, headers: Headers = org.headers) => inject('DELETE', `/v1/taxes/${encodeURIComponent(id)}`, headers),
  apply: (payload: unknown, headers: Headers = org.headers) => inject('POST', '/v1/taxes/apply', headers, payload),
  applied: (query: Record<string, string>, headers: Headers = org.headers) =>
    inject('GET', `/v1/taxes/applied?${new URLSearchParams(query).toString()}`, headers),
  unapply: (id: string, headers: Headers = org.headers) => inject('DELETE', `/v1/taxes/applied/${encodeURIComponent(id)}`, headers),
};

async function createTax(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<TaxResource> {
  const res = await api.create({ code: nextCode(), name: 'VAT', rate: '0.2', ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<TaxResource>();
}

async function createCustomer(headers: Headers = org.headers): Promise<{ id: string; external_id: string }> {
  const res = await inject('POST', '/v1/customers', headers, { external_id: nextCode('cus') });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function createAddOn(headers: Headers = org.headers): Promise<{ id: string; code: string }> {
  const res = await inject('POST', '/v1/add_ons', headers, { code: nextCode('addon'), name: 'Setup', amount_cents: 1000 });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

/** A plan document as the plans module stores it, with one charge. */
async function insertPlan(organizationId: string, deletedAt: Date | null = null): Promise<{ id: string; code: string; chargeId: string }> {
  const plan = { id: randomUUID(), code: nextCode('plan'), chargeId: randomUUID() };
  await stack.db.connection.collection('plans').insertOne({
    _id: plan.id,
    organization_id: organizationId,
    code: plan.code,
    name: 'Plan',
    deleted_at: deletedAt,
    charges: [{ _id: plan.chargeId, billable_metric_id: randomUUID(), filters: [] }],
    created_at: new Date(),
    updated_at: new Date(),
  } as never);
  return plan;
}

async function applyTax(
  taxCode: string,
  taxableType: string,
  taxableId: string,
  headers: Headers = org.headers,
): Promise<AppliedTaxResource> {
  const res = await api.apply({ tax_code: taxCode, taxable_type: taxableType, taxable_id: taxableId }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<AppliedTaxResource>();
}

describe('create and read', () => {
  it('creates a tax with defaults', async () => {
    const code = nextCode('defaults');
    const res = await api.create({ code, name: 'VAT 20', rate: '0.2' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      code,
      name: 'VAT 20',
      rate: '0.2',
      applied_to_organization: false,
      description: null,
      category: null,
      deleted_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
  });

  it.each([
    ['0.2', '0.2'],
    [0.2, '0.2'],
    ['0.20', '0.2'],
    ['0.0875', '0.0875'],
    [0.0001, '0.0001'],
    ['1', '1'],
    [1, '1'],
    ['0', '0'],
    ['1.0000', '1'],
  ])('accepts rate %j and answers it as the plain decimal %s', async (rate, expected) => {
    const tax = await createTax({ rate });
    expect(tax.rate).toBe(expected);
    expect((await api.get(tax.id)).json<TaxResource>().rate).toBe(expected);
  });

  it('stores the rate as Decimal128 and keeps every field', async () => {
    const payload = {
      code: nextCode('full'),
      name: 'Sales tax',
      rate: '0.0875',
      applied_to_organization: true,
      description: 'CA',
      category: 'sales',
    };
    const res = await api.create(payload);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ ...payload, rate: '0.0875' });
    const stored = await stack.db.connection.collection('taxes').findOne({ _id: res.json<TaxResource>().id } as never);
    expect(stored?.rate?._bsontype).toBe('Decimal128');
    expect(String(stored?.rate)).toBe('0.0875');
    expect(stored).toMatchObject({ organization_id: org.id, applied_to_organization: true, deleted_at: null });
  });

  it('gets a tax by id and by code, with or without a trailing slash', async () => {
    const tax = await createTax();
    for (const url of [`/v1/taxes/${tax.id}`, `/v1/taxes/${tax.code}`, `/v1/taxes/${tax.id}/`]) {
      const res = await inject('GET', url, org.headers);
      expect(res.statusCode, url).toBe(200);
      expect(res.json()).toEqual(tax);
    }
    expectError(await api.get(randomUUID()), 404, 'tax_not_found');
    expectError(await api.get('no_such_tax'), 404, 'tax_not_found');
  });

  it('is 409 already_exists on a duplicate code', async () => {
    const tax = await createTax();
    const body = expectError(await api.create({ code: tax.code, name: 'Again', rate: '0.1' }), 409, 'already_exists');
    expect(body.message).toContain(tax.code);
    expect((await api.get(tax.code)).json<TaxResource>().rate).toBe('0.2');
  });

  it('lists newest first with X-Total-Count, pages, and filters applied_to_organization', async () => {
    const own = await createOrganization(stack.app, { name: 'Tax list org' });
    const made: TaxResource[] = [];
    for (const applied of [false, true, false]) {
      made.push(await createTax({ applied_to_organization: applied }, own.headers));
      await sleep(3);
    }
    for (const url of ['/v1/taxes', '/v1/taxes/']) {
      const res = await inject('GET', url, own.headers);
      expect(res.json<TaxResource[]>().map((t) => t.id)).toEqual(made.map((t) => t.id).reverse());
      expect(res.headers['x-total-count']).toBe('3');
    }
    const page = await api.list('?skip=2&limit=5', own.headers);
    expect(page.json<TaxResource[]>().map((t) => t.id)).toEqual([made[0]!.id]);
    expect(page.headers['x-total-count']).toBe('3');
    const orgWide = await api.list('?applied_to_organization=true', own.headers);
    expect(orgWide.json<TaxResource[]>().map((t) => t.id)).toEqual([made[1]!.id]);
    expect(orgWide.headers['x-total-count']).toBe('1');
    expect((await api.list('?applied_to_organization=false', own.headers)).headers['x-total-count']).toBe('2');
    expectValidationError(await api.list('?limit=1001', own.headers), 'limit');
  });
});

describe('validation', () => {
  it.each([
    ['5 fractional digits', { rate: '0.12345' }, 'rate'],
    ['5 fractional digits as a number', { rate: 0.12345 }, 'rate'],
    ['a rate above 1', { rate: '1.5' }, 'rate'],
    ['a rate of 20 (a percentage)', { rate: 20 }, 'rate'],
    ['a negative rate', { rate: '-0.1' }, 'rate'],
    ['a rate that is not a number', { rate: '12,5' }, 'rate'],
    ['a boolean rate', { rate: true }, 'rate'],
    ['a missing rate', { rate: undefined }, 'rate'],
    ['a missing code', { code: undefined }, 'code'],
    ['a missing name', { name: undefined }, 'name'],
    ['a non-boolean applied_to_organization', { applied_to_organization: 'yes' }, 'applied_to_organization'],
    ['a category over 255 characters', { category: 'c'.repeat(256) }, 'category'],
  ])('is 422 with %s, naming the field, creating nothing', async (_name, payload, path) => {
    const before = await stack.db.models.Tax.countDocuments({ organization_id: org.id });
    expectValidationError(await api.create({ code: nextCode('invalid'), name: 'Invalid', rate: '0.1', ...payload }), path);
    expect(await stack.db.models.Tax.countDocuments({ organization_id: org.id })).toBe(before);
  });

  it('is 422 naming each unknown field', async () => {
    const body = expectUnknownFields(await api.create({ code: nextCode(), name: 'x', rate: '0.1', percentage: 20 }), ['percentage']);
    expect(body.errors.map((e) => e.path)).toEqual(['percentage']);
  });
});

describe('update', () => {
  it('changes the given fields by id or by code and keeps the others', async () => {
    const tax = await createTax({ description: 'Old', category: 'vat' });
    await sleep(5);
    const res = await api.update(tax.code, { name: 'Reduced VAT', rate: 0.055, description: null });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<TaxResource>();
    expect(updated).toMatchObject({ id: tax.id, code: tax.code, name: 'Reduced VAT', rate: '0.055', description: null, category: 'vat' });
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(tax.updated_at));
    expect((await api.get(tax.id)).json()).toEqual(updated);
  });

  it('validates PUT bodies and changes nothing on 422', async () => {
    const tax = await createTax();
    expectValidationError(await api.update(tax.id, { rate: '0.00001' }), 'rate');
    expectValidationError(await api.update(tax.id, { rate: 2 }), 'rate');
    expectUnknownFields(await api.update(tax.id, { ratee: '0.1' }), ['ratee']);
    expect((await api.get(tax.id)).json()).toEqual(tax);
  });

  it('changes the code; 409 when it is taken; 404 for an unknown tax', async () => {
    const tax = await createTax();
    const other = await createTax();
    expectError(await api.update(tax.id, { code: other.code }), 409, 'already_exists');
    const code = nextCode('recoded');
    expect((await api.update(tax.id, { code })).statusCode).toBe(200);
    expect((await api.get(code)).json<TaxResource>().id).toBe(tax.id);
    expectError(await api.update(randomUUID(), { name: 'x' }), 404, 'tax_not_found');
  });
});

describe('apply', () => {
  it('applies a tax to a customer by id, answering 201 with the link', async () => {
    const tax = await createTax();
    const customer = await createCustomer();
    const res = await api.apply({ tax_code: tax.code, taxable_type: 'customer', taxable_id: customer.id });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(UUID),
      tax_id: tax.id,
      tax_code: tax.code,
      taxable_type: 'customer',
      taxable_id: customer.id,
      created_at: expect.stringMatching(ISO_MS_UTC),
    });
    const stored = await stack.db.connection.collection('applied_taxes').findOne({ _id: res.json<AppliedTaxResource>().id } as never);
    expect(stored).toMatchObject({ organization_id: org.id, tax_id: tax.id, taxable_type: 'customer', taxable_id: customer.id });
  });

  it('resolves a customer external_id to its id, and 409 when the tax is already applied', async () => {
    const tax = await createTax();
    const customer = await createCustomer();
    const link = await applyTax(tax.code, 'customer', customer.external_id);
    expect(link.taxable_id).toBe(customer.id);
    const body = expectError(
      await api.apply({ tax_code: tax.code, taxable_type: 'customer', taxable_id: customer.id }),
      409,
      'already_exists',
    );
    expect(body.message).toContain(tax.code);
    expect(await stack.db.models.AppliedTax.countDocuments({ tax_id: tax.id })).toBe(1);
  });

  it('applies to a plan by id and by code', async () => {
    const tax = await createTax();
    const plan = await insertPlan(org.id);
    const byId = await applyTax(tax.code, 'plan', plan.id);
    expect(byId).toMatchObject({ taxable_type: 'plan', taxable_id: plan.id, tax_id: tax.id });
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'plan', taxable_id: plan.code }), 409, 'already_exists');
    const other = await createTax();
    expect((await applyTax(other.code, 'plan', plan.code)).taxable_id).toBe(plan.id);
  });

  it('applies to a charge of a live plan', async () => {
    const tax = await createTax();
    const plan = await insertPlan(org.id);
    const link = await applyTax(tax.id, 'charge', plan.chargeId);
    expect(link).toMatchObject({ taxable_type: 'charge', taxable_id: plan.chargeId, tax_code: tax.code });
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'charge', taxable_id: plan.chargeId }), 409, 'already_exists');
  });

  it('applies to an add-on by id and by code', async () => {
    const tax = await createTax();
    const addOn = await createAddOn();
    expect((await applyTax(tax.code, 'add_on', addOn.code)).taxable_id).toBe(addOn.id);
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'add_on', taxable_id: addOn.id }), 409, 'already_exists');
  });

  it('applies one tax to several taxables and several taxes to one taxable', async () => {
    const vat = await createTax();
    const levy = await createTax({ rate: '0.01' });
    const customer = await createCustomer();
    const addOn = await createAddOn();
    await applyTax(vat.code, 'customer', customer.id);
    await applyTax(levy.code, 'customer', customer.id);
    await applyTax(vat.code, 'add_on', addOn.id);
    const list = await api.applied({ taxable_type: 'customer', taxable_id: customer.id });
    expect(
      list
        .json<AppliedTaxResource[]>()
        .map((l) => l.tax_code)
        .sort(),
    ).toEqual([vat.code, levy.code].sort());
  });

  it.each([
    ['an unknown customer', 'customer', 'customer_not_found'],
    ['an unknown plan', 'plan', 'plan_not_found'],
    ['an unknown charge', 'charge', 'charge_not_found'],
    ['an unknown add-on', 'add_on', 'add_on_not_found'],
  ])('is 404 for %s, creating nothing', async (_name, taxableType, code) => {
    const tax = await createTax();
    expectError(await api.apply({ tax_code: tax.code, taxable_type: taxableType, taxable_id: randomUUID() }), 404, code);
    expect(await stack.db.models.AppliedTax.countDocuments({ tax_id: tax.id })).toBe(0);
  });

  it('is 404 for deleted taxables: a deleted customer, add-on, plan, or a charge of a deleted plan', async () => {
    const tax = await createTax();
    const customer = await createCustomer();
    expect((await inject('DELETE', `/v1/customers/${customer.id}`, org.headers)).statusCode).toBe(200);
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'customer', taxable_id: customer.id }), 404, 'customer_not_found');
    const addOn = await createAddOn();
    expect((await inject('DELETE', `/v1/add_ons/${addOn.id}`, org.headers)).statusCode).toBe(200);
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'add_on', taxable_id: addOn.code }), 404, 'add_on_not_found');
    const plan = await insertPlan(org.id, new Date());
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'plan', taxable_id: plan.id }), 404, 'plan_not_found');
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'charge', taxable_id: plan.chargeId }), 404, 'charge_not_found');
    expect(await stack.db.models.AppliedTax.countDocuments({ tax_id: tax.id })).toBe(0);
  });

  it('is 404 tax_not_found for an unknown or deleted tax', async () => {
    const customer = await createCustomer();
    expectError(await api.apply({ tax_code: 'no_such_tax', taxable_type: 'customer', taxable_id: customer.id }), 404, 'tax_not_found');
    const tax = await createTax();
    expect((await api.remove(tax.id)).statusCode).toBe(200);
    expectError(await api.apply({ tax_code: tax.code, taxable_type: 'customer', taxable_id: customer.id }), 404, 'tax_not_found');
  });

  it.each([
    ['an unknown taxable_type', { taxable_type: 'invoice' }, 'taxable_type'],
    ['a missing taxable_id', { taxable_id: undefined }, 'taxable_id'],
    ['a missing tax_code', { tax_code: undefined }, 'tax_code'],
    ['an empty taxable_id', { taxable_id: ' ' }, 'taxable_id'],
  ])('is 422 with %s', async (_name, payload, path) => {
    expectValidationError(await api.apply({ tax_code: 'any', taxable_type: 'customer', taxable_id: 'x', ...payload }), path);
  });

  it('is 422 naming an unknown field', async () => {
    expectUnknownFields(await api.apply({ tax_code: 'x', taxable_type: 'customer', taxable_id: 'y', tax_id: 'z' }), ['tax_id']);
  });
});

describe('applied taxes', () => {
  let tax: TaxResource;
  let customer: { id: string; external_id: string };
  const links: AppliedTaxResource[] = [];

  beforeAll(async () => {
    tax = await createTax();
    customer = await createCustomer();
    const taxes = [tax, await createTax(), await createTax()];
    for (const t of taxes) {
      links.push(await applyTax(t.code, 'customer', customer.id));
      await sleep(3);
    }
    links.push(await applyTax(tax.code, 'add_on', (await createAddOn()).id));
  });

  it('lists the taxes of a taxable, newest first, with X-Total-Count and pages', async () => {
    const res = await api.applied({ taxable_type: 'customer', taxable_id: customer.id });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(links.slice(0, 3).reverse());
    expect(res.headers['x-total-count']).toBe('3');
    const page = await api.applied({ taxable_type: 'customer', taxable_id: customer.id, skip: '1', limit: '1' });
    expect(page.json<AppliedTaxResource[]>().map((l) => l.id)).toEqual([links[1]!.id]);
    expect(page.headers['x-total-count']).toBe('3');
    const slash = await inject('GET', `/v1/taxes/applied/?taxable_type=customer&taxable_id=${customer.id}`, org.headers);
    expect(slash.headers['x-total-count']).toBe('3');
  });

  it('finds the links of a customer by external_id, and those of a tax by tax_code', async () => {
    const byExternalId = await api.applied({ taxable_type: 'customer', taxable_id: customer.external_id });
    expect(byExternalId.headers['x-total-count']).toBe('3');
    const ofTax = await api.applied({ tax_code: tax.code });
    expect(ofTax.json<AppliedTaxResource[]>().map((l) => l.id)).toEqual([links[3]!.id, links[0]!.id]);
    const none = await api.applied({ tax_code: 'no_such_tax' });
    expect(none.json()).toEqual([]);
    expect(none.headers['x-total-count']).toBe('0');
    expectValidationError(await api.applied({ taxable_type: 'invoice' }), 'taxable_type');
  });

  it('removes a link: 200 with it, gone from the list, 404 the second time', async () => {
    const extra = await createTax();
    const link = await applyTax(extra.code, 'customer', customer.id);
    const res = await api.unapply(link.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual(link);
    expect((await api.applied({ tax_code: extra.code })).json()).toEqual([]);
    expectError(await api.unapply(link.id), 404, 'applied_tax_not_found');
    // ...and the tax can be applied again.
    expect((await applyTax(extra.code, 'customer', customer.id)).id).not.toBe(link.id);
  });
});

describe('delete', () => {
  it('soft-deletes an unused tax; the code can be used again', async () => {
    const tax = await createTax({ name: 'Gone' });
    const res = await inject('DELETE', `/v1/taxes/${tax.code}/`, org.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<TaxResource>()).toMatchObject({ id: tax.id, name: 'Gone' });
    expect(res.json<TaxResource>().deleted_at).toMatch(ISO_MS_UTC);
    expectError(await api.get(tax.id), 404, 'tax_not_found');
    expectError(await api.get(tax.code), 404, 'tax_not_found');
    expect((await api.list('?limit=1000')).json<TaxResource[]>().map((t) => t.id)).not.toContain(tax.id);
    expect((await stack.db.models.Tax.findById(tax.id).lean())?.deleted_at).toBeInstanceOf(Date);
    expectError(await api.remove(tax.id), 404, 'tax_not_found');
    const again = await createTax({ code: tax.code });
    expect(again.id).not.toBe(tax.id);
    expectError(await api.create({ code: tax.code, name: 'x', rate: '0.1' }), 409, 'already_exists');
  });

  it.each(['customer', 'plan', 'charge', 'add_on'])(
    'is 400 resource_in_use while applied to a live %s, 200 once the link is removed',
    async (type) => {
      const tax = await createTax();
      let taxableId: string;
      if (type === 'customer') taxableId = (await createCustomer()).id;
      else if (type === 'add_on') taxableId = (await createAddOn()).id;
      else {
        const plan = await insertPlan(org.id);
        taxableId = type === 'plan' ? plan.id : plan.chargeId;
      }
      const link = await applyTax(tax.code, type, taxableId);
      expectError(await api.remove(tax.id), 400, 'resource_in_use');
      expect((await api.get(tax.id)).json<TaxResource>().deleted_at).toBeNull();
      expect((await api.unapply(link.id)).statusCode).toBe(200);
      expect((await api.remove(tax.id)).statusCode).toBe(200);
    },
  );

  it('is allowed when the taxables are gone, and removes their leftover links', async () => {
    const tax = await createTax();
    const customer = await createCustomer();
    const addOn = await createAddOn();
    const plan = await insertPlan(org.id);
    await applyTax(tax.code, 'customer', customer.id);
    await applyTax(tax.code, 'add_on', addOn.id);
    await applyTax(tax.code, 'plan', plan.id);
    await applyTax(tax.code, 'charge', plan.chargeId);
    expectError(await api.remove(tax.id), 400, 'resource_in_use');
    expect((await inject('DELETE', `/v1/customers/${customer.id}`, org.headers)).statusCode).toBe(200);
    expect((await inject('DELETE', `/v1/add_ons/${addOn.id}`, org.headers)).statusCode).toBe(200);
    expectError(await api.remove(tax.id), 400, 'resource_in_use');
    await stack.db.connection.collection('plans').updateOne({ _id: plan.id } as never, { $set: { deleted_at: new Date() } });
    const res = await api.remove(tax.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(await stack.db.models.AppliedTax.countDocuments({ tax_id: tax.id })).toBe(0);
  });

  it('is 400 resource_in_use while applied_to_organization, 200 after setting it to false', async () => {
    const tax = await createTax({ applied_to_organization: true });
    const body = expectError(await api.remove(tax.code), 400, 'resource_in_use');
    expect(body.message).toContain('applied_to_organization');
    expect((await api.update(tax.code, { applied_to_organization: false })).statusCode).toBe(200);
    expect((await api.remove(tax.code)).statusCode).toBe(200);
  });
});

describe('tenant isolation', () => {
  let a: TestOrganization;
  let b: TestOrganization;
  let taxOfA: TaxResource;
  let taxOfB: TaxResource;
  let customerOfA: { id: string; external_id: string };
  let linkOfA: AppliedTaxResource;

  beforeAll(async () => {
    a = await createOrganization(stack.app, { name: 'Tenant A' });
    b = await createOrganization(stack.app, { name: 'Tenant B' });
    taxOfA = await createTax({ code: 'vat' }, a.headers);
    taxOfB = await createTax({ code: 'vat_b' }, b.headers);
    customerOfA = await createCustomer(a.headers);
    linkOfA = await applyTax(taxOfA.code, 'customer', customerOfA.id, a.headers);
  });

  it("org B gets 404 for org A's tax by id and by code, on every verb", async () => {
    for (const key of [taxOfA.id, taxOfA.code]) {
      expectError(await api.get(key, b.headers), 404, 'tax_not_found');
      expectError(await api.update(key, { name: 'Hijacked' }, b.headers), 404, 'tax_not_found');
      expectError(await api.remove(key, b.headers), 404, 'tax_not_found');
    }
    expect((await api.list('', b.headers)).json<TaxResource[]>().map((t) => t.id)).toEqual([taxOfB.id]);
    expect((await api.get(taxOfA.id, a.headers)).json<TaxResource>().name).toBe('VAT');
  });

  it("org B can neither apply A's tax nor tax A's customer, plan, charge or add-on", async () => {
    const planOfA = await insertPlan(a.id);
    const addOnOfA = await createAddOn(a.headers);
    const customerOfB = await createCustomer(b.headers);
    expectError(
      await api.apply({ tax_code: taxOfA.code, taxable_type: 'customer', taxable_id: customerOfB.id }, b.headers),
      404,
      'tax_not_found',
    );
    expectError(
      await api.apply({ tax_code: taxOfA.id, taxable_type: 'customer', taxable_id: customerOfB.id }, b.headers),
      404,
      'tax_not_found',
    );
    const cases = [
      ['customer', customerOfA.id, 'customer_not_found'],
      ['customer', customerOfA.external_id, 'customer_not_found'],
      ['plan', planOfA.id, 'plan_not_found'],
      ['plan', planOfA.code, 'plan_not_found'],
      ['charge', planOfA.chargeId, 'charge_not_found'],
      ['add_on', addOnOfA.id, 'add_on_not_found'],
      ['add_on', addOnOfA.code, 'add_on_not_found'],
    ] as const;
    for (const [type, id, code] of cases) {
      expectError(await api.apply({ tax_code: taxOfB.code, taxable_type: type, taxable_id: id }, b.headers), 404, code);
    }
    expect(await stack.db.models.AppliedTax.countDocuments({ organization_id: b.id })).toBe(0);
  });

  it("org B neither sees nor removes A's applied taxes", async () => {
    const list = await api.applied({ taxable_type: 'customer', taxable_id: customerOfA.id }, b.headers);
    expect(list.json()).toEqual([]);
    expect(list.headers['x-total-count']).toBe('0');
    expectError(await api.unapply(linkOfA.id, b.headers), 404, 'applied_tax_not_found');
    const mine = await api.applied({ taxable_type: 'customer', taxable_id: customerOfA.id }, a.headers);
    expect(mine.json()).toEqual([linkOfA]);
  });
});

describe('OpenAPI document', () => {
  it('documents the tax paths', async () => {
    const doc = (await inject('GET', '/docs/openapi.json', {})).json<{ paths: Record<string, Record<string, unknown>> }>();
    expect(Object.keys(doc.paths['/v1/taxes']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/taxes/{id}']!).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(doc.paths['/v1/taxes/apply']!)).toEqual(['post']);
    expect(Object.keys(doc.paths['/v1/taxes/applied']!)).toEqual(['get']);
    expect(Object.keys(doc.paths['/v1/taxes/applied/{id}']!)).toEqual(['delete']);
  });
});
