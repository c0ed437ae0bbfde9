// The timed steps run as local activities without a patch marker in executions that say so in their
// input (localTimedSteps, set by startSubscriptionWorkflow and by continue-as-new); an execution
// started without it (before the flag existed) still decides with patched(), as it did.
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { initialState } from '../../src/subscriptions/start';
import { subscriptionWorkflowType } from '../../workflows/subscription.messages';
import { advanceTo, createPlan, createTenant, invoicesOf, planOf, startHarness, subscribe, type Harness } from './subscription-harness';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const utc = (iso: string) => new Date(`${iso}Z`);

type Event = temporal.api.history.v1.IHistoryEvent;

const TIMED_STEPS = ['activateSubscription', 'endSubscriptionTrial', 'billSubscriptionPeriod', 'checkUsageThresholds'];

/** What a run's history says about its timed steps: patch markers, local-activity markers, timed steps run as activities, upserted attribute names. */
function timedStepTraces(events: Event[]) {
  const markers = (name: string) => events.filter((e) => e.markerRecordedEventAttributes?.markerName === name).length;
  return {
    patchMarkers: markers('core_patch'),
    localActivityMarkers: markers('core_local_activity'),
    timedStepActivities: events.filter((e) => TIMED_STEPS.includes(e.activityTaskScheduledEventAttributes?.activityType?.name ?? ''))
      .length,
    upserted: events.flatMap((e) => Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {})),
  };
}

async function historyOf(workflowId: string, runId?: string): Promise<Event[]> {
  return (await h.temporal.client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
}

describe('subscriptionWorkflow timed steps', () => {
  it('started by startSubscriptionWorkflow: local activities, no patch marker, no TemporalChangeVersion upsert', async () => {
    const tenant = await createTenant(h);
    const { planId } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2027-01-10T00:00:00') });
    await advanceTo(h, id, utc('2027-02-01T00:00:01'));
    expect(await invoicesOf(h, id)).toHaveLength(1);

    const traces = timedStepTraces((await handle.fetchHistory()).events ?? []);
    expect(traces.patchMarkers).toBe(0);
    expect(traces.localActivityMarkers).toBe(2); // activation, boundary
    expect(traces.timedStepActivities).toBe(0);
    expect(traces.upserted).not.toContain('TemporalChangeVersion');
  });

  it('started without the flag: patched() decides (marker, local steps), and its continue-as-new passes the flag on', async () => {
    const tenant = await createTenant(h);
    const { planId } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    // A later start: the first run announces it (an activity), activates it (a timed step) and
    // continues as new after these two steps; the second run bills the boundary.
    const startedAt = utc('2029-03-01T00:00:00');
    const boundary = utc('2029-04-01T00:00:00');
    const doc = await h.db.models.Subscription.create({
      organization_id: tenant.organizationId,
      customer_id: tenant.customerId,
      external_customer_id: tenant.externalCustomerId,
      external_id: 'sub-before-the-flag',
      plan_id: planId,
      status: 'pending',
      billing_time: 'calendar',
      started_at: startedAt,
    });
    const state = initialState(doc.toObject(), await planOf(h, planId), tenant.timezone, {
      jitterWindowMs: 0,
      progressiveCheckMs: 86_400_000,
    });
    // As an execution started before localTimedSteps existed: its input lacks it.
    const workflowId = workflowIds.subscription(doc._id);
    const first = await h.temporal.client.workflow.start(subscriptionWorkflowType, {
      workflowId,
      taskQueue: h.temporal.taskQueue,
      args: [{ state, maxStepsPerRun: 2 }],
    });
    await advanceTo(h, doc._id, new Date(boundary.getTime() + 1000));
    expect(await invoicesOf(h, doc._id)).toHaveLength(1);

    const firstRun = await historyOf(workflowId, first.firstExecutionRunId);
    const traces = timedStepTraces(firstRun);
    expect(traces.patchMarkers).toBe(1);
    expect(traces.localActivityMarkers).toBe(1); // activation
    expect(traces.timedStepActivities).toBe(0);
    expect(traces.upserted).toContain('TemporalChangeVersion');
    const continued = firstRun.find(
      (e) => e.workflowExecutionContinuedAsNewEventAttributes,
    )?.workflowExecutionContinuedAsNewEventAttributes;
    expect(continued?.newExecutionRunId).toBeTruthy();

    // The next run (the boundary's) carries the flag: no marker, still a local activity.
    const secondRun = await historyOf(workflowId, continued!.newExecutionRunId!);
    const input = secondRun[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
    expect(JSON.parse(Buffer.from(input!).toString('utf8'))).toMatchObject({ localTimedSteps: true, resumed: true });
    const next = timedStepTraces(secondRun);
    expect(next.patchMarkers).toBe(0);
    expect(next.localActivityMarkers).toBe(1); // boundary
    expect(next.timedStepActivities).toBe(0);
  });
});
