// A worker dies while generating a period's invoice: the activity has created the invoice (fees,
// invoice.created, its workflow started and finalized) and never answers. Another worker takes the
// activity over after its heartbeat timeout: the period still has exactly one invoice, one number, and the
// subscription goes on to the next period.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { SubscriptionState } from '../../src/subscriptions/state';
import { subscriptionStateQuery } from '../../workflows/subscription.messages';
import { eventually } from '../support/http';
import {
  advanceTo,
  cents,
  createPlan,
  createTenant,
  invoicesOf,
  sendEvents,
  startHarness,
  subscribe,
  type Harness,
} from './subscription-harness';

let h: Harness;
let crashed = false;

beforeAll(async () => {
  h = await startHarness({
    sticky: false,
    activities: (real) => ({
      ...real,
      async billSubscriptionPeriod(state: SubscriptionState, boundary: string) {
        await real.billSubscriptionPeriod(state, boundary);
        crashed = true;
        await new Promise(() => undefined); // the process "dies" before answering
        throw new Error('unreachable');
      },
    }),
  });
});

afterAll(async () => {
  await h?.close();
});

const utc = (iso: string) => new Date(`${iso}Z`);

it('leaves exactly one invoice for the period when the worker dies mid-generation and another takes over', async () => {
  const tenant = await createTenant(h);
  const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
  const { id, handle } = await subscribe(h, tenant, { planId, startedAt: utc('2027-01-01T00:00:00') });
  await advanceTo(h, id, utc('2027-01-01T00:00:01'));
  await sendEvents(h, tenant, metricCode, utc('2027-01-15T00:00:00'), 4);

  // To the boundary: the dying worker generates January's invoice and hangs.
  await h.env.sleep(utc('2027-02-01T00:00:01').getTime() - (await h.env.currentTimeMs()));
  await eventually(async () => (crashed ? true : undefined), 30_000, 'the first attempt to run');
  expect(await invoicesOf(h, id)).toHaveLength(1);

  await h.replaceWorker(h.activities);
  // The dead worker stops heartbeating: after the 30 s heartbeat timeout the new worker retries.
  await eventually(
    async () => (await handle.query(subscriptionStateQuery)).currentPeriod?.from === '2027-02-01T00:00:00.000Z' || undefined,
    90_000,
    'the retried step',
  );

  const invoices = await invoicesOf(h, id);
  expect(invoices).toHaveLength(1);
  expect(invoices[0]).toMatchObject({ status: 'finalized', number: `${tenant.prefix}-000001` });
  expect(cents(invoices[0]!.total)).toBe('10008');
  expect(await h.db.models.Fee.countDocuments({ invoice_id: invoices[0]!._id })).toBe(2);
  expect(await h.db.models.LifecycleEvent.countDocuments({ organization_id: tenant.organizationId, type: 'invoice.created' })).toBe(1);

  // And the subscription bills on.
  await advanceTo(h, id, utc('2027-03-01T00:01:00'));
  expect((await invoicesOf(h, id)).map((i) => cents(i.total))).toEqual(['10008', '10000']);
}, 150_000);
