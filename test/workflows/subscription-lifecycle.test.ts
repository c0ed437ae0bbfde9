// subscriptionWorkflow's lifecycle on the time-skipping server, with real activities: trials,
// upgrades and downgrades mid-period, cancel and terminate with each on_termination_action,
// progressive billing, continue-as-new. Every expected amount is computed here from billing-rules.md.
import { randomUUID } from 'node:crypto';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toDecimal128 } from '../../src/db/decimal';
import { cancelUpdate, changePlanUpdate, terminateUpdate } from '../../workflows/subscription.messages';
import {
  advanceTo,
  cents,
  createPlan,
  createTenant,
  fee4,
  feesOf,
  invoicesOf,
  planOf,
  sendEvents,
  startHarness,
  subscribe,
  type Harness,
} from './subscription-harness';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const utc = (iso: string) => new Date(`${iso}Z`);

/** An instant set from workflow time when a command arrived: within a few seconds after `iso`. */
function near(iso: string) {
  return expect.stringMatching(new RegExp(`^${iso.slice(0, 16)}`));
}

async function subscriptionDoc(id: string) {
  return (await h.db.models.Subscription.findById(id).lean())!;
}

async function eventTypes(organizationId: string) {
  return (await h.db.models.LifecycleEvent.find({ organization_id: organizationId }).sort({ occurred_at: 1 }).lean())
    .map((e) => e.type)
    .filter((t) => t.startsWith('subscription.'));
}

async function creditNotesOf(organizationId: string) {
  return h.db.models.CreditNote.find({ organization_id: organizationId }).sort({ created_at: 1 }).lean();
}

describe('subscriptionWorkflow lifecycle', () => {
  it('bills nothing during a trial; in advance the trial end bills the rest of the period from the trial end day', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2027-01-10T14:00:00'), payInAdvance: true, trialPeriodDays: 10 });
    await advanceTo(h, id, utc('2027-01-10T14:00:01'));
    expect(await invoicesOf(h, id)).toHaveLength(0);
    expect(await subscriptionDoc(id)).toMatchObject({ status: 'active', trial_ended_at: null });
    await sendEvents(h, tenant, metricCode, utc('2027-01-15T00:00:00'), 3); // in the trial: never billed
    await sendEvents(h, tenant, metricCode, utc('2027-01-25T00:00:00'), 4);

    await advanceTo(h, id, utc('2027-01-20T14:00:01'));
    const [atTrialEnd] = await invoicesOf(h, id);
    // Trial ends Jan 20 14:00: Jan 20..31 = 12 days of 31: 3100 * 12 / 31 = 1200.
    expect(await feesOf(h, atTrialEnd!._id)).toEqual({ subscription: '1200.0000' });
    expect(atTrialEnd!.issuing_date).toBe('2027-01-20');
    expect((await subscriptionDoc(id)).trial_ended_at?.toISOString()).toBe('2027-01-20T14:00:00.000Z');

    await advanceTo(h, id, utc('2027-02-01T00:01:00'));
    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(2);
    // February in advance + the usage since the trial end: 4 events * 2.
    expect(await feesOf(h, invoices[1]!._id)).toEqual({ subscription: '3100.0000', charge: '8.0000' });
    expect(await eventTypes(tenant.organizationId)).toEqual(['subscription.created', 'subscription.started', 'subscription.trial_ended']);
  });

  it('in arrear, a trial ending mid-period bills that period from the trial end day at its end', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2027-03-10T14:00:00'), trialPeriodDays: 10 });
    await advanceTo(h, id, utc('2027-03-10T14:00:01'));
    await sendEvents(h, tenant, metricCode, utc('2027-03-20T13:59:00'), 3); // one minute before the trial ends
    await sendEvents(h, tenant, metricCode, utc('2027-03-25T00:00:00'), 4);
    await advanceTo(h, id, utc('2027-04-01T00:01:00'));
    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(1);
    // Mar 20..31 = 12 days of 31: 3100 * 12 / 31 = 1200; usage after the trial end only: 4 * 2.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '1200.0000', charge: '8.0000' });
    expect(cents(invoices[0]!.total)).toBe('1208');
  });

  it('upgrades at once in arrear: the old plan billed to the day before, the new one from the change day at the period end', async () => {
    const tenant = await createTenant(h);
    const small = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    const big = await createPlan(h, tenant, { amountCents: 20000, perCall: '2', metricCode: small.metricCode });
    const { id, handle } = await subscribe(h, tenant, { planId: small.planId, startedAt: utc('2027-05-01T00:00:00') });
    await advanceTo(h, id, utc('2027-05-01T00:00:01'));
    await sendEvents(h, tenant, small.metricCode, utc('2027-05-10T00:00:00'), 5);
    await advanceTo(h, id, utc('2027-05-15T09:00:00'));

    const upgraded = await handle.executeUpdate(changePlanUpdate, { args: [{ plan: await planOf(h, big.planId) }] });
    expect(upgraded).toMatchObject({ plan_id: big.planId, previous_plan_id: null, status: 'active' });
    let invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(1);
    // May 1..14 = 14 of 31 days: 10000 * 14 / 31 = 4516.1290, + 5 events * 2.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '4516.1290', charge: '10.0000' });
    expect(cents(invoices[0]!.total)).toBe('4526');

    await sendEvents(h, tenant, small.metricCode, utc('2027-05-20T00:00:00'), 3);
    await advanceTo(h, id, utc('2027-06-01T00:01:00'));
    invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(2);
    // May 15..31 = 17 of 31 days of the new plan: 20000 * 17 / 31 = 10967.7419, + 3 * 2.
    expect(await feesOf(h, invoices[1]!._id)).toEqual({ subscription: '10967.7419', charge: '6.0000' });
    expect(cents(invoices[1]!.total)).toBe('10974');
    expect(await eventTypes(tenant.organizationId)).toEqual(['subscription.created', 'subscription.started', 'subscription.plan_changed']);
  });

  it('upgrades at once in advance: a credit note for the unused old fee, the new fee prorated now, the boundaries unmoved', async () => {
    const tenant = await createTenant(h);
    const small = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const big = await createPlan(h, tenant, { amountCents: 6200, perCall: '2', metricCode: small.metricCode });
    const { id, handle } = await subscribe(h, tenant, { planId: small.planId, startedAt: utc('2027-07-01T00:00:00'), payInAdvance: true });
    await advanceTo(h, id, utc('2027-07-01T00:00:01'));
    await sendEvents(h, tenant, small.metricCode, utc('2027-07-05T00:00:00'), 2);
    await advanceTo(h, id, utc('2027-07-10T12:00:00'));
    await handle.executeUpdate(changePlanUpdate, { args: [{ plan: await planOf(h, big.planId) }] });

    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(3);
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '3100.0000' });
    // The old plan's part Jul 1..9: its usage only (its fee was paid in advance): 2 * 2.
    expect(await feesOf(h, invoices[1]!._id)).toEqual({ charge: '4.0000' });
    // Jul 10..31 = 22 days: credit 3100 * 22 / 31 = 2200 on the July fee; the new plan 6200 * 22 / 31 = 4400 now.
    const [note] = await creditNotesOf(tenant.organizationId);
    expect(note).toMatchObject({ invoice_id: invoices[0]!._id, reason: 'order_change' });
    expect(fee4(note!.credit_amount_cents)).toBe('2200.0000');
    expect(await feesOf(h, invoices[2]!._id)).toEqual({ subscription: '4400.0000' });
    // The credit note pays for the next invoice finalized after it: 4400 - 2200.
    expect(cents(invoices[2]!.credit_notes_amount_cents)).toBe('2200');
    expect(cents(invoices[2]!.total)).toBe('2200');

    await sendEvents(h, tenant, small.metricCode, utc('2027-07-20T00:00:00'), 1);
    await advanceTo(h, id, utc('2027-08-01T00:01:00'));
    const all = await invoicesOf(h, id);
    expect(all).toHaveLength(4);
    // Labelled with August, which its base fee pays for; its usage line measured the segment Jul 10..31.
    expect(all[3]!.period_started_at?.toISOString()).toBe('2027-08-01T00:00:00.000Z');
    expect(await feesOf(h, all[3]!._id)).toEqual({ subscription: '6200.0000', charge: '2.0000' });
    const periods = await h.db.models.Fee.find({ invoice_id: all[3]!._id }).lean();
    expect(
      Object.fromEntries(periods.map((f) => [f.fee_type, [f.period_started_at?.toISOString(), f.period_ended_at?.toISOString()]])),
    ).toEqual({
      subscription: ['2027-08-01T00:00:00.000Z', '2027-09-01T00:00:00.000Z'],
      charge: ['2027-07-10T00:00:00.000Z', '2027-08-01T00:00:00.000Z'],
    });
  });

  it('schedules a downgrade for the next boundary, bills the ended period on the old plan, then switches', async () => {
    const tenant = await createTenant(h);
    const small = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    const big = await createPlan(h, tenant, { amountCents: 20000, perCall: '2', metricCode: small.metricCode });
    const { id, handle } = await subscribe(h, tenant, { planId: big.planId, startedAt: utc('2027-09-01T00:00:00') });
    await advanceTo(h, id, utc('2027-09-15T08:00:00'));
    const scheduled = await handle.executeUpdate(changePlanUpdate, { args: [{ plan: await planOf(h, small.planId) }] });
    expect(scheduled).toMatchObject({ plan_id: big.planId, previous_plan_id: small.planId, downgraded_at: near('2027-09-15T08:00') });
    expect(await invoicesOf(h, id)).toHaveLength(0);
    await sendEvents(h, tenant, small.metricCode, utc('2027-09-20T00:00:00'), 1);
    await sendEvents(h, tenant, small.metricCode, utc('2027-10-20T00:00:00'), 2);

    await advanceTo(h, id, utc('2027-10-01T00:01:00'));
    expect(await subscriptionDoc(id)).toMatchObject({ plan_id: small.planId, previous_plan_id: null, downgraded_at: null });
    await advanceTo(h, id, utc('2027-11-01T00:01:00'));
    const invoices = await invoicesOf(h, id);
    expect(invoices.map((i) => cents(i.total))).toEqual(['20002', '10004']);
    const changed = await h.db.models.LifecycleEvent.findOne({
      organization_id: tenant.organizationId,
      type: 'subscription.plan_changed',
    }).lean();
    expect(changed?.occurred_at.toISOString()).toBe('2027-10-01T00:00:00.000Z');
  });

  it('cancel with generate_invoice: active until the period end, then the last period billed and canceled', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2028-01-01T00:00:00') });
    await advanceTo(h, id, utc('2028-01-10T00:00:00'));
    const canceled = await handle.executeUpdate(cancelUpdate, { args: [{}] });
    expect(canceled).toMatchObject({ status: 'active', ending_at: '2028-02-01T00:00:00.000Z', canceled_at: near('2028-01-10T00:00') });
    await expect(handle.executeUpdate(cancelUpdate, { args: [{}] })).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
    await sendEvents(h, tenant, metricCode, utc('2028-01-20T00:00:00'), 3);
    await advanceTo(h, id, utc('2028-03-01T00:00:00'));
    expect(await handle.result()).toEqual({ status: 'canceled' });
    const invoices = await invoicesOf(h, id);
    expect(invoices.map((i) => cents(i.total))).toEqual(['10006']);
    expect((await subscriptionDoc(id)).status).toBe('canceled');
    expect(await eventTypes(tenant.organizationId)).toEqual(['subscription.created', 'subscription.started', 'subscription.canceled']);
  });

  it('cancel with skip: nothing more is billed at the end', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2028-03-01T00:00:00'), payInAdvance: true });
    await advanceTo(h, id, utc('2028-03-10T00:00:00'));
    await handle.executeUpdate(cancelUpdate, { args: [{ onTerminationAction: 'skip' }] });
    await sendEvents(h, tenant, metricCode, utc('2028-03-20T00:00:00'), 3);
    await advanceTo(h, id, utc('2028-04-01T00:01:00'));
    expect(await handle.result()).toEqual({ status: 'canceled' });
    expect((await invoicesOf(h, id)).map((i) => cents(i.total))).toEqual(['3100']);
  });

  it('cancel with generate_credit_note in advance: the last usage billed, nothing unused to credit at the period end', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2028-05-01T00:00:00'), payInAdvance: true });
    await advanceTo(h, id, utc('2028-05-10T00:00:00'));
    await handle.executeUpdate(cancelUpdate, { args: [{ onTerminationAction: 'generate_credit_note' }] });
    await sendEvents(h, tenant, metricCode, utc('2028-05-20T00:00:00'), 2);
    await advanceTo(h, id, utc('2028-06-01T00:01:00'));
    expect(await handle.result()).toEqual({ status: 'canceled' });
    const invoices = await invoicesOf(h, id);
    expect(invoices.map((i) => cents(i.total))).toEqual(['3100', '4']);
    expect(await feesOf(h, invoices[1]!._id)).toEqual({ charge: '4.0000' });
    expect(await creditNotesOf(tenant.organizationId)).toHaveLength(0);
  });

  it('terminate with generate_invoice in arrear: the base fee through the termination day and the usage so far, now', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2028-07-01T00:00:00') });
    await advanceTo(h, id, utc('2028-07-01T00:00:01'));
    await sendEvents(h, tenant, metricCode, utc('2028-07-05T00:00:00'), 3);
    await advanceTo(h, id, utc('2028-07-10T12:00:00'));
    const terminated = await handle.executeUpdate(terminateUpdate, { args: [{ onTerminationAction: 'generate_invoice' }] });
    expect(terminated).toMatchObject({
      status: 'terminated',
      terminated_at: near('2028-07-10T12:00'),
      ending_at: near('2028-07-10T12:00'),
    });
    expect(await handle.result()).toEqual({ status: 'terminated' });
    const invoices = await invoicesOf(h, id);
    // Jul 1..10 = 10 of 31 days: 3100 * 10 / 31 = 1000, + 3 * 2.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '1000.0000', charge: '6.0000' });
    expect(invoices.map((i) => cents(i.total))).toEqual(['1006']);
    expect(await eventTypes(tenant.organizationId)).toEqual(['subscription.created', 'subscription.started', 'subscription.terminated']);
  });

  it('terminate with generate_credit_note in advance: the days after the termination day credited, the usage invoiced', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2028-08-01T00:00:00'), payInAdvance: true });
    await advanceTo(h, id, utc('2028-08-01T00:00:01'));
    await sendEvents(h, tenant, metricCode, utc('2028-08-05T00:00:00'), 1);
    await advanceTo(h, id, utc('2028-08-10T12:00:00'));
    await handle.executeUpdate(terminateUpdate, { args: [{ onTerminationAction: 'generate_credit_note' }] });
    const invoices = await invoicesOf(h, id);
    expect(invoices.map((i) => cents(i.total))).toEqual(['3100', '2']);
    // Aug 11..31 = 21 days of 31: 3100 * 21 / 31 = 2100.
    const notes = await creditNotesOf(tenant.organizationId);
    expect(notes.map((n) => [n.invoice_id, fee4(n.credit_amount_cents), n.reason])).toEqual([
      [invoices[0]!._id, '2100.0000', 'order_cancellation'],
    ]);
  });

  it('terminate with skip: nothing billed, nothing credited', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2028-10-01T00:00:00'), payInAdvance: true });
    await advanceTo(h, id, utc('2028-10-01T00:00:01'));
    await sendEvents(h, tenant, metricCode, utc('2028-10-05T00:00:00'), 1);
    await advanceTo(h, id, utc('2028-10-10T00:00:00'));
    await handle.executeUpdate(terminateUpdate, { args: [{ onTerminationAction: 'skip' }] });
    expect(await handle.result()).toEqual({ status: 'terminated' });
    expect((await invoicesOf(h, id)).map((i) => cents(i.total))).toEqual(['3100']);
    expect(await creditNotesOf(tenant.organizationId)).toHaveLength(0);
    await expect(handle.executeUpdate(terminateUpdate, { args: [{}] })).rejects.toThrow();
  });

  it('progressive billing: each crossed threshold bills the usage so far less earlier progressive invoices; the period end credits them', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 0, perCall: '100' });
    for (const amount of ['10000', '20000']) {
      await h.db.models.UsageThreshold.create({
        organization_id: tenant.organizationId,
        plan_id: planId,
        amount_cents: toDecimal128(amount),
        recurring: false,
        uniqueness_key: `amount:${amount}`,
        threshold_display_name: null,
      });
    }
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2029-01-01T00:00:00') });
    await advanceTo(h, id, utc('2029-01-01T00:00:01'));
    await sendEvents(h, tenant, metricCode, utc('2029-01-05T12:00:00'), 120); // 12000: past 10000
    await sendEvents(h, tenant, metricCode, utc('2029-01-10T12:00:00'), 90); // 21000: past 20000
    await sendEvents(h, tenant, metricCode, utc('2029-01-20T12:00:00'), 40); // 25000
    await advanceTo(h, id, utc('2029-02-01T00:01:00'));

    const invoices = await invoicesOf(h, id);
    expect(
      invoices.map((i) => [
        i.invoice_type,
        i.issuing_date,
        fee4(i.fees_amount_cents),
        cents(i.progressive_billing_credit_amount_cents),
        cents(i.total),
      ]),
    ).toEqual([
      ['progressive_billing', '2029-01-06', '12000.0000', '0', '12000'],
      ['progressive_billing', '2029-01-11', '21000.0000', '12000', '9000'],
      // The period's invoice: 25000 of usage less the 21000 already billed.
      ['subscription', '2029-02-01', '25000.0000', '21000', '4000'],
    ]);
    const reached = await h.db.models.LifecycleEvent.countDocuments({
      organization_id: tenant.organizationId,
      type: 'subscription.usage_threshold_reached',
    });
    expect(reached).toBe(2);
  });

  it('continues as new between steps with its whole state, and bills on unchanged', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2029-03-01T00:00:00'), maxStepsPerRun: 2 });
    const firstRun = (await handle.describe()).runId;
    await advanceTo(h, id, utc('2029-03-01T00:00:01'));
    for (const month of ['03', '04', '05', '06']) await sendEvents(h, tenant, metricCode, utc(`2029-${month}-15T00:00:00`), 1);
    await advanceTo(h, id, utc('2029-07-01T00:01:00'));
    expect((await handle.describe()).runId).not.toBe(firstRun);
    const first = await h.temporal.client.workflow.getHandle(handle.workflowId, firstRun).fetchHistory();
    expect(first.events?.some((e) => e.workflowExecutionContinuedAsNewEventAttributes)).toBe(true);
    expect((await invoicesOf(h, id)).map((i) => cents(i.total))).toEqual(['10002', '10002', '10002', '10002']);
    void randomUUID;
  });
});
