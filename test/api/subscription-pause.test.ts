// Pause and resume (issue 19, item 3; docs/subscriptions-pause.md), driven by a test clock over
// HTTP: the pause days are never billed, the base fee of the period is prorated to its active days
// (billed at the period end: the part before the pause and the part from the resume day), events
// sent while paused are stored and not billed, invalid transitions are 400s that change nothing,
// the bulk endpoints answer per id, and subscription.paused / .resumed are emitted once each.
import { describe, expect, it } from 'vitest';
import type { FeeResource, InvoiceResource } from '../../src/resources/invoice';
import type { SubscriptionResource } from '../../src/resources/subscription';
import { expectError } from '../support/http';
import { clockScenario } from '../support/clock-scenario';

const scenario = clockScenario('Pause');
const { at, post, get, ok, createClock, createCustomer, createPlan, subscribe, subscription, advance, sendCalls } = scenario;

async function invoicesOf(subscriptionId: string): Promise<InvoiceResource[]> {
  const list = await ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscriptionId}`), 200);
  const full = await Promise.all(list.map(async (i) => ok<InvoiceResource>(await get(`/v1/invoices/${i.id}`), 200)));
  return full.sort((a, b) => (a.period_started_at ?? '').localeCompare(b.period_started_at ?? ''));
}

const feeOf = (inv: InvoiceResource, type: FeeResource['fee_type']) =>
  inv.fees!.filter((f) => f.fee_type === type).map((f) => ({ units: f.units, amount_cents: f.amount_cents }));

async function eventTimes(type: string, objectId: string): Promise<string[]> {
  const events = await scenario
    .stack()
    .db.models.LifecycleEvent.find({ organization_id: scenario.org().id, type, 'object.id': objectId })
    .sort({ occurred_at: 1 })
    .lean();
  return events.map((e) => e.occurred_at.toISOString());
}

describe('pause and resume on a test clock', () => {
  it('Pause for 10 days in the middle of a month then resume: exact prorated fee; nothing billed while paused', async () => {
    // March 2030 has 31 days: 3100 a month is 100 a day.
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });

    await advance(clock.id, '2030-03-11T00:00:00Z');
    await sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-05T11:00:00Z']);
    const paused = await ok<SubscriptionResource>(await post(`/v1/subscriptions/${sub.id}/pause`), 200);
    expect(paused).toMatchObject({
      status: 'paused',
      paused_at: at('2030-03-11T00:00:00Z'),
      current_period_started_at: at('2030-03-01T00:00:00Z'),
    });
    expect(sub.paused_at).toBeNull();

    // Events while paused: stored, never billed.
    await advance(clock.id, '2030-03-15T00:00:00Z');
    await sendCalls(customer, ['2030-03-14T10:00:00Z', '2030-03-14T11:00:00Z', '2030-03-14T12:00:00Z']);
    expect(await scenario.stack().db.models.Event.countDocuments({ organization_id: scenario.org().id, subscription_ids: sub.id })).toBe(5);
    await advance(clock.id, '2030-03-21T00:00:00Z');
    expect(await invoicesOf(sub.id)).toEqual([]);
    expect(await subscription(sub.id)).toMatchObject({ status: 'paused', paused_at: at('2030-03-11T00:00:00Z') });

    const resumed = await ok<SubscriptionResource>(await post(`/v1/subscriptions/${sub.id}/resume`), 200);
    expect(resumed).toMatchObject({ status: 'active', paused_at: null, current_period_ending_at: at('2030-04-01T00:00:00Z') });
    await advance(clock.id, '2030-03-26T00:00:00Z');
    await sendCalls(customer, ['2030-03-25T10:00:00Z']);
    await advance(clock.id, '2030-04-01T00:00:00Z');

    // At the period end: March 1-10 (10 days, 2 calls) and March 21-31 (11 days, 1 call); March 11-20 never.
    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(2);
    const [before, after] = invoices;
    expect(before).toMatchObject({
      issuing_date: '2030-04-01',
      period_started_at: at('2030-03-01T00:00:00Z'),
      period_ended_at: at('2030-03-11T00:00:00Z'),
      total: '1010.0000',
    });
    expect(feeOf(before!, 'subscription')).toEqual([{ units: '10.0000', amount_cents: '1000.0000' }]);
    expect(feeOf(before!, 'charge')).toEqual([{ units: '2.0000', amount_cents: '10.0000' }]);
    expect(after).toMatchObject({
      issuing_date: '2030-04-01',
      period_started_at: at('2030-03-21T00:00:00Z'),
      period_ended_at: at('2030-04-01T00:00:00Z'),
      total: '1105.0000',
    });
    expect(feeOf(after!, 'subscription')).toEqual([{ units: '11.0000', amount_cents: '1100.0000' }]);
    expect(feeOf(after!, 'charge')).toEqual([{ units: '1.0000', amount_cents: '5.0000' }]);
    // 3100 * 21 / 31 = 2100 of base fee for the month.

    expect(await eventTimes('subscription.paused', sub.id)).toEqual([at('2030-03-11T00:00:00Z')]);
    expect(await eventTimes('subscription.resumed', sub.id)).toEqual([at('2030-03-21T00:00:00Z')]);
    expect(await subscription(sub.id)).toMatchObject({ status: 'active', current_period_started_at: at('2030-04-01T00:00:00Z') });
  });

  it('a pause across the period end bills the active part at that end, then nothing until the resume month', async () => {
    // April 2030 has 30 days: 3000 is 100 a day; May has 31.
    const clock = await createClock('2030-04-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3000);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    await advance(clock.id, '2030-04-21T00:00:00Z');
    await ok(await post(`/v1/subscriptions/${sub.id}/pause`), 200);
    await advance(clock.id, '2030-05-01T00:00:00Z');
    const [april] = await invoicesOf(sub.id);
    expect(april).toMatchObject({
      period_started_at: at('2030-04-01T00:00:00Z'),
      period_ended_at: at('2030-04-21T00:00:00Z'),
      total: '2000.0000',
    });
    expect(await subscription(sub.id)).toMatchObject({ status: 'paused', current_period_started_at: null, current_period_ending_at: null });
    // Paused through the rest of the clock's advance: no invoice for May's first days.
    await advance(clock.id, '2030-05-11T00:00:00Z');
    expect(await invoicesOf(sub.id)).toHaveLength(1);
    const resumed = await ok<SubscriptionResource>(await post(`/v1/subscriptions/${sub.id}/resume`), 200);
    expect(resumed).toMatchObject({
      status: 'active',
      current_period_started_at: at('2030-05-11T00:00:00Z'),
      current_period_ending_at: at('2030-06-01T00:00:00Z'),
    });
    await advance(clock.id, '2030-06-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(2);
    // May 11-31: 21 of 31 days of 3000 = 2032.2580... -> 2032.2581 at 4 digits, 2032 cents on the total.
    expect(feeOf(invoices[1]!, 'subscription')).toEqual([{ units: '21.0000', amount_cents: expect.stringMatching(/^2032\.258/) }]);
  });

  it('refuses to pause a subscription that is not active (400) and changes nothing', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const later = await subscribe({ customer_id: customer.id, plan_id: plan.id, started_at: '2030-04-01T00:00:00Z' });
    expectError(await post(`/v1/subscriptions/${later.id}/pause`), 400, 'invalid_state_transition');
    expect(await subscription(later.id)).toMatchObject({ status: 'pending', updated_at: later.updated_at });

    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    expectError(await post(`/v1/subscriptions/${sub.id}/resume`), 400, 'invalid_state_transition');
    await ok(await post(`/v1/subscriptions/${sub.id}/pause`), 200);
    const paused = await subscription(sub.id);
    expectError(await post(`/v1/subscriptions/${sub.id}/pause`), 400, 'invalid_state_transition');
    expectError(await post(`/v1/subscriptions/${sub.id}/cancel`), 400, 'invalid_state_transition');
    expect(await subscription(sub.id)).toEqual(paused);
    // Paused subscriptions are listed by their status (and no longer once terminated, below).
    const listedPaused = await ok<SubscriptionResource[]>(await get(`/v1/subscriptions?status=paused&customer_id=${customer.id}`), 200);
    expect(listedPaused.map((s) => s.id)).toEqual([sub.id]);

    await ok(
      await scenario.stack().app.inject({ method: 'DELETE', url: `/v1/subscriptions/${sub.id}`, headers: scenario.org().headers }),
      200,
    );
    expectError(await post(`/v1/subscriptions/${sub.id}/pause`), 400, 'invalid_state_transition');
    expectError(await post(`/v1/subscriptions/${sub.id}/resume`), 400, 'invalid_state_transition');
    expect(await subscription(sub.id)).toMatchObject({ status: 'terminated' });
    expect(await eventTimes('subscription.paused', sub.id)).toEqual([at('2030-03-01T00:00:00Z')]);
    expect(await eventTimes('subscription.resumed', sub.id)).toEqual([]);
    const list = await ok<SubscriptionResource[]>(await get(`/v1/subscriptions?status=paused&customer_id=${customer.id}`), 200);
    expect(list).toEqual([]);
  });

  it('bulk_pause and bulk_resume answer each id with its own outcome', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const a = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    const b = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    const res = await ok<{
      results: { id: string; outcome: string; subscription: SubscriptionResource | null; error: { status: number; code: string } | null }[];
    }>(await post('/v1/subscriptions/bulk_pause', { ids: [a.id, b.external_id, 'nope'] }), 200);
    expect(
      res.results.map((r) => ({ id: r.id, outcome: r.outcome, status: r.subscription?.status ?? null, error: r.error?.code ?? null })),
    ).toEqual([
      { id: a.id, outcome: 'paused', status: 'paused', error: null },
      { id: b.external_id, outcome: 'paused', status: 'paused', error: null },
      { id: 'nope', outcome: 'failed', status: null, error: 'subscription_not_found' },
    ]);
    expect(res.results[2]!.error!.status).toBe(404);
    const list = await ok<SubscriptionResource[]>(await get(`/v1/subscriptions?status=paused&customer_id=${customer.id}`), 200);
    expect(list.map((s) => s.id).sort()).toEqual([a.id, b.id].sort());

    const again = await ok<{ results: { outcome: string; error: { status: number; code: string } | null }[] }>(
      await post('/v1/subscriptions/bulk_resume', { ids: [a.id, b.id] }),
      200,
    );
    expect(again.results.map((r) => r.outcome)).toEqual(['resumed', 'resumed']);
    const twice = await ok<{ results: { outcome: string; error: { status: number; code: string } | null }[] }>(
      await post('/v1/subscriptions/bulk_resume', { ids: [a.id] }),
      200,
    );
    expect(twice.results).toEqual([
      expect.objectContaining({ outcome: 'failed', error: expect.objectContaining({ status: 400, code: 'invalid_state_transition' }) }),
    ]);
    expectError(await post('/v1/subscriptions/bulk_pause', { ids: [] }), 422, 'validation_error');
    expect(await eventTimes('subscription.paused', a.id)).toEqual([at('2030-03-01T00:00:00Z')]);
    expect(await eventTimes('subscription.resumed', a.id)).toEqual([at('2030-03-01T00:00:00Z')]);
  });
});
