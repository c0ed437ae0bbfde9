// The subscription reconciler on the dev server, with the real activities: a pending or active
// subscription whose workflow is missing or closed gets it started again (from its document, or
// from the workflow_state its last step recorded); a second pass restarts nothing; ended
// subscriptions are left alone. And the `reconcile-subscriptions` schedule is created once.
import { randomUUID } from 'node:crypto';
import { ScheduleOverlapPolicy, WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SubscriptionStatus } from '../../src/db/models/subscription';
import type { SubscriptionState } from '../../src/subscriptions/state';
import { ensureReconcilerSchedule, RECONCILER_SCHEDULE_ID } from '../../src/temporal/schedules';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { reconcileSubscriptionsWorkflow } from '../../workflows/reconciler';
import type { ReconcileTotals } from '../../workflows/reconciler.messages';
import { subscriptionStateQuery } from '../../workflows/subscription.messages';
import { eventually } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let customer: { id: string; external_id: string };
let planId: string;

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, { timezone: 'Europe/Paris' });
  const created = await stack.app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: org.headers,
    payload: { external_id: `c-${randomUUID()}` },
  });
  expect(created.statusCode, created.body).toBe(201);
  customer = created.json();
  const plan = await stack.app.inject({
    method: 'POST',
    url: '/v1/plans',
    headers: org.headers,
    payload: { code: `p-${randomUUID().slice(0, 8)}`, name: 'Monthly', interval: 'monthly', amount_cents: 1000, currency: 'USD' },
  });
  expect(plan.statusCode, plan.body).toBe(201);
  planId = plan.json<{ id: string }>().id;
});

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

/** A subscription document written without its workflow (as after a lost start or namespace). */
async function insertSubscription(status: SubscriptionStatus, startedAt: Date): Promise<string> {
  const doc = await stack.db.models.Subscription.create({
    organization_id: org.id,
    customer_id: customer.id,
    external_customer_id: customer.external_id,
    external_id: `s-${randomUUID()}`,
    plan_id: planId,
    status,
    billing_time: 'calendar',
    started_at: startedAt,
    ...(status === 'terminated' ? { terminated_at: startedAt, ending_at: startedAt } : {}),
  });
  return doc._id;
}

function reconcile(pageSize?: number): Promise<ReconcileTotals> {
  worker.assertAlive();
  return stack.temporal.client.workflow.execute(reconcileSubscriptionsWorkflow, {
    taskQueue: stack.taskQueue,
    workflowId: `reconcile-test/${randomUUID()}`,
    // minAgeMs 0: the documents here were inserted a moment ago.
    args: [pageSize ? { pageSize, minAgeMs: 0 } : { minAgeMs: 0 }],
  });
}

const handleOf = (subscriptionId: string) => stack.temporal.client.workflow.getHandle(workflowIds.subscription(subscriptionId));

async function statusOf(subscriptionId: string): Promise<string | 'NOT_FOUND'> {
  try {
    return (await handleOf(subscriptionId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'NOT_FOUND';
    throw err;
  }
}

/** Once Temporal's visibility (what the reconciler lists) shows the subscription's workflow `status`. */
const listedAs = (subscriptionId: string, status: 'Running' | 'Terminated') =>
  eventually(
    async () => {
      const query = `WorkflowId = '${workflowIds.subscription(subscriptionId)}' AND ExecutionStatus = '${status}'`;
      for await (const execution of stack.temporal.client.workflow.list({ query })) return execution;
      return undefined;
    },
    15_000,
    `the workflow of ${subscriptionId} to be listed ${status}`,
  );

/** The document once its workflow's first step recorded a state (version >= `version`). */
const recorded = (subscriptionId: string, version = 1) =>
  eventually(
    async () => {
      const doc = await stack.db.models.Subscription.findById(subscriptionId).lean();
      return doc && doc.state_version >= version && doc.workflow_state ? doc : undefined;
    },
    15_000,
    `subscription ${subscriptionId} to record state version ${version}`,
  );

describe('reconcileSubscriptionsWorkflow', () => {
  const monthStart = () => {
    const now = new Date();
    return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  };
  let active: string;
  let pending: string;
  let terminated: string;

  it('starts the workflow of every pending or active subscription that has none, from its document', async () => {
    active = await insertSubscription('active', monthStart());
    pending = await insertSubscription('pending', new Date(Date.UTC(new Date().getUTCFullYear() + 1, 0, 1)));
    terminated = await insertSubscription('terminated', monthStart());
    expect(await statusOf(active)).toBe('NOT_FOUND');
    expect(await statusOf(pending)).toBe('NOT_FOUND');

    // Pages of one: the pass walks every page.
    const totals = await reconcile(1);
    expect(totals).toEqual({ pages: 3, checked: 2, restarted: 2, skipped: 0 });
    expect(await statusOf(active)).toBe('RUNNING');
    expect(await statusOf(pending)).toBe('RUNNING');
    expect(await statusOf(terminated)).toBe('NOT_FOUND');

    // The restarted workflows ran their first step: activation for the past start (in the
    // organization's zone, this month's period), announcement for the future one.
    const activeDoc = await recorded(active);
    expect(activeDoc.status).toBe('active');
    const state = activeDoc.workflow_state as unknown as SubscriptionState;
    expect(state).toMatchObject({ status: 'active', timezone: 'Europe/Paris', jitterMs: 0, progressiveCheckMs: 3_600_000 });
    // The step saves the document before its activity returns to the workflow: the workflow's
    // state catches up a moment later.
    const queried = await eventually(
      async () => {
        const now = await handleOf(active).query(subscriptionStateQuery);
        return now.version >= state.version ? now : undefined;
      },
      15_000,
      'the workflow to take the recorded state',
    );
    expect(queried).toMatchObject({ status: 'active', version: state.version });
    const pendingDoc = await recorded(pending);
    expect(pendingDoc.status).toBe('pending');
    expect(pendingDoc.workflow_state).toMatchObject({ status: 'pending', announced: true });
  });

  it('restarts nothing on a second pass (idempotent), and describes none of the workflows listed running', async () => {
    const runIds = await Promise.all([active, pending].map(async (id) => (await handleOf(id).describe()).runId));
    await Promise.all([active, pending].map((id) => listedAs(id, 'Running')));
    // The activities share the stack's client: every describe goes through getHandle.
    const handles = vi.spyOn(stack.temporal.client.workflow, 'getHandle');
    let totals: ReconcileTotals;
    try {
      totals = await reconcile();
      expect(handles).not.toHaveBeenCalled();
    } finally {
      handles.mockRestore();
    }
    expect(totals).toEqual({ pages: 1, checked: 2, restarted: 0, skipped: 0 });
    expect(await Promise.all([active, pending].map(async (id) => (await handleOf(id).describe()).runId))).toEqual(runIds);
    expect(await statusOf(terminated)).toBe('NOT_FOUND');
  });

  it('restarts a terminated workflow of an active subscription from its recorded workflow_state', async () => {
    const before = await recorded(active);
    const recordedState = before.workflow_state as unknown as SubscriptionState;
    const handle = handleOf(active);
    const oldRun = (await handle.describe()).runId;
    await handle.terminate('operator mistake');
    expect(await statusOf(active)).toBe('TERMINATED');
    // The reconciler lists running workflows: a pass restarts a closed one once visibility shows it closed.
    await listedAs(active, 'Terminated');

    const totals = await reconcile();
    expect(totals).toMatchObject({ checked: 2, restarted: 1 });
    const description = await handle.describe();
    expect(description.status.name).toBe('RUNNING');
    expect(description.runId).not.toBe(oldRun);
    // The new run carries on from the recorded state: same version, nothing replayed or re-billed.
    expect(await handle.query(subscriptionStateQuery)).toEqual(recordedState);
    const after = await stack.db.models.Subscription.findById(active).lean();
    expect(after!.state_version).toBe(before.state_version);
    expect(await stack.db.models.Invoice.countDocuments({ subscription_id: active })).toBe(0);

    expect((await reconcile()).restarted).toBe(0);
  });
});

describe('ensureReconcilerSchedule', () => {
  it('creates the reconcile-subscriptions schedule once; a second call leaves it', async () => {
    const client = stack.temporal.client;
    const schedule = client.schedule.getHandle(RECONCILER_SCHEDULE_ID);
    await schedule.delete().catch(() => undefined); // a leftover of an interrupted run
    try {
      expect(await ensureReconcilerSchedule(client, stack.taskQueue, '1 hour')).toBe(true);
      expect(await ensureReconcilerSchedule(client, stack.taskQueue, '1 hour')).toBe(false);
      const description = await schedule.describe();
      expect(description.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'reconcileSubscriptionsWorkflow',
        taskQueue: stack.taskQueue,
      });
      expect(description.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
      expect(description.spec.intervals?.map((i) => i.every)).toEqual([3_600_000]);
    } finally {
      await schedule.delete();
    }
  });
});
