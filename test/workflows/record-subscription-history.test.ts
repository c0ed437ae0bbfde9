// Records a subscriptionWorkflow history for the replay test (test/workflows/replay.test.ts). Runs
// only with RECORD_HISTORIES=1 (see record-histories.test.ts): a trial in advance, a boundary, a
// downgrade scheduled then executed, an upgrade with its credit note, a cancellation ending the
// subscription at the period end.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelUpdate, changePlanUpdate, terminateUpdate } from '../../workflows/subscription.messages';
import { advanceTestClockUpdate } from '../../workflows/test-clock.messages';
import { advanceTo, createPlan, createTenant, planOf, sendEvents, startHarness, subscribe, type Harness } from './subscription-harness';

const record = process.env.RECORD_HISTORIES === '1';
const utc = (iso: string) => new Date(`${iso}Z`);

describe.skipIf(!record)('record a subscription history', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('records trial, boundary, downgrade, upgrade and cancellation', async () => {
    const tenant = await createTenant(h);
    const small = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const big = await createPlan(h, tenant, { amountCents: 6200, perCall: '2', metricCode: small.metricCode });
    const { id, handle } = await subscribe(h, tenant, {
      planId: big.planId,
      startedAt: utc('2027-01-10T00:00:00'),
      payInAdvance: true,
      trialPeriodDays: 5,
    });
    await advanceTo(h, id, utc('2027-01-20T00:00:00'));
    await sendEvents(h, tenant, small.metricCode, utc('2027-01-20T00:00:00'), 3);
    await advanceTo(h, id, utc('2027-02-10T00:00:00'));
    await handle.executeUpdate(changePlanUpdate, { args: [{ plan: await planOf(h, small.planId) }] });
    await advanceTo(h, id, utc('2027-03-15T00:00:00'));
    await handle.executeUpdate(changePlanUpdate, { args: [{ plan: await planOf(h, big.planId) }] });
    await advanceTo(h, id, utc('2027-03-20T00:00:00'));
    await handle.executeUpdate(cancelUpdate, { args: [{ onTerminationAction: 'generate_invoice' }] });
    await advanceTo(h, id, utc('2027-04-01T00:01:00'));
    expect(await handle.result()).toEqual({ status: 'canceled' });
    const history = await handle.fetchHistory();
    writeFileSync(join(__dirname, 'histories', 'subscription-trial-downgrade-upgrade-cancel.json'), JSON.stringify(history, null, 1));
  }, 120_000);

  it('records a subscription driven by a test clock: advances across boundaries, then a termination', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3100, perCall: '2' });
    const clock = await h.db.models.TestClock.create({ organization_id: tenant.organizationId, frozen_time: utc('2031-01-01T00:00:00') });
    await h.db.models.Customer.updateOne({ _id: tenant.customerId }, { $set: { test_clock_id: clock._id } });
    const { handle } = await subscribe(h, tenant, {
      planId,
      startedAt: utc('2031-01-01T00:00:00'),
      clock: { id: clock._id, now: '2031-01-01T00:00:00.000Z' },
    });
    const advance = async (to: string) => {
      await h.db.models.TestClock.updateOne({ _id: clock._id }, { $set: { frozen_time: utc(to) } });
      return handle.executeUpdate(advanceTestClockUpdate, { args: [utc(to).toISOString()] });
    };
    await advance('2031-01-20T00:00:00');
    await sendEvents(h, tenant, metricCode, utc('2031-01-15T00:00:00'), 2);
    await advance('2031-03-10T00:00:00');
    await handle.executeUpdate(terminateUpdate, { args: [{ onTerminationAction: 'generate_invoice' }] });
    expect(await handle.result()).toEqual({ status: 'terminated' });
    const history = await handle.fetchHistory();
    writeFileSync(join(__dirname, 'histories', 'subscription-test-clock.json'), JSON.stringify(history, null, 1));
  }, 120_000);
});
