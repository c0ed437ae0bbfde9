// A harness for subscriptionWorkflow tests on the time-skipping server with the real activities
// (MongoDB stand-in): an organization, customers, metrics and plans written straight to MongoDB,
// subscriptions started like the API starts them, events ingested through the real ingestor, and
// a clock moved step by step, each step waiting until the workflows have finished what fell due.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createActivities } from '../../activities';
import type { Db } from '../../src/db';
import type { InvoiceDoc } from '../../src/db/models/invoice';
import { fromDecimal128 } from '../../src/db/decimal';
import { CatalogView } from '../../src/usage/catalog-view';
import { Ingestor } from '../../src/usage/ingest';
import { initialState, planSnapshot, ensureSubscriptionWorkflow, subscriptionLabels } from '../../src/subscriptions/start';
import { isFinal, nextDue, type SubscriptionState } from '../../src/subscriptions/state';
import { wrapClient, type TemporalClient } from '../../src/temporal/client';
import type { ClockRef } from '../../src/test-clocks/time';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { startSubscriptionWorkflow, subscriptionStateQuery } from '../../workflows/subscription.messages';
import { eventually } from '../support/http';
import { insertMetric, insertPlan } from '../support/catalog-fixtures';
import { createTestDb } from '../support/stack';
import { bundleWorkflows, createTimeSkippingEnv } from '../support/temporal';

export type Activities = ReturnType<typeof createActivities>;

export interface Harness {
  env: TestWorkflowEnvironment;
  db: Db;
  temporal: TemporalClient;
  /** The real activities, for workers with some of them replaced. */
  activities: Activities;
  /** Stops the running worker (forcefully after a second) and starts one with `activities`. */
  replaceWorker(activities: Activities): Promise<void>;
  close(): Promise<void>;
}

/**
 * `sticky: false` keeps no workflow cache, so the server never routes a workflow's tasks to this
 * worker's own queue: the test server does not fall back from a dead worker's sticky queue.
 */
export async function startHarness(options: { activities?: (real: Activities) => Activities; sticky?: boolean } = {}): Promise<Harness> {
  const taskQueue = `subscriptions-${randomUUID()}`;
  const [env, bundle, db] = (await Promise.all([createTimeSkippingEnv(), bundleWorkflows(), createTestDb()])) as [
    TestWorkflowEnvironment,
    WorkflowBundleWithSourceMap,
    Db,
  ];
  const temporal = wrapClient(env.client, taskQueue);
  const real = createActivities({ db, temporal });
  const launch = async (activities: Activities) => {
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: bundle,
      activities,
      shutdownGraceTime: '1s',
      shutdownForceTime: '2s',
      ...(options.sticky === false ? { maxCachedWorkflows: 0 } : {}),
    });
    return { worker, running: worker.run().catch(() => undefined) };
  };
  let current = await launch(options.activities ? options.activities(real) : real);
  return {
    env,
    db,
    temporal,
    activities: real,
    async replaceWorker(activities) {
      current.worker.shutdown();
      await current.running;
      current = await launch(activities);
    },
    async close() {
      current.worker.shutdown();
      await current.running;
      await env.teardown();
      await db.connection.dropDatabase().catch(() => undefined);
      await db.close();
    },
  };
}

export interface Tenant {
  organizationId: string;
  prefix: string;
  customerId: string;
  externalCustomerId: string;
  timezone: string;
}

export async function createTenant(
  h: Harness,
  options: { timezone?: string; netPaymentTerm?: number; gracePeriod?: number } = {},
): Promise<Tenant> {
  const prefix = `S${randomUUID().slice(0, 4).toUpperCase()}`;
  const organization = await h.db.models.Organization.create({
    name: 'Acme',
    default_currency: 'USD',
    document_number_prefix: prefix,
    events_rate_limit_per_minute: 1000,
    timezone: 'UTC',
    net_payment_term: options.netPaymentTerm ?? 30,
    invoice_grace_period: options.gracePeriod ?? 0,
  });
  const timezone = options.timezone ?? 'UTC';
  const customer = await h.db.models.Customer.create({
    organization_id: organization._id,
    external_id: `c-${randomUUID()}`,
    currency: 'USD',
    timezone,
  });
  return { organizationId: organization._id, prefix, customerId: customer._id, externalCustomerId: customer.external_id, timezone };
}

/** A `count` metric and a plan charging `perCall` cents per event (standard model). */
export async function createPlan(
  h: Harness,
  tenant: Tenant,
  plan: { amountCents: number; interval?: 'weekly' | 'monthly' | 'quarterly' | 'yearly'; perCall?: string; metricCode?: string },
): Promise<{ planId: string; metricCode: string }> {
  const metricCode = plan.metricCode ?? `calls-${randomUUID().slice(0, 6)}`;
  const existing = await h.db.connection
    .collection('billable_metrics')
    .findOne({ organization_id: tenant.organizationId, code: metricCode });
  const metricId = existing
    ? String(existing._id)
    : await insertMetric(h.db, tenant.organizationId, { code: metricCode, aggregation_type: 'count' });
  const { planId } = await insertPlan(h.db, tenant.organizationId, {
    amount_cents: plan.amountCents,
    interval: plan.interval ?? 'monthly',
    charges: [{ billable_metric_id: metricId, charge_model: 'standard', properties: { amount: plan.perCall ?? '2' } }],
  });
  return { planId, metricCode };
}

export async function planOf(h: Harness, planId: string) {
  const plan = await h.db.connection.collection('plans').findOne({ _id: planId as never });
  return planSnapshot(plan as never);
}

/** Inserts the subscription document and starts its workflow, as POST /v1/subscriptions does. */
export async function subscribe(
  h: Harness,
  tenant: Tenant,
  s: {
    planId: string;
    startedAt: Date;
    billingTime?: 'calendar' | 'anniversary';
    payInAdvance?: boolean;
    trialPeriodDays?: number;
    maxStepsPerRun?: number;
    clock?: ClockRef;
  },
) {
  const doc = await h.db.models.Subscription.create({
    organization_id: tenant.organizationId,
    customer_id: tenant.customerId,
    external_customer_id: tenant.externalCustomerId,
    external_id: `sub-${randomUUID().slice(0, 8)}`,
    plan_id: s.planId,
    status: 'pending',
    billing_time: s.billingTime ?? 'calendar',
    pay_in_advance: s.payInAdvance ?? false,
    trial_period_days: s.trialPeriodDays ?? 0,
    started_at: s.startedAt,
  });
  const state = initialState(doc.toObject(), await planOf(h, s.planId), tenant.timezone, {
    jitterWindowMs: 0,
    progressiveCheckMs: 86_400_000,
  });
  if (s.maxStepsPerRun !== undefined) {
    await startSubscriptionWorkflow(h.temporal, { state, maxStepsPerRun: s.maxStepsPerRun });
  } else {
    await ensureSubscriptionWorkflow(h.temporal, state, s.clock ?? null, subscriptionLabels(doc));
  }
  return { id: doc._id, handle: h.temporal.client.workflow.getHandle(workflowIds.subscription(doc._id)) };
}

/** Events through the real ingestor, `count` per instant. */
export async function sendEvents(
  h: Harness,
  tenant: Tenant,
  code: string,
  at: Date,
  count: number,
  properties: Record<string, unknown> = {},
): Promise<void> {
  const ingestor = new Ingestor(h.db, new CatalogView(h.db));
  const inputs = Array.from({ length: count }, () => ({
    transaction_id: randomUUID(),
    external_customer_id: tenant.externalCustomerId,
    code,
    timestamp: at,
    properties,
  }));
  const outcomes = await ingestor.ingest({ _id: tenant.organizationId, timezone: 'UTC' }, inputs, at);
  const bad = outcomes.filter((o) => o.status !== 'created');
  if (bad.length > 0) throw new Error(`events refused: ${JSON.stringify(bad[0])}`);
  const stored = outcomes.filter((o) => o.status === 'created' && o.event.subscription_ids.length > 0).length;
  if (stored !== count) throw new Error(`only ${stored} of ${count} events were attributed to a subscription at ${at.toISOString()}`);
}

async function stateOf(h: Harness, subscriptionId: string): Promise<SubscriptionState | null> {
  const handle = h.temporal.client.workflow.getHandle(workflowIds.subscription(subscriptionId));
  const description = await handle.describe();
  if (description.status.name !== 'RUNNING') return null;
  return handle.query(subscriptionStateQuery);
}

/** Waits until no activity of the workflow is pending and every grace-less draft is finalized. */
async function settle(h: Harness, subscriptionId: string, afterVersion: number | null): Promise<void> {
  const handle = h.temporal.client.workflow.getHandle(workflowIds.subscription(subscriptionId));
  await eventually(
    async () => {
      const description = await handle.describe();
      if (description.status.name === 'RUNNING') {
        if ((description.raw.pendingActivities ?? []).length > 0) return undefined;
        const state = await handle.query(subscriptionStateQuery);
        if (afterVersion !== null && state.version <= afterVersion) return undefined;
      }
      const drafts = await h.db.models.Invoice.countDocuments({ subscription_id: subscriptionId, status: 'draft', grace_period_days: 0 });
      return drafts === 0 ? true : undefined;
    },
    30_000,
    `subscription ${subscriptionId} to settle`,
  );
}

/**
 * Moves the clock to `until`, stopping at each step the subscription has due before it, and
 * waiting for that step (and the invoices it issued) to complete before moving on: the
 * time-skipping server does not hold its clock while a TypeScript activity runs.
 */
/**
 * Awaits `call`, saying on stderr every 10 s that it is still waiting: one of these calls has been
 * seen to block a whole minute in CI under load (the continue-as-new case), and the log names it.
 */
async function watched<T>(what: string, call: Promise<T>): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => console.error(`advanceTo: still waiting for ${what} after ${Date.now() - started} ms`), 10_000);
  try {
    return await call;
  } finally {
    clearInterval(timer);
  }
}

export async function advanceTo(h: Harness, subscriptionId: string, until: Date): Promise<void> {
  for (;;) {
    const state = await watched('the state query', stateOf(h, subscriptionId));
    const due = state && !isFinal(state.status) ? nextDue(state) : null;
    const now = await h.env.currentTimeMs();
    if (!due || due.at > until.getTime()) {
      if (until.getTime() > now) await watched(`env.sleep to ${until.toISOString()}`, h.env.sleep(until.getTime() - now));
      await settle(h, subscriptionId, null);
      return;
    }
    if (due.at + 1000 > now) await watched(`env.sleep to the ${due.kind} step`, h.env.sleep(due.at + 1000 - now));
    await settle(h, subscriptionId, state!.version);
  }
}

export async function invoicesOf(h: Harness, subscriptionId: string): Promise<InvoiceDoc[]> {
  // Invoices issued by one step share their creation instant; their numbers follow the order of issue.
  return h.db.models.Invoice.find({ subscription_id: subscriptionId }).sort({ created_at: 1, number: 1 }).lean();
}

export const cents = (value: unknown) => fromDecimal128(value)!.toFixed(0);
export const fee4 = (value: unknown) => fromDecimal128(value)!.toFixed(4);

/** The invoice's base fee (`subscription`) and usage lines, by key. */
export async function feesOf(h: Harness, invoiceId: string): Promise<Record<string, string>> {
  const fees = await h.db.models.Fee.find({ invoice_id: invoiceId }).lean();
  return Object.fromEntries(fees.map((f) => [f.fee_type === 'charge' ? 'charge' : f.key, fee4(f.amount_cents)]));
}
