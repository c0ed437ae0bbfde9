// Billable metrics (api-contract.md "Catalog", billing-rules.md "Usage"): CRUD by id and by code,
// the aggregation rules of the pricing engine as 422s, filters, soft delete, resource_in_use while a
// live plan charges the metric, tenant isolation.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseExpression } from '../../src/domain/expression';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, sleep, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const nextCode = (label = 'bm') => `${label}_${(seq += 1)}_${Date.now()}`;

beforeAll(async () => {
  stack = await createTestStack();
  org = await createOrganization(stack.app, { name: 'Metric Org' });
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const api = {
  create: (payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: '/v1/billable_metrics', headers, payload: payload as Record<string, unknown> }),
  get: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'GET', url: `/v1/billable_metrics/${encodeURIComponent(id)}`, headers }),
  list: (query = '', headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url: `/v1/billable_metrics${query}`, headers }),
  update: (id: string, payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({
      method: 'PUT',
      url: `/v1/billable_metrics/${encodeURIComponent(id)}`,
      headers,
      payload: payload as Record<string, unknown>,
    }),
  remove: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'DELETE', url: `/v1/billable_metrics/${encodeURIComponent(id)}`, headers }),
};

async function createMetric(payload: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<BillableMetricResource> {
  const res = await api.create({ code: nextCode(), name: 'Metric', aggregation_type: 'count', ...payload }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<BillableMetricResource>();
}

/** A plan document as the plans module stores it, charging the given metrics. */
async function insertPlan(
  organizationId: string,
  charges: { billable_metric_id: string; filters?: Record<string, string[]>[] }[],
  deletedAt: Date | null = null,
): Promise<string> {
  const id = randomUUID();
  await stack.db.connection.collection('plans').insertOne({
    _id: id,
    organization_id: organizationId,
    code: nextCode('plan'),
    name: 'Plan',
    deleted_at: deletedAt,
    charges: charges.map((c) => ({
      _id: randomUUID(),
      billable_metric_id: c.billable_metric_id,
      filters: (c.filters ?? []).map((values) => ({ _id: randomUUID(), values })),
    })),
    created_at: new Date(),
    updated_at: new Date(),
  } as never);
  return id;
}

const plans = () => stack.db.connection.collection('plans');

describe('create and read', () => {
  it('creates a count metric with defaults', async () => {
    const code = nextCode('defaults');
    const res = await api.create({ code, name: 'API calls', aggregation_type: 'count' });
    expect(res.statusCode, res.body).toBe(201);
    const metric = res.json<BillableMetricResource>();
    expect(metric).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      code,
      name: 'API calls',
      description: null,
      aggregation_type: 'count',
      field_name: null,
      recurring: false,
      expression: null,
      rounding_function: null,
      rounding_precision: null,
      filters: [],
      deleted_at: null,
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
    });
  });

  it('keeps every given field and stores them in billable_metrics', async () => {
    const payload = {
      code: nextCode('full'),
      name: 'Storage',
      description: 'GB stored',
      aggregation_type: 'sum',
      field_name: 'gb',
      recurring: true,
      expression: 'gb * 1024',
      rounding_function: 'ceil',
      rounding_precision: 2,
      filters: [
        { key: 'region', values: ['eu', 'us'] },
        { key: 'tier', values: ['hot'] },
      ],
    };
    const res = await api.create(payload);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject(payload);
    const stored = await stack.db.connection
      .collection('billable_metrics')
      .findOne({ _id: res.json<BillableMetricResource>().id } as never);
    expect(stored).toMatchObject({ ...payload, organization_id: org.id, deleted_at: null });
  });

  it.each(['sum', 'unique_count', 'weighted_sum'])('accepts recurring on %s', async (type) => {
    const metric = await createMetric({ aggregation_type: type, field_name: 'value', recurring: true });
    expect(metric).toMatchObject({ aggregation_type: type, recurring: true });
  });

  it('accepts custom with a field_name, with or without an expression', async () => {
    const withExpression = await createMetric({
      aggregation_type: 'custom',
      field_name: 'cpu_seconds',
      expression: 'cpu_seconds * 2 + memory_mb / 1024',
    });
    expect(withExpression).toMatchObject({
      aggregation_type: 'custom',
      field_name: 'cpu_seconds',
      expression: 'cpu_seconds * 2 + memory_mb / 1024',
    });
    const withoutExpression = await createMetric({ aggregation_type: 'custom', field_name: 'cpu_seconds' });
    expect(withoutExpression).toMatchObject({ aggregation_type: 'custom', field_name: 'cpu_seconds', expression: null });
  });

  it('stores a blank expression as null', async () => {
    const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb', expression: '   ' });
    expect(metric.expression).toBeNull();
  });

  it('gets a metric by id and by code, with or without a trailing slash', async () => {
    const metric = await createMetric({ name: 'Lookup' });
    for (const url of [
      `/v1/billable_metrics/${metric.id}`,
      `/v1/billable_metrics/${metric.code}`,
      `/v1/billable_metrics/${metric.code}/`,
    ]) {
      const res = await stack.app.inject({ method: 'GET', url, headers: org.headers });
      expect(res.statusCode, url).toBe(200);
      expect(res.json()).toEqual(metric);
    }
  });

  it('is 404 billable_metric_not_found for an unknown id or code', async () => {
    expectError(await api.get(randomUUID()), 404, 'billable_metric_not_found');
    expectError(await api.get('no_such_code'), 404, 'billable_metric_not_found');
  });

  it('is 409 already_exists on a duplicate code, keeping the first', async () => {
    const first = await createMetric({ name: 'First' });
    const body = expectError(await api.create({ code: first.code, name: 'Second', aggregation_type: 'count' }), 409, 'already_exists');
    expect(body.message).toContain(first.code);
    expect((await api.get(first.code)).json<BillableMetricResource>()).toMatchObject({ id: first.id, name: 'First' });
  });

  it('answers 409 to concurrent creations of one code, creating exactly one', async () => {
    const code = nextCode('race');
    const results = await Promise.all(Array.from({ length: 6 }, () => api.create({ code, name: 'Race', aggregation_type: 'count' })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(await stack.db.models.BillableMetric.countDocuments({ organization_id: org.id, code })).toBe(1);
  });
});

describe('list', () => {
  let own: TestOrganization;
  const made: BillableMetricResource[] = [];

  beforeAll(async () => {
    own = await createOrganization(stack.app, { name: 'List Org' });
    for (const [type, recurring] of [
      ['count', false],
      ['sum', true],
      ['max', false],
      ['sum', false],
    ] as const) {
      made.push(await createMetric({ aggregation_type: type, field_name: type === 'count' ? undefined : 'v', recurring }, own.headers));
      await sleep(3);
    }
  });

  it('is newest first with X-Total-Count, also with a trailing slash', async () => {
    for (const url of ['/v1/billable_metrics', '/v1/billable_metrics/']) {
      const res = await stack.app.inject({ method: 'GET', url, headers: own.headers });
      expect(res.statusCode).toBe(200);
      expect(res.json<BillableMetricResource[]>().map((m) => m.id)).toEqual(made.map((m) => m.id).reverse());
      expect(res.headers['x-total-count']).toBe('4');
    }
  });

  it('pages with skip and limit, the total staying the full count', async () => {
    const res = await api.list('?skip=1&limit=2', own.headers);
    expect(res.json<BillableMetricResource[]>().map((m) => m.id)).toEqual([made[2]!.id, made[1]!.id]);
    expect(res.headers['x-total-count']).toBe('4');
    expectValidationError(await api.list('?limit=0', own.headers), 'limit');
    expectValidationError(await api.list('?skip=-1', own.headers), 'skip');
  });

  it('filters by aggregation_type and recurring', async () => {
    const sums = await api.list('?aggregation_type=sum', own.headers);
    expect(sums.json<BillableMetricResource[]>().map((m) => m.id)).toEqual([made[3]!.id, made[1]!.id]);
    expect(sums.headers['x-total-count']).toBe('2');
    const recurring = await api.list('?recurring=true', own.headers);
    expect(recurring.json<BillableMetricResource[]>().map((m) => m.id)).toEqual([made[1]!.id]);
    const notRecurring = await api.list('?recurring=false', own.headers);
    expect(notRecurring.headers['x-total-count']).toBe('3');
    expectValidationError(await api.list('?aggregation_type=median', own.headers), 'aggregation_type');
  });
});

describe('validation', () => {
  it.each([
    ['a missing code', { code: undefined }, 'code'],
    ['an empty code', { code: '  ' }, 'code'],
    ['a missing name', { name: undefined }, 'name'],
    ['an unknown aggregation_type', { aggregation_type: 'median' }, 'aggregation_type'],
    ['sum without field_name', { aggregation_type: 'sum' }, 'field_name'],
    ['max without field_name', { aggregation_type: 'max', field_name: null }, 'field_name'],
    ['unique_count without field_name', { aggregation_type: 'unique_count' }, 'field_name'],
    ['weighted_sum without field_name', { aggregation_type: 'weighted_sum' }, 'field_name'],
    ['latest without field_name', { aggregation_type: 'latest' }, 'field_name'],
    ['custom with neither field_name nor expression', { aggregation_type: 'custom' }, 'field_name'],
    // api-contract.md, Billable metrics: field_name is required for every type but count.
    ['custom with an expression but no field_name', { aggregation_type: 'custom', expression: 'cpu_seconds * 2' }, 'field_name'],
    ['custom with an expression and a null field_name', { aggregation_type: 'custom', field_name: null, expression: 'a' }, 'field_name'],
    ['recurring count', { aggregation_type: 'count', recurring: true }, 'recurring'],
    ['recurring max', { aggregation_type: 'max', field_name: 'v', recurring: true }, 'recurring'],
    ['recurring latest', { aggregation_type: 'latest', field_name: 'v', recurring: true }, 'recurring'],
    ['recurring custom', { aggregation_type: 'custom', field_name: 'a', expression: 'a', recurring: true }, 'recurring'],
    ['an expression on count', { aggregation_type: 'count', expression: 'a * 2' }, 'expression'],
    ['an unknown rounding_function', { rounding_function: 'truncate' }, 'rounding_function'],
    ['a fractional rounding_precision', { rounding_precision: 1.5 }, 'rounding_precision'],
    ['a filter without values', { filters: [{ key: 'region', values: [] }] }, 'filters.0.values'],
    ['a filter with an empty value', { filters: [{ key: 'region', values: ['eu', ''] }] }, 'filters.0.values.1'],
    ['a filter with an empty key', { filters: [{ key: '', values: ['eu'] }] }, 'filters.0.key'],
    ['a filter with a duplicate value', { filters: [{ key: 'region', values: ['eu', 'us', 'eu'] }] }, 'filters.0.values.2'],
    ['a filter value that is not a string', { filters: [{ key: 'region', values: [1] }] }, 'filters.0.values.0'],
    [
      'a duplicate filter key',
      {
        filters: [
          { key: 'region', values: ['eu'] },
          { key: 'tier', values: ['a'] },
          { key: 'region', values: ['us'] },
        ],
      },
      'filters.2.key',
    ],
    ['a filter with an unknown field', { filters: [{ key: 'region', values: ['eu'], value: 'x' }] }, 'filters.0.value'],
  ])('is 422 with %s, naming the field, creating nothing', async (_name, payload, path) => {
    const before = await stack.db.models.BillableMetric.countDocuments({ organization_id: org.id });
    expectValidationError(await api.create({ code: nextCode('invalid'), name: 'Invalid', aggregation_type: 'count', ...payload }), path);
    expect(await stack.db.models.BillableMetric.countDocuments({ organization_id: org.id })).toBe(before);
  });

  it.each([
    ['a syntax error', 'cpu * (2 + 1'],
    ['a trailing operator', 'cpu +'],
    ['an unknown function', 'sqrt(cpu)'],
    ['a wrong arity', 'min(cpu)'],
    ['an unexpected character', 'cpu $ 2'],
  ])("is 422 naming expression with the parser's message for %s", async (_name, expression) => {
    const parsed = parseExpression(expression);
    expect(parsed.ok).toBe(false);
    const body = expectValidationError(
      await api.create({ code: nextCode('expr'), name: 'E', aggregation_type: 'sum', field_name: 'cpu', expression }),
      'expression',
    );
    expect(body.errors).toContainEqual({ path: 'expression', message: (parsed as { message: string }).message });
  });

  it('names each unknown field', async () => {
    const body = expectUnknownFields(
      await api.create({ code: nextCode(), name: 'x', aggregation_type: 'count', agregation: 1, organization_id: 'x' }),
      ['agregation', 'organization_id'],
    );
    expect(body.errors.map((e) => e.path).sort()).toEqual(['agregation', 'organization_id']);
  });
});

describe('update', () => {
  it('changes name, description, field_name, expression, rounding and filters, keeping the rest', async () => {
    const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb', filters: [{ key: 'region', values: ['eu'] }] });
    await sleep(5);
    const changes = {
      name: 'Renamed',
      description: 'Now described',
      field_name: 'bytes',
      expression: 'bytes / 1024',
      rounding_function: 'round',
      rounding_precision: -2,
      filters: [{ key: 'tier', values: ['hot', 'cold'] }],
    };
    const res = await api.update(metric.id, changes);
    expect(res.statusCode, res.body).toBe(200);
    const updated = res.json<BillableMetricResource>();
    expect(updated).toMatchObject({ ...changes, id: metric.id, code: metric.code, aggregation_type: 'sum', created_at: metric.created_at });
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(metric.updated_at));
    expect((await api.get(metric.id)).json()).toEqual(updated);
  });

  it('addresses the metric by code, with a trailing slash too', async () => {
    const metric = await createMetric();
    const res = await stack.app.inject({
      method: 'PUT',
      url: `/v1/billable_metrics/${metric.code}/`,
      headers: org.headers,
      payload: { name: 'Via code' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect((await api.get(metric.id)).json<BillableMetricResource>().name).toBe('Via code');
  });

  it('sets nullable fields back to null and a blank expression to null', async () => {
    const metric = await createMetric({
      aggregation_type: 'sum',
      field_name: 'gb',
      description: 'd',
      expression: 'gb * 2',
      rounding_function: 'floor',
      rounding_precision: 1,
    });
    const res = await api.update(metric.id, { description: null, expression: ' ', rounding_function: null, rounding_precision: null });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      description: null,
      expression: null,
      rounding_function: null,
      rounding_precision: null,
      field_name: 'gb',
    });
  });

  it('applies the aggregation rules to the metric as it will be', async () => {
    const sum = await createMetric({ aggregation_type: 'sum', field_name: 'gb', recurring: true });
    expectValidationError(await api.update(sum.id, { field_name: null }), 'field_name');
    expectValidationError(await api.update(sum.id, { aggregation_type: 'max' }), 'recurring');
    expectValidationError(await api.update(sum.id, { expression: 'gb +' }), 'expression');
    const count = await createMetric();
    expectValidationError(await api.update(count.id, { recurring: true }), 'recurring');
    expectValidationError(await api.update(count.id, { aggregation_type: 'sum' }), 'field_name');
    // custom needs a field_name too, with an expression or not (api-contract.md, Billable metrics).
    expectValidationError(await api.update(count.id, { aggregation_type: 'custom', expression: 'cpu * 2' }), 'field_name');
    const custom = await createMetric({ aggregation_type: 'custom', field_name: 'cpu', expression: 'cpu * 2' });
    expectValidationError(await api.update(custom.id, { field_name: null }), 'field_name');
    expectValidationError(
      await api.update(sum.id, { aggregation_type: 'custom', field_name: null, expression: 'gb * 2', recurring: false }),
      'field_name',
    );
    expect((await api.get(sum.id)).json()).toEqual(sum);
    expect((await api.get(count.id)).json()).toEqual(count);
    expect((await api.get(custom.id)).json()).toEqual(custom);
    // ...and accepts a consistent change of several fields at once.
    const ok = await api.update(count.id, { aggregation_type: 'latest', field_name: 'level' });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ aggregation_type: 'latest', field_name: 'level' });
  });

  it('validates PUT bodies: unknown fields, filters, types', async () => {
    const metric = await createMetric();
    expectUnknownFields(await api.update(metric.id, { colour: 'blue' }), ['colour']);
    expectValidationError(
      await api.update(metric.id, {
        filters: [
          { key: 'a', values: ['x'] },
          { key: 'a', values: ['y'] },
        ],
      }),
      'filters.1.key',
    );
    expectValidationError(await api.update(metric.id, { recurring: 'yes' }), 'recurring');
    expect((await api.get(metric.id)).json()).toEqual(metric);
  });

  it('changes the code of an unused metric, 409 when the code is taken', async () => {
    const metric = await createMetric();
    const other = await createMetric();
    expectError(await api.update(metric.id, { code: other.code }), 409, 'already_exists');
    const newCode = nextCode('recoded');
    const res = await api.update(metric.code, { code: newCode });
    expect(res.statusCode, res.body).toBe(200);
    expect((await api.get(newCode)).json<BillableMetricResource>().id).toBe(metric.id);
    expectError(await api.get(metric.code), 404, 'billable_metric_not_found');
  });

  it('is 404 for an unknown metric', async () => {
    expectError(await api.update(randomUUID(), { name: 'x' }), 404, 'billable_metric_not_found');
  });

  describe('while a live plan charges the metric', () => {
    it('refuses to change code or aggregation_type (400 resource_in_use), allows the rest', async () => {
      const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb' });
      await insertPlan(org.id, [{ billable_metric_id: metric.id }]);
      const body = expectError(await api.update(metric.id, { code: nextCode('new') }), 400, 'resource_in_use');
      expect(body.message).toContain('code');
      expectError(await api.update(metric.id, { aggregation_type: 'max' }), 400, 'resource_in_use');
      expect((await api.get(metric.id)).json()).toEqual(metric);

      // Sending the same code and type is no change.
      const same = await api.update(metric.id, { code: metric.code, aggregation_type: 'sum', name: 'Still used', field_name: 'bytes' });
      expect(same.statusCode, same.body).toBe(200);
      expect(same.json()).toMatchObject({ code: metric.code, name: 'Still used', field_name: 'bytes' });
    });

    it('refuses to remove filter values a charge filter uses; adding and removing unused ones is fine', async () => {
      const metric = await createMetric({
        filters: [
          { key: 'region', values: ['eu', 'us', 'apac'] },
          { key: 'tier', values: ['hot'] },
        ],
      });
      await insertPlan(org.id, [{ billable_metric_id: metric.id, filters: [{ region: ['eu'] }, { tier: ['__ALL_FILTER_VALUES__'] }] }]);

      const removeEu = expectError(
        await api.update(metric.id, {
          filters: [
            { key: 'region', values: ['us'] },
            { key: 'tier', values: ['hot'] },
          ],
        }),
        400,
        'resource_in_use',
      );
      expect(removeEu.message).toContain('region=eu');
      const removeTier = expectError(await api.update(metric.id, { filters: [{ key: 'region', values: ['eu'] }] }), 400, 'resource_in_use');
      expect(removeTier.message).toContain('tier');
      expect((await api.get(metric.id)).json<BillableMetricResource>().filters).toEqual(metric.filters);

      const res = await api.update(metric.id, {
        filters: [
          { key: 'region', values: ['eu', 'latam'] },
          { key: 'tier', values: ['cold'] },
        ],
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json<BillableMetricResource>().filters).toEqual([
        { key: 'region', values: ['eu', 'latam'] },
        { key: 'tier', values: ['cold'] },
      ]);
    });

    it('allows the change once the plan is deleted, and ignores plans of other metrics', async () => {
      const metric = await createMetric();
      const other = await createMetric();
      const planId = await insertPlan(org.id, [{ billable_metric_id: metric.id }]);
      await insertPlan(org.id, [{ billable_metric_id: other.id }]);
      expectError(await api.update(metric.id, { aggregation_type: 'sum', field_name: 'v' }), 400, 'resource_in_use');
      await plans().updateOne({ _id: planId } as never, { $set: { deleted_at: new Date() } });
      const res = await api.update(metric.id, { aggregation_type: 'sum', field_name: 'v', code: nextCode('freed') });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ aggregation_type: 'sum', field_name: 'v' });
    });
  });
});

describe('soft delete', () => {
  it('answers 200 with deleted_at, then the metric is gone from GET and the list', async () => {
    const metric = await createMetric({ name: 'To delete' });
    const countBefore = Number((await api.list()).headers['x-total-count']);
    const res = await api.remove(metric.id);
    expect(res.statusCode, res.body).toBe(200);
    const deleted = res.json<BillableMetricResource>();
    expect(deleted).toMatchObject({ id: metric.id, code: metric.code, name: 'To delete' });
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expectError(await api.get(metric.id), 404, 'billable_metric_not_found');
    expectError(await api.get(metric.code), 404, 'billable_metric_not_found');
    const list = await api.list('?limit=1000');
    expect(list.json<BillableMetricResource[]>().map((m) => m.id)).not.toContain(metric.id);
    expect(Number(list.headers['x-total-count'])).toBe(countBefore - 1);
    const stored = await stack.db.models.BillableMetric.findById(metric.id).lean();
    expect(stored?.deleted_at).toBeInstanceOf(Date);
    expectError(await api.update(metric.id, { name: 'zombie' }), 404, 'billable_metric_not_found');
    expectError(await api.remove(metric.id), 404, 'billable_metric_not_found');
  });

  it('deletes by code with a trailing slash, and the code can be used again', async () => {
    const first = await createMetric({ name: 'Gen 1' });
    const res = await stack.app.inject({ method: 'DELETE', url: `/v1/billable_metrics/${first.code}/`, headers: org.headers });
    expect(res.statusCode, res.body).toBe(200);
    const second = await createMetric({ code: first.code, name: 'Gen 2' });
    expect(second.id).not.toBe(first.id);
    expect((await api.get(first.code)).json<BillableMetricResource>()).toMatchObject({ id: second.id, name: 'Gen 2' });
    expect((await api.remove(second.code)).statusCode).toBe(200);
    const third = await createMetric({ code: first.code, name: 'Gen 3' });
    expectError(await api.create({ code: first.code, name: 'Gen 4', aggregation_type: 'count' }), 409, 'already_exists');
    expect((await api.get(first.code)).json<BillableMetricResource>().id).toBe(third.id);
  });

  it('is refused with 400 resource_in_use while a live plan charges it, naming the plan', async () => {
    const metric = await createMetric();
    const planId = await insertPlan(org.id, [{ billable_metric_id: randomUUID() }, { billable_metric_id: metric.id }]);
    const plan = await plans().findOne({ _id: planId } as never);
    const body = expectError(await api.remove(metric.code), 400, 'resource_in_use');
    expect(body.message).toContain(String(plan?.code));
    expect((await api.get(metric.id)).json<BillableMetricResource>().deleted_at).toBeNull();

    await plans().updateOne({ _id: planId } as never, { $set: { deleted_at: new Date() } });
    const res = await api.remove(metric.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<BillableMetricResource>().deleted_at).not.toBeNull();
  });

  it("is not blocked by another organization's plan that names the same id", async () => {
    const metric = await createMetric();
    const other = await createOrganization(stack.app, { name: 'Other plans' });
    await insertPlan(other.id, [{ billable_metric_id: metric.id }]);
    expect((await api.remove(metric.id)).statusCode).toBe(200);
  });
});

describe('tenant isolation', () => {
  let a: TestOrganization;
  let b: TestOrganization;
  let metricOfA: BillableMetricResource;

  beforeAll(async () => {
    a = await createOrganization(stack.app, { name: 'Tenant A' });
    b = await createOrganization(stack.app, { name: 'Tenant B' });
    metricOfA = await createMetric({ name: 'Belongs to A', code: 'shared_code' }, a.headers);
  });

  it("org B gets 404 for org A's metric by id and by code, on every verb", async () => {
    for (const key of [metricOfA.id, metricOfA.code]) {
      expectError(await api.get(key, b.headers), 404, 'billable_metric_not_found');
      expectError(await api.update(key, { name: 'Hijacked' }, b.headers), 404, 'billable_metric_not_found');
      expectError(await api.remove(key, b.headers), 404, 'billable_metric_not_found');
    }
    expect((await api.get(metricOfA.id, a.headers)).json()).toEqual(metricOfA);
  });

  it("org B's list does not show org A's metrics, and B may use the same code", async () => {
    const res = await api.list('', b.headers);
    expect(res.json()).toEqual([]);
    expect(res.headers['x-total-count']).toBe('0');
    const metricOfB = await createMetric({ code: metricOfA.code }, b.headers);
    expect((await api.get(metricOfA.code, b.headers)).json<BillableMetricResource>().id).toBe(metricOfB.id);
    expect((await api.get(metricOfA.code, a.headers)).json<BillableMetricResource>().id).toBe(metricOfA.id);
  });
});

describe('OpenAPI document', () => {
  it('documents the billable metric paths with the BillableMetric schema', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    const doc = res.json<{
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    }>();
    expect(Object.keys(doc.paths['/v1/billable_metrics']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/billable_metrics/{id}']!).sort()).toEqual(['delete', 'get', 'put']);
    const query = doc.paths['/v1/billable_metrics']!.get!.parameters!.filter((p) => p.in === 'query').map((p) => p.name);
    expect(query).toEqual(expect.arrayContaining(['skip', 'limit', 'aggregation_type', 'recurring']));
    expect(Object.keys(doc.components.schemas.BillableMetric?.properties ?? {})).toEqual(expect.arrayContaining(['filters', 'expression']));
  });
});
