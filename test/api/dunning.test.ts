// Dunning end to end on a test clock (api-contract.md, Dunning campaigns and payment requests;
// docs/dunning.md walks through the same numbers): two invoices become overdue, the organization's
// default campaign totals them against its USD threshold and creates a payment request; the first
// attempt fails, the second one days_between_attempts later succeeds and pays both invoices.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import type { DunningCampaignResource } from '../../src/resources/dunning-campaign';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentResource } from '../../src/resources/payment';
import type { PaymentRequestResource } from '../../src/resources/payment-request';
import { eventually, injectAs, ok, type Method } from '../support/http';
import { finalizedOneOff, manualOrganization } from '../support/payment-fixtures';
import { startFakeStripe, type FakeStripe } from '../support/providers/fake-stripe';
import { notifyManual } from '../support/providers/manual-notifier';
import { startReceiver, type Receiver } from '../support/receiver';
import { createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let webhookUrl: string;
let stripe: FakeStripe;
let receiver: Receiver;
const SECRET = 'manual_secret_for_dunning';

beforeAll(async () => {
  stack = await createTestStack();
  await stack.app.listen({ host: '127.0.0.1', port: 0 });
  webhookUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}/v1/payments/webhook/manual`;
  [worker, stripe, receiver] = await Promise.all([startStackWorker(stack), startFakeStripe(), startReceiver()]);
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await stripe?.close();
  await worker?.stop();
  await stack?.close();
});

const call = (org: TestOrganization, method: Method, url: string, payload?: unknown) => injectAs(stack.app, org, method, url, payload);

async function advance(org: TestOrganization, clockId: string, to: string): Promise<void> {
  ok(await call(org, 'POST', `/v1/test_clocks/${clockId}/advance`, { frozen_time: to }), 202);
  await eventually(
    async () => {
      worker.assertAlive();
      return ok<{ status: string }>(await call(org, 'GET', `/v1/test_clocks/${clockId}`)).status === 'ready' ? true : undefined;
    },
    60_000,
    `the clock to reach ${to}`,
  );
}

async function requestsOf(org: TestOrganization, customerId: string): Promise<PaymentRequestResource[]> {
  return ok<PaymentRequestResource[]>(await call(org, 'GET', `/v1/payment_requests?customer_id=${customerId}`));
}

const getRequest = async (org: TestOrganization, id: string) =>
  ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${id}`));

/**
 * An organization with a manual integration and a default campaign (`campaign`'s fields), a test
 * clock at 2031-01-01, and a customer on it (due the next day); `newCustomer()` adds others like it.
 */
async function chased(campaign: Record<string, unknown>) {
  const org = await manualOrganization(stack.app, 'Dunning', SECRET);
  const defaultCampaign = ok<DunningCampaignResource>(
    await call(org, 'POST', '/v1/dunning_campaigns', { code: 'default', name: 'Default', applied_to_organization: true, ...campaign }),
    201,
  );
  const clock = ok<{ id: string }>(await call(org, 'POST', '/v1/test_clocks', { frozen_time: '2031-01-01T00:00:00Z' }), 201);
  const newCustomer = async (fields: Record<string, unknown> = {}) =>
    ok<CustomerResource>(
      await call(org, 'POST', '/v1/customers', {
        external_id: `dun_${randomUUID()}`,
        currency: 'USD',
        net_payment_term: 1,
        timezone: 'UTC',
        payment_provider: 'manual',
        test_clock_id: clock.id,
        ...fields,
      }),
      201,
    );
  const customer = await newCustomer();
  /** A finalized one-off invoice of `cents`, due the day after the clock's current day. */
  const invoice = (cents: number, currency = 'USD', customerId = customer.id) =>
    finalizedOneOff(stack.app, org, customerId, cents, currency);
  return { org, campaign: defaultCampaign, clock, customer, newCustomer, invoice };
}

/** The customer's requests once there are `count`, each with its first attempt made. */
async function attemptedRequests(org: TestOrganization, customerId: string, count = 1): Promise<PaymentRequestResource[]> {
  return eventually(
    async () => {
      worker.assertAlive();
      const found = await requestsOf(org, customerId);
      return found.length === count && found.every((r) => r.payment_ids.length >= 1) ? found : undefined;
    },
    30_000,
    `${count} payment request(s) and their first attempt`,
  );
}

describe('dunning campaign on a test clock', () => {
  it('overdue invoices reach the threshold → a request; a failed attempt, another 2 days later that pays both invoices', async () => {
    const { org, campaign, clock, customer, invoice } = await chased({
      max_attempts: 3,
      days_between_attempts: 2,
      thresholds: [{ currency: 'USD', amount_cents: 1000 }],
    });
    const invoices = [await invoice(600), await invoice(500)];
    expect(invoices.map((i) => i.payment_due_date)).toEqual(['2031-01-02', '2031-01-02']);

    // Due on January 2, overdue once that day is over: the campaign's check makes one request of both (1100 >= 1000).
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [request] = await attemptedRequests(org, customer.id);
    expect(request).toMatchObject({
      status: 'pending',
      dunning_campaign_id: campaign.id,
      amount_cents: '1100.0000',
      currency: 'USD',
      payment_attempts: 1,
      max_attempts: 3,
    });
    expect([...request!.invoice_ids].sort()).toEqual(invoices.map((i) => i.id).sort());

    // The first attempt fails: the next one is due 2 days later on the clock.
    expect((await notifyManual(webhookUrl, SECRET, { payment_id: request!.payment_ids[0], status: 'failed' })).status).toBe(200);
    const waiting = await eventually(
      async () => {
        const r = await getRequest(org, request!.id);
        return r.next_attempt_at ? r : undefined;
      },
      30_000,
      'the next attempt to be scheduled',
    );
    expect(waiting.next_attempt_at).toBe('2031-01-06T00:00:00.000Z');
    expect(waiting.status).toBe('pending');

    await advance(org, clock.id, '2031-01-07T00:00:00Z');
    const second = await eventually(
      async () => {
        const r = await getRequest(org, request!.id);
        return r.payment_ids.length === 2 ? r : undefined;
      },
      30_000,
      'the second attempt',
    );
    expect(second.payment_attempts).toBe(2);
    const payment = ok<PaymentResource>(await call(org, 'GET', `/v1/payments/${second.payment_ids[1]}`));
    expect(payment.amount).toBe('1100.0000');
    expect((await notifyManual(webhookUrl, SECRET, { payment_id: payment.id, status: 'succeeded' })).status).toBe(200);
    await eventually(
      async () => ((await getRequest(org, request!.id)).status === 'succeeded' ? true : undefined),
      30_000,
      'the request to succeed',
    );
    for (const paid of invoices) {
      await eventually(
        async () => (ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${paid.id}`)).status === 'paid' ? true : undefined),
        30_000,
      );
    }
    expect(await requestsOf(org, customer.id)).toHaveLength(1);
  });

  it('an excluded customer is not chased; a threshold not reached makes no request', async () => {
    const {
      org,
      clock,
      customer: small,
      newCustomer,
      invoice,
    } = await chased({
      max_attempts: 1,
      days_between_attempts: 1,
      thresholds: [{ currency: 'USD', amount_cents: 1000 }],
    });
    const excluded = await newCustomer({ exclude_from_dunning_campaign: true });
    await invoice(5000, 'USD', excluded.id);
    await invoice(900);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    await eventually(async () => {
      const overdue = await stack.db.models.Invoice.countDocuments({
        customer_id: { $in: [excluded.id, small.id] },
        payment_overdue: true,
      });
      return overdue === 2 ? true : undefined;
    }, 30_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await requestsOf(org, excluded.id)).toHaveLength(0);
    expect(await requestsOf(org, small.id)).toHaveLength(0);
  });

  it('an invoice paid by hand between two attempts: the next attempt charges the rest', async () => {
    const { org, clock, customer, invoice } = await chased({
      max_attempts: 3,
      days_between_attempts: 2,
      thresholds: [{ currency: 'USD', amount_cents: 1000 }],
    });
    const first = await invoice(600);
    const second = await invoice(500);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [request] = await attemptedRequests(org, customer.id);
    expect((await notifyManual(webhookUrl, SECRET, { payment_id: request!.payment_ids[0], status: 'failed' })).status).toBe(200);
    await eventually(async () => ((await getRequest(org, request!.id)).next_attempt_at ? true : undefined), 30_000);
    ok(await call(org, 'POST', `/v1/invoices/${first.id}/pay`));
    await advance(org, clock.id, '2031-01-07T00:00:00Z');
    const retried = await eventually(async () => {
      const r = await getRequest(org, request!.id);
      return r.payment_ids.length === 2 ? r : undefined;
    }, 30_000);
    expect(retried.amount_cents).toBe('500.0000');
    expect(retried.invoice_ids).toEqual([second.id]);
    const payment = ok<PaymentResource>(await call(org, 'GET', `/v1/payments/${retried.payment_ids[1]}`));
    expect(payment.amount).toBe('500.0000');
    expect((await notifyManual(webhookUrl, SECRET, { payment_id: payment.id, status: 'succeeded' })).status).toBe(200);
    await eventually(async () => ((await getRequest(org, request!.id)).status === 'succeeded' ? true : undefined), 30_000);
    const settlements = await stack.db.models.InvoiceSettlement.find({ source_id: payment.id }).lean();
    expect(settlements.map((s) => [s.invoice_id, s.amount_cents.toString()])).toEqual([[second.id, '500']]);
  });

  it('max_attempts failures: the request fails, the invoices stay overdue, no more attempts', async () => {
    const { org, clock, customer, invoice } = await chased({
      max_attempts: 2,
      days_between_attempts: 1,
      thresholds: [{ currency: 'USD', amount_cents: 100 }],
    });
    const unpaid = await invoice(700);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [request] = await attemptedRequests(org, customer.id);
    await notifyManual(webhookUrl, SECRET, { payment_id: request!.payment_ids[0], status: 'failed' });
    await eventually(
      async () => ((await getRequest(org, request!.id)).next_attempt_at === '2031-01-05T00:00:00.000Z' ? true : undefined),
      30_000,
    );
    await advance(org, clock.id, '2031-01-05T12:00:00Z');
    const second = await eventually(async () => {
      const r = await getRequest(org, request!.id);
      return r.payment_ids.length === 2 ? r : undefined;
    }, 30_000);
    await notifyManual(webhookUrl, SECRET, { payment_id: second.payment_ids[1], status: 'failed' });
    const failed = await eventually(async () => {
      const r = await getRequest(org, request!.id);
      return r.status === 'failed' ? r : undefined;
    }, 30_000);
    expect(failed.payment_attempts).toBe(2);
    await advance(org, clock.id, '2031-01-09T00:00:00Z');
    expect((await getRequest(org, request!.id)).payment_ids).toHaveLength(2);
    const after = ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${unpaid.id}`));
    expect([after.status, after.payment_overdue]).toEqual(['finalized', true]);
  });

  it('invoices in two currencies: one request per currency, each against its own threshold', async () => {
    const { org, clock, customer, invoice } = await chased({
      max_attempts: 1,
      days_between_attempts: 1,
      thresholds: [
        { currency: 'USD', amount_cents: 1000 },
        { currency: 'EUR', amount_cents: 300 },
      ],
    });
    await invoice(1200, 'USD');
    await invoice(400, 'EUR');
    await invoice(50, 'GBP'); // no threshold in GBP: never chased
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const requests = await attemptedRequests(org, customer.id, 2);
    expect(requests.map((r) => [r.currency, r.amount_cents]).sort()).toEqual([
      ['EUR', '400.0000'],
      ['USD', '1200.0000'],
    ]);
  });

  it('two overdue invoices below the threshold: no request; a third crossing it: one request of all three, payment_request.created delivered', async () => {
    const { org, campaign, clock, customer, invoice } = await chased({
      max_attempts: 1,
      days_between_attempts: 1,
      thresholds: [{ currency: 'USD', amount_cents: 1500 }],
    });
    ok(await call(org, 'POST', '/v1/webhook_endpoints', { url: receiver.url(`/${org.id}`) }), 201);
    const early = [await invoice(400), await invoice(500)];
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    await eventually(
      async () =>
        (await stack.db.models.Invoice.countDocuments({ customer_id: customer.id, payment_overdue: true })) === 2 ? true : undefined,
      30_000,
      'both invoices overdue',
    );
    // The campaign looked (900 < 1500) and made nothing.
    await eventually(async () => {
      const history = await stack.temporal.client.workflow.getHandle(`dunning-campaign/${campaign.id}`).fetchHistory();
      return history.events?.some((e) => e.activityTaskCompletedEventAttributes) ? true : undefined;
    }, 30_000);
    expect(await requestsOf(org, customer.id)).toHaveLength(0);

    const third = await invoice(700);
    expect(third.payment_due_date).toBe('2031-01-05');
    await advance(org, clock.id, '2031-01-07T00:00:00Z');
    const [request] = await attemptedRequests(org, customer.id);
    expect(request).toMatchObject({ status: 'pending', amount_cents: '1600.0000', currency: 'USD', dunning_campaign_id: campaign.id });
    expect([...request!.invoice_ids].sort()).toEqual([...early, third].map((i) => i.id).sort());
    const payment = ok<PaymentResource>(await call(org, 'GET', `/v1/payments/${request!.payment_ids[0]}`));
    expect([payment.amount, payment.payment_request_id]).toEqual(['1600.0000', request!.id]);

    const delivered = await eventually(
      async () => {
        const bodies = receiver
          .requests(`/${org.id}`)
          .map((r) => JSON.parse(r.body) as { type: string; data: { object: PaymentRequestResource } });
        return bodies.find((b) => b.type === 'payment_request.created');
      },
      30_000,
      'payment_request.created delivered',
    );
    expect(delivered.data.object).toMatchObject({ id: request!.id, amount_cents: '1600.0000', payment_ids: [payment.id] });
    expect(
      receiver
        .requests(`/${org.id}`)
        .map((r) => (JSON.parse(r.body) as { type: string }).type)
        .filter((t) => t === 'payment_request.created'),
    ).toHaveLength(1);
  });

  it('an off-session charge declined twice, paid on the third attempt: attempts exactly days_between_attempts apart on the clock, events in order', async () => {
    const { org, clock, newCustomer, invoice } = await chased({
      max_attempts: 3,
      days_between_attempts: 3,
      thresholds: [{ currency: 'USD', amount_cents: 1000 }],
    });
    ok(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { api_key: 'sk_test_dunning', webhook_secret: 'whsec_dunning', api_base_url: stripe.url },
      }),
      201,
    );
    const card = `pm_${randomUUID().replaceAll('-', '')}`;
    stripe.declinePaymentMethod(card, { message: 'Insufficient funds.', decline_code: 'insufficient_funds' }, 2);
    const customer = await newCustomer({ payment_provider: 'provider_a', provider_customer_id: 'cus_Dunning1', payment_method_id: card });
    const invoices = [await invoice(700, 'USD', customer.id), await invoice(800, 'USD', customer.id)];

    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [request] = await attemptedRequests(org, customer.id);
    const first = await eventually(async () => {
      const r = await getRequest(org, request!.id);
      return r.next_attempt_at ? r : undefined;
    }, 30_000);
    // The charge is declined at once, at the instant the invoices became overdue (the end of their due day).
    const start = Date.parse('2031-01-03T00:00:00Z');
    const DAY = 86_400_000;
    expect(first.next_attempt_at).toBe(new Date(start + 3 * DAY).toISOString());

    // A minute before the next attempt is due, nothing happens; at the instant, it is made.
    await advance(org, clock.id, new Date(start + 3 * DAY - 60_000).toISOString());
    expect((await getRequest(org, request!.id)).payment_ids).toHaveLength(1);
    await advance(org, clock.id, new Date(start + 3 * DAY).toISOString());
    const second = await eventually(async () => {
      const r = await getRequest(org, request!.id);
      return r.payment_ids.length === 2 && r.next_attempt_at !== first.next_attempt_at ? r : undefined;
    }, 30_000);
    expect(second.next_attempt_at).toBe(new Date(start + 6 * DAY).toISOString());
    await advance(org, clock.id, new Date(start + 6 * DAY).toISOString());
    const paid = await eventually(async () => {
      const r = await getRequest(org, request!.id);
      return r.status === 'succeeded' ? r : undefined;
    }, 30_000);
    expect([paid.payment_attempts, paid.payment_ids.length, paid.next_attempt_at]).toEqual([3, 3, null]);

    const intents = [...stripe.paymentIntents.values()].filter((pi) => pi.payment_method === card);
    expect(intents.map((pi) => [pi.amount, pi.status])).toEqual([
      [1500, 'requires_payment_method'],
      [1500, 'requires_payment_method'],
      [1500, 'succeeded'],
    ]);
    for (const one of invoices) {
      await eventually(
        async () => (ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${one.id}`)).status === 'paid' ? true : undefined),
        30_000,
      );
    }
    // Every event of the request and its payments, in the order they happened on the clock.
    // payment_request.payment_succeeded is written right after the request's status.
    const objectIds = new Set([request!.id, ...paid.payment_ids]);
    const events = await eventually(
      async () => {
        const found = (await stack.db.models.LifecycleEvent.find({ organization_id: org.id }).lean())
          .filter((e) => objectIds.has((e.object as { id: string }).id) && e.type !== 'payment.created')
          .sort((a, b) => a.occurred_at.getTime() - b.occurred_at.getTime());
        return found.some((e) => e.type === 'payment_request.payment_succeeded') ? found : undefined;
      },
      10_000,
      'payment_request.payment_succeeded',
    );
    const at = (days: number) => new Date(start + days * DAY).toISOString();
    expect(events.map((e) => [e.type, e.occurred_at.toISOString()])).toEqual([
      ['payment.failed', at(0)],
      ['payment_request.created', at(0)],
      ['payment.failed', at(3)],
      ['payment.succeeded', at(6)],
      ['payment_request.payment_succeeded', at(6)],
    ]);
  });

  it('a customer on another campaign follows its threshold; moved to a third one, that one chases all its overdue invoices', async () => {
    const { org, clock, newCustomer, invoice } = await chased({
      max_attempts: 1,
      days_between_attempts: 1,
      thresholds: [{ currency: 'USD', amount_cents: 100 }],
    });
    const campaign = async (code: string, cents: number, maxAttempts: number) =>
      ok<DunningCampaignResource>(
        await call(org, 'POST', '/v1/dunning_campaigns', {
          code,
          name: code,
          max_attempts: maxAttempts,
          days_between_attempts: 5,
          thresholds: [{ currency: 'USD', amount_cents: cents }],
        }),
        201,
      );
    const lenient = await campaign('lenient', 5000, 2);
    const strict = await campaign('strict', 1500, 4);
    const customer = await newCustomer({ applied_dunning_campaign_id: lenient.id });
    const first = await invoice(1000, 'USD', customer.id);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    await eventually(async () => {
      const history = await stack.temporal.client.workflow.getHandle(`dunning-campaign/${lenient.id}`).fetchHistory();
      return history.events?.some((e) => e.activityTaskCompletedEventAttributes) ? true : undefined;
    }, 30_000);
    // The organization's default (100) would have chased it; its own campaign's 5000 is not reached.
    expect(await requestsOf(org, customer.id)).toHaveLength(0);

    ok(await call(org, 'PUT', `/v1/customers/${customer.id}`, { applied_dunning_campaign_id: strict.id }));
    const second = await invoice(600, 'USD', customer.id);
    await advance(org, clock.id, '2031-01-07T00:00:00Z');
    const [request] = await attemptedRequests(org, customer.id);
    expect(request).toMatchObject({ dunning_campaign_id: strict.id, max_attempts: 4, amount_cents: '1600.0000' });
    expect([...request!.invoice_ids].sort()).toEqual([first.id, second.id].sort());
  });

  it("a deleted campaign starts no request while its running one goes on; the organization's new default takes over", async () => {
    const { org, campaign, clock, customer, newCustomer, invoice } = await chased({
      max_attempts: 2,
      days_between_attempts: 2,
      thresholds: [{ currency: 'USD', amount_cents: 100 }],
    });
    await invoice(300);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [running] = await attemptedRequests(org, customer.id);
    await notifyManual(webhookUrl, SECRET, { payment_id: running!.payment_ids[0], status: 'failed' });
    await eventually(async () => ((await getRequest(org, running!.id)).next_attempt_at ? true : undefined), 30_000);

    ok(await call(org, 'DELETE', `/v1/dunning_campaigns/${campaign.id}`));
    const orphan = await newCustomer();
    await invoice(900, 'USD', orphan.id);
    await advance(org, clock.id, '2031-01-07T00:00:00Z');
    // The running request made its second attempt; the deleted campaign made none for the new overdue invoice.
    const retried = await eventually(async () => {
      const r = await getRequest(org, running!.id);
      return r.payment_ids.length === 2 ? r : undefined;
    }, 30_000);
    expect(retried.dunning_campaign_id).toBe(campaign.id);
    await eventually(
      async () =>
        (await stack.db.models.Invoice.countDocuments({ customer_id: orphan.id, payment_overdue: true })) === 1 ? true : undefined,
      30_000,
    );
    await new Promise((r) => setTimeout(r, 1500));
    expect(await requestsOf(org, orphan.id)).toHaveLength(0);
    const ended = await stack.temporal.client.workflow.getHandle(`dunning-campaign/${campaign.id}`).describe();
    expect(ended.status.name).not.toBe('RUNNING');

    // A new default campaign: the next overdue invoice is chased by it.
    const next = ok<DunningCampaignResource>(
      await call(org, 'POST', '/v1/dunning_campaigns', {
        code: 'next',
        name: 'Next',
        max_attempts: 1,
        days_between_attempts: 1,
        applied_to_organization: true,
        thresholds: [{ currency: 'USD', amount_cents: 100 }],
      }),
      201,
    );
    await invoice(200, 'USD', orphan.id);
    await advance(org, clock.id, '2031-01-10T00:00:00Z');
    const [chasedNow] = await attemptedRequests(org, orphan.id);
    expect(chasedNow).toMatchObject({ dunning_campaign_id: next.id, amount_cents: '1100.0000' });
  });

  it("the campaign's workflow continues as new with what it has to look at, and goes on creating requests", async () => {
    const { org, campaign, clock, customer, newCustomer, invoice } = await chased({
      max_attempts: 1,
      days_between_attempts: 1,
      thresholds: [{ currency: 'USD', amount_cents: 100 }],
    });
    // Started before any invoice is overdue, with a run of at most 2 checks.
    const handle = await stack.temporal.client.workflow.start('dunningCampaignWorkflow', {
      workflowId: `dunning-campaign/${campaign.id}`,
      taskQueue: stack.taskQueue,
      args: [{ campaignId: campaign.id, organizationId: org.id, maxChecksPerRun: 2 }],
    });
    const customers = [customer, await newCustomer(), await newCustomer(), await newCustomer(), await newCustomer()];
    for (const c of customers) await invoice(250, 'USD', c.id);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    for (const c of customers) await attemptedRequests(org, c.id);
    const first = await stack.temporal.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).fetchHistory();
    expect(first.events?.some((e) => e.workflowExecutionContinuedAsNewEventAttributes)).toBe(true);
    expect((await handle.describe()).status.name).toBe('RUNNING');
  });
});
