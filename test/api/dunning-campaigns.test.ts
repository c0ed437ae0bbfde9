// Dunning campaigns (api-contract.md, "Dunning campaigns and payment requests", first bullet) and the
// customers' dunning fields ("Customers and payment methods"): CRUD by id and code, the list's order
// and pages, the 409 and every 422, one default campaign per organization, tenant isolation, soft
// delete, and which campaign a customer may name. How a campaign chases invoices: dunning.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import type { DunningCampaignResource } from '../../src/resources/dunning-campaign';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let other: TestOrganization;
let seq = 0;
const nextCode = (label = 'dun') => `${label}_${(seq += 1)}_${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Dunning Org' });
  other = await createOrganization(stack.app, { name: 'Other Dunning Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
const api = {
  create: (payload: unknown, headers?: Headers) => inject('POST', '/v1/dunning_campaigns', payload, headers),
  get: (id: string, headers?: Headers) => inject('GET', `/v1/dunning_campaigns/${encodeURIComponent(id)}`, undefined, headers),
  list: (query = '', headers?: Headers) => inject('GET', `/v1/dunning_campaigns${query}`, undefined, headers),
  update: (id: string, payload: unknown, headers?: Headers) =>
    inject('PUT', `/v1/dunning_campaigns/${encodeURIComponent(id)}`, payload, headers),
  remove: (id: string, headers?: Headers) => inject('DELETE', `/v1/dunning_campaigns/${encodeURIComponent(id)}`, undefined, headers),
};

const valid = {
  name: 'Default',
  max_attempts: 3,
  days_between_attempts: 2,
  thresholds: [{ currency: 'USD', amount_cents: 1000 }],
};

async function createCampaign(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<DunningCampaignResource> {
  const res = await api.create({ code: nextCode(), ...valid, ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<DunningCampaignResource>();
}

async function isDefault(id: string, headers: Headers = org.headers): Promise<boolean> {
  const res = await api.get(id, headers);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<DunningCampaignResource>().applied_to_organization;
}

describe('dunning campaigns: create and read', () => {
  it('creates a campaign with the defaults, currencies upper-cased, amount_cents an integer of minor units', async () => {
    const code = nextCode('create');
    const res = await api.create({
      code,
      name: 'Chase',
      max_attempts: 20,
      days_between_attempts: 365,
      thresholds: [
        { currency: 'usd', amount_cents: 1000 },
        { currency: 'EUR', amount_cents: 0 },
      ],
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      code,
      name: 'Chase',
      description: null,
      max_attempts: 20,
      days_between_attempts: 365,
      thresholds: [
        { currency: 'USD', amount_cents: 1000 },
        { currency: 'EUR', amount_cents: 0 },
      ],
      applied_to_organization: false,
      deleted_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
  });

  it('reads a campaign by id and by code', async () => {
    const campaign = await createCampaign({ description: 'For the big ones', max_attempts: 1, days_between_attempts: 1 });
    expect(campaign.description).toBe('For the big ones');
    for (const key of [campaign.id, campaign.code]) {
      const res = await api.get(key);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual(campaign);
    }
    expectError(await api.get('no_such_campaign'), 404, 'dunning_campaign_not_found');
    expectError(await api.get(randomUUID()), 404, 'dunning_campaign_not_found');
  });

  it('lists the live campaigns newest first with X-Total-Count, skip and limit', async () => {
    const own = await createOrganization(stack.app, { name: 'Dunning List Org' });
    const created: DunningCampaignResource[] = [];
    for (let i = 0; i < 4; i += 1) {
      created.push(await createCampaign({}, own.headers));
      await sleep(5);
    }
    const all = await api.list('', own.headers);
    expect(all.statusCode, all.body).toBe(200);
    expect(all.headers['x-total-count']).toBe('4');
    expect(all.json<DunningCampaignResource[]>().map((c) => c.id)).toEqual(created.map((c) => c.id).reverse());

    const page = await api.list('?skip=1&limit=2', own.headers);
    expect(page.headers['x-total-count']).toBe('4');
    expect(page.json<DunningCampaignResource[]>().map((c) => c.id)).toEqual([created[2]!.id, created[1]!.id]);

    expect((await api.remove(created[0]!.id, own.headers)).statusCode).toBe(200);
    const afterDelete = await api.list('', own.headers);
    expect(afterDelete.headers['x-total-count']).toBe('3');
    expect(afterDelete.json<DunningCampaignResource[]>().map((c) => c.id)).not.toContain(created[0]!.id);

    expectValidationError(await api.list('?limit=0', own.headers), 'limit');
    expectValidationError(await api.list('?skip=-1', own.headers), 'skip');
  });

  it('answers 409 already_exists on a code the organization already has; another organization may use it', async () => {
    const campaign = await createCampaign();
    expectError(await api.create({ code: campaign.code, ...valid }), 409, 'already_exists');
    const elsewhere = await api.create({ code: campaign.code, ...valid }, other.headers);
    expect(elsewhere.statusCode, elsewhere.body).toBe(201);
  });
});

describe('dunning campaigns: validation (422)', () => {
  const create = (overrides: Record<string, unknown>) => api.create({ code: nextCode('bad'), ...valid, ...overrides });

  it('requires at least one threshold', async () => {
    expectValidationError(await create({ thresholds: [] }), 'thresholds');
    expectValidationError(await create({ thresholds: undefined }), 'thresholds');
  });

  it('refuses two thresholds of one currency, whatever its case', async () => {
    const body = expectValidationError(
      await create({
        thresholds: [
          { currency: 'USD', amount_cents: 1000 },
          { currency: 'EUR', amount_cents: 500 },
          { currency: 'usd', amount_cents: 2000 },
        ],
      }),
      'thresholds.2.currency',
    );
    expect(body.message).toContain('USD');
  });

  it('refuses an amount_cents that is negative, fractional or missing', async () => {
    expectValidationError(await create({ thresholds: [{ currency: 'USD', amount_cents: -1 }] }), 'thresholds.0.amount_cents');
    expectValidationError(await create({ thresholds: [{ currency: 'USD', amount_cents: 10.5 }] }), 'thresholds.0.amount_cents');
    expectValidationError(await create({ thresholds: [{ currency: 'USD' }] }), 'thresholds.0.amount_cents');
  });

  it('keeps max_attempts within 1..20 and days_between_attempts within 1..365', async () => {
    expectValidationError(await create({ max_attempts: 0 }), 'max_attempts');
    expectValidationError(await create({ max_attempts: 21 }), 'max_attempts');
    expectValidationError(await create({ max_attempts: 2.5 }), 'max_attempts');
    expectValidationError(await create({ days_between_attempts: 0 }), 'days_between_attempts');
    expectValidationError(await create({ days_between_attempts: 366 }), 'days_between_attempts');
  });

  it('refuses a currency that is not an ISO 4217 code', async () => {
    expectValidationError(await create({ thresholds: [{ currency: 'XYZ', amount_cents: 100 }] }), 'thresholds.0.currency');
    expectValidationError(await create({ thresholds: [{ currency: 'US', amount_cents: 100 }] }), 'thresholds.0.currency');
  });

  it('requires code and name, and refuses unknown fields at both levels', async () => {
    expectValidationError(await api.create({ ...valid }), 'code');
    expectValidationError(await create({ name: '  ' }), 'name');
    expectUnknownFields(await create({ max_attempt: 3 }), ['max_attempt']);
    expectUnknownFields(await create({ thresholds: [{ currency: 'USD', amount_cents: 100, amount: 1 }] }), ['amount']);
  });

  it('applies the same rules to an update, and changes nothing on a 422', async () => {
    const campaign = await createCampaign();
    expectValidationError(await api.update(campaign.id, { thresholds: [] }), 'thresholds');
    expectValidationError(await api.update(campaign.id, { max_attempts: 21 }), 'max_attempts');
    expectValidationError(await api.update(campaign.id, { days_between_attempts: 0 }), 'days_between_attempts');
    expectValidationError(
      await api.update(campaign.id, {
        thresholds: [
          { currency: 'EUR', amount_cents: 1 },
          { currency: 'EUR', amount_cents: 2 },
        ],
      }),
      'thresholds.1.currency',
    );
    expectUnknownFields(await api.update(campaign.id, { organization_id: other.id }), ['organization_id']);
    expect((await api.get(campaign.id)).json()).toEqual(campaign);
  });
});

describe('dunning campaigns: update', () => {
  it('updates by id or code; the code is accepted only unchanged', async () => {
    const campaign = await createCampaign();
    const res = await api.update(campaign.code, {
      code: campaign.code,
      name: 'Renamed',
      description: 'now described',
      max_attempts: 5,
      days_between_attempts: 7,
      thresholds: [
        { currency: 'EUR', amount_cents: 250 },
        { currency: 'GBP', amount_cents: 0 },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<DunningCampaignResource>();
    expect(updated).toMatchObject({
      id: campaign.id,
      code: campaign.code,
      name: 'Renamed',
      description: 'now described',
      max_attempts: 5,
      days_between_attempts: 7,
      thresholds: [
        { currency: 'EUR', amount_cents: 250 },
        { currency: 'GBP', amount_cents: 0 },
      ],
      created_at: campaign.created_at,
    });
    expect(Date.parse(updated.updated_at)).toBeGreaterThanOrEqual(Date.parse(campaign.updated_at));

    const cleared = await api.update(campaign.id, { description: null });
    expect(cleared.json<DunningCampaignResource>().description).toBeNull();

    expectValidationError(await api.update(campaign.id, { code: nextCode('moved') }), 'code');
    expect((await api.get(campaign.code)).statusCode).toBe(200);
  });
});

describe('dunning campaigns: one default per organization', () => {
  it('moves applied_to_organization to the campaign that last took it, on create and on update', async () => {
    const own = await createOrganization(stack.app, { name: 'Dunning Default Org' });
    const theirs = await createCampaign({ applied_to_organization: true }, other.headers);

    const a = await createCampaign({ applied_to_organization: true }, own.headers);
    expect(a.applied_to_organization).toBe(true);
    const b = await createCampaign({ applied_to_organization: true }, own.headers);
    expect(b.applied_to_organization).toBe(true);
    expect(await isDefault(a.id, own.headers)).toBe(false);

    const plain = await createCampaign({}, own.headers);
    expect(await isDefault(b.id, own.headers)).toBe(true);

    const res = await api.update(a.id, { applied_to_organization: true }, own.headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<DunningCampaignResource>().applied_to_organization).toBe(true);
    expect(await isDefault(b.id, own.headers)).toBe(false);
    expect(await isDefault(plain.id, own.headers)).toBe(false);

    // An update that does not touch the flag keeps the default where it is.
    await api.update(b.id, { name: 'still not the default' }, own.headers);
    expect(await isDefault(a.id, own.headers)).toBe(true);

    // Another organization's default is its own business.
    expect(await isDefault(theirs.id, other.headers)).toBe(true);
    expect(await stack.db.models.DunningCampaign.countDocuments({ organization_id: own.id, applied_to_organization: true })).toBe(1);

    // Unsetting it leaves the organization without a default.
    await api.update(a.id, { applied_to_organization: false }, own.headers);
    expect(await stack.db.models.DunningCampaign.countDocuments({ organization_id: own.id, applied_to_organization: true })).toBe(0);
  });
});

describe('dunning campaigns: tenant isolation', () => {
  it("answers 404 for another organization's campaign, by id and by code, on every route", async () => {
    const theirs = await createCampaign({}, other.headers);
    for (const key of [theirs.id, theirs.code]) {
      expectError(await api.get(key), 404, 'dunning_campaign_not_found');
      expectError(await api.update(key, { name: 'hijacked' }), 404, 'dunning_campaign_not_found');
      expectError(await api.remove(key), 404, 'dunning_campaign_not_found');
    }
    expect((await api.list()).json<DunningCampaignResource[]>().map((c) => c.id)).not.toContain(theirs.id);
    expect((await api.get(theirs.id, other.headers)).json()).toEqual(theirs);
  });
});

describe('dunning campaigns: soft delete', () => {
  it('deletes softly: 404 afterwards, the default flag dropped, the code free again', async () => {
    const own = await createOrganization(stack.app, { name: 'Dunning Delete Org' });
    const campaign = await createCampaign({ applied_to_organization: true }, own.headers);
    const res = await api.remove(campaign.code, own.headers);
    expect(res.statusCode, res.body).toBe(200);
    const deleted = res.json<DunningCampaignResource>();
    expect(deleted.id).toBe(campaign.id);
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expect(deleted.applied_to_organization).toBe(false);

    expectError(await api.get(campaign.id, own.headers), 404, 'dunning_campaign_not_found');
    expectError(await api.get(campaign.code, own.headers), 404, 'dunning_campaign_not_found');
    expectError(await api.update(campaign.id, { name: 'back' }, own.headers), 404, 'dunning_campaign_not_found');
    expectError(await api.remove(campaign.id, own.headers), 404, 'dunning_campaign_not_found');
    // Kept, not removed.
    expect(await stack.db.models.DunningCampaign.exists({ _id: campaign.id })).not.toBeNull();

    const again = await api.create({ code: campaign.code, ...valid }, own.headers);
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json<DunningCampaignResource>().id).not.toBe(campaign.id);
    expect((await api.get(campaign.code, own.headers)).json<DunningCampaignResource>().id).toBe(again.json<DunningCampaignResource>().id);
  });
});

describe("customers' dunning fields", () => {
  const createCustomer = (payload: Record<string, unknown>, headers: Headers = org.headers) =>
    inject('POST', '/v1/customers', { external_id: nextCode('cus'), ...payload }, headers);
  const updateCustomer = (id: string, payload: Record<string, unknown>, headers: Headers = org.headers) =>
    inject('PUT', `/v1/customers/${encodeURIComponent(id)}`, payload, headers);

  it('default to no campaign of its own and not excluded', async () => {
    const res = await createCustomer({});
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json<CustomerResource>()).toMatchObject({ applied_dunning_campaign_id: null, exclude_from_dunning_campaign: false });
  });

  it('take a campaign of the organization and the exclusion on create, and change them on update', async () => {
    const first = await createCampaign();
    const second = await createCampaign();
    const res = await createCustomer({ applied_dunning_campaign_id: first.id, exclude_from_dunning_campaign: true });
    expect(res.statusCode, res.body).toBe(201);
    const customer = res.json<CustomerResource>();
    expect(customer).toMatchObject({ applied_dunning_campaign_id: first.id, exclude_from_dunning_campaign: true });
    expect((await inject('GET', `/v1/customers/${customer.id}`)).json<CustomerResource>()).toMatchObject({
      applied_dunning_campaign_id: first.id,
      exclude_from_dunning_campaign: true,
    });

    const moved = await updateCustomer(customer.id, { applied_dunning_campaign_id: second.id, exclude_from_dunning_campaign: false });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json<CustomerResource>()).toMatchObject({ applied_dunning_campaign_id: second.id, exclude_from_dunning_campaign: false });

    // A PUT that leaves them out leaves them alone.
    const renamed = await updateCustomer(customer.id, { name: 'Renamed' });
    expect(renamed.json<CustomerResource>()).toMatchObject({
      applied_dunning_campaign_id: second.id,
      exclude_from_dunning_campaign: false,
    });

    const back = await updateCustomer(customer.id, { applied_dunning_campaign_id: null });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json<CustomerResource>().applied_dunning_campaign_id).toBeNull();
  });

  it("answer 404 dunning_campaign_not_found for an unknown, another organization's or a deleted campaign", async () => {
    const theirs = await createCampaign({}, other.headers);
    const gone = await createCampaign();
    expect((await api.remove(gone.id)).statusCode).toBe(200);
    const customer = (await createCustomer({})).json<CustomerResource>();

    for (const campaignId of [randomUUID(), theirs.id, gone.id]) {
      const externalId = nextCode('cus404');
      expectError(
        await inject('POST', '/v1/customers', { external_id: externalId, applied_dunning_campaign_id: campaignId }),
        404,
        'dunning_campaign_not_found',
      );
      expect(await stack.db.models.Customer.exists({ organization_id: org.id, external_id: externalId })).toBeNull();
      expectError(await updateCustomer(customer.id, { applied_dunning_campaign_id: campaignId }), 404, 'dunning_campaign_not_found');
    }
    expect((await inject('GET', `/v1/customers/${customer.id}`)).json<CustomerResource>().applied_dunning_campaign_id).toBeNull();
  });

  it('refuse values of the wrong type', async () => {
    expectValidationError(await createCustomer({ exclude_from_dunning_campaign: 'yes' }), 'exclude_from_dunning_campaign');
    expectValidationError(await createCustomer({ applied_dunning_campaign_id: '' }), 'applied_dunning_campaign_id');
    expectValidationError(await createCustomer({ applied_dunning_campaign_id: 42 }), 'applied_dunning_campaign_id');
  });

  it("keep a deleted campaign's id: such a customer follows the organization's default", async () => {
    const campaign = await createCampaign();
    const customer = (await createCustomer({ applied_dunning_campaign_id: campaign.id })).json<CustomerResource>();
    expect((await api.remove(campaign.id)).statusCode).toBe(200);
    const after = (await inject('GET', `/v1/customers/${customer.id}`)).json<CustomerResource>();
    expect(after.applied_dunning_campaign_id).toBe(campaign.id);
    // Other fields stay writable without naming the campaign again.
    expect((await updateCustomer(customer.id, { name: 'Still here' })).statusCode).toBe(200);
  });
});

describe('OpenAPI document', () => {
  it('documents the dunning campaign routes and their schema', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' })).json<{
      paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, unknown> };
    }>();
    const methods = (path: string) => Object.keys(doc.paths[path] ?? {}).sort();
    expect(methods('/v1/dunning_campaigns')).toEqual(['get', 'post']);
    expect(methods('/v1/dunning_campaigns/{id}')).toEqual(['delete', 'get', 'put']);
    expect(doc.paths['/v1/dunning_campaigns']!.post!.requestBody).toBeDefined();
    expect(doc.paths['/v1/dunning_campaigns/{id}']!.put!.requestBody).toBeDefined();
    expect(Object.keys(doc.paths['/v1/dunning_campaigns']!.post!.responses)).toEqual(expect.arrayContaining(['201', '409', '422']));
    expect(Object.keys(doc.components.schemas)).toContain('DunningCampaign');
  });
});
