// Dunning end to end on a test clock (api-contract.md, Dunning campaigns and payment requests;
// docs/dunning.md walks through the same numbers): two invoices become overdue, the organization's
// default campaign totals them against its USD threshold and creates a payment request; the first
// attempt fails, the second one days_between_attempts later succeeds and pays both invoices.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentResource } from '../../src/resources/payment';
import type { PaymentRequestResource } from '../../src/resources/payment-request';
import { eventually, injectAs, ok, type Method } from '../support/http';
import { notifyManual } from '../support/providers/manual-notifier';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let webhookUrl: string;
const SECRET = 'manual_secret_for_dunning';

beforeAll(async () => {
  stack = await createTestStack();
  await stack.app.listen({ host: '127.0.0.1', port: 0 });
  webhookUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}/v1/payments/webhook/manual`;
  worker = await startStackWorker(stack);
}, 120_000);

afterAll(async () => {
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

describe('dunning campaign on a test clock', () => {
  it('overdue invoices reach the threshold → a request; a failed attempt, another 2 days later that pays both invoices', async () => {
    const org = await createOrganization(stack.app, { name: `Dunning ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
    ok(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'manual',
        settings: { webhook_secret: SECRET },
      }),
      201,
    );
    const campaign = ok<{ id: string }>(
      await call(org, 'POST', '/v1/dunning_campaigns', {
        code: 'default',
        name: 'Default',
        max_attempts: 3,
        days_between_attempts: 2,
        thresholds: [{ currency: 'USD', amount_cents: 1000 }],
        applied_to_organization: true,
      }),
      201,
    );
    const clock = ok<{ id: string }>(await call(org, 'POST', '/v1/test_clocks', { frozen_time: '2031-01-01T00:00:00Z' }), 201);
    const customer = ok<CustomerResource>(
      await call(org, 'POST', '/v1/customers', {
        external_id: `dun_${randomUUID()}`,
        currency: 'USD',
        net_payment_term: 1,
        timezone: 'UTC',
        payment_provider: 'manual',
        test_clock_id: clock.id,
      }),
      201,
    );
    const invoices: InvoiceResource[] = [];
    for (const cents of [600, 500]) {
      const draft = ok<InvoiceResource>(
        await call(org, 'POST', '/v1/invoices/one_off', {
          customer_id: customer.id,
          line_items: [{ description: 'Service', unit_price: String(cents) }],
        }),
        201,
      );
      invoices.push(
        draft.status === 'finalized' ? draft : ok<InvoiceResource>(await call(org, 'POST', `/v1/invoices/${draft.id}/finalize`)),
      );
    }
    expect(invoices.map((i) => i.payment_due_date)).toEqual(['2031-01-02', '2031-01-02']);

    // Due on January 2, overdue once that day is over: the campaign's check makes one request of both (1100 >= 1000).
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [request] = await eventually(
      async () => {
        const found = await requestsOf(org, customer.id);
        return found.length === 1 && found[0]!.payment_ids.length === 1 ? found : undefined;
      },
      30_000,
      'the payment request and its first attempt',
    );
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
        const r = ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${request!.id}`));
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
        const r = ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${request!.id}`));
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
      async () =>
        ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${request!.id}`)).status === 'succeeded' ? true : undefined,
      30_000,
      'the request to succeed',
    );
    for (const invoice of invoices) {
      await eventually(
        async () => (ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${invoice.id}`)).status === 'paid' ? true : undefined),
        30_000,
      );
    }
    expect(await requestsOf(org, customer.id)).toHaveLength(1);
  });

  it('an excluded customer is not chased; a threshold not reached makes no request', async () => {
    const org = await createOrganization(stack.app, { name: `Dunning ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
    ok(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'manual',
        settings: { webhook_secret: SECRET },
      }),
      201,
    );
    ok(
      await call(org, 'POST', '/v1/dunning_campaigns', {
        code: 'default',
        name: 'Default',
        max_attempts: 1,
        days_between_attempts: 1,
        thresholds: [{ currency: 'USD', amount_cents: 1000 }],
        applied_to_organization: true,
      }),
      201,
    );
    const clock = ok<{ id: string }>(await call(org, 'POST', '/v1/test_clocks', { frozen_time: '2031-01-01T00:00:00Z' }), 201);
    const base = { currency: 'USD', net_payment_term: 1, timezone: 'UTC', payment_provider: 'manual', test_clock_id: clock.id };
    const excluded = ok<CustomerResource>(
      await call(org, 'POST', '/v1/customers', { ...base, external_id: `ex_${randomUUID()}`, exclude_from_dunning_campaign: true }),
      201,
    );
    const small = ok<CustomerResource>(await call(org, 'POST', '/v1/customers', { ...base, external_id: `sm_${randomUUID()}` }), 201);
    for (const [customer, cents] of [
      [excluded, 5000],
      [small, 900],
    ] as const) {
      const draft = ok<InvoiceResource>(
        await call(org, 'POST', '/v1/invoices/one_off', {
          customer_id: customer.id,
          line_items: [{ description: 'x', unit_price: String(cents) }],
        }),
        201,
      );
      if (draft.status === 'draft') ok(await call(org, 'POST', `/v1/invoices/${draft.id}/finalize`));
    }
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

  /** An organization with a manual integration and a default campaign, a customer on a clock at 2031-01-01 (due the next day). */
  async function chased(campaign: Record<string, unknown>) {
    const org = await createOrganization(stack.app, { name: `Dunning ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
    ok(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'manual',
        settings: { webhook_secret: SECRET },
      }),
      201,
    );
    ok(
      await call(org, 'POST', '/v1/dunning_campaigns', { code: 'default', name: 'Default', applied_to_organization: true, ...campaign }),
      201,
    );
    const clock = ok<{ id: string }>(await call(org, 'POST', '/v1/test_clocks', { frozen_time: '2031-01-01T00:00:00Z' }), 201);
    const customer = ok<CustomerResource>(
      await call(org, 'POST', '/v1/customers', {
        external_id: `dun_${randomUUID()}`,
        currency: 'USD',
        net_payment_term: 1,
        timezone: 'UTC',
        payment_provider: 'manual',
        test_clock_id: clock.id,
      }),
      201,
    );
    const invoice = async (cents: number, currency = 'USD') => {
      const draft = ok<InvoiceResource>(
        await call(org, 'POST', '/v1/invoices/one_off', {
          customer_id: customer.id,
          currency,
          line_items: [{ description: 'x', unit_price: String(cents) }],
        }),
        201,
      );
      return draft.status === 'finalized' ? draft : ok<InvoiceResource>(await call(org, 'POST', `/v1/invoices/${draft.id}/finalize`));
    };
    return { org, clock, customer, invoice };
  }

  const getRequest = async (org: TestOrganization, id: string) =>
    ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${id}`));

  it('an invoice paid by hand between two attempts: the next attempt charges the rest', async () => {
    const { org, clock, customer, invoice } = await chased({
      max_attempts: 3,
      days_between_attempts: 2,
      thresholds: [{ currency: 'USD', amount_cents: 1000 }],
    });
    const first = await invoice(600);
    const second = await invoice(500);
    await advance(org, clock.id, '2031-01-04T00:00:00Z');
    const [request] = await eventually(async () => {
      const found = await requestsOf(org, customer.id);
      return found.length === 1 && found[0]!.payment_ids.length === 1 ? found : undefined;
    }, 30_000);
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
    const [request] = await eventually(async () => {
      const found = await requestsOf(org, customer.id);
      return found.length === 1 && found[0]!.payment_ids.length === 1 ? found : undefined;
    }, 30_000);
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
    const requests = await eventually(async () => {
      const found = await requestsOf(org, customer.id);
      return found.length === 2 && found.every((r) => r.payment_ids.length === 1) ? found : undefined;
    }, 30_000);
    expect(requests.map((r) => [r.currency, r.amount_cents]).sort()).toEqual([
      ['EUR', '400.0000'],
      ['USD', '1200.0000'],
    ]);
  });
});
