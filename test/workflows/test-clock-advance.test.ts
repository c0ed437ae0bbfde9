// Test clocks at the service level on the dev server (real time): a customer on a clock, its
// subscription driven through a year by clock advances only; the invoices' dates follow the
// clock; a real customer's subscription is untouched by any advance.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/db';
import { fromDecimal128 } from '../../src/db/decimal';
import { initialState, planSnapshot, ensureSubscriptionWorkflow, subscriptionLabels } from '../../src/subscriptions/start';
import type { SubscriptionState } from '../../src/subscriptions/state';
import { startClockAdvance } from '../../src/test-clocks/advance';
import { clockOfCustomer } from '../../src/test-clocks/time';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { CatalogView } from '../../src/usage/catalog-view';
import { Ingestor } from '../../src/usage/ingest';
import { subscriptionStateQuery } from '../../workflows/subscription.messages';
import { insertMetric, insertPlan } from '../support/catalog-fixtures';
import { eventually } from '../support/http';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let db: Db;

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  db = stack.db;
});

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

async function subscribeCustomer(
  organizationId: string,
  customer: { _id: string; external_id: string; test_clock_id: string | null },
  planId: string,
  startedAt: Date,
) {
  const doc = await db.models.Subscription.create({
    organization_id: organizationId,
    customer_id: customer._id,
    external_customer_id: customer.external_id,
    external_id: `sub-${randomUUID().slice(0, 8)}`,
    plan_id: planId,
    status: 'pending',
    started_at: startedAt,
  });
  const plan = await db.connection.collection('plans').findOne({ _id: planId as never });
  const state = initialState(doc.toObject(), planSnapshot(plan as never), 'UTC', { jitterWindowMs: 0, progressiveCheckMs: 3_600_000 });
  await ensureSubscriptionWorkflow(stack.temporal, state, await clockOfCustomer(db, customer), subscriptionLabels(doc));
  return doc._id;
}

async function advance(clockId: string, to: string) {
  const clock = (await db.models.TestClock.findById(clockId).lean())!;
  await startClockAdvance({ db, temporal: stack.temporal }, clock, new Date(to));
  await eventually(
    async () => ((await db.models.TestClock.findById(clockId).lean())?.status === 'ready' ? true : undefined),
    120_000,
    `clock at ${to}`,
  );
}

it('drives a monthly subscription through a year by monthly advances only; a real subscription is untouched', async () => {
  const org = await createOrganization(stack.app, { invoice_grace_period: 0, net_payment_term: 30, document_number_prefix: 'TCK' });
  const clock = await db.models.TestClock.create({ organization_id: org.id, name: 'year', frozen_time: new Date('2027-01-01T00:00:00Z') });
  const onClock = (
    await db.models.Customer.create({
      organization_id: org.id,
      external_id: `c-${randomUUID()}`,
      currency: 'USD',
      test_clock_id: clock._id,
    })
  ).toObject();
  const real = (await db.models.Customer.create({ organization_id: org.id, external_id: `r-${randomUUID()}`, currency: 'USD' })).toObject();
  const metricId = await insertMetric(db, org.id, { code: 'calls', aggregation_type: 'count' });
  const { planId } = await insertPlan(db, org.id, {
    amount_cents: 10000,
    charges: [{ billable_metric_id: metricId, charge_model: 'standard', properties: { amount: '2' } }],
  });

  const realSub = await subscribeCustomer(org.id, real, planId, new Date());
  const clockSub = await subscribeCustomer(org.id, onClock, planId, new Date('2027-01-01T00:00:00Z'));
  const realHandle = stack.temporal.client.workflow.getHandle(workflowIds.subscription(realSub));
  const realBefore = await eventually(
    async () => {
      const s = await realHandle.query(subscriptionStateQuery);
      return s.status === 'active' ? s : undefined;
    },
    20_000,
    'the real subscription active',
  );
  await eventually(
    async () => ((await db.models.Subscription.findById(clockSub).lean())?.status === 'active' ? true : undefined),
    20_000,
    'the clock subscription active',
  );

  // 5 events in each month of 2027, each sent once the clock has passed it (never ahead of the clock).
  const ingestor = new Ingestor(db, new CatalogView(db));
  for (let month = 1; month <= 12; month++) {
    const at = new Date(Date.UTC(2027, month - 1, 15));
    await advance(clock._id, new Date(Date.UTC(2027, month - 1, 20)).toISOString());
    const outcomes = await ingestor.ingest(
      { _id: org.id, timezone: 'UTC' },
      Array.from({ length: 5 }, () => ({
        transaction_id: randomUUID(),
        external_customer_id: onClock.external_id,
        code: 'calls',
        timestamp: at,
        properties: {},
      })),
      at,
    );
    expect(outcomes.every((o) => o.status === 'created' && o.event.subscription_ids.includes(clockSub))).toBe(true);
  }
  expect(await db.models.Invoice.countDocuments({ subscription_id: clockSub })).toBe(11);

  await advance(clock._id, '2028-01-01T00:00:00Z');
  const invoices = await db.models.Invoice.find({ subscription_id: clockSub }).sort({ number: 1 }).lean();
  // Twelve whole months of 10000, each with 5 events at 2 cents.
  expect(invoices.map((i) => fromDecimal128(i.total)!.toFixed(0))).toEqual(Array(12).fill('10010'));
  expect(invoices.map((i) => i.issuing_date)).toEqual(
    Array.from({ length: 12 }, (_, m) => (m === 11 ? '2028-01-01' : `2027-${String(m + 2).padStart(2, '0')}-01`)),
  );
  // Due 30 days after issue; all but December's are overdue at the clock's time.
  expect(invoices.filter((i) => i.payment_overdue).length).toBe(11);
  const state = await stack.temporal.client.workflow.getHandle(workflowIds.subscription(clockSub)).query(subscriptionStateQuery);
  expect(state.currentPeriod).toEqual({ from: '2028-01-01T00:00:00.000Z', to: '2028-02-01T00:00:00.000Z' });

  // The real subscription did not move: same state, nothing billed.
  const realAfter: SubscriptionState = await realHandle.query(subscriptionStateQuery);
  expect(realAfter).toEqual(realBefore);
  expect(await db.models.Invoice.countDocuments({ subscription_id: realSub })).toBe(0);
}, 180_000);
