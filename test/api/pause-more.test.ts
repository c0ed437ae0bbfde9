// Pause and resume, the cases test/api/subscription-pause.test.ts leaves out (issue 19, item 3;
// docs/subscriptions-pause.md), on a test clock over HTTP with exact amounts: pay in advance (the
// credit at the pause, the charge at the resume, and what the month adds up to), two pauses in one
// period, and an upgrade after a resume in the same period (in arrear and in advance).
// March 2030 has 31 days: a 3100-cent plan is 100 cents a day, a 6200-cent plan 200; a call is 5.
import { describe, expect, it } from 'vitest';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { FeeResource, InvoiceResource } from '../../src/resources/invoice';
import type { SubscriptionResource } from '../../src/resources/subscription';
import { clockScenario } from '../support/clock-scenario';

const scenario = clockScenario('Pause more');
const { at, post, get, ok, createClock, createCustomer, createPlan, subscribe, advance, sendCalls } = scenario;

/** The subscription's invoices with their fees, in issue order. */
async function invoicesOf(subscriptionId: string): Promise<InvoiceResource[]> {
  const list = await ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscriptionId}&limit=100`), 200);
  const full = await Promise.all(list.map(async (i) => ok<InvoiceResource>(await get(`/v1/invoices/${i.id}`), 200)));
  return full.sort((a, b) => a.number.localeCompare(b.number));
}

async function creditNotesOf(customerId: string): Promise<CreditNoteResource[]> {
  const list = await ok<CreditNoteResource[]>(await get(`/v1/credit_notes?customer_id=${customerId}&limit=100`), 200);
  return list.sort((a, b) => a.number.localeCompare(b.number));
}

const feeOf = (inv: InvoiceResource, type: FeeResource['fee_type']) =>
  inv.fees!.filter((f) => f.fee_type === type).map((f) => [f.units, f.amount_cents]);

/** Each invoice as [period start, period end, base fee lines, charge lines, credit notes applied, total]. */
const summary = (inv: InvoiceResource) => [
  inv.period_started_at,
  inv.period_ended_at,
  feeOf(inv, 'subscription'),
  feeOf(inv, 'charge'),
  inv.credit_notes_amount_cents,
  inv.total,
];

const baseFees = (invoices: InvoiceResource[]) =>
  invoices.flatMap((i) => i.fees!.filter((f) => f.fee_type === 'subscription').map((f) => Number(f.amount_cents)));
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** The clock moved to `pauseAt`, the subscription paused, the clock moved to `resumeAt`, the subscription resumed. */
async function pausedBetween(clockId: string, subscriptionId: string, pauseAt: string, resumeAt: string): Promise<void> {
  await advance(clockId, pauseAt);
  await ok(await post(`/v1/subscriptions/${subscriptionId}/pause`), 200);
  await advance(clockId, resumeAt);
  await ok(await post(`/v1/subscriptions/${subscriptionId}/resume`), 200);
}

describe('pause and resume, more cases', () => {
  it('pay in advance, paused 10 days mid-month then resumed: 2100 credited at the pause, 1100 charged at the resume, 2100 of base fee for March', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id, pay_in_advance: true });
    // March paid in advance at the start.
    const [march] = await invoicesOf(sub.id);
    expect(summary(march!)).toEqual([
      at('2030-03-01T00:00:00Z'),
      at('2030-04-01T00:00:00Z'),
      [['31.0000', '3100.0000']],
      [],
      '0.0000',
      '3100.0000',
    ]);

    await advance(clock.id, '2030-03-11T00:00:00Z');
    await sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-05T11:00:00Z']);
    await ok<SubscriptionResource>(await post(`/v1/subscriptions/${sub.id}/pause`), 200);
    // The pause credits March 11 to 31 at once: 21 days, 2100; it invoices nothing.
    const atPause = await creditNotesOf(customer.id);
    expect(atPause.map((n) => [n.invoice_id, n.reason, n.credit_amount_cents, n.balance_amount_cents, n.status])).toEqual([
      [march!.id, 'order_change', '2100.0000', '2100.0000', 'finalized'],
    ]);
    expect(await invoicesOf(sub.id)).toHaveLength(1);

    await advance(clock.id, '2030-03-21T00:00:00Z');
    await sendCalls(customer, ['2030-03-15T10:00:00Z', '2030-03-15T11:00:00Z', '2030-03-15T12:00:00Z']);
    await ok<SubscriptionResource>(await post(`/v1/subscriptions/${sub.id}/resume`), 200);
    // The resume bills March 21 to 31 at once: 11 days, 1100, paid by the pause's credit.
    const atResume = await invoicesOf(sub.id);
    expect(atResume).toHaveLength(2);
    expect(atResume[1]).toMatchObject({ issuing_date: '2030-03-21', status: 'paid' });
    expect(summary(atResume[1]!)).toEqual([
      at('2030-03-21T00:00:00Z'),
      at('2030-04-01T00:00:00Z'),
      [['11.0000', '1100.0000']],
      [],
      '1100.0000',
      '0.0000',
    ]);
    expect((await creditNotesOf(customer.id)).map((n) => n.balance_amount_cents)).toEqual(['1000.0000']);

    await advance(clock.id, '2030-03-26T00:00:00Z');
    await sendCalls(customer, ['2030-03-25T10:00:00Z']);
    await advance(clock.id, '2030-04-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(4);
    // April 1st: the usage of March 1-10 (2 calls) on its own invoice, then March 21-31's usage (1
    // call) with April's base fee; the 1000 left of the credit pays 10, then 990. The 3 calls of
    // the paused days are never billed.
    expect(summary(invoices[2]!)).toEqual([
      at('2030-03-01T00:00:00Z'),
      at('2030-03-11T00:00:00Z'),
      [],
      [['2.0000', '10.0000']],
      '10.0000',
      '0.0000',
    ]);
    expect(summary(invoices[3]!)).toEqual([
      at('2030-04-01T00:00:00Z'),
      at('2030-05-01T00:00:00Z'),
      [['30.0000', '3100.0000']],
      [['1.0000', '5.0000']],
      '990.0000',
      '2115.0000',
    ]);
    expect((await creditNotesOf(customer.id)).map((n) => n.balance_amount_cents)).toEqual(['0.0000']);
    // March's base fee: 3100 billed, 2100 credited, 1100 billed again = 2100, 21 active days of 100.
    const marchFees = baseFees(invoices.filter((i) => (i.period_started_at ?? '') < at('2030-04-01T00:00:00Z')));
    expect(sum(marchFees) - 2100).toBe(2100);
  });

  it('two pauses in one period (in arrear): three invoices at its end, one per active part, 1600 of base fee for 16 days', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });

    // Active March 1-5, paused 6-10, active 11-15, paused 16-25, active 26-31.
    await pausedBetween(clock.id, sub.id, '2030-03-06T00:00:00Z', '2030-03-11T00:00:00Z');
    await pausedBetween(clock.id, sub.id, '2030-03-16T00:00:00Z', '2030-03-26T00:00:00Z');
    expect(await invoicesOf(sub.id)).toEqual([]);
    // One call in each active part (2 in the first), one in each pause.
    await sendCalls(customer, [
      '2030-03-02T10:00:00Z',
      '2030-03-05T23:59:59Z',
      '2030-03-08T10:00:00Z',
      '2030-03-12T10:00:00Z',
      '2030-03-20T10:00:00Z',
      '2030-03-26T00:00:00Z',
    ]);

    await advance(clock.id, '2030-04-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    expect(invoices.map(summary)).toEqual([
      [at('2030-03-01T00:00:00Z'), at('2030-03-06T00:00:00Z'), [['5.0000', '500.0000']], [['2.0000', '10.0000']], '0.0000', '510.0000'],
      [at('2030-03-11T00:00:00Z'), at('2030-03-16T00:00:00Z'), [['5.0000', '500.0000']], [['1.0000', '5.0000']], '0.0000', '505.0000'],
      [at('2030-03-26T00:00:00Z'), at('2030-04-01T00:00:00Z'), [['6.0000', '600.0000']], [['1.0000', '5.0000']], '0.0000', '605.0000'],
    ]);
    expect(invoices.map((i) => i.issuing_date)).toEqual(['2030-04-01', '2030-04-01', '2030-04-01']);
    expect(sum(baseFees(invoices))).toBe(1600);
    expect(await scenario.subscription(sub.id)).toMatchObject({ status: 'active', current_period_started_at: at('2030-04-01T00:00:00Z') });
  });

  it('terminated with on_termination_action skip after a pause and resume: nothing billed, neither the part before the pause nor the last one', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    await pausedBetween(clock.id, sub.id, '2030-03-11T00:00:00Z', '2030-03-21T00:00:00Z');
    await advance(clock.id, '2030-03-25T12:00:00Z');
    await sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-23T10:00:00Z']);
    const terminated = await scenario
      .stack()
      .app.inject({ method: 'DELETE', url: `/v1/subscriptions/${sub.id}?on_termination_action=skip`, headers: scenario.org().headers });
    expect(terminated.statusCode, terminated.body).toBe(200);
    await advance(clock.id, '2030-04-02T00:00:00Z');
    expect(await scenario.subscription(sub.id)).toMatchObject({ status: 'terminated' });
    expect(await invoicesOf(sub.id)).toEqual([]);
  });

  it('an upgrade after a resume in the same period (in arrear): the resumed part billed at the change, the part before the pause and the new plan at the end', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const [basic, pro] = await Promise.all([createPlan(3100), createPlan(6200)]);
    const sub = await subscribe({ customer_id: customer.id, plan_id: basic.id });
    await pausedBetween(clock.id, sub.id, '2030-03-11T00:00:00Z', '2030-03-21T00:00:00Z');
    await advance(clock.id, '2030-03-26T12:00:00Z');
    await sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-05T11:00:00Z', '2030-03-15T10:00:00Z', '2030-03-23T10:00:00Z']);
    await ok(
      await scenario
        .stack()
        .app.inject({ method: 'PUT', url: `/v1/subscriptions/${sub.id}`, headers: scenario.org().headers, payload: { plan_id: pro.id } }),
      200,
    );

    // The upgrade bills the resumed part on the old plan: March 21-25, 5 days of 100 and 1 call.
    const atChange = await invoicesOf(sub.id);
    expect(atChange.map(summary)).toEqual([
      [at('2030-03-21T00:00:00Z'), at('2030-03-26T00:00:00Z'), [['5.0000', '500.0000']], [['1.0000', '5.0000']], '0.0000', '505.0000'],
    ]);
    expect(atChange[0]).toMatchObject({ issuing_date: '2030-03-26' });

    await advance(clock.id, '2030-03-29T00:00:00Z');
    await sendCalls(customer, ['2030-03-28T10:00:00Z']);
    await advance(clock.id, '2030-04-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    // April 1st: March 1-10 on the old plan (1000 and 2 calls), then March 26-31 on the new one (6 days of 200 and 1 call).
    expect(invoices.slice(1).map(summary)).toEqual([
      [at('2030-03-01T00:00:00Z'), at('2030-03-11T00:00:00Z'), [['10.0000', '1000.0000']], [['2.0000', '10.0000']], '0.0000', '1010.0000'],
      [at('2030-03-26T00:00:00Z'), at('2030-04-01T00:00:00Z'), [['6.0000', '1200.0000']], [['1.0000', '5.0000']], '0.0000', '1205.0000'],
    ]);
    expect(sum(baseFees(invoices))).toBe(2700);
  });

  it('an upgrade after a resume in the same period (in advance): credits and charges from the change day, the credit notes paying in order', async () => {
    const clock = await createClock('2030-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const [basic, pro] = await Promise.all([createPlan(3100), createPlan(6200)]);
    const sub = await subscribe({ customer_id: customer.id, plan_id: basic.id, pay_in_advance: true });
    await pausedBetween(clock.id, sub.id, '2030-03-11T00:00:00Z', '2030-03-21T00:00:00Z');
    await advance(clock.id, '2030-03-26T12:00:00Z');
    await sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-05T11:00:00Z', '2030-03-15T10:00:00Z', '2030-03-23T10:00:00Z']);
    await ok(
      await scenario
        .stack()
        .app.inject({ method: 'PUT', url: `/v1/subscriptions/${sub.id}`, headers: scenario.org().headers, payload: { plan_id: pro.id } }),
      200,
    );

    const atChange = await invoicesOf(sub.id);
    // March 3100; the resume's 1100 (March 21-31) paid by the pause's 2100 credit; at the change the
    // resumed part's usage (1 call, 5, paid by what is left of that credit: 1000 -> 995), then March
    // 26-31 on the new plan, 6 days of 200 = 1200, paid by the 995 left and 205 of the change's credit.
    expect(atChange.map(summary)).toEqual([
      [at('2030-03-01T00:00:00Z'), at('2030-04-01T00:00:00Z'), [['31.0000', '3100.0000']], [], '0.0000', '3100.0000'],
      [at('2030-03-21T00:00:00Z'), at('2030-04-01T00:00:00Z'), [['11.0000', '1100.0000']], [], '1100.0000', '0.0000'],
      [at('2030-03-21T00:00:00Z'), at('2030-03-26T00:00:00Z'), [], [['1.0000', '5.0000']], '5.0000', '0.0000'],
      [at('2030-03-26T00:00:00Z'), at('2030-04-01T00:00:00Z'), [['6.0000', '1200.0000']], [], '1200.0000', '0.0000'],
    ]);
    // The pause credits 21 unused days of March's fee; the change 6 unused days of the resume's fee.
    const notes = await creditNotesOf(customer.id);
    expect(notes.map((n) => [n.invoice_id, n.reason, n.credit_amount_cents, n.balance_amount_cents])).toEqual([
      [atChange[0]!.id, 'order_change', '2100.0000', '0.0000'],
      [atChange[1]!.id, 'order_change', '600.0000', '395.0000'],
    ]);

    await advance(clock.id, '2030-03-29T00:00:00Z');
    await sendCalls(customer, ['2030-03-28T10:00:00Z']);
    await advance(clock.id, '2030-04-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    // April 1st: March 1-10's usage (2 calls, 10, paid by the credit: 395 -> 385), then March 26-31's
    // usage (1 call) with April on the new plan (6200): 6205 - 385 = 5820.
    expect(invoices.slice(4).map(summary)).toEqual([
      [at('2030-03-01T00:00:00Z'), at('2030-03-11T00:00:00Z'), [], [['2.0000', '10.0000']], '10.0000', '0.0000'],
      [at('2030-04-01T00:00:00Z'), at('2030-05-01T00:00:00Z'), [['30.0000', '6200.0000']], [['1.0000', '5.0000']], '385.0000', '5820.0000'],
    ]);
    // March's base fee: 3100 + 1100 + 1200 billed, 2100 + 600 credited = 2700 (15 days of 100, 6 of 200).
    const marchFees = baseFees(invoices.filter((i) => (i.period_started_at ?? '') < at('2030-04-01T00:00:00Z')));
    expect(sum(marchFees) - 2100 - 600).toBe(2700);
  });
});
