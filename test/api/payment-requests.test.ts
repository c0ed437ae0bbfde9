// Payment requests through the API (api-contract.md, Dunning campaigns and payment requests): a
// request collects several invoices with one payment through the payments' machinery; its workflow
// waits for the payment's outcome, and the payment settles every invoice.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentResource } from '../../src/resources/payment';
import type { PaymentRequestResource } from '../../src/resources/payment-request';
import { eventually, expectError, injectAs, ok, type Method } from '../support/http';
import { waitForEventTypes } from '../support/lifecycle-events';
import { finalizedOneOff, manualCustomerWithInvoices } from '../support/payment-fixtures';
import { notifyManual } from '../support/providers/manual-notifier';
import { startFakeStripe, type FakeStripe } from '../support/providers/fake-stripe';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let webhookUrl: string;
let publicUrl: string;
let stripe: FakeStripe;
const SECRET = 'manual_secret_for_requests';

beforeAll(async () => {
  stack = await createTestStack();
  await stack.app.listen({ host: '127.0.0.1', port: 0 });
  publicUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
  webhookUrl = `${publicUrl}/v1/payments/webhook/manual`;
  [worker, stripe] = await Promise.all([startStackWorker(stack, { publicUrl }), startFakeStripe()]);
}, 120_000);

afterAll(async () => {
  await stripe?.close();
  await worker?.stop();
  await stack?.close();
});

const call = (org: TestOrganization, method: Method, url: string, payload?: unknown) => injectAs(stack.app, org, method, url, payload);

const setup = () => manualCustomerWithInvoices(stack.app, SECRET, [1000, 500]);

async function waitForRequest(org: TestOrganization, id: string, ready: (r: PaymentRequestResource) => boolean, what: string) {
  return eventually(
    async () => {
      worker.assertAlive();
      const request = ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${id}`));
      return ready(request) ? request : undefined;
    },
    30_000,
    what,
  );
}

describe('payment requests', () => {
  it('one payment collects every invoice: succeeded, each invoice paid with its own settlement, events', async () => {
    const { org, customer, invoices } = await setup();
    const created = ok<PaymentRequestResource>(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id, invoice_ids: invoices.map((i) => i.id) }),
      201,
    );
    expect(created).toMatchObject({
      status: 'pending',
      amount_cents: '1500.0000',
      currency: 'USD',
      max_attempts: 1,
      dunning_campaign_id: null,
    });
    const attempted = await waitForRequest(
      org,
      created.id,
      (r) => r.payment_ids.length === 1 && r.payment_attempts === 1,
      'the first attempt',
    );
    const payment = ok<PaymentResource>(await call(org, 'GET', `/v1/payments/${attempted.payment_ids[0]}`));
    expect(payment).toMatchObject({ amount: '1500.0000', payment_request_id: created.id, provider: 'manual' });

    expect((await notifyManual(webhookUrl, SECRET, { payment_id: payment.id, status: 'succeeded' })).status).toBe(200);
    await waitForRequest(org, created.id, (r) => r.status === 'succeeded', 'the request to succeed');
    for (const invoice of invoices) {
      await eventually(
        async () => (ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${invoice.id}`)).status === 'paid' ? true : undefined),
        20_000,
      );
    }
    const settlements = await stack.db.models.InvoiceSettlement.find({ source_id: payment.id }).lean();
    expect(settlements.map((s) => [s.invoice_id, s.amount_cents.toString()]).sort()).toEqual(
      [
        [invoices[0]!.id, '1000'],
        [invoices[1]!.id, '500'],
      ].sort(),
    );
    // payment_request.payment_succeeded is written right after the request's status.
    expect(await waitForEventTypes(stack.db, org.id, created.id, ['payment_request.payment_succeeded'])).toEqual([
      'payment_request.created',
      'payment_request.payment_succeeded',
    ]);
    const listed = ok<PaymentRequestResource[]>(await call(org, 'GET', `/v1/payment_requests?customer_id=${customer.id}&status=succeeded`));
    expect(listed.map((r) => r.id)).toEqual([created.id]);

    // Refunded: every invoice the payment paid, and each of their fees, shows it.
    expect(ok<PaymentResource>(await call(org, 'POST', `/v1/payments/${payment.id}/refund`, {})).status).toBe('refunded');
    for (const invoice of invoices) {
      const after = ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${invoice.id}`));
      expect([after.status, after.payment_status]).toEqual(['paid', 'refunded']);
      expect(after.fees!.map((f) => f.payment_status)).toEqual(after.fees!.map(() => 'refunded'));
    }
  });

  it('a failed attempt with max_attempts 1 fails the request; nothing is settled, every invoice shows the failure', async () => {
    const { org, customer, invoices } = await setup();
    const created = ok<PaymentRequestResource>(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id, invoice_ids: invoices.map((i) => i.id) }),
      201,
    );
    const attempted = await waitForRequest(org, created.id, (r) => r.payment_ids.length === 1, 'the first attempt');
    expect((await notifyManual(webhookUrl, SECRET, { payment_id: attempted.payment_ids[0], status: 'failed' })).status).toBe(200);
    await waitForRequest(org, created.id, (r) => r.status === 'failed', 'the request to fail');
    expect(await stack.db.models.InvoiceSettlement.countDocuments({ invoice_id: { $in: invoices.map((i) => i.id) } })).toBe(0);
    for (const invoice of invoices) {
      const after = ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${invoice.id}`));
      expect([after.status, after.payment_status]).toEqual(['finalized', 'failed']);
      expect(after.fees!.map((f) => f.payment_status)).toEqual(after.fees!.map(() => 'failed'));
    }
    await waitForEventTypes(stack.db, org.id, created.id, ['payment_request.payment_failed']);
  });

  it('refuses invoices that are not the customer’s, in another currency or not finalized, and a customer without a provider (422)', async () => {
    const { org, customer, invoices } = await setup();
    const other = await setup();
    expectError(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id, invoice_ids: [other.invoices[0]!.id] }),
      422,
      'validation_error',
    );
    expectError(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id, currency: 'EUR', invoice_ids: [invoices[0]!.id] }),
      422,
      'validation_error',
    );
    expectError(await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id }), 422, 'validation_error');
    const bare = ok<CustomerResource>(await call(org, 'POST', '/v1/customers', { external_id: `bare_${randomUUID()}` }), 201);
    expectError(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: bare.id, invoice_ids: [invoices[0]!.id] }),
      422,
      'validation_error',
    );
    expectError(await call(org, 'POST', '/v1/payment_requests', { customer_id: randomUUID() }), 404, 'customer_not_found');
    expectError(await call(org, 'GET', `/v1/payment_requests/${randomUUID()}`), 404, 'not_found');
  });

  it('with a saved card the attempt charges it off-session (Stripe): success pays at once; a decline fails the request', async () => {
    const org = await createOrganization(stack.app, { name: `Saved ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
    ok(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { api_key: 'sk_test_saved', webhook_secret: 'whsec_saved', api_base_url: stripe.url },
      }),
      201,
    );
    const customerFor = async (pm: string) =>
      ok<CustomerResource>(
        await call(org, 'POST', '/v1/customers', {
          external_id: `cus_${randomUUID()}`,
          currency: 'USD',
          payment_provider: 'provider_a',
          provider_customer_id: 'cus_Saved1',
          payment_method_id: pm,
        }),
        201,
      );
    const invoiceFor = (customerId: string, cents: number) => finalizedOneOff(stack.app, org, customerId, cents);

    const good = await customerFor('pm_card_good');
    const paidInvoice = await invoiceFor(good.id, 2100);
    const created = ok<PaymentRequestResource>(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: good.id, invoice_ids: [paidInvoice.id] }),
      201,
    );
    await waitForRequest(org, created.id, (r) => r.status === 'succeeded', 'the off-session charge to pay the request');
    const intents = [...stripe.paymentIntents.values()].filter((pi) => pi.payment_method === 'pm_card_good');
    expect(intents.map((pi) => [pi.amount, pi.customer, pi.status])).toEqual([[2100, 'cus_Saved1', 'succeeded']]);
    await eventually(
      async () => (ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${paidInvoice.id}`)).status === 'paid' ? true : undefined),
      20_000,
    );
    expect(ok<PaymentRequestResource>(await call(org, 'GET', `/v1/payment_requests/${created.id}`)).checkout_url).toBeNull();

    stripe.declinePaymentMethod('pm_card_declined');
    const declined = await customerFor('pm_card_declined');
    const unpaid = await invoiceFor(declined.id, 900);
    const failing = ok<PaymentRequestResource>(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: declined.id, invoice_ids: [unpaid.id] }),
      201,
    );
    const failed = await waitForRequest(org, failing.id, (r) => r.status === 'failed', 'the declined charge to fail the request');
    const payment = ok<PaymentResource>(await call(org, 'GET', `/v1/payments/${failed.payment_ids[0]}`));
    expect(payment.status).toBe('failed');
    expect(payment.failure_reason).toBe('Your card was declined.');
    expect(ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${unpaid.id}`)).status).toBe('finalized');
  });

  it('without a saved method a Stripe checkout: its URL on the request and in payment_request.created, the customer sent back to a landing page', async () => {
    const org = await createOrganization(stack.app, { name: `Checkout ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
    const integration = ok<{ id: string }>(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { api_key: 'sk_test_request', webhook_secret: 'whsec_request', api_base_url: stripe.url },
      }),
      201,
    );
    const customer = ok<CustomerResource>(
      await call(org, 'POST', '/v1/customers', { external_id: `cus_${randomUUID()}`, currency: 'USD', payment_provider: 'provider_a' }),
      201,
    );
    const invoiceOf = (cents: number) => finalizedOneOff(stack.app, org, customer.id, cents);
    const sessionOf = (paymentId: string) => [...stripe.sessions.values()].find((s) => s.metadata?.payment_id === paymentId);

    // No success_redirect_url on the integration: the service's own landing page.
    const first = ok<PaymentRequestResource>(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id, invoice_ids: [(await invoiceOf(1300)).id] }),
      201,
    );
    const attempted = await waitForRequest(org, first.id, (r) => r.checkout_url !== null, 'the checkout');
    const paymentId = attempted.payment_ids[0]!;
    const session = sessionOf(paymentId)!;
    expect(attempted.checkout_url).toBe(session.url);
    expect([session.amount_total, session.success_url, session.cancel_url]).toEqual([
      1300,
      `${publicUrl}/v1/payments/${paymentId}/done`,
      `${publicUrl}/v1/payments/${paymentId}/done`,
    ]);
    // Announced right after the attempt is recorded on the request (which the wait above saw).
    const created = await eventually(
      async () =>
        (await stack.db.models.LifecycleEvent.findOne({ organization_id: org.id, type: 'payment_request.created' }).lean()) ?? undefined,
      10_000,
      'payment_request.created',
    );
    expect((created.object as { checkout_url: string }).checkout_url).toBe(session.url);

    const landing = await fetch(session.success_url);
    expect([landing.status, landing.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    expect(await landing.text()).toContain('Your payment is being processed');
    const completed = stripe.complete(session.id);
    expect(
      (
        await stripe.notify(
          `${publicUrl}/v1/payments/webhook/provider_a`,
          'whsec_request',
          stripe.event('checkout.session.completed', completed),
        )
      ).status,
    ).toBe(200);
    await waitForRequest(org, first.id, (r) => r.status === 'succeeded', 'the paid checkout to pay the request');
    expect(await (await fetch(session.success_url)).text()).toContain('Your payment was received');
    expect((await fetch(`${publicUrl}/v1/payments/${randomUUID()}/done`)).status).toBe(404);

    // The integration's success_redirect_url, when set, is where the customer goes back.
    ok(await call(org, 'PUT', `/v1/integrations/${integration.id}`, { settings: { success_redirect_url: 'https://shop.example/thanks' } }));
    const second = ok<PaymentRequestResource>(
      await call(org, 'POST', '/v1/payment_requests', { customer_id: customer.id, invoice_ids: [(await invoiceOf(700)).id] }),
      201,
    );
    const redirected = await waitForRequest(org, second.id, (r) => r.checkout_url !== null, 'the second checkout');
    expect(sessionOf(redirected.payment_ids[0]!)!.success_url).toBe('https://shop.example/thanks');
    expectError(
      await call(org, 'PUT', `/v1/integrations/${integration.id}`, { settings: { success_redirect_url: 'ftp://shop.example' } }),
      422,
      'validation_error',
    );
  });
});
