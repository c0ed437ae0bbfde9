// One organization on a real stack (API + worker) with a "calls" count metric, and the HTTP helpers
// that drive subscriptions on test clocks: shared by the API tests that walk a subscription through
// time (pause and resume, lifecycle endpoints). Registers its own beforeAll/afterAll.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import { eventually } from './http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from './stack';
import { startStackWorker, type StackWorker } from './worker';

export function clockScenario(name: string) {
  let stack: TestStack;
  let worker: StackWorker;
  let org: TestOrganization;
  let calls: BillableMetricResource;

  const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
  const at = (iso: string) => new Date(iso).toISOString();
  const post = (url: string, payload?: unknown) =>
    stack.app.inject({ method: 'POST', url, headers: org.headers, ...(payload === undefined ? {} : { payload: payload as object }) });
  const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: org.headers });

  async function ok<T>(res: Awaited<ReturnType<typeof get>>, status: number): Promise<T> {
    expect(res.statusCode, res.body).toBe(status);
    return res.json<T>();
  }

  beforeAll(async () => {
    stack = await createTestStack();
    worker = await startStackWorker(stack);
    org = await createOrganization(stack.app, { name, default_currency: 'USD', timezone: 'UTC', events_rate_limit_per_minute: 100_000 });
    calls = await ok<BillableMetricResource>(
      await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }),
      201,
    );
  }, 120_000);

  afterAll(async () => {
    await worker?.stop();
    await stack?.close();
  });

  return {
    stack: () => stack,
    org: () => org,
    calls: () => calls,
    uid,
    at,
    post,
    get,
    ok,
    async createClock(frozenTime: string): Promise<TestClockResource> {
      return ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: frozenTime }), 201);
    },
    async createCustomer(clockId: string): Promise<CustomerResource> {
      return ok<CustomerResource>(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clockId }), 201);
    },
    /** A monthly plan of `amount_cents`, 5 cents a call. */
    async createPlan(amount_cents: number): Promise<PlanResource> {
      return ok<PlanResource>(
        await post('/v1/plans', {
          code: uid('plan'),
          name: 'Plan',
          interval: 'monthly',
          amount_cents,
          currency: 'USD',
          charges: [{ billable_metric_id: calls.id, charge_model: 'standard', properties: { amount: '5' } }],
        }),
        201,
      );
    },
    async subscribe(body: Record<string, unknown>): Promise<SubscriptionResource> {
      worker.assertAlive();
      return ok<SubscriptionResource>(await post('/v1/subscriptions', { external_id: uid('sub'), ...body }), 201);
    },
    async subscription(id: string): Promise<SubscriptionResource> {
      return ok<SubscriptionResource>(await get(`/v1/subscriptions/${id}`), 200);
    },
    /** Advances the clock and waits until every workflow of its customers caught up. */
    async advance(clockId: string, iso: string): Promise<void> {
      worker.assertAlive();
      expect((await post(`/v1/test_clocks/${clockId}/advance`, { frozen_time: iso })).statusCode).toBe(202);
      await eventually(
        async () => {
          worker.assertAlive();
          const clock = await ok<TestClockResource>(await get(`/v1/test_clocks/${clockId}`), 200);
          return clock.status === 'ready' ? clock : undefined;
        },
        60_000,
        `test clock ${clockId} ready at ${iso}`,
      );
    },
    /** One call event per timestamp, through the batch endpoint; all must be stored. */
    async sendCalls(customer: CustomerResource, timestamps: string[]): Promise<void> {
      const events = timestamps.map((timestamp) => ({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: calls.code,
        timestamp,
      }));
      const body = await ok<{ ingested: number; errors: unknown[] }>(await post('/v1/events/batch', { events }), 201);
      expect(body.errors).toEqual([]);
      expect(body.ingested).toBe(timestamps.length);
    },
  };
}
