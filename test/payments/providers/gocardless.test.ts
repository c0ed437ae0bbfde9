import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gocardlessAdapter } from '../../../src/payments/providers/gocardless';
import {
  InvalidProviderSignature,
  ProviderRefused,
  type CheckoutRequest,
  type ProviderContext,
  type RawHeaders,
  type RefundRequest,
  type SavedMethodCharge,
} from '../../../src/payments/providers/types';
import { startFakeGoCardless, type FakeGoCardless, type GoCardlessEvent } from '../../support/providers/fake-gocardless';
import { startReceiver } from '../../support/receiver';

const now = new Date('2026-03-01T10:00:00.000Z');
const completeRedirect = gocardlessAdapter.completeRedirect!.bind(gocardlessAdapter);
const chargeSavedMethod = gocardlessAdapter.chargeSavedMethod!.bind(gocardlessAdapter);

let fake: FakeGoCardless;
let ctx: ProviderContext;
let sequence = 0;

beforeAll(async () => {
  fake = await startFakeGoCardless();
  ctx = {
    settings: { access_token: 'sandbox_token_1', webhook_secret: 'gc_secret', environment: 'sandbox' },
    apiBaseUrl: fake.url,
  };
});

afterAll(async () => {
  await fake.close();
});

function checkoutRequest(overrides: Partial<CheckoutRequest> = {}): CheckoutRequest {
  sequence += 1;
  const paymentId = `00000000-0000-0000-0000-${String(sequence).padStart(12, '0')}`;
  return {
    paymentId,
    invoiceId: `inv-${sequence}`,
    invoiceNumber: `INV-${sequence}`,
    amountMinor: 1999,
    currency: 'GBP',
    successUrl: 'https://merchant.test/paid',
    cancelUrl: 'https://merchant.test/cancelled',
    returnUrl: `https://billing.test/v1/payments/${paymentId}/return`,
    customerEmail: 'ada@example.com',
    idempotencyKey: `checkout-${paymentId}`,
    now,
    ...overrides,
  };
}

/** A request straight to the fake, to read the answer GoCardless's API would give (not through the SDK). */
async function postToFake(path: string, body: unknown, idempotencyKey?: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${fake.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: 'Bearer sandbox_token_1',
      'content-type': 'application/json',
      ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

function lastRequest(method: string, path: string) {
  const found = fake.requests.filter((r) => r.method === method && r.path === path).at(-1);
  if (!found) throw new Error(`the fake received no ${method} ${path}`);
  return found;
}

/** A checkout whose redirect flow is then completed, as the return route does it. */
async function completedPayment(request = checkoutRequest()) {
  const checkout = await gocardlessAdapter.createCheckout(ctx, request);
  const completion = {
    flowId: checkout.providerCheckoutId,
    sessionToken: request.paymentId,
    paymentId: request.paymentId,
    amountMinor: request.amountMinor,
    currency: request.currency,
    idempotencyKey: `collect-${request.paymentId}`,
  };
  return { request, checkout, completion, result: await completeRedirect(ctx, completion) };
}

describe('gocardless adapter: redirect flow checkout', () => {
  it('creates a redirect flow carrying our payment as its session and metadata', async () => {
    const request = checkoutRequest();
    const result = await gocardlessAdapter.createCheckout(ctx, request);

    expect(result.providerCheckoutId).toMatch(/^RE[0-9A-F]+$/);
    expect(result.checkoutUrl).toBe(`https://pay-sandbox.gocardless.com/flow/${result.providerCheckoutId}`);
    expect(result.expiresAt.toISOString()).toBe('2026-03-01T11:00:00.000Z');

    const sent = lastRequest('POST', '/redirect_flows');
    expect(sent.headers.authorization).toBe('Bearer sandbox_token_1');
    expect(sent.headers['idempotency-key']).toBe(request.idempotencyKey);
    expect(sent.headers['gocardless-version']).toBe('2015-07-06');
    // The SDK still addresses GoCardless; only the connection goes to the fake.
    expect(sent.headers.host).toBe('api-sandbox.gocardless.com');
    expect(sent.body).toEqual({
      redirect_flows: {
        description: `Invoice ${request.invoiceNumber}`,
        session_token: request.paymentId,
        success_redirect_url: request.returnUrl,
        prefilled_customer: { email: 'ada@example.com' },
        scheme: 'bacs',
        metadata: { payment_id: request.paymentId, invoice_id: request.invoiceId },
      },
    });
    expect(fake.flows.get(result.providerCheckoutId)?.session_token).toBe(request.paymentId);
  });

  it('reaches the live host when the environment is live', async () => {
    await gocardlessAdapter.createCheckout({ ...ctx, settings: { ...ctx.settings, environment: 'live' } }, checkoutRequest());
    expect(lastRequest('POST', '/redirect_flows').headers.host).toBe('api.gocardless.com');
  });

  it.each([
    ['EUR', 'sepa_core'],
    ['USD', undefined],
    ['SEK', undefined],
  ])('chooses the scheme for %s: %s', async (currency, scheme) => {
    await gocardlessAdapter.createCheckout(ctx, checkoutRequest({ currency }));
    const body = lastRequest('POST', '/redirect_flows').body as { redirect_flows: Record<string, unknown> };
    expect(body.redirect_flows.scheme).toBe(scheme);
  });

  it('leaves out the email and description it does not know', async () => {
    await gocardlessAdapter.createCheckout(ctx, checkoutRequest({ customerEmail: null, invoiceNumber: null }));
    const body = lastRequest('POST', '/redirect_flows').body as { redirect_flows: Record<string, unknown> };
    expect(body.redirect_flows).not.toHaveProperty('prefilled_customer');
    expect(body.redirect_flows).not.toHaveProperty('description');
  });

  it('refuses a currency GoCardless does not collect before any call', async () => {
    const before = fake.requests.length;
    await expect(gocardlessAdapter.createCheckout(ctx, checkoutRequest({ currency: 'JPY' }))).rejects.toThrow(ProviderRefused);
    expect(fake.requests.length).toBe(before);
  });

  it('answers the same flow to a retried creation with the same idempotency key', async () => {
    const request = checkoutRequest();
    const first = await gocardlessAdapter.createCheckout(ctx, request);
    const flowsBefore = fake.flows.size;
    const again = await gocardlessAdapter.createCheckout(ctx, request);

    expect(again.providerCheckoutId).toBe(first.providerCheckoutId);
    expect(again.checkoutUrl).toBe(first.checkoutUrl);
    expect(fake.flows.size).toBe(flowsBefore);
    expect(lastRequest('GET', `/redirect_flows/${first.providerCheckoutId}`)).toBeDefined();
  });

  it('refuses for good when the access token is missing', async () => {
    await expect(
      gocardlessAdapter.createCheckout({ ...ctx, settings: { webhook_secret: 'gc_secret' } }, checkoutRequest()),
    ).rejects.toThrow(ProviderRefused);
  });

  it('has nothing to expire: GoCardless lapses unfinished flows itself', async () => {
    const before = fake.requests.length;
    await gocardlessAdapter.expireCheckout(ctx, 'RE123');
    expect(fake.requests.length).toBe(before);
  });
});

describe('gocardless adapter: completing the redirect flow', () => {
  it('completes the flow and creates one payment of the amount on the new mandate', async () => {
    const { request, checkout, result } = await completedPayment();

    expect(result.mandateId).toMatch(/^MD/);
    expect(result.providerCustomerId).toMatch(/^CU/);
    expect(result.providerPaymentId).toMatch(/^PM/);
    expect(fake.mandates.has(result.mandateId)).toBe(true);
    expect(fake.flows.get(checkout.providerCheckoutId)?.links.mandate).toBe(result.mandateId);

    expect(lastRequest('POST', `/redirect_flows/${checkout.providerCheckoutId}/actions/complete`).body).toEqual({
      data: { session_token: request.paymentId },
    });
    const sent = lastRequest('POST', '/payments');
    expect(sent.headers['idempotency-key']).toBe(`collect-${request.paymentId}`);
    expect(sent.body).toEqual({
      payments: {
        amount: 1999,
        currency: 'GBP',
        links: { mandate: result.mandateId },
        metadata: { payment_id: request.paymentId },
      },
    });
    expect(fake.payments.get(result.providerPaymentId)).toMatchObject({
      amount: 1999,
      currency: 'GBP',
      status: 'pending_submission',
      links: { mandate: result.mandateId },
    });
  });

  it('answers the same mandate and payment to a retried completion, and collects once', async () => {
    const { completion, result } = await completedPayment();
    const paymentsBefore = fake.payments.size;

    const again = await completeRedirect(ctx, completion);

    expect(again).toEqual(result);
    expect(fake.payments.size).toBe(paymentsBefore);
    const collected = [...fake.payments.values()].filter((p) => p.metadata.payment_id === completion.paymentId);
    expect(collected).toHaveLength(1);
    // The retry read the completed flow, then followed the idempotency conflict to the first payment.
    expect(lastRequest('GET', `/redirect_flows/${completion.flowId}`)).toBeDefined();
    expect(lastRequest('GET', `/payments/${result.providerPaymentId}`)).toBeDefined();
  });

  it('refuses for good a session token that is not the flow’s', async () => {
    const request = checkoutRequest();
    const checkout = await gocardlessAdapter.createCheckout(ctx, request);
    const refusal = completeRedirect(ctx, {
      flowId: checkout.providerCheckoutId,
      sessionToken: 'someone-else',
      paymentId: request.paymentId,
      amountMinor: 1999,
      currency: 'GBP',
      idempotencyKey: `collect-${request.paymentId}`,
    });
    await expect(refusal).rejects.toThrow(ProviderRefused);
    await expect(refusal).rejects.toMatchObject({ status: 422 });
    expect(fake.flows.get(checkout.providerCheckoutId)?.links.mandate).toBeUndefined();
  });

  it('refuses an unknown flow', async () => {
    const refusal = completeRedirect(ctx, {
      flowId: 'RE000NOSUCHFLOW',
      sessionToken: 'x',
      paymentId: 'x',
      amountMinor: 1999,
      currency: 'GBP',
      idempotencyKey: 'collect-unknown',
    });
    await expect(refusal).rejects.toMatchObject({ name: 'ProviderRefused', status: 404 });
  });

  it('cannot complete a flow the customer has not finished', async () => {
    const strict = await startFakeGoCardless({ requireCustomerApproval: true });
    try {
      const strictCtx = { ...ctx, apiBaseUrl: strict.url };
      const request = checkoutRequest();
      const checkout = await gocardlessAdapter.createCheckout(strictCtx, request);
      const completion = {
        flowId: checkout.providerCheckoutId,
        sessionToken: request.paymentId,
        paymentId: request.paymentId,
        amountMinor: 1999,
        currency: 'GBP',
        idempotencyKey: `collect-${request.paymentId}`,
      };
      await expect(completeRedirect(strictCtx, completion)).rejects.toThrow(/redirect_flow_incomplete/);

      const back = strict.customerApproves(checkout.providerCheckoutId);
      expect(back).toBe(`${request.returnUrl}?redirect_flow_id=${checkout.providerCheckoutId}`);
      const result = await completeRedirect(strictCtx, completion);
      expect(strict.payments.get(result.providerPaymentId)?.amount).toBe(1999);
    } finally {
      await strict.close();
    }
  });
});

describe('gocardless adapter: charging a saved mandate', () => {
  /** A charge on the mandate a completed checkout left behind. */
  async function mandateCharge(overrides: Partial<SavedMethodCharge> = {}): Promise<SavedMethodCharge> {
    const { result } = await completedPayment();
    sequence += 1;
    return {
      paymentId: `11111111-0000-0000-0000-${String(sequence).padStart(12, '0')}`,
      amountMinor: 4250,
      currency: 'gbp',
      providerCustomerId: result.providerCustomerId,
      paymentMethodId: result.mandateId,
      description: 'Invoice INV-42',
      idempotencyKey: `charge-${sequence}`,
      ...overrides,
    };
  }

  it('creates a payment of the amount on the mandate, processing until GoCardless confirms it', async () => {
    const charge = await mandateCharge();
    const result = await chargeSavedMethod(ctx, charge);

    expect(result).toEqual({ providerPaymentId: expect.stringMatching(/^PM[0-9A-F]+$/), outcome: 'processing', failureReason: null });
    const sent = lastRequest('POST', '/payments');
    expect(sent.headers['idempotency-key']).toBe(charge.idempotencyKey);
    expect(sent.body).toEqual({
      payments: {
        amount: 4250,
        currency: 'GBP',
        links: { mandate: charge.paymentMethodId },
        description: 'Invoice INV-42',
        metadata: { payment_id: charge.paymentId },
      },
    });
    expect(fake.payments.get(result.providerPaymentId!)).toMatchObject({
      amount: 4250,
      currency: 'GBP',
      status: 'pending_submission',
      links: { mandate: charge.paymentMethodId },
    });
  });

  it('collects once when a retried activity sends the same idempotency key', async () => {
    const charge = await mandateCharge();
    const first = await chargeSavedMethod(ctx, charge);
    const retried = await chargeSavedMethod(ctx, charge);

    expect(retried).toEqual(first);
    expect([...fake.payments.values()].filter((p) => p.metadata.payment_id === charge.paymentId)).toHaveLength(1);
  });

  it.each(['cancelled', 'failed', 'expired'])(
    'answers a %s mandate as a failed charge with a reason and the mandate’s id, never an empty id',
    async (status) => {
      const charge = await mandateCharge();
      fake.setMandateStatus(charge.paymentMethodId, status);
      const paymentsBefore = fake.payments.size;

      const result = await chargeSavedMethod(ctx, charge);

      expect(result).toEqual({
        providerPaymentId: null,
        outcome: 'failed',
        failureReason: `GoCardless mandate ${charge.paymentMethodId} can no longer be collected on: Mandate is failed, cancelled or expired`,
      });
      expect(fake.payments.size).toBe(paymentsBefore);
      expect(lastRequest('POST', '/payments').body).toMatchObject({ payments: { links: { mandate: charge.paymentMethodId } } });
      // GoCardless created nothing under the key: a retried activity gets the same failed charge.
      expect(await chargeSavedMethod(ctx, charge)).toEqual(result);
      expect(fake.payments.size).toBe(paymentsBefore);
    },
  );

  it('(fake) refuses a payment on an inactive mandate with GoCardless’s 422 error body', async () => {
    const charge = await mandateCharge();
    fake.cancelMandate(charge.paymentMethodId);
    const answer = await postToFake('/payments', {
      payments: { amount: 100, currency: 'GBP', links: { mandate: charge.paymentMethodId } },
    });
    expect(answer).toMatchObject({
      status: 422,
      body: {
        error: {
          type: 'invalid_state',
          code: 422,
          message: 'Mandate is failed, cancelled or expired',
          errors: [{ reason: 'mandate_is_inactive', message: 'Mandate is failed, cancelled or expired' }],
        },
      },
    });
  });

  it('refuses for good an unknown mandate and an amount GoCardless rejects', async () => {
    const unknown = chargeSavedMethod(ctx, await mandateCharge({ paymentMethodId: 'MD000NOSUCHMANDATE' }));
    await expect(unknown).rejects.toThrow(ProviderRefused);
    await expect(unknown).rejects.toMatchObject({ status: 422 });

    await expect(chargeSavedMethod(ctx, await mandateCharge({ amountMinor: 0 }))).rejects.toMatchObject({
      name: 'ProviderRefused',
      status: 422,
    });
  });

  it('refuses before any call a currency GoCardless does not collect, or a missing access token', async () => {
    const charge = await mandateCharge();
    const before = fake.requests.length;
    await expect(chargeSavedMethod(ctx, { ...charge, currency: 'JPY' })).rejects.toThrow(ProviderRefused);
    await expect(chargeSavedMethod({ ...ctx, settings: { webhook_secret: 'gc_secret' } }, charge)).rejects.toThrow(ProviderRefused);
    expect(fake.requests.length).toBe(before);
  });
});

describe('gocardless adapter: refunds', () => {
  /** A refund of `amountMinor` on a payment `completedPayment` made (1999 GBP). */
  function refundOf(paid: Awaited<ReturnType<typeof completedPayment>>, amountMinor: number, idempotencyKey: string): RefundRequest {
    return {
      paymentId: paid.request.paymentId,
      providerPaymentId: paid.result.providerPaymentId,
      providerCheckoutId: null,
      amountMinor,
      currency: 'GBP',
      idempotencyKey,
    };
  }

  const refundsOf = (providerPaymentId: string) => [...fake.refunds.values()].filter((r) => r.links.payment === providerPaymentId);

  it('refunds the payment through the refunds API', async () => {
    const { request, result } = await completedPayment();
    const refund = await gocardlessAdapter.refund(ctx, {
      paymentId: request.paymentId,
      providerPaymentId: result.providerPaymentId,
      providerCheckoutId: null,
      amountMinor: 500,
      currency: 'GBP',
      idempotencyKey: `refund-${request.paymentId}`,
    });

    expect(refund.providerRefundId).toMatch(/^RF/);
    expect(refund.status).toBe('created');
    // The refunded total is read from GoCardless first: nothing yet.
    expect(lastRequest('GET', '/refunds').query).toEqual({ payment: result.providerPaymentId });
    const sent = lastRequest('POST', '/refunds');
    expect(sent.headers['idempotency-key']).toBe(`refund-${request.paymentId}`);
    expect(sent.body).toEqual({
      refunds: {
        amount: 500,
        total_amount_confirmation: 500,
        links: { payment: result.providerPaymentId },
        metadata: { payment_id: request.paymentId },
      },
    });
    expect(fake.refunds.get(refund.providerRefundId!)).toMatchObject({ amount: 500, currency: 'GBP' });
    expect(fake.payments.get(result.providerPaymentId)?.amount_refunded).toBe(500);
  });

  it('makes a second partial refund of a payment, confirming the refunded total including it', async () => {
    const paid = await completedPayment();
    const first = await gocardlessAdapter.refund(ctx, refundOf(paid, 500, `refund-1-${paid.request.paymentId}`));
    expect(lastRequest('POST', '/refunds').body).toMatchObject({ refunds: { amount: 500, total_amount_confirmation: 500 } });

    const second = await gocardlessAdapter.refund(ctx, refundOf(paid, 700, `refund-2-${paid.request.paymentId}`));

    expect(lastRequest('POST', '/refunds').body).toMatchObject({ refunds: { amount: 700, total_amount_confirmation: 1200 } });
    expect(second.providerRefundId).toMatch(/^RF/);
    expect(second.providerRefundId).not.toBe(first.providerRefundId);
    expect(refundsOf(paid.result.providerPaymentId).map((r) => r.amount)).toEqual([500, 700]);
    expect(fake.payments.get(paid.result.providerPaymentId)?.amount_refunded).toBe(1200);

    // What is left is all that can still be refunded.
    await expect(gocardlessAdapter.refund(ctx, refundOf(paid, 800, `refund-3-${paid.request.paymentId}`))).rejects.toMatchObject({
      name: 'ProviderRefused',
      status: 422,
      message: expect.stringContaining('available_refund_amount_insufficient'),
    });
    const last = await gocardlessAdapter.refund(ctx, refundOf(paid, 799, `refund-4-${paid.request.paymentId}`));
    expect(last.providerRefundId).toMatch(/^RF/);
    expect(lastRequest('POST', '/refunds').body).toMatchObject({ refunds: { amount: 799, total_amount_confirmation: 1999 } });
  });

  it('leaves an earlier refund that did not stand out of the refunded total', async () => {
    const paid = await completedPayment();
    const first = await gocardlessAdapter.refund(ctx, refundOf(paid, 500, `refund-1-${paid.request.paymentId}`));
    fake.refunds.get(first.providerRefundId!)!.status = 'cancelled';

    await gocardlessAdapter.refund(ctx, refundOf(paid, 700, `refund-2-${paid.request.paymentId}`));

    expect(lastRequest('POST', '/refunds').body).toMatchObject({ refunds: { amount: 700, total_amount_confirmation: 700 } });
  });

  it.each([
    ['a partial refund', 500],
    ['a full refund', 1999],
  ])('answers the first refund to a retry of %s with the same idempotency key: one refund', async (_, amount) => {
    const paid = await completedPayment();
    const request = refundOf(paid, amount, `refund-${paid.request.paymentId}`);
    const first = await gocardlessAdapter.refund(ctx, request);

    const retried = await gocardlessAdapter.refund(ctx, request);

    expect(retried).toEqual(first);
    expect(refundsOf(paid.result.providerPaymentId)).toHaveLength(1);
    expect(fake.payments.get(paid.result.providerPaymentId)?.amount_refunded).toBe(amount);
    // The retry counted the first refund as an earlier one, so its body changed; GoCardless answered
    // the key's 409 conflict before reading it, and the SDK fetched the refund the conflict names.
    expect(lastRequest('POST', '/refunds').body).toMatchObject({ refunds: { amount, total_amount_confirmation: 2 * amount } });
    expect(lastRequest('GET', `/refunds/${first.providerRefundId}`)).toBeDefined();
  });

  it('(fake) refuses a refund confirming a wrong total, or none, with GoCardless’s 422 error body', async () => {
    const paid = await completedPayment();
    await gocardlessAdapter.refund(ctx, refundOf(paid, 500, `refund-1-${paid.request.paymentId}`));
    const links = { payment: paid.result.providerPaymentId };

    // The old adapter's mistake: this refund's amount alone, where 500 were refunded already.
    const wrong = await postToFake('/refunds', { refunds: { amount: 700, total_amount_confirmation: 700, links } });
    expect(wrong).toMatchObject({
      status: 422,
      body: {
        error: {
          type: 'invalid_state',
          code: 422,
          message: 'Total amount confirmation invalid',
          errors: [{ reason: 'total_amount_confirmation_invalid', message: 'Total amount confirmation invalid' }],
        },
      },
    });
    const missing = await postToFake('/refunds', { refunds: { amount: 700, links } });
    expect(missing).toMatchObject({
      status: 422,
      body: { error: { type: 'validation_failed', code: 422, errors: [{ field: 'total_amount_confirmation', message: 'is missing' }] } },
    });
    expect(refundsOf(paid.result.providerPaymentId)).toHaveLength(1);
    expect(fake.payments.get(paid.result.providerPaymentId)?.amount_refunded).toBe(500);
  });

  it('refuses without a GoCardless payment, before any call', async () => {
    const before = fake.requests.length;
    const refusal = gocardlessAdapter.refund(ctx, {
      paymentId: 'p',
      providerPaymentId: null,
      providerCheckoutId: 'RE123',
      amountMinor: 500,
      currency: 'GBP',
      idempotencyKey: 'refund-none',
    });
    await expect(refusal).rejects.toThrow(ProviderRefused);
    expect(fake.requests.length).toBe(before);
  });

  it('refuses for good a refund GoCardless rejects', async () => {
    const { request, result } = await completedPayment();
    const refusal = gocardlessAdapter.refund(ctx, {
      paymentId: request.paymentId,
      providerPaymentId: result.providerPaymentId,
      providerCheckoutId: null,
      amountMinor: 5000,
      currency: 'GBP',
      idempotencyKey: `refund-too-much-${request.paymentId}`,
    });
    await expect(refusal).rejects.toMatchObject({ name: 'ProviderRefused', status: 422 });
  });
});

describe('gocardless adapter: notifications', () => {
  const b2 = '{"events":[{"id":"EV1","resource_type":"payments","action":"confirmed","links":{"payment":"PM1"}}]}';
  const b2Signature = '69199aca0b34a4fa68ad2705134bafe5b342c24149b010b8670a192156cfc997';

  const verify = (rawBody: Buffer, headers: RawHeaders, settings = ctx.settings) =>
    gocardlessAdapter.verifyNotification({ settings }, { rawBody, headers, now });

  it('verifies the §8 vector and reads a confirmed payment', () => {
    expect(createHmac('sha256', 'gc_secret').update(b2).digest('hex')).toBe(b2Signature);
    expect(verify(Buffer.from(b2), { 'webhook-signature': b2Signature })).toEqual([
      {
        eventKey: 'EV1',
        eventType: 'payments.confirmed',
        outcome: 'succeeded',
        paymentId: null,
        providerCheckoutId: null,
        providerPaymentId: 'PM1',
        failureReason: null,
        providerCustomerId: null,
        paymentMethodId: null,
      },
    ]);
  });

  it('returns every event of a batch, in order', async () => {
    const { request, result } = await completedPayment();
    const events = [
      fake.event({ resource_type: 'mandates', action: 'active', links: { mandate: result.mandateId, customer: 'CU1' } }),
      fake.event({ action: 'confirmed', links: { payment: result.providerPaymentId, mandate: result.mandateId } }),
      fake.event({ resource_type: 'refunds', action: 'paid', links: { refund: 'RF1', payment: result.providerPaymentId } }),
    ];
    const { rawBody, headers } = fake.webhook('gc_secret', events);

    const notifications = verify(rawBody, headers);

    expect(notifications.map((n) => n.eventKey)).toEqual(events.map((e) => e.id));
    expect(notifications.map((n) => [n.eventType, n.outcome])).toEqual([
      ['mandates.active', null],
      ['payments.confirmed', 'succeeded'],
      ['refunds.paid', 'refunded'],
    ]);
    expect(notifications[0]).toMatchObject({ providerCustomerId: 'CU1', paymentMethodId: result.mandateId });
    expect(notifications[1]).toMatchObject({ paymentId: request.paymentId, providerPaymentId: result.providerPaymentId });
    expect(notifications[2]).toMatchObject({ providerPaymentId: result.providerPaymentId });
  });

  it('verifies what the fake POSTs to a receiver', async () => {
    const receiver = await startReceiver();
    try {
      const event = fake.event({ action: 'failed', links: { payment: 'PM9' } });
      const answer = await fake.notify(receiver.url('/hook'), 'gc_secret', [event]);
      expect(answer.status).toBe(200);
      const [received] = receiver.requests('/hook');
      const notifications = verify(Buffer.from(received!.body), received!.headers);
      expect(notifications).toMatchObject([{ eventKey: event.id, outcome: 'failed', providerPaymentId: 'PM9' }]);
    } finally {
      await receiver.close();
    }
  });

  const forged = b2Signature.replace(/^6/, '7');
  it.each<[string, Buffer, RawHeaders, Record<string, string>?]>([
    ['a forged signature', Buffer.from(b2), { 'webhook-signature': forged }],
    ['a signature made with another secret', Buffer.from(b2), { 'webhook-signature': b2Signature }, { webhook_secret: 'other' }],
    ['no signature header', Buffer.from(b2), {}],
    ['a truncated body', Buffer.from(b2.slice(0, -2)), { 'webhook-signature': b2Signature }],
    ['a signature that is not hex', Buffer.from(b2), { 'webhook-signature': 'not-a-signature' }],
    ['no secret configured', Buffer.from(b2), { 'webhook-signature': b2Signature }, { access_token: 't' }],
  ])('rejects %s', (_, rawBody, headers, settings) => {
    expect(() => verify(rawBody, headers, settings ?? ctx.settings)).toThrow(InvalidProviderSignature);
  });

  it('rejects a signed body that is not JSON', () => {
    const body = 'not json';
    const signature = createHmac('sha256', 'gc_secret').update(body).digest('hex');
    expect(() => verify(Buffer.from(body), { 'webhook-signature': signature })).toThrow(InvalidProviderSignature);
  });

  it('falls back to the shared signature headers only when Webhook-Signature is absent', () => {
    expect(verify(Buffer.from(b2), { 'x-webhook-signature': b2Signature })).toHaveLength(1);
    expect(verify(Buffer.from(b2), { 'stripe-signature': b2Signature })).toHaveLength(1);
    expect(verify(Buffer.from(b2), { 'x-ucp-signature': [b2Signature] })).toHaveLength(1);
    expect(() => verify(Buffer.from(b2), { 'webhook-signature': forged, 'x-webhook-signature': b2Signature })).toThrow(
      InvalidProviderSignature,
    );
  });

  const event = (fields: Partial<GoCardlessEvent>) => fake.event({ links: { payment: 'PM1', mandate: 'MD1' }, ...fields });
  it.each([
    ['payments', 'confirmed', 'succeeded'],
    ['payments', 'paid_out', 'succeeded'],
    ['payments', 'failed', 'failed'],
    ['payments', 'customer_approval_denied', 'failed'],
    ['payments', 'charged_back', 'failed'],
    ['payments', 'cancelled', 'canceled'],
    ['payments', 'submitted', 'processing'],
    ['payments', 'created', null],
    ['payments', 'pending_customer_approval', null],
    ['mandates', 'active', null],
    ['mandates', 'failed', null],
    ['mandates', 'cancelled', null],
    ['mandates', 'expired', null],
    ['refunds', 'paid', 'refunded'],
    ['refunds', 'refund_settled', 'refunded'],
    ['refunds', 'created', null],
    ['refunds', 'failed', null],
    ['payouts', 'paid', null],
  ])('maps %s.%s to %s', (resourceType, action, outcome) => {
    const { rawBody, headers } = fake.webhook('gc_secret', [event({ resource_type: resourceType, action })]);
    const [notification] = verify(rawBody, headers);
    expect(notification).toMatchObject({ eventType: `${resourceType}.${action}`, outcome, providerPaymentId: 'PM1' });
  });

  it('gives the failure reason of a failed payment and a saved mandate only when active', () => {
    const details = { origin: 'bank', cause: 'insufficient_funds', description: 'The customer had insufficient funds.' };
    const { rawBody, headers } = fake.webhook('gc_secret', [
      event({ action: 'failed', details }),
      event({ resource_type: 'mandates', action: 'active', links: { mandate: 'MD1', customer: 'CU1' } }),
      event({ resource_type: 'mandates', action: 'cancelled', links: { mandate: 'MD1', customer: 'CU1' } }),
    ]);
    const [failed, active, cancelled] = verify(rawBody, headers);
    expect(failed?.failureReason).toBe('The customer had insufficient funds.');
    expect(active).toMatchObject({ providerCustomerId: 'CU1', paymentMethodId: 'MD1' });
    expect(cancelled).toMatchObject({ providerCustomerId: null, paymentMethodId: null });
  });

  it('reads our payment id from resource_metadata first, then metadata', () => {
    const { rawBody, headers } = fake.webhook('gc_secret', [
      event({ resource_metadata: { payment_id: 'from-resource' }, metadata: { payment_id: 'from-call' } }),
      event({ resource_metadata: {}, metadata: { payment_id: 'from-call' } }),
      event({ resource_metadata: { payment_id: 42 }, metadata: {} }),
    ]);
    expect(verify(rawBody, headers).map((n) => n.paymentId)).toEqual(['from-resource', 'from-call', null]);
  });
});

describe('gocardless adapter: references', () => {
  it('names the payments, GoCardless payments and mandates of every event without verifying', () => {
    const { rawBody } = fake.webhook('not-the-secret', [
      fake.event({ links: { payment: 'PM1', mandate: 'MD1' }, resource_metadata: { payment_id: 'p1' } }),
      fake.event({ links: { payment: 'PM2', mandate: 'MD1' }, resource_metadata: {}, metadata: { payment_id: 'p2' } }),
      fake.event({ resource_type: 'mandates', action: 'active', links: { mandate: 'MD3' }, resource_metadata: {} }),
    ]);
    const references = gocardlessAdapter.references(rawBody);
    expect(references.paymentIds.sort()).toEqual(['p1', 'p2']);
    expect(references.providerIds.sort()).toEqual(['MD1', 'MD3', 'PM1', 'PM2']);
  });

  it.each(['', 'not json', '{"events":"nope"}', 'null', '{"events":[null,1]}'])('is empty for %j', (body) => {
    expect(gocardlessAdapter.references(Buffer.from(body))).toEqual({ paymentIds: [], providerIds: [] });
  });
});
