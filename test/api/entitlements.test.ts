// Features, entitlements and what a subscription's customer may use (issue 19, item 4; docs/entitlements.md).
// A worker on the run's Temporal dev server serves the subscriptions, so plan changes go through
// the subscription workflow as in production: an upgrade at once (PUT), a downgrade at the period
// boundary (a test clock moves time there). The cache of GET /v1/subscriptions/{id}/entitlements is
// checked from the outside: every change is visible at the very next request, also when it was
// written by another API process (a second app on the same database).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/api/app';
import type { CustomerResource } from '../../src/resources/customer';
import type { EntitlementResource, FeatureResource, SubscriptionEntitlementsResource } from '../../src/resources/feature';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import { eventually, expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, TEST_SECRETS_KEY, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let other: TestOrganization;

const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

type Headers = Record<string, string>;
type Response = Awaited<ReturnType<TestStack['app']['inject']>>;
const post = (url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
const put = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'PUT', url, headers, payload: payload as object });
const get = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url, headers });
const del = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'DELETE', url, headers });

function ok<T>(res: Response, status: number): T {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, { name: 'Entitlements Org', default_currency: 'USD', timezone: 'UTC' });
  other = await createOrganization(stack.app, { name: 'Other Org', default_currency: 'USD', timezone: 'UTC' });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

async function feature(feature_type: 'boolean' | 'quantity' | 'custom', headers: Headers = org.headers): Promise<FeatureResource> {
  return ok<FeatureResource>(
    await post('/v1/features', { code: uid(feature_type), name: `A ${feature_type} feature`, feature_type }, headers),
    201,
  );
}

async function plan(amountCents = 10_000, headers: Headers = org.headers): Promise<PlanResource> {
  return ok<PlanResource>(
    await post('/v1/plans', { code: uid('plan'), name: 'Plan', interval: 'monthly', amount_cents: amountCents, currency: 'USD' }, headers),
    201,
  );
}

async function grant(planId: string, featureId: string, value: unknown, headers: Headers = org.headers): Promise<EntitlementResource> {
  return ok<EntitlementResource>(await post('/v1/entitlements', { plan_id: planId, feature_id: featureId, value }, headers), 201);
}

async function customer(extra: Record<string, unknown> = {}): Promise<CustomerResource> {
  return ok<CustomerResource>(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', ...extra }), 201);
}

async function subscribe(customerId: string, planId: string): Promise<SubscriptionResource> {
  worker.assertAlive();
  return ok<SubscriptionResource>(
    await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: customerId, plan_id: planId }),
    201,
  );
}

async function entitlementsOf(subscription: string, headers: Headers = org.headers): Promise<SubscriptionEntitlementsResource> {
  return ok<SubscriptionEntitlementsResource>(await get(`/v1/subscriptions/${subscription}/entitlements`, headers), 200);
}

/** What the subscription grants, as [feature_code, value] pairs (ordered by code, as answered). */
async function granted(subscription: string): Promise<[string, unknown][]> {
  return (await entitlementsOf(subscription)).entitlements.map((e) => [e.feature_code, e.value]);
}

/** Three features, and a Basic and a Pro plan granting them differently. */
async function catalog() {
  const seats = await feature('quantity');
  const sso = await feature('boolean');
  const region = await feature('custom');
  const basic = await plan(3000);
  const pro = await plan(10_000);
  await grant(basic.id, seats.id, 3);
  await grant(basic.id, sso.code, false);
  await grant(pro.code, seats.code, 25);
  await grant(pro.id, sso.id, true);
  await grant(pro.id, region.id, { regions: ['eu', 'us'], dedicated: true });
  // Ordered by feature code: boolean-..., custom-..., quantity-...
  return { seats, sso, region, basic, pro };
}

describe('/v1/features', () => {
  it('creates, gets by id or code, lists, updates and deletes (soft) a feature', async () => {
    const code = uid('seats');
    const created = ok<FeatureResource>(
      await post('/v1/features', { code, name: 'Seats', description: 'Team members', feature_type: 'quantity' }),
      201,
    );
    expect(created).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      code,
      name: 'Seats',
      description: 'Team members',
      feature_type: 'quantity',
      deleted_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
    expect(ok<FeatureResource>(await get(`/v1/features/${code}`), 200)).toEqual(created);
    expect(ok<FeatureResource>(await get(`/v1/features/${created.id}/`), 200)).toEqual(created);

    const list = await get('/v1/features?feature_type=quantity&limit=1');
    expect(ok<FeatureResource[]>(list, 200).map((f) => f.id)).toEqual([created.id]);
    expect(Number(list.headers['x-total-count'])).toBeGreaterThanOrEqual(1);

    const renamed = ok<FeatureResource>(await put(`/v1/features/${code}`, { name: 'Seats (users)', description: null }), 200);
    expect(renamed).toMatchObject({ id: created.id, code, name: 'Seats (users)', description: null, feature_type: 'quantity' });

    const deleted = ok<FeatureResource>(await del(`/v1/features/${created.id}`), 200);
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expectError(await get(`/v1/features/${code}`), 404, 'feature_not_found');
    // A deleted feature's code can be used again.
    ok<FeatureResource>(await post('/v1/features', { code, name: 'Seats again', feature_type: 'boolean' }), 201);
  });

  it('refuses a duplicate code (409), unknown fields, a bad feature_type and a change of type (422)', async () => {
    const f = await feature('boolean');
    expectError(await post('/v1/features', { code: f.code, name: 'Dup', feature_type: 'boolean' }), 409, 'already_exists');
    expectValidationError(await post('/v1/features', { code: uid('x'), name: 'X', feature_type: 'number' }), 'feature_type');
    expectValidationError(await post('/v1/features', { name: 'X', feature_type: 'boolean' }), 'code');
    expectUnknownFields(await post('/v1/features', { code: uid('x'), name: 'X', feature_type: 'boolean', typo: 1 }), ['typo']);
    expectUnknownFields(await put(`/v1/features/${f.id}`, { feature_type: 'quantity' }), ['feature_type']);
    const g = await feature('boolean');
    expectError(await put(`/v1/features/${g.id}`, { code: f.code }), 409, 'already_exists');
  });

  it('refuses to delete a feature a live plan grants (400 resource_in_use), until its entitlement is removed', async () => {
    const f = await feature('boolean');
    const p = await plan();
    const e = await grant(p.id, f.id, true);
    const refused = expectError(await del(`/v1/features/${f.code}`), 400, 'resource_in_use');
    expect(refused.message).toContain(p.code);
    ok<EntitlementResource>(await del(`/v1/entitlements/${e.id}`), 200);
    ok<FeatureResource>(await del(`/v1/features/${f.code}`), 200);
  });

  it("another organization's feature is 404", async () => {
    const f = await feature('boolean', other.headers);
    expectError(await get(`/v1/features/${f.id}`), 404, 'feature_not_found');
    expectError(await get(`/v1/features/${f.code}`), 404, 'feature_not_found');
    expectError(await put(`/v1/features/${f.id}`, { name: 'stolen' }), 404, 'feature_not_found');
    expectError(await del(`/v1/features/${f.id}`), 404, 'feature_not_found');
    expect(ok<FeatureResource>(await get(`/v1/features/${f.id}`, other.headers), 200).name).toBe('A boolean feature');
  });
});

describe('/v1/entitlements', () => {
  it("sets a plan's values of each type, lists them by plan, replaces and removes one", async () => {
    const { seats, sso, region, pro } = await catalog();
    const list = await get(`/v1/entitlements?plan_id=${pro.code}`);
    const rows = ok<EntitlementResource[]>(list, 200);
    expect(list.headers['x-total-count']).toBe('3');
    // Newest first.
    expect(rows.map((e) => [e.feature_code, e.feature_type, e.value])).toEqual([
      [region.code, 'custom', { regions: ['eu', 'us'], dedicated: true }],
      [sso.code, 'boolean', true],
      [seats.code, 'quantity', 25],
    ]);
    const seatsRow = rows[2]!;
    expect(seatsRow).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      plan_id: pro.id,
      feature_id: seats.id,
      feature_code: seats.code,
      feature_name: 'A quantity feature',
      feature_type: 'quantity',
      value: 25,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
    expect(ok<EntitlementResource>(await get(`/v1/entitlements/${seatsRow.id}`), 200)).toEqual(seatsRow);
    expect(ok<EntitlementResource[]>(await get(`/v1/entitlements?feature_id=${seats.code}&plan_id=${pro.id}`), 200)).toEqual([seatsRow]);

    expect(ok<EntitlementResource>(await put(`/v1/entitlements/${seatsRow.id}`, { value: 50 }), 200)).toMatchObject({ value: 50 });
    ok<EntitlementResource>(await put(`/v1/entitlements/${rows[0]!.id}`, { value: 'eu-only' }), 200);
    expect(ok<EntitlementResource>(await del(`/v1/entitlements/${rows[1]!.id}`), 200)).toMatchObject({ feature_id: sso.id, value: true });
    expectError(await get(`/v1/entitlements/${rows[1]!.id}`), 404, 'entitlement_not_found');
    expect(ok<EntitlementResource[]>(await get(`/v1/entitlements?plan_id=${pro.id}`), 200).map((e) => [e.feature_code, e.value])).toEqual([
      [region.code, 'eu-only'],
      [seats.code, 50],
    ]);
    // One value per plan and feature.
    const dup = expectError(await post('/v1/entitlements', { plan_id: pro.id, feature_id: seats.id, value: 1 }), 409, 'already_exists', [
      'existing_entitlement_id',
    ]);
    expect(dup.existing_entitlement_id).toBe(seatsRow.id);
  });

  it("validates a value against its feature's type (422 on value)", async () => {
    const p = await plan();
    const flag = await feature('boolean');
    const seats = await feature('quantity');
    const custom = await feature('custom');
    const attempt = (f: FeatureResource, value: unknown) => post('/v1/entitlements', { plan_id: p.id, feature_id: f.id, value });
    for (const value of [1, 'true', { on: true }]) expectValidationError(await attempt(flag, value), 'value');
    for (const value of [-1, 1.5, true, '3', 2 ** 53]) expectValidationError(await attempt(seats, value), 'value');
    for (const value of [true, 7, 'x'.repeat(20_000)]) expectValidationError(await attempt(custom, value), 'value');
    expectValidationError(await attempt(flag, null), 'value');
    expectValidationError(await post('/v1/entitlements', { plan_id: p.id, feature_id: flag.id }), 'value');
    expectUnknownFields(await post('/v1/entitlements', { plan_id: p.id, feature_id: flag.id, value: true, plan: 'x' }), ['plan']);
    // Nothing was stored; the valid ones are.
    expect(ok<EntitlementResource[]>(await get(`/v1/entitlements?plan_id=${p.id}`), 200)).toEqual([]);
    await grant(p.id, flag.id, false);
    await grant(p.id, seats.id, 0);
    await grant(p.id, custom.id, ['a', 1]);
    const e = await grant((await plan()).id, custom.id, 'plain text');
    expectValidationError(await put(`/v1/entitlements/${e.id}`, { value: false }), 'value');
    expect(ok<EntitlementResource>(await get(`/v1/entitlements/${e.id}`), 200).value).toBe('plain text');
  });

  it("copies every entitlement of a plan to another, keeping or (replace) removing the target's others", async () => {
    const { seats, sso, region, basic, pro } = await catalog();
    const extra = await feature('boolean');
    const target = await plan(5000);
    await grant(target.id, seats.id, 1);
    await grant(target.id, extra.id, true);

    const copy = await post('/v1/entitlements/copy', { from_plan_id: pro.code, to_plan_id: target.code });
    const copied = ok<EntitlementResource[]>(copy, 200);
    expect(copy.headers['x-total-count']).toBe('4');
    // By feature code: the source's values replace the target's for the same features.
    const expected: [string, unknown][] = [
      [extra.code, true],
      [sso.code, true],
      [region.code, { regions: ['eu', 'us'], dedicated: true }],
      [seats.code, 25],
    ];
    const sortByCode = (rows: [string, unknown][]) => rows.sort((a, b) => a[0].localeCompare(b[0]));
    expect(copied.map((e) => [e.feature_code, e.value])).toEqual(sortByCode(expected));
    expect(copied.every((e) => e.plan_id === target.id)).toBe(true);
    // The source is untouched.
    expect(ok<EntitlementResource[]>(await get(`/v1/entitlements?plan_id=${pro.id}`), 200)).toHaveLength(3);

    const exact = ok<EntitlementResource[]>(
      await post('/v1/entitlements/copy', { from_plan_id: basic.id, to_plan_id: target.id, replace: true }),
      200,
    );
    expect(exact.map((e) => [e.feature_code, e.value])).toEqual(
      sortByCode([
        [sso.code, false],
        [seats.code, 3],
      ]),
    );

    expectValidationError(await post('/v1/entitlements/copy', { from_plan_id: pro.id, to_plan_id: pro.code }), 'to_plan_id');
    expectError(await post('/v1/entitlements/copy', { from_plan_id: pro.id, to_plan_id: uid('nope') }), 404, 'plan_not_found');
  });

  it('concurrent copies to a new plan leave one entitlement per feature, each with a new id and timestamps', async () => {
    const { pro } = await catalog();
    const target = await plan(5000);
    const before = Date.now();
    // The four copies' upserts create or update the same three rows. (On MongoDB an upsert can lose
    // the race to create its row; bulkUpsert's retry of that is tested in test/infra/mongodb-compat.)
    const copies = await Promise.all(
      [1, 2, 3, 4].map(() => post('/v1/entitlements/copy', { from_plan_id: pro.id, to_plan_id: target.id })),
    );
    for (const copy of copies) expect(ok<EntitlementResource[]>(copy, 200)).toHaveLength(3);
    const rows = ok<EntitlementResource[]>(await get(`/v1/entitlements?plan_id=${target.id}`), 200);
    const source = ok<EntitlementResource[]>(await get(`/v1/entitlements?plan_id=${pro.id}`), 200);
    expect(rows.map((e) => [e.feature_id, e.value]).sort()).toEqual(source.map((e) => [e.feature_id, e.value]).sort());
    for (const row of rows) {
      expect(row.id).toMatch(UUID);
      expect(source.map((e) => e.id)).not.toContain(row.id);
      expect(Date.parse(row.created_at)).toBeGreaterThanOrEqual(before - 1000);
      expect(Date.parse(row.updated_at)).toBeGreaterThanOrEqual(Date.parse(row.created_at));
      expect(ok<EntitlementResource>(await get(`/v1/entitlements/${row.id}`), 200).plan_id).toBe(target.id);
    }
  });

  it("another organization's plan, feature or entitlement is 404", async () => {
    const mine = await plan();
    const myFeature = await feature('boolean');
    const theirs = await plan(10_000, other.headers);
    const theirFeature = await feature('quantity', other.headers);
    const theirEntitlement = await grant(theirs.id, theirFeature.id, 9, other.headers);

    expectError(await post('/v1/entitlements', { plan_id: theirs.id, feature_id: myFeature.id, value: true }), 404, 'plan_not_found');
    expectError(await post('/v1/entitlements', { plan_id: mine.id, feature_id: theirFeature.code, value: 1 }), 404, 'feature_not_found');
    expectError(await get(`/v1/entitlements?plan_id=${theirs.code}`), 404, 'plan_not_found');
    expectError(await get(`/v1/entitlements?feature_id=${theirFeature.id}`), 404, 'feature_not_found');
    expectError(await get(`/v1/entitlements/${theirEntitlement.id}`), 404, 'entitlement_not_found');
    expectError(await put(`/v1/entitlements/${theirEntitlement.id}`, { value: 1000 }), 404, 'entitlement_not_found');
    expectError(await del(`/v1/entitlements/${theirEntitlement.id}`), 404, 'entitlement_not_found');
    expectError(await post('/v1/entitlements/copy', { from_plan_id: theirs.id, to_plan_id: mine.id }), 404, 'plan_not_found');
    expect(ok<EntitlementResource[]>(await get('/v1/entitlements?limit=1000'), 200).map((e) => e.id)).not.toContain(theirEntitlement.id);
    // Untouched.
    expect(ok<EntitlementResource>(await get(`/v1/entitlements/${theirEntitlement.id}`, other.headers), 200).value).toBe(9);
  });
});

describe('GET /v1/subscriptions/{external_id}/entitlements', () => {
  it("answers the current plan's features and values, by external_id or id", async () => {
    const { seats, sso, region, pro } = await catalog();
    const sub = await subscribe((await customer()).id, pro.id);
    const answer = await entitlementsOf(sub.external_id);
    expect(answer).toEqual({
      subscription_id: sub.id,
      external_id: sub.external_id,
      status: 'active',
      plan_id: pro.id,
      entitlements: [
        { feature_id: sso.id, feature_code: sso.code, feature_name: 'A boolean feature', feature_type: 'boolean', value: true },
        {
          feature_id: region.id,
          feature_code: region.code,
          feature_name: 'A custom feature',
          feature_type: 'custom',
          value: { regions: ['eu', 'us'], dedicated: true },
        },
        { feature_id: seats.id, feature_code: seats.code, feature_name: 'A quantity feature', feature_type: 'quantity', value: 25 },
      ],
    });
    expect(await entitlementsOf(sub.id)).toEqual(answer);
    expectError(await get(`/v1/subscriptions/${uid('nope')}/entitlements`), 404, 'subscription_not_found');
    expectError(await get(`/v1/subscriptions/${sub.external_id}/entitlements`, other.headers), 404, 'subscription_not_found');
    expectError(await stack.app.inject({ method: 'GET', url: `/v1/subscriptions/${sub.id}/entitlements` }), 401, 'unauthorized');
  });

  it('shows an upgrade at the very next request', async () => {
    const { seats, sso, region, basic, pro } = await catalog();
    const sub = await subscribe((await customer()).id, basic.id);
    // Twice: the second answer comes from the cache.
    expect(await granted(sub.external_id)).toEqual([
      [sso.code, false],
      [seats.code, 3],
    ]);
    expect(await granted(sub.external_id)).toEqual([
      [sso.code, false],
      [seats.code, 3],
    ]);
    ok<SubscriptionResource>(await put(`/v1/subscriptions/${sub.id}`, { plan_id: pro.id }), 200);
    const upgraded = await entitlementsOf(sub.external_id);
    expect(upgraded.plan_id).toBe(pro.id);
    expect(upgraded.entitlements.map((e) => [e.feature_code, e.value])).toEqual([
      [sso.code, true],
      [region.code, { regions: ['eu', 'us'], dedicated: true }],
      [seats.code, 25],
    ]);
  });

  it('shows a change written by another API process, and a plan switched by the worker, at the next request', async () => {
    const { seats, sso, basic, pro } = await catalog();
    const sub = await subscribe((await customer()).id, basic.id);
    expect(await granted(sub.external_id)).toEqual([
      [sso.code, false],
      [seats.code, 3],
    ]);
    // Another API process (its own app and cache, the same database) raises Basic's seats.
    const otherProcess = await buildApp({
      config: { LOG_LEVEL: 'silent', BODY_LIMIT_BYTES: 1024 * 1024, SECRETS_KEY: TEST_SECRETS_KEY },
      db: stack.db,
      temporal: stack.temporal,
      logger: false,
    });
    try {
      await otherProcess.ready();
      const [seatsOfBasic] = ok<EntitlementResource[]>(
        await otherProcess.inject({
          method: 'GET',
          url: `/v1/entitlements?plan_id=${basic.id}&feature_id=${seats.id}`,
          headers: org.headers,
        }),
        200,
      );
      ok<EntitlementResource>(
        await otherProcess.inject({
          method: 'PUT',
          url: `/v1/entitlements/${seatsOfBasic!.id}`,
          headers: org.headers,
          payload: { value: 4 },
        }),
        200,
      );
    } finally {
      await otherProcess.close();
    }
    expect(await granted(sub.external_id)).toEqual([
      [sso.code, false],
      [seats.code, 4],
    ]);
    // The worker writes plan_id on the subscription document (its projection) at a boundary; no
    // process is told: the next request reads it.
    await stack.db.models.Subscription.updateOne({ _id: sub.id }, { $set: { plan_id: pro.id } });
    expect((await entitlementsOf(sub.external_id)).plan_id).toBe(pro.id);
    expect((await granted(sub.external_id)).at(-1)).toEqual([seats.code, 25]);
    await stack.db.models.Subscription.updateOne({ _id: sub.id }, { $set: { plan_id: basic.id } });
  });

  it("keeps a downgrade's plan until the boundary on a test clock, then shows the lower plan", async () => {
    const { seats, sso, region, basic, pro } = await catalog();
    const clock = ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: '2030-01-01T00:00:00Z' }), 201);
    const sub = await subscribe((await customer({ test_clock_id: clock.id })).id, pro.id);
    const proValues: [string, unknown][] = [
      [sso.code, true],
      [region.code, { regions: ['eu', 'us'], dedicated: true }],
      [seats.code, 25],
    ];
    expect(await granted(sub.external_id)).toEqual(proValues);

    const advance = async (iso: string) => {
      worker.assertAlive();
      ok<TestClockResource>(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: iso }), 202);
      await eventually(
        async () => (ok<TestClockResource>(await get(`/v1/test_clocks/${clock.id}`), 200).status === 'ready' ? true : undefined),
        60_000,
        `clock ready at ${iso}`,
      );
    };
    await advance('2030-01-10T12:00:00Z');
    const scheduled = ok<SubscriptionResource>(await put(`/v1/subscriptions/${sub.id}`, { plan_id: basic.id }), 200);
    expect(scheduled).toMatchObject({ plan_id: pro.id, previous_plan_id: basic.id });
    expect(await granted(sub.external_id)).toEqual(proValues);

    await advance('2030-01-31T23:59:59Z');
    expect(await granted(sub.external_id)).toEqual(proValues);

    await advance('2030-02-01T00:00:00Z');
    const downgraded = await entitlementsOf(sub.external_id);
    expect(downgraded.plan_id).toBe(basic.id);
    expect(downgraded.entitlements.map((e) => [e.feature_code, e.value])).toEqual([
      [sso.code, false],
      [seats.code, 3],
    ]);
  }, 120_000);

  it('grants nothing once the subscription is terminated', async () => {
    const { pro } = await catalog();
    const sub = await subscribe((await customer()).id, pro.id);
    expect((await entitlementsOf(sub.external_id)).entitlements).toHaveLength(3);
    ok<SubscriptionResource>(await del(`/v1/subscriptions/${sub.id}?on_termination_action=skip`), 200);
    expect(await entitlementsOf(sub.external_id)).toMatchObject({ status: 'terminated', plan_id: pro.id, entitlements: [] });
  });
});

describe('OpenAPI', () => {
  it('documents every feature and entitlement route', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    const paths = ok<{ paths: Record<string, Record<string, unknown>> }>(res, 200).paths;
    expect(Object.keys(paths['/v1/features'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(paths['/v1/features/{id}'] ?? {}).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(paths['/v1/entitlements'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(paths['/v1/entitlements/{id}'] ?? {}).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(paths['/v1/entitlements/copy'] ?? {})).toEqual(['post']);
    expect(Object.keys(paths['/v1/subscriptions/{id}/entitlements'] ?? {})).toEqual(['get']);
  });
});
