// Payments end to end (api-contract.md, Payments; issue 14): through the API, a worker on the run's
// Temporal server, and each provider's local fake reached by the production adapters through the
// integration's api_base_url. Notifications travel over real HTTP from the fakes to the API.
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../activities';
import type { CustomerResource } from '../../src/resources/customer';
import type { IntegrationResource } from '../../src/resources/integration';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentResource } from '../../src/resources/payment';
import { eventually, expectError, injectAs, ok, type Method } from '../support/http';
import { waitForEventTypes } from '../support/lifecycle-events';
import { startReceiver, type Receiver } from '../support/receiver';
import { startFakeAdyen, type FakeAdyen } from '../support/providers/fake-adyen';
import { startFakeGoCardless, type FakeGoCardless } from '../support/providers/fake-gocardless';
import { startFakeStripe, type FakeStripe } from '../support/providers/fake-stripe';
import { startFakeUcp, type FakeUcp } from '../support/providers/fake-ucp';
import { notifyManual } from '../support/providers/manual-notifier';
import { createOrganization, createTestStack, TEST_SECRETS_KEY, type TestOrganization, type TestStack } from '../support/stack';
import { bundleWorkflows } from '../support/temporal';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let apiUrl: string;
let stripe: FakeStripe;
let adyen: FakeAdyen;
let gocardless: FakeGoCardless;
let ucp: FakeUcp;

const STRIPE_SECRET = 'whsec_stripe_test_secret';
const ADYEN_HMAC = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const GC_SECRET = 'gc_webhook_secret';
const UCP_SECRET = 'ucp_webhook_secret';
const MANUAL_SECRET = 'manual_webhook_secret';

beforeAll(async () => {
  stack = await createTestStack();
  await stack.app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
  [worker, stripe, adyen, gocardless, ucp] = await Promise.all([
    startStackWorker(stack),
    startFakeStripe(),
    startFakeAdyen(),
    startFakeGoCardless(),
    startFakeUcp(),
  ]);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await Promise.all([stripe?.close(), adyen?.close(), gocardless?.close(), ucp?.close()]);
  await stack?.close();
});

const call = (org: TestOrganization, method: Method, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
  injectAs(stack.app, org, method, url, payload, headers);

function settingsFor(provider: string): Record<string, string> {
  switch (provider) {
    case 'provider_a':
      return { api_key: 'sk_test_123', webhook_secret: STRIPE_SECRET, api_base_url: stripe.url };
    case 'provider_b':
      return { api_key: 'adyen_key', merchant_account: 'TestMerchant', hmac_key: ADYEN_HMAC, api_base_url: adyen.url };
    case 'provider_c':
      return { access_token: 'gc_token', webhook_secret: GC_SECRET, api_base_url: gocardless.url };
    case 'provider_d':
      return { base_url: ucp.url, api_key: ucp.apiKey, webhook_secret: UCP_SECRET };
    default:
      return { webhook_secret: MANUAL_SECRET };
  }
}

async function newOrg(providers: string[] = ['provider_a', 'provider_b', 'provider_c', 'provider_d', 'manual']): Promise<TestOrganization> {
  const org = await createOrganization(stack.app, { name: `Payments ${randomUUID().slice(0, 6)}`, timezone: 'UTC' });
  for (const provider of providers) {
    ok(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: provider,
        settings: settingsFor(provider),
      }),
      201,
    );
  }
  return org;
}

async function newCustomer(org: TestOrganization, extra: Record<string, unknown> = {}): Promise<CustomerResource> {
  return ok<CustomerResource>(
    await call(org, 'POST', '/v1/customers', { external_id: `cus_${randomUUID()}`, currency: 'USD', email: 'buyer@example.com', ...extra }),
    201,
  );
}

/** A finalized one-off invoice of `cents` in the customer's currency. */
async function finalizedInvoice(org: TestOrganization, customerId: string, cents: number): Promise<InvoiceResource> {
  const draft = ok<InvoiceResource>(
    await call(org, 'POST', '/v1/invoices/one_off', {
      customer_id: customerId,
      line_items: [{ description: 'Setup', unit_price: String(cents) }],
    }),
    201,
  );
  if (draft.status === 'finalized') return draft;
  return ok<InvoiceResource>(await call(org, 'POST', `/v1/invoices/${draft.id}/finalize`));
}

interface Checkout {
  payment_id: string;
  checkout_url: string | null;
  provider: string;
  expires_at: string | null;
}

const checkout = (org: TestOrganization, invoiceId: string, provider: string) =>
  call(org, 'POST', '/v1/payments/checkout', {
    invoice_id: invoiceId,
    provider,
    success_url: 'https://shop.example/paid',
    cancel_url: 'https://shop.example/canceled',
  });

const getPayment = async (org: TestOrganization, id: string) => ok<PaymentResource>(await call(org, 'GET', `/v1/payments/${id}`));
const getInvoice = async (org: TestOrganization, id: string) => ok<InvoiceResource>(await call(org, 'GET', `/v1/invoices/${id}`));

async function waitForPayment(org: TestOrganization, id: string, status: PaymentResource['status']): Promise<PaymentResource> {
  return eventually(
    async () => {
      worker.assertAlive();
      const payment = await getPayment(org, id);
      return payment.status === status ? payment : undefined;
    },
    30_000,
    `payment ${id} to be ${status}`,
  );
}

async function waitForInvoicePaid(org: TestOrganization, id: string): Promise<InvoiceResource> {
  return eventually(
    async () => {
      const invoice = await getInvoice(org, id);
      return invoice.status === 'paid' ? invoice : undefined;
    },
    30_000,
    `invoice ${id} to be paid`,
  );
}

const settlementsOf = (invoiceId: string) =>
  stack.db.models.InvoiceSettlement.find({ invoice_id: invoiceId, settlement_type: 'payment' }).lean();

/**
 * With RECORD_HISTORIES=1, keeps a payment workflow's current run for the replay test
 * (test/workflows/replay.test.ts): `RECORD_HISTORIES=1 npx vitest run test/api/payments.test.ts`.
 */
async function recordHistory(name: string, paymentId: string): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  const handle = stack.temporal.client.workflow.getHandle(`payment/${paymentId}`);
  await handle.result();
  writeFileSync(join(__dirname, '../workflows/histories', `${name}.json`), JSON.stringify(await handle.fetchHistory(), null, 1));
}

const webhookUrl = (provider: string, organizationId?: string) =>
  `${apiUrl}/v1/payments/webhook/${provider}${organizationId ? `/${organizationId}` : ''}`;

describe('integrations', () => {
  it('stores secrets sealed, answers them masked, merges settings on update, one per provider', async () => {
    const org = await newOrg([]);
    const created = ok<IntegrationResource>(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { provider_a_api_key: 'sk_test_abcd1234', provider_a_webhook_secret: 'whsec_zyx9876' },
      }),
      201,
    );
    expect(created.settings).toEqual({ api_key: '••••1234', webhook_secret: '••••9876' });
    expect(created.status).toBe('active');
    const stored = await stack.db.models.Integration.findById(created.id).lean();
    expect(JSON.stringify(stored)).not.toContain('sk_test_abcd1234');
    expect(JSON.stringify(stored)).not.toContain('whsec_zyx9876');

    const updated = ok<IntegrationResource>(
      await call(org, 'PUT', `/v1/integrations/${created.id}`, { settings: { api_key: 'sk_test_new_5555' } }),
    );
    expect(updated.settings).toEqual({ api_key: '••••5555', webhook_secret: '••••9876' });

    expectError(
      await call(org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { api_key: 'k', webhook_secret: 's' },
      }),
      409,
      'already_exists',
    );
    const listed = ok<IntegrationResource[]>(await call(org, 'GET', '/v1/integrations?provider_type=provider_a'));
    expect(listed.map((i) => i.id)).toEqual([created.id]);
    ok(await call(org, 'DELETE', `/v1/integrations/${created.id}`));
    expectError(await call(org, 'GET', `/v1/integrations/${created.id}`), 404, 'not_found');
  });

  it('refuses a missing required setting, an unknown one, a bad hex key and an unknown provider (422)', async () => {
    const org = await newOrg([]);
    const post = (provider_type: string, settings: Record<string, unknown>) =>
      call(org, 'POST', '/v1/integrations', { integration_type: 'payment_provider', provider_type, settings });
    expect(expectError(await post('provider_a', { api_key: 'sk' }), 422, 'validation_error').errors).toEqual([
      { path: 'settings.webhook_secret', message: 'Required' },
    ]);
    expectError(await post('provider_a', { api_key: 'sk', webhook_secret: 'w', colour: 'blue' }), 422, 'validation_error');
    expectError(await post('provider_b', { api_key: 'k', merchant_account: 'M', hmac_key: 'not-hex' }), 422, 'validation_error');
    expectError(await post('provider_z', { api_key: 'k' }), 422, 'validation_error');
    expect(await stack.db.models.Integration.countDocuments({ organization_id: org.id })).toBe(0);
  });

  it('refuses api_base_url when the server does not allow overrides', async () => {
    const strict = await createTestStack({ allowProviderBaseUrl: false });
    try {
      const org = await createOrganization(strict.app, { name: 'Strict' });
      const res = await injectAs(strict.app, org, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { api_key: 'sk', webhook_secret: 'w', api_base_url: 'http://169.254.169.254' },
      });
      expect(expectError(res, 422, 'validation_error').errors[0]!.path).toBe('settings.api_base_url');
    } finally {
      await strict.close();
    }
  });
});

describe("customers' payment methods", () => {
  it('are settable on create and update, and refused for an unknown provider', async () => {
    const org = await newOrg([]);
    const customer = await newCustomer(org, { payment_provider: 'provider_a', provider_customer_id: 'cus_S1', payment_method_id: 'pm_1' });
    expect([customer.payment_provider, customer.provider_customer_id, customer.payment_method_id]).toEqual([
      'provider_a',
      'cus_S1',
      'pm_1',
    ]);
    const updated = ok<CustomerResource>(
      await call(org, 'PUT', `/v1/customers/${customer.id}`, { payment_provider: 'provider_c', payment_method_id: 'MD1' }),
    );
    expect([updated.payment_provider, updated.provider_customer_id, updated.payment_method_id]).toEqual(['provider_c', 'cus_S1', 'MD1']);
    expectError(await call(org, 'POST', '/v1/customers', { external_id: 'x', payment_provider: 'paypal' }), 422, 'validation_error');
  });
});

describe('checkout', () => {
  it('answers the same open payment again, refuses drafts, paid invoices and unconfigured providers', async () => {
    const org = await newOrg(['manual']);
    const customer = await newCustomer(org);
    const invoice = await finalizedInvoice(org, customer.id, 1999);
    const first = ok<Checkout>(await checkout(org, invoice.id, 'manual'));
    expect(first.checkout_url).toBeNull();
    expect(Date.parse(first.expires_at!) - Date.now()).toBeGreaterThan(29 * 86_400_000);
    const again = ok<Checkout>(await checkout(org, invoice.id, 'manual'));
    expect(again.payment_id).toBe(first.payment_id);
    expect(await stack.db.models.Payment.countDocuments({ invoice_id: invoice.id })).toBe(1);

    expectError(await checkout(org, invoice.id, 'provider_a'), 422, 'provider_not_configured');
    const draft = ok<InvoiceResource>(
      await call(org, 'POST', '/v1/invoices/one_off', { customer_id: customer.id, line_items: [{ description: 'x', unit_price: '10' }] }),
      201,
    );
    if (draft.status === 'draft') expectError(await checkout(org, draft.id, 'manual'), 400, 'invalid_state_transition');
    expectError(await checkout(org, randomUUID(), 'manual'), 404, 'invoice_not_found');
  });
});

describe('provider_a (Stripe)', () => {
  it('checkout → signed checkout.session.completed → succeeded, one settlement, invoice paid; the replay is a duplicate', async () => {
    const org = await newOrg(['provider_a']);
    const customer = await newCustomer(org);
    const invoice = await finalizedInvoice(org, customer.id, 2500);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_a'));
    const payment = await getPayment(org, answer.payment_id);
    const session = stripe.sessions.get(payment.provider_checkout_id!)!;
    expect(answer.checkout_url).toBe(session.url);
    expect(session.amount_total).toBe(2500);
    expect(session.metadata.payment_id).toBe(payment.id);

    const completed = stripe.complete(session.id);
    const event = stripe.event('checkout.session.completed', completed);
    const res = await stripe.notify(webhookUrl('provider_a'), STRIPE_SECRET, event);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ status: 'processed' });
    const succeeded = await waitForPayment(org, payment.id, 'succeeded');
    expect(succeeded.provider_payment_id).toBe(completed.payment_intent);
    // The fees' payment_status and invoice.paid are written right after the invoice's status.
    const paid = await eventually(async () => {
      const current = await getInvoice(org, invoice.id);
      return current.status === 'paid' && (current.fees ?? []).every((f) => f.payment_status === 'succeeded') ? current : undefined;
    }, 30_000);
    expect(paid.payment_status).toBe('succeeded');
    expect((paid.fees ?? []).every((f) => f.payment_status === 'succeeded')).toBe(true);

    const replay = await stripe.notify(webhookUrl('provider_a'), STRIPE_SECRET, event);
    expect(JSON.parse(replay.body)).toEqual({ status: 'duplicate' });
    expect(await settlementsOf(invoice.id)).toHaveLength(1);
    expect(await waitForEventTypes(stack.db, org.id, payment.id, ['payment.succeeded'])).toEqual(['payment.created', 'payment.succeeded']);
    await waitForEventTypes(stack.db, org.id, invoice.id, ['invoice.paid']);

    // A late failure after success changes nothing.
    const late = stripe.event('payment_intent.payment_failed', {
      id: completed.payment_intent,
      object: 'payment_intent',
      metadata: { payment_id: payment.id },
    });
    expect((await stripe.notify(webhookUrl('provider_a'), STRIPE_SECRET, late)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1000));
    expect((await getPayment(org, payment.id)).status).toBe('succeeded');

    await recordHistory('payment-checkout-notified-succeeded', payment.id);
    // Refund through Stripe's refund API.
    const refunded = ok<PaymentResource>(await call(org, 'POST', `/v1/payments/${payment.id}/refund`, {}));
    expect(refunded.status).toBe('refunded');
    expect([...stripe.refunds.values()].map((r) => [r.payment_intent, r.amount])).toEqual([[completed.payment_intent, 2500]]);
    expect((await getInvoice(org, invoice.id)).payment_status).toBe('refunded');
    expectError(await call(org, 'POST', `/v1/payments/${payment.id}/refund`, {}), 400, 'invalid_state_transition');
  });

  it('payment_intent.payment_failed → failed with the reason; forged, stale, wrong-secret and unsigned notifications are 401 and change nothing', async () => {
    const org = await newOrg(['provider_a']);
    const other = await newOrg([]);
    ok(
      await call(other, 'POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'provider_a',
        settings: { api_key: 'sk_other', webhook_secret: 'whsec_other_org', api_base_url: stripe.url },
      }),
      201,
    );
    const customer = await newCustomer(org);
    const invoice = await finalizedInvoice(org, customer.id, 700);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_a'));
    const failure = stripe.event('payment_intent.payment_failed', {
      id: 'pi_failed_1',
      object: 'payment_intent',
      metadata: { payment_id: answer.payment_id },
      last_payment_error: { message: 'Your card was declined.' },
    });
    const body = JSON.stringify(failure);
    const post = (headers: Record<string, string>, payload = body, url = webhookUrl('provider_a')) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: payload });

    const now = Math.floor(Date.now() / 1000);
    const refusals = [
      await post({ 'stripe-signature': `t=${now},v1=${'0'.repeat(64)}` }),
      await post(stripe.signedHeaders(body, 'whsec_wrong')),
      await post(stripe.signedHeaders(body, STRIPE_SECRET, now - 301)),
      await post({}),
      await post(stripe.signedHeaders(body, STRIPE_SECRET), body.slice(0, -5)),
      // Signed with another organization's secret: this organization's integration does not verify it.
      await post(stripe.signedHeaders(body, 'whsec_other_org')),
      await post(stripe.signedHeaders(body, 'whsec_other_org'), body, webhookUrl('provider_a', org.id)),
    ];
    for (const res of refusals) {
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('invalid_signature');
    }
    expect(await stack.db.models.ProviderEvent.countDocuments({ organization_id: { $in: [org.id, other.id] } })).toBe(0);
    expect((await getPayment(org, answer.payment_id)).status).toBe('pending');

    expect((await post(stripe.signedHeaders(body, STRIPE_SECRET), body, webhookUrl('provider_a', org.id))).status).toBe(200);
    const failed = await waitForPayment(org, answer.payment_id, 'failed');
    expect(failed.failure_reason).toBe('Your card was declined.');
    await eventually(async () => ((await getInvoice(org, invoice.id)).payment_status === 'failed' ? true : undefined), 10_000);
    // mark-paid is allowed from failed.
    const marked = ok<PaymentResource>(await call(org, 'POST', `/v1/payments/${answer.payment_id}/mark-paid`, { reference: 'WIRE-42' }));
    expect(marked.status).toBe('succeeded');
    expect(marked.reference).toBe('WIRE-42');
    await waitForInvoicePaid(org, invoice.id);
  });

  it('an unknown provider is 404; a notification about no payment is ignored', async () => {
    const org = await newOrg(['provider_a']);
    const res = await fetch(webhookUrl('provider_x', org.id), { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
    const event = stripe.event('checkout.session.completed', { id: 'cs_unknown', object: 'checkout.session', payment_status: 'paid' });
    const ignored = await stripe.notify(webhookUrl('provider_a', org.id), STRIPE_SECRET, event);
    expect(ignored.status).toBe(200);
    expect(JSON.parse(ignored.body)).toEqual({ status: 'ignored' });
  });

  it('a pending payment is canceled at expires_at on the customer test clock, and its session expired at Stripe', async () => {
    const org = await newOrg(['provider_a']);
    const clock = ok<{ id: string }>(await call(org, 'POST', '/v1/test_clocks', { frozen_time: '2030-01-10T10:00:00Z' }), 201);
    const customer = await newCustomer(org, { test_clock_id: clock.id });
    const invoice = await finalizedInvoice(org, customer.id, 900);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_a'));
    const payment = await getPayment(org, answer.payment_id);
    expect(stripe.sessions.get(payment.provider_checkout_id!)!.status).toBe('open');
    ok(await call(org, 'POST', `/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2030-01-12T10:00:00Z' }), 202);
    const canceled = await waitForPayment(org, payment.id, 'canceled');
    expect(canceled.status).toBe('canceled');
    await recordHistory('payment-test-clock-expiry', payment.id);
    expect(stripe.sessions.get(payment.provider_checkout_id!)!.status).toBe('expired');
    // payment.canceled is written right after the payment's status.
    await waitForEventTypes(stack.db, org.id, payment.id, ['payment.canceled']);
    await eventually(
      async () => (ok<{ status: string }>(await call(org, 'GET', `/v1/test_clocks/${clock.id}`)).status === 'ready' ? true : undefined),
      30_000,
      'the clock to be ready',
    );
    // A new checkout opens a new payment.
    const next = ok<Checkout>(await checkout(org, invoice.id, 'provider_a'));
    expect(next.payment_id).not.toBe(payment.id);
  });
});

describe('provider_b (Adyen)', () => {
  it('session → signed AUTHORISATION → succeeded and paid; a refund goes through Adyen', async () => {
    const org = await newOrg(['provider_b']);
    const customer = await newCustomer(org, { currency: 'EUR' });
    const invoice = await finalizedInvoice(org, customer.id, 1130);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_b'));
    const payment = await getPayment(org, answer.payment_id);
    const session = adyen.sessions.get(payment.provider_checkout_id!)!;
    expect(session.amount).toEqual({ value: 1130, currency: 'EUR' });
    expect(session.mode).toBe('hosted');
    expect(answer.checkout_url).toBe(session.url);

    const psp = adyen.authorise(session.id);
    const item = {
      eventCode: 'AUTHORISATION',
      success: 'true' as const,
      pspReference: psp,
      merchantReference: payment.id,
      amount: { value: 1130, currency: 'EUR' },
    };
    const res = await adyen.notify(webhookUrl('provider_b'), ADYEN_HMAC, [item]);
    expect(res).toEqual({ status: 200, body: '[accepted]' });
    const succeeded = await waitForPayment(org, payment.id, 'succeeded');
    expect(succeeded.provider_payment_id).toBe(psp);
    await waitForInvoicePaid(org, invoice.id);
    await adyen.notify(webhookUrl('provider_b'), ADYEN_HMAC, [item]);
    expect(await settlementsOf(invoice.id)).toHaveLength(1);

    const refunded = ok<PaymentResource>(await call(org, 'POST', `/v1/payments/${payment.id}/refund`, { amount_cents: 500 }));
    expect(refunded.status).toBe('refunded');
    expect(refunded.refund_amount_cents).toBe('500.0000');
    expect(adyen.refunds.map((r) => [r.paymentPspReference, r.amount.value])).toEqual([[psp, 500]]);
  });

  it('a refused AUTHORISATION fails the payment; a forged item is 401', async () => {
    const org = await newOrg(['provider_b']);
    const customer = await newCustomer(org, { currency: 'EUR' });
    const invoice = await finalizedInvoice(org, customer.id, 400);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_b'));
    const item = {
      eventCode: 'AUTHORISATION',
      success: 'false' as const,
      pspReference: '8815000000000001',
      merchantReference: answer.payment_id,
      reason: 'Refused',
      amount: { value: 400, currency: 'EUR' },
    };
    const forged = await adyen.notify(webhookUrl('provider_b'), '00'.repeat(32), [item]);
    expect(forged.status).toBe(401);
    expect((await getPayment(org, answer.payment_id)).status).toBe('pending');
    expect((await adyen.notify(webhookUrl('provider_b'), ADYEN_HMAC, [item])).status).toBe(200);
    expect((await waitForPayment(org, answer.payment_id, 'failed')).failure_reason).toBe('Refused');
  });
});

describe('provider_c (GoCardless)', () => {
  it('redirect flow → return completes it, pays on the mandate, saves the mandate → confirmed → succeeded', async () => {
    const org = await newOrg(['provider_c']);
    const customer = await newCustomer(org, { currency: 'GBP' });
    const invoice = await finalizedInvoice(org, customer.id, 1999);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_c'));
    const payment = await getPayment(org, answer.payment_id);
    const flow = gocardless.flows.get(payment.provider_checkout_id!)!;
    expect(answer.checkout_url).toBe(flow.redirect_url);
    expect(flow.success_redirect_url).toBe(`http://127.0.0.1:3000/v1/payments/${payment.id}/return`);

    const back = new URL(gocardless.customerApproves(flow.id));
    const wrong = await stack.app.inject({ method: 'GET', url: `/v1/payments/${payment.id}/return?redirect_flow_id=RE000WRONG` });
    expect(wrong.statusCode).toBe(400);
    const returned = await stack.app.inject({ method: 'GET', url: `/v1/payments/${payment.id}/return${back.search}` });
    expect(returned.statusCode).toBe(302);
    expect(returned.headers.location).toBe('https://shop.example/paid');
    const processing = await getPayment(org, payment.id);
    expect(processing.status).toBe('processing');
    const gcPayment = gocardless.payments.get(processing.provider_payment_id!)!;
    expect(gcPayment.amount).toBe(1999);
    const savedCustomer = ok<CustomerResource>(await call(org, 'GET', `/v1/customers/${customer.id}`));
    expect(savedCustomer.payment_provider).toBe('provider_c');
    expect(savedCustomer.payment_method_id).toBe(gcPayment.links.mandate);

    const confirmed = gocardless.event({ resource_type: 'payments', action: 'confirmed', links: { payment: gcPayment.id } });
    const other = gocardless.event({ resource_type: 'payments', action: 'created', links: { payment: gcPayment.id } });
    const res = await gocardless.notify(webhookUrl('provider_c'), GC_SECRET, [other, confirmed]);
    expect(res.status).toBe(200);
    await waitForPayment(org, payment.id, 'succeeded');
    await waitForInvoicePaid(org, invoice.id);
    expect(await settlementsOf(invoice.id)).toHaveLength(1);
  });
});

describe('provider_d (UCP)', () => {
  it('checkout session → signed completed notification → succeeded; canceled after expiry otherwise', async () => {
    const org = await newOrg(['provider_d']);
    const customer = await newCustomer(org);
    const invoice = await finalizedInvoice(org, customer.id, 1500);
    const answer = ok<Checkout>(await checkout(org, invoice.id, 'provider_d'));
    const payment = await getPayment(org, answer.payment_id);
    const session = ucp.sessions.get(payment.provider_checkout_id!)!;
    expect(session.line_items[0]!.item.price).toBe(1500);
    ucp.complete(session.id);
    const res = await ucp.notify(webhookUrl('provider_d'), UCP_SECRET, ucp.eventFor(session.id), { prefixed: true });
    expect(res.status).toBe(200);
    await waitForPayment(org, payment.id, 'succeeded');
    await waitForInvoicePaid(org, invoice.id);
  });
});

/** How each provider's customer pays or fails, and how many refund calls its fake received. */
interface ProviderDriver {
  currency: string;
  succeed(org: TestOrganization, payment: PaymentResource): Promise<{ status: number }>;
  fail(org: TestOrganization, payment: PaymentResource): Promise<{ status: number }>;
  refundCalls(): number;
}

/** provider_c: the customer completes the redirect flow and comes back; the payment is made on the mandate. */
async function returnFromFlow(org: TestOrganization, payment: PaymentResource): Promise<PaymentResource> {
  const back = new URL(gocardless.customerApproves(payment.provider_checkout_id!));
  const res = await stack.app.inject({ method: 'GET', url: `/v1/payments/${payment.id}/return${back.search}` });
  expect(res.statusCode).toBe(302);
  return getPayment(org, payment.id);
}

const drivers: Record<string, ProviderDriver> = {
  provider_a: {
    currency: 'USD',
    succeed: (_org, p) =>
      stripe.notify(
        webhookUrl('provider_a'),
        STRIPE_SECRET,
        stripe.event('checkout.session.completed', stripe.complete(p.provider_checkout_id!)),
      ),
    fail: (_org, p) =>
      stripe.notify(
        webhookUrl('provider_a'),
        STRIPE_SECRET,
        stripe.event('payment_intent.payment_failed', {
          id: `pi_f_${p.id}`,
          object: 'payment_intent',
          metadata: { payment_id: p.id },
          last_payment_error: { message: 'declined' },
        }),
      ),
    refundCalls: () => stripe.refunds.size,
  },
  provider_b: {
    currency: 'EUR',
    succeed: (_org, p) =>
      adyen.notify(webhookUrl('provider_b'), ADYEN_HMAC, [
        {
          eventCode: 'AUTHORISATION',
          success: 'true',
          pspReference: adyen.authorise(p.provider_checkout_id!),
          merchantReference: p.id,
          amount: { value: Number(p.amount), currency: p.currency },
        },
      ]),
    fail: (_org, p) =>
      adyen.notify(webhookUrl('provider_b'), ADYEN_HMAC, [
        {
          eventCode: 'AUTHORISATION',
          success: 'false',
          pspReference: '8816000000000009',
          merchantReference: p.id,
          reason: 'Refused',
          amount: { value: Number(p.amount), currency: p.currency },
        },
      ]),
    refundCalls: () => adyen.refunds.length,
  },
  provider_c: {
    currency: 'GBP',
    succeed: async (org, p) => {
      const after = await returnFromFlow(org, p);
      return gocardless.notify(webhookUrl('provider_c'), GC_SECRET, [
        gocardless.event({ resource_type: 'payments', action: 'confirmed', links: { payment: after.provider_payment_id! } }),
      ]);
    },
    fail: async (org, p) => {
      const after = await returnFromFlow(org, p);
      return gocardless.notify(webhookUrl('provider_c'), GC_SECRET, [
        gocardless.event({ resource_type: 'payments', action: 'failed', links: { payment: after.provider_payment_id! } }),
      ]);
    },
    refundCalls: () => gocardless.refunds.size,
  },
  provider_d: {
    currency: 'USD',
    succeed: (_org, p) => {
      ucp.complete(p.provider_checkout_id!);
      return ucp.notify(webhookUrl('provider_d'), UCP_SECRET, ucp.eventFor(p.provider_checkout_id!));
    },
    fail: (_org, p) =>
      ucp.notify(webhookUrl('provider_d'), UCP_SECRET, {
        type: 'checkout.failed',
        data: { id: p.provider_checkout_id, status: 'failed', metadata: { payment_id: p.id } },
      }),
    refundCalls: () => ucp.refunds.length,
  },
  manual: {
    currency: 'USD',
    succeed: (_org, p) => notifyManual(webhookUrl('manual'), MANUAL_SECRET, { payment_id: p.id, status: 'succeeded' }),
    fail: (_org, p) => notifyManual(webhookUrl('manual'), MANUAL_SECRET, { payment_id: p.id, status: 'failed', failure_reason: 'bounced' }),
    // Offline payments are refunded offline: nothing to call.
    refundCalls: () => 0,
  },
};

describe.each(Object.keys(drivers))('%s end to end', (provider) => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => receiver?.close());

  it('checkout → signed success → succeeded, one settlement, invoice paid, payment.succeeded and invoice.paid delivered; refund through the provider; a failure → failed', async () => {
    const driver = drivers[provider]!;
    const org = await newOrg([provider]);
    ok(await call(org, 'POST', '/v1/webhook_endpoints', { url: receiver.url(`/${provider}`) }), 201);
    const customer = await newCustomer(org, { currency: driver.currency });
    const invoice = await finalizedInvoice(org, customer.id, 1999);
    const answer = ok<Checkout>(await checkout(org, invoice.id, provider));
    const payment = await getPayment(org, answer.payment_id);
    expect(payment.amount).toBe('1999.0000');

    expect((await driver.succeed(org, payment)).status).toBe(200);
    await waitForPayment(org, payment.id, 'succeeded');
    const paid = await waitForInvoicePaid(org, invoice.id);
    expect(paid.payment_status).toBe('succeeded');
    // The same provider event again (the stored one is found): still one settlement.
    const stored = await stack.db.models.ProviderEvent.find({ payment_id: payment.id }).lean();
    expect(stored.length).toBeGreaterThanOrEqual(1);
    expect(await settlementsOf(invoice.id)).toHaveLength(1);
    const delivered = await eventually(
      async () => {
        const types = receiver.requests(`/${provider}`).map((r) => (JSON.parse(r.body) as { type: string }).type);
        return types.includes('payment.succeeded') && types.includes('invoice.paid') ? types : undefined;
      },
      30_000,
      'payment.succeeded and invoice.paid delivered',
    );
    expect(delivered).toEqual(expect.arrayContaining(['payment.created', 'payment.succeeded', 'invoice.paid']));

    const refundsBefore = driver.refundCalls();
    const refunded = ok<PaymentResource>(await call(org, 'POST', `/v1/payments/${payment.id}/refund`, {}));
    expect(refunded.status).toBe('refunded');
    expect(driver.refundCalls() - refundsBefore).toBe(provider === 'manual' ? 0 : 1);

    const second = await finalizedInvoice(org, customer.id, 500);
    const failing = await getPayment(org, ok<Checkout>(await checkout(org, second.id, provider)).payment_id);
    expect((await driver.fail(org, failing)).status).toBe(200);
    await waitForPayment(org, failing.id, 'failed');
    expect(await settlementsOf(second.id)).toHaveLength(0);
  });
});

describe('a provider that refuses', () => {
  it('a refused checkout is 502 provider_error and a failed payment; the next checkout opens a new one', async () => {
    const org = await newOrg(['provider_d']);
    const customer = await newCustomer(org);
    const invoice = await finalizedInvoice(org, customer.id, 640);
    ucp.failNext(400);
    expectError(await checkout(org, invoice.id, 'provider_d'), 502, 'provider_error');
    const [failed] = ok<PaymentResource[]>(await call(org, 'GET', `/v1/payments?invoice_id=${invoice.id}`));
    expect(failed!.status).toBe('failed');
    expect(failed!.failure_reason).toBeTruthy();
    const next = ok<Checkout>(await checkout(org, invoice.id, 'provider_d'));
    expect(next.payment_id).not.toBe(failed!.id);
    expect(next.checkout_url).toMatch(/^http/);
  });
});

describe('manual', () => {
  it('a signed notification pays; mark-paid, refund and delete follow the state table', async () => {
    const org = await newOrg(['manual']);
    const customer = await newCustomer(org);
    const invoice = await finalizedInvoice(org, customer.id, 1200);
    const first = ok<Checkout>(await checkout(org, invoice.id, 'manual'));
    const forged = await notifyManual(webhookUrl('manual'), 'not-the-secret', { payment_id: first.payment_id, status: 'succeeded' });
    expect(forged.status).toBe(401);
    const res = await notifyManual(webhookUrl('manual'), MANUAL_SECRET, { payment_id: first.payment_id, status: 'succeeded' });
    expect(res.status).toBe(200);
    await waitForPayment(org, first.payment_id, 'succeeded');
    await waitForInvoicePaid(org, invoice.id);
    expectError(await call(org, 'DELETE', `/v1/payments/${first.payment_id}`), 400, 'invalid_state_transition');
    expectError(await call(org, 'POST', `/v1/payments/${first.payment_id}/mark-paid`, {}), 400, 'invalid_state_transition');

    const second = await finalizedInvoice(org, customer.id, 300);
    const pending = ok<Checkout>(await checkout(org, second.id, 'manual'));
    expectError(await call(org, 'POST', `/v1/payments/${pending.payment_id}/refund`, {}), 400, 'invalid_state_transition');
    const deleted = ok<PaymentResource>(await call(org, 'DELETE', `/v1/payments/${pending.payment_id}`));
    expect(deleted.status).toBe('canceled');
    expectError(await call(org, 'GET', `/v1/payments/${pending.payment_id}`), 404, 'not_found');

    const list = ok<PaymentResource[]>(await call(org, 'GET', `/v1/payments?invoice_id=${invoice.id}&status=succeeded`));
    expect(list.map((p) => p.id)).toEqual([first.payment_id]);
  });

  it('exactly one settlement when no worker runs at the notification and the one that takes over dies after the write', async () => {
    // A stack of its own, whose worker starts only after the notifications were stored and
    // signalled; its first attempt at the step dies after writing, as a killed worker would.
    const own = await createTestStack();
    await own.app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(own.app.server.address() as AddressInfo).port}/v1/payments/webhook/manual`;
    const org = await createOrganization(own.app, { name: 'Crash' });
    const as = (method: Method, path: string, payload?: unknown) => injectAs(own.app, org, method, path, payload);
    ok(
      await as('POST', '/v1/integrations', {
        integration_type: 'payment_provider',
        provider_type: 'manual',
        settings: { webhook_secret: MANUAL_SECRET },
      }),
      201,
    );
    const customer = ok<CustomerResource>(await as('POST', '/v1/customers', { external_id: 'crash', currency: 'USD' }), 201);
    const invoice = ok<InvoiceResource>(
      await as('POST', '/v1/invoices/one_off', { customer_id: customer.id, line_items: [{ description: 'x', unit_price: '800' }] }),
      201,
    );
    let crashed = 0;
    const real = createActivities({ db: own.db, temporal: own.temporal, secretsKey: TEST_SECRETS_KEY });
    const activities = {
      ...real,
      applyProviderNotificationActivity: async (...args: Parameters<typeof real.applyProviderNotificationActivity>) => {
        const result = await real.applyProviderNotificationActivity(...args);
        if (crashed++ === 0) throw new Error('the worker died after the write');
        return result;
      },
    };
    const [connection, bundle] = await Promise.all([NativeConnection.connect({ address: inject('temporalAddress') }), bundleWorkflows()]);
    const first = await Worker.create({ connection, taskQueue: own.taskQueue, workflowBundle: bundle, activities: real });
    let release: () => void = () => undefined;
    const running = first.runUntil(new Promise<void>((resolve) => (release = resolve)));
    try {
      const finalized = ok<InvoiceResource>(await as('POST', `/v1/invoices/${invoice.id}/finalize`));
      const answer = ok<Checkout>(
        await as('POST', '/v1/payments/checkout', {
          invoice_id: finalized.id,
          provider: 'manual',
          success_url: 'https://a.example',
          cancel_url: 'https://b.example',
        }),
      );
      release();
      await running;
      const body = { payment_id: answer.payment_id, status: 'succeeded' };
      expect((await notifyManual(url, MANUAL_SECRET, body)).status).toBe(200);
      expect((await notifyManual(url, MANUAL_SECRET, body)).body).toBe('{"status":"duplicate"}');
      expect((await own.db.models.Payment.findById(answer.payment_id).lean())!.status).toBe('pending');

      const second = await Worker.create({ connection, taskQueue: own.taskQueue, workflowBundle: bundle, activities });
      await second.runUntil(
        eventually(
          async () => ((await own.db.models.Invoice.findById(invoice.id).lean())!.status === 'paid' ? true : undefined),
          30_000,
          'the invoice to be paid',
        ),
      );
      expect(crashed).toBeGreaterThanOrEqual(2);
      expect((await own.db.models.Payment.findById(answer.payment_id).lean())!.status).toBe('succeeded');
      expect(await own.db.models.InvoiceSettlement.countDocuments({ invoice_id: invoice.id, settlement_type: 'payment' })).toBe(1);
    } finally {
      release();
      await connection.close().catch(() => undefined);
      await own.close();
    }
  }, 240_000);
});

describe('OpenAPI document', () => {
  it('documents every payments and integrations route with its schemas', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' })).json<{
      paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, unknown> };
    }>();
    const methods = (path: string) => Object.keys(doc.paths[path] ?? {}).sort();
    expect(methods('/v1/integrations')).toEqual(['get', 'post']);
    expect(methods('/v1/integrations/{id}')).toEqual(['delete', 'get', 'put']);
    expect(methods('/v1/payments')).toEqual(['get']);
    expect(methods('/v1/payments/{id}')).toEqual(['delete', 'get']);
    expect(methods('/v1/payments/checkout')).toEqual(['post']);
    expect(methods('/v1/payments/{id}/mark-paid')).toEqual(['post']);
    expect(methods('/v1/payments/{id}/refund')).toEqual(['post']);
    expect(methods('/v1/payments/{id}/return')).toEqual(['get']);
    expect(methods('/v1/payments/webhook/{provider}')).toEqual(['post']);
    expect(methods('/v1/payments/webhook/{provider}/{organization_id}')).toEqual(['post']);
    expect(doc.paths['/v1/payments/checkout']!.post!.requestBody).toBeDefined();
    expect(Object.keys(doc.paths['/v1/payments/checkout']!.post!.responses)).toEqual(expect.arrayContaining(['200', '400', '422', '502']));
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['Payment', 'Integration', 'Checkout']));
  });
});
