// GET /v1/subscriptions/{id}/next_billing_date and /lifecycle (issue 19, item 1), read from the
// subscription's workflow (its lifecycle query), on a test clock: exact values for a subscription
// with a trial and a pending downgrade, in arrear and in advance, and after a pause.
import { describe, expect, it } from 'vitest';
import { clockScenario } from '../support/clock-scenario';

const scenario = clockScenario('Lifecycle');
const { at, post, get, ok, createClock, createCustomer, createPlan, subscribe, advance } = scenario;

describe('next_billing_date and lifecycle', () => {
  it('answer the exact steps of a subscription with a trial and a pending downgrade', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const pro = await createPlan(10_000);
    const basic = await createPlan(3000);
    const sub = await subscribe({ customer_id: customer.id, plan_id: pro.id, trial_period_days: 10 });
    await advance(clock.id, '2030-01-05T12:00:00Z');
    await ok(
      await scenario
        .stack()
        .app.inject({ method: 'PUT', url: `/v1/subscriptions/${sub.id}`, headers: scenario.org().headers, payload: { plan_id: basic.id } }),
      200,
    );

    expect(await ok(await get(`/v1/subscriptions/${sub.id}/next_billing_date`), 200)).toEqual({
      subscription_id: sub.id,
      status: 'active',
      next_billing_at: at('2030-02-01T00:00:00Z'),
      next_billing_date: '2030-02-01',
      timezone: 'UTC',
    });
    expect(await ok(await get(`/v1/subscriptions/${sub.external_id}/lifecycle`), 200)).toEqual({
      subscription_id: sub.id,
      status: 'active',
      past: [
        { step: 'activation', at: at('2030-01-01T00:00:00Z'), plan_id: pro.id },
        { step: 'downgrade_scheduled', at: at('2030-01-05T12:00:00Z'), plan_id: basic.id },
      ],
      scheduled: [
        { step: 'trial_end', at: at('2030-01-11T00:00:00Z'), plan_id: pro.id },
        { step: 'boundary', at: at('2030-02-01T00:00:00Z'), plan_id: pro.id },
        { step: 'downgrade', at: at('2030-02-01T00:00:00Z'), plan_id: basic.id },
      ],
      next_billing_at: at('2030-02-01T00:00:00Z'),
    });

    await advance(clock.id, '2030-02-01T00:00:00Z');
    const after = await ok<{ past: unknown[]; scheduled: unknown[] }>(await get(`/v1/subscriptions/${sub.id}/lifecycle`), 200);
    expect(after.past).toEqual([
      { step: 'activation', at: at('2030-01-01T00:00:00Z'), plan_id: pro.id },
      { step: 'downgrade_scheduled', at: at('2030-01-05T12:00:00Z'), plan_id: basic.id },
      { step: 'trial_end', at: at('2030-01-11T00:00:00Z'), plan_id: pro.id },
      { step: 'boundary', at: at('2030-02-01T00:00:00Z'), plan_id: pro.id },
      { step: 'downgrade', at: at('2030-02-01T00:00:00Z'), plan_id: basic.id },
    ]);
    expect(after.scheduled).toEqual([{ step: 'boundary', at: at('2030-03-01T00:00:00Z'), plan_id: basic.id }]);

    // Canceled: the end is scheduled at the period end; terminated: nothing scheduled, no billing date.
    await ok(await post(`/v1/subscriptions/${sub.id}/cancel`), 200);
    const canceled = await ok<{ scheduled: unknown[] }>(await get(`/v1/subscriptions/${sub.id}/lifecycle`), 200);
    expect(canceled.scheduled).toEqual([
      { step: 'boundary', at: at('2030-03-01T00:00:00Z'), plan_id: basic.id },
      { step: 'end', at: at('2030-03-01T00:00:00Z'), plan_id: basic.id },
    ]);
    await ok(
      await scenario.stack().app.inject({ method: 'DELETE', url: `/v1/subscriptions/${sub.id}`, headers: scenario.org().headers }),
      200,
    );
    const over = await ok<{ past: { step: string }[]; scheduled: unknown[]; next_billing_at: string | null }>(
      await get(`/v1/subscriptions/${sub.id}/lifecycle`),
      200,
    );
    expect(over.past.map((s) => s.step).slice(-2)).toEqual(['cancellation', 'termination']);
    expect(over.scheduled).toEqual([]);
    expect(over.next_billing_at).toBeNull();
  });

  it('in advance with a trial: the next billing date is the trial end; a paused one has its period end, then none until resumed', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const pro = await createPlan(10_000);
    const sub = await subscribe({ customer_id: customer.id, plan_id: pro.id, trial_period_days: 10, pay_in_advance: true });
    expect(await ok(await get(`/v1/subscriptions/${sub.id}/next_billing_date`), 200)).toMatchObject({
      next_billing_at: at('2030-01-11T00:00:00Z'),
      next_billing_date: '2030-01-11',
    });
    await advance(clock.id, '2030-01-20T00:00:00Z');
    expect(await ok(await get(`/v1/subscriptions/${sub.id}/next_billing_date`), 200)).toMatchObject({ next_billing_date: '2030-02-01' });
    await ok(await post(`/v1/subscriptions/${sub.id}/pause`), 200);
    // Paused: the usage of January 1-19 (its active part) is still billed at January's end.
    expect(await ok(await get(`/v1/subscriptions/${sub.id}/next_billing_date`), 200)).toMatchObject({
      status: 'paused',
      next_billing_at: at('2030-02-01T00:00:00Z'),
      next_billing_date: '2030-02-01',
    });
    const lifecycle = await ok<{ past: { step: string; at: string }[]; scheduled: unknown[] }>(
      await get(`/v1/subscriptions/${sub.id}/lifecycle`),
      200,
    );
    expect(lifecycle.past.map((s) => [s.step, s.at])).toEqual([
      ['activation', at('2030-01-01T00:00:00Z')],
      ['trial_end', at('2030-01-11T00:00:00Z')],
      ['pause', at('2030-01-20T00:00:00Z')],
    ]);
    expect(lifecycle.scheduled).toEqual([{ step: 'boundary', at: at('2030-02-01T00:00:00Z'), plan_id: pro.id }]);
    // Past that end: nothing until resumed.
    await advance(clock.id, '2030-02-10T00:00:00Z');
    expect(await ok(await get(`/v1/subscriptions/${sub.id}/next_billing_date`), 200)).toMatchObject({
      status: 'paused',
      next_billing_at: null,
      next_billing_date: null,
    });
    expect(await ok<{ scheduled: unknown[] }>(await get(`/v1/subscriptions/${sub.id}/lifecycle`), 200)).toMatchObject({ scheduled: [] });
  });
});
