import { randomUUID } from 'node:crypto';

import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { BadRequest } from '../../../src/errors';
import { stripeAdapter } from '../../../src/payments/providers/stripe';
import {
  InvalidProviderSignature,
  ProviderRefused,
  type CheckoutRequest,
  type NotificationOutcome,
  type ProviderContext,
  type ProviderNotification,
  type RawHeaders,
  type SavedMethodCharge,
} from '../../../src/payments/providers/types';
import { startFakeStripe, type FakeStripe } from '../../support/providers/fake-stripe';
import { startReceiver } from '../../support/receiver';

const SECRET = 'whsec_test';
// payment-providers.md §8.
const VECTOR_TIMESTAMP = 1_700_000_000;
const VECTOR_BODY = '{"id":"evt_1","type":"checkout.session.completed"}';
const VECTOR_SIGNATURE = '749721cbedbfa4cc1aa6c9c2bec1edd93766a07906c9d9b3dbc7626e4e660caf';
const vectorHeaders: RawHeaders = { 'stripe-signature': `t=${VECTOR_TIMESTAMP},v1=${VECTOR_SIGNATURE}` };
const atSeconds = (seconds: number) => new Date(seconds * 1000);

let fake: FakeStripe;
let ctx: ProviderContext;

beforeAll(async () => {
  fake = await startFakeStripe();
  ctx = { settings: { api_key: 'sk_test_123', webhook_secret: SECRET }, apiBaseUrl: fake.url };
});

afterAll(async () => {
  await fake.close();
});

function checkoutRequest(overrides: Partial<CheckoutRequest> = {}): CheckoutRequest {
  return {
    paymentId: randomUUID(),
    invoiceId: randomUUID(),
    invoiceNumber: 'INV-2024-0001',
    amountMinor: 1999,
    currency: 'USD',
    successUrl: 'https://merchant.test/paid',
    cancelUrl: 'https://merchant.test/canceled',
    returnUrl: 'https://billing.test/v1/payments/x/return',
    customerEmail: 'payer@example.test',
    idempotencyKey: randomUUID(),
    now: new Date('2024-05-01T10:00:00Z'),
    ...overrides,
  };
}

function lastRequest(path: string) {
  const request = fake.requests.filter((r) => r.path === path).at(-1);
  if (!request) throw new Error(`The fake received no request to ${path}`);
  return request;
}

/** A paid session and its PaymentIntent, created through the adapter. */
async function paidCheckout(amountMinor = 1999) {
  const request = checkoutRequest({ amountMinor });
  const result = await stripeAdapter.createCheckout(ctx, request);
  const session = fake.complete(result.providerCheckoutId);
  return { request, session, paymentIntent: session.payment_intent! };
}

function verify(event: object, nowSeconds = VECTOR_TIMESTAMP): ProviderNotification[] {
  const rawBody = JSON.stringify(event);
  return stripeAdapter.verifyNotification(ctx, {
    rawBody: Buffer.from(rawBody),
    headers: fake.signedHeaders(rawBody, SECRET, VECTOR_TIMESTAMP),
    now: atSeconds(nowSeconds),
  });
}

describe('stripeAdapter.createCheckout', () => {
  it('sends the amount once, in minor units, with the lower-case currency, metadata and idempotency key', async () => {
    const request = checkoutRequest();
    const result = await stripeAdapter.createCheckout(ctx, request);

    const sent = lastRequest('/v1/checkout/sessions');
    expect(sent.headers.authorization).toBe('Bearer sk_test_123');
    expect(sent.headers['idempotency-key']).toBe(request.idempotencyKey);
    expect(sent.form).toMatchObject({
      mode: 'payment',
      'line_items[0][price_data][unit_amount]': '1999',
      'line_items[0][price_data][currency]': 'usd',
      'line_items[0][price_data][product_data][name]': 'Invoice INV-2024-0001',
      'line_items[0][quantity]': '1',
      success_url: 'https://merchant.test/paid',
      cancel_url: 'https://merchant.test/canceled',
      client_reference_id: request.paymentId,
      customer_email: 'payer@example.test',
      'metadata[payment_id]': request.paymentId,
      'metadata[invoice_id]': request.invoiceId,
      'metadata[invoice_number]': 'INV-2024-0001',
      'payment_intent_data[metadata][payment_id]': request.paymentId,
      'payment_intent_data[metadata][invoice_id]': request.invoiceId,
    });

    const session = fake.sessions.get(result.providerCheckoutId)!;
    expect(result.providerCheckoutId).toMatch(/^cs_test_/);
    expect(session.amount_total).toBe(1999);
    expect(result.checkoutUrl).toBe(`https://checkout.stripe.test/c/pay/${result.providerCheckoutId}`);
    expect(result.expiresAt).toEqual(atSeconds(session.expires_at));
    expect(result.providerPaymentId).toBeNull();
  });

  it('sends a zero-decimal amount as it is, and names the invoice by id when it has no number', async () => {
    const request = checkoutRequest({ amountMinor: 500, currency: 'JPY', invoiceNumber: null, customerEmail: null });
    await stripeAdapter.createCheckout(ctx, request);

    const sent = lastRequest('/v1/checkout/sessions');
    expect(sent.form['line_items[0][price_data][unit_amount]']).toBe('500');
    expect(sent.form['line_items[0][price_data][currency]']).toBe('jpy');
    expect(sent.form['line_items[0][price_data][product_data][name]']).toBe(`Invoice ${request.invoiceId}`);
    expect(sent.form).not.toHaveProperty('customer_email');
    expect(sent.form).not.toHaveProperty('metadata[invoice_number]');
  });

  it('creates one session when a retried activity sends the same idempotency key', async () => {
    const request = checkoutRequest();
    const before = fake.sessions.size;
    const first = await stripeAdapter.createCheckout(ctx, request);
    const retried = await stripeAdapter.createCheckout(ctx, request);

    expect(retried).toEqual(first);
    expect(fake.sessions.size).toBe(before + 1);
  });

  it('fails for good on a request Stripe rejects, and leaves network errors to retries', async () => {
    const refused = stripeAdapter.createCheckout(ctx, checkoutRequest({ amountMinor: 12.5 }));
    await expect(refused).rejects.toBeInstanceOf(ProviderRefused);
    await expect(refused).rejects.toMatchObject({ status: 400 });

    const unreachable = stripeAdapter.createCheckout({ ...ctx, apiBaseUrl: 'http://127.0.0.1:9' }, checkoutRequest());
    await expect(unreachable).rejects.toBeInstanceOf(Stripe.errors.StripeConnectionError);
  });
});

describe('stripeAdapter.expireCheckout', () => {
  it('expires an open session', async () => {
    const { providerCheckoutId } = await stripeAdapter.createCheckout(ctx, checkoutRequest());
    await stripeAdapter.expireCheckout(ctx, providerCheckoutId);

    expect(lastRequest(`/v1/checkout/sessions/${providerCheckoutId}/expire`).method).toBe('POST');
    expect(fake.sessions.get(providerCheckoutId)?.status).toBe('expired');
  });

  it('treats a session that is already expired or paid as done', async () => {
    const { providerCheckoutId } = await stripeAdapter.createCheckout(ctx, checkoutRequest());
    await stripeAdapter.expireCheckout(ctx, providerCheckoutId);
    await expect(stripeAdapter.expireCheckout(ctx, providerCheckoutId)).resolves.toBeUndefined();

    const { session } = await paidCheckout();
    await expect(stripeAdapter.expireCheckout(ctx, session.id)).resolves.toBeUndefined();
    expect(fake.sessions.get(session.id)?.status).toBe('complete');
  });

  it('refuses an unknown session', async () => {
    await expect(stripeAdapter.expireCheckout(ctx, 'cs_test_unknown')).rejects.toMatchObject({ name: 'ProviderRefused', status: 404 });
  });
});

describe('stripeAdapter.refund', () => {
  it('refunds the amount on the PaymentIntent, once per idempotency key', async () => {
    const { request, paymentIntent } = await paidCheckout(1999);
    const refund = {
      paymentId: request.paymentId,
      providerPaymentId: paymentIntent,
      providerCheckoutId: null,
      amountMinor: 1000,
      currency: 'USD',
      idempotencyKey: randomUUID(),
    };
    const result = await stripeAdapter.refund(ctx, refund);
    const retried = await stripeAdapter.refund(ctx, refund);

    const sent = lastRequest('/v1/refunds');
    expect(sent.form).toEqual({ payment_intent: paymentIntent, amount: '1000' });
    expect(sent.headers['idempotency-key']).toBe(refund.idempotencyKey);
    expect(result).toEqual({ providerRefundId: expect.stringMatching(/^re_/), status: 'succeeded' });
    expect(retried).toEqual(result);
    expect([...fake.refunds.values()].filter((r) => r.payment_intent === paymentIntent)).toHaveLength(1);
  });

  it('needs a PaymentIntent, and refuses what Stripe refuses', async () => {
    const requestsBefore = fake.requests.length;
    const base = {
      paymentId: randomUUID(),
      providerCheckoutId: 'cs_test_x',
      amountMinor: 100,
      currency: 'USD',
      idempotencyKey: randomUUID(),
    };
    await expect(stripeAdapter.refund(ctx, { ...base, providerPaymentId: null })).rejects.toBeInstanceOf(ProviderRefused);
    expect(fake.requests.length).toBe(requestsBefore);

    await expect(stripeAdapter.refund(ctx, { ...base, providerPaymentId: 'pi_unknown' })).rejects.toMatchObject({
      name: 'ProviderRefused',
      status: 400,
    });
    const { paymentIntent } = await paidCheckout(500);
    await expect(
      stripeAdapter.refund(ctx, { ...base, providerPaymentId: paymentIntent, amountMinor: 501, idempotencyKey: randomUUID() }),
    ).rejects.toMatchObject({ name: 'ProviderRefused', status: 400 });
  });
});

describe('stripeAdapter.chargeSavedMethod', () => {
  const chargeSavedMethod = stripeAdapter.chargeSavedMethod!.bind(stripeAdapter);

  function savedMethodCharge(overrides: Partial<SavedMethodCharge> = {}): SavedMethodCharge {
    return {
      paymentId: randomUUID(),
      amountMinor: 4250,
      currency: 'EUR',
      providerCustomerId: 'cus_saved',
      paymentMethodId: `pm_${randomUUID().replaceAll('-', '')}`,
      description: 'Invoice INV-2024-0042',
      idempotencyKey: randomUUID(),
      ...overrides,
    };
  }

  it('confirms a PaymentIntent off-session on the saved method, the amount once, and reports it succeeded', async () => {
    const charge = savedMethodCharge();
    const result = await chargeSavedMethod(ctx, charge);

    const sent = lastRequest('/v1/payment_intents');
    expect(sent.headers.authorization).toBe('Bearer sk_test_123');
    expect(sent.headers['idempotency-key']).toBe(charge.idempotencyKey);
    expect(sent.form).toEqual({
      amount: '4250',
      currency: 'eur',
      customer: 'cus_saved',
      payment_method: charge.paymentMethodId,
      off_session: 'true',
      confirm: 'true',
      description: 'Invoice INV-2024-0042',
      'metadata[payment_id]': charge.paymentId,
    });
    expect(result).toEqual({ providerPaymentId: expect.stringMatching(/^pi_/), outcome: 'succeeded', failureReason: null });
    expect(fake.paymentIntents.get(result.providerPaymentId!)).toMatchObject({
      amount: 4250,
      amount_received: 4250,
      currency: 'eur',
      status: 'succeeded',
      customer: 'cus_saved',
      payment_method: charge.paymentMethodId,
      metadata: { payment_id: charge.paymentId },
    });
  });

  it('leaves the customer out when none is known', async () => {
    await chargeSavedMethod(ctx, savedMethodCharge({ providerCustomerId: null }));
    expect(lastRequest('/v1/payment_intents').form).not.toHaveProperty('customer');
  });

  it('creates one PaymentIntent when a retried activity sends the same idempotency key', async () => {
    const charge = savedMethodCharge();
    const first = await chargeSavedMethod(ctx, charge);
    const retried = await chargeSavedMethod(ctx, charge);

    expect(retried).toEqual(first);
    expect([...fake.paymentIntents.values()].filter((pi) => pi.metadata.payment_id === charge.paymentId)).toHaveLength(1);
  });

  it('answers a decline as a failed charge with Stripe’s reason and the failed PaymentIntent, not a throw', async () => {
    const charge = savedMethodCharge();
    fake.declinePaymentMethod(charge.paymentMethodId);
    const result = await chargeSavedMethod(ctx, charge);
    const retried = await chargeSavedMethod(ctx, charge);

    expect(result).toEqual({
      providerPaymentId: expect.stringMatching(/^pi_/),
      outcome: 'failed',
      failureReason: 'Your card was declined.',
    });
    expect(retried).toEqual(result);
    expect(fake.paymentIntents.get(result.providerPaymentId!)).toMatchObject({
      status: 'requires_payment_method',
      amount_received: 0,
      metadata: { payment_id: charge.paymentId },
    });
  });

  it('answers a card that needs the absent customer to authenticate as failed too', async () => {
    const charge = savedMethodCharge();
    const message = 'Your card was declined. This transaction requires authentication.';
    fake.declinePaymentMethod(charge.paymentMethodId, {
      code: 'authentication_required',
      decline_code: 'authentication_required',
      message,
    });

    expect(await chargeSavedMethod(ctx, charge)).toMatchObject({ outcome: 'failed', failureReason: message });
  });

  it('reports a bank debit that settles later as processing', async () => {
    const charge = savedMethodCharge({ currency: 'USD' });
    fake.delayPaymentMethod(charge.paymentMethodId);
    const result = await chargeSavedMethod(ctx, charge);

    expect(result).toEqual({ providerPaymentId: expect.stringMatching(/^pi_/), outcome: 'processing', failureReason: null });
    expect(fake.paymentIntents.get(result.providerPaymentId!)?.status).toBe('processing');
  });

  it('fails for good on what Stripe rejects outright, and leaves network errors to retries', async () => {
    await expect(chargeSavedMethod(ctx, savedMethodCharge({ paymentMethodId: 'card_unknown' }))).rejects.toMatchObject({
      name: 'ProviderRefused',
      status: 400,
    });
    await expect(chargeSavedMethod(ctx, savedMethodCharge({ amountMinor: 12.5 }))).rejects.toMatchObject({
      name: 'ProviderRefused',
      status: 400,
    });
    const requestsBefore = fake.requests.length;
    await expect(chargeSavedMethod({ ...ctx, settings: { webhook_secret: SECRET } }, savedMethodCharge())).rejects.toBeInstanceOf(
      ProviderRefused,
    );
    expect(fake.requests.length).toBe(requestsBefore);

    const unreachable = chargeSavedMethod({ ...ctx, apiBaseUrl: 'http://127.0.0.1:9' }, savedMethodCharge());
    await expect(unreachable).rejects.toBeInstanceOf(Stripe.errors.StripeConnectionError);
  });
});

describe('stripeAdapter.verifyNotification', () => {
  const verifyVector = (overrides: { headers?: RawHeaders; body?: string; now?: Date; secret?: string } = {}) =>
    stripeAdapter.verifyNotification(
      { settings: { api_key: 'sk_test_123', webhook_secret: overrides.secret ?? SECRET } },
      {
        rawBody: Buffer.from(overrides.body ?? VECTOR_BODY),
        headers: overrides.headers ?? vectorHeaders,
        now: overrides.now ?? atSeconds(VECTOR_TIMESTAMP),
      },
    );

  it('accepts the §8 vector through the SDK verifier, at the signed instant and up to 300 s later', () => {
    expect(Stripe.webhooks.generateTestHeaderString({ payload: VECTOR_BODY, secret: SECRET, timestamp: VECTOR_TIMESTAMP })).toBe(
      vectorHeaders['stripe-signature'],
    );
    expect(verifyVector()).toEqual([
      {
        eventKey: 'evt_1',
        eventType: 'checkout.session.completed',
        outcome: 'processing',
        paymentId: null,
        providerCheckoutId: null,
        providerPaymentId: null,
        failureReason: null,
        providerCustomerId: null,
        paymentMethodId: null,
      },
    ]);
    expect(verifyVector({ now: atSeconds(VECTOR_TIMESTAMP + 300) })).toHaveLength(1);
  });

  it.each([
    ['a forged signature', { headers: { 'stripe-signature': `t=${VECTOR_TIMESTAMP},v1=${VECTOR_SIGNATURE.replace(/^7/, '8')}` } }],
    ['a wrong secret', { secret: 'whsec_other' }],
    ['no secret configured', { secret: '' }],
    ['a timestamp 301 s old', { now: atSeconds(VECTOR_TIMESTAMP + 301) }],
    ['a signature moved to another timestamp', { headers: { 'stripe-signature': `t=${VECTOR_TIMESTAMP + 1},v1=${VECTOR_SIGNATURE}` } }],
    ['a missing header', { headers: {} }],
    ['a header without v1', { headers: { 'stripe-signature': `t=${VECTOR_TIMESTAMP},v0=${VECTOR_SIGNATURE}` } }],
    ['a truncated body', { body: VECTOR_BODY.slice(0, -1) }],
  ])('rejects %s', (_label, overrides) => {
    expect(() => verifyVector(overrides)).toThrow(InvalidProviderSignature);
  });

  it('reads the shared fallback headers only when Stripe-Signature is absent', () => {
    const signature = vectorHeaders['stripe-signature'];
    expect(verifyVector({ headers: { 'webhook-signature': signature } })[0]?.eventKey).toBe('evt_1');
    expect(verifyVector({ headers: { 'x-ucp-signature': signature, 'x-webhook-signature': 'junk' } })[0]?.eventKey).toBe('evt_1');
    expect(() => verifyVector({ headers: { 'stripe-signature': 't=1,v1=00', 'x-webhook-signature': signature } })).toThrow(
      InvalidProviderSignature,
    );
  });

  it('answers a signed body that is not JSON as a bad request, not a forgery', () => {
    const body = 'not json';
    const headers = fake.signedHeaders(body, SECRET, VECTOR_TIMESTAMP);
    expect(() => verifyVector({ body, headers })).toThrow(BadRequest);
  });

  it('verifies what notify() POSTs over HTTP, byte for byte', async () => {
    const receiver = await startReceiver();
    try {
      const { session } = await paidCheckout();
      const event = fake.event('checkout.session.completed', session);
      const answer = await fake.notify(receiver.url('/webhook'), SECRET, event);
      const [received] = receiver.requests('/webhook');

      expect(answer.status).toBe(200);
      const notifications = stripeAdapter.verifyNotification(ctx, {
        rawBody: Buffer.from(received!.body),
        headers: received!.headers,
        now: new Date(),
      });
      expect(notifications).toMatchObject([{ eventKey: event.id, outcome: 'succeeded', providerCheckoutId: session.id }]);
    } finally {
      await receiver.close();
    }
  });
});

describe('stripeAdapter event mapping', () => {
  it('maps checkout session events, paid only when the session says paid', async () => {
    const { request, session, paymentIntent } = await paidCheckout();
    const open = (await stripeAdapter.createCheckout(ctx, checkoutRequest())).providerCheckoutId;
    const unpaid = { ...fake.sessions.get(open)!, status: 'complete', customer: 'cus_1' };

    const cases: [string, object, NotificationOutcome][] = [
      ['checkout.session.completed', session, 'succeeded'],
      ['checkout.session.completed', unpaid, 'processing'],
      ['checkout.session.async_payment_succeeded', session, 'succeeded'],
      ['checkout.session.async_payment_failed', session, 'failed'],
      ['checkout.session.expired', session, 'canceled'],
    ];
    for (const [type, object, outcome] of cases) {
      const event = fake.event(type, object);
      expect(verify(event), type).toEqual([
        expect.objectContaining({ eventKey: event.id, eventType: type, outcome, failureReason: null, paymentMethodId: null }),
      ]);
    }

    expect(verify(fake.event('checkout.session.completed', session))[0]).toMatchObject({
      paymentId: request.paymentId,
      providerCheckoutId: session.id,
      providerPaymentId: paymentIntent,
      providerCustomerId: null,
    });
    expect(verify(fake.event('checkout.session.completed', unpaid))[0]).toMatchObject({
      providerCheckoutId: open,
      providerPaymentId: null,
      providerCustomerId: 'cus_1',
    });
  });

  it('finds our payment by client_reference_id when the session has no metadata', () => {
    const [notification] = verify(
      fake.event('checkout.session.expired', { id: 'cs_test_1', object: 'checkout.session', client_reference_id: 'pay_1', metadata: {} }),
    );
    expect(notification).toMatchObject({ paymentId: 'pay_1', providerCheckoutId: 'cs_test_1', outcome: 'canceled' });
  });

  it('maps PaymentIntent events with the saved method and the failure reason', async () => {
    const { request, paymentIntent } = await paidCheckout();
    const intent = { ...fake.paymentIntents.get(paymentIntent)!, customer: 'cus_9' };

    expect(intent.metadata.payment_id).toBe(request.paymentId);
    expect(verify(fake.event('payment_intent.succeeded', intent))).toEqual([
      {
        eventKey: expect.stringMatching(/^evt_/),
        eventType: 'payment_intent.succeeded',
        outcome: 'succeeded',
        paymentId: request.paymentId,
        providerCheckoutId: null,
        providerPaymentId: paymentIntent,
        failureReason: null,
        providerCustomerId: 'cus_9',
        paymentMethodId: intent.payment_method,
      },
    ]);
    expect(verify(fake.event('payment_intent.processing', intent))[0]?.outcome).toBe('processing');
    const failed = { ...intent, status: 'requires_payment_method', last_payment_error: { message: 'Your card was declined.' } };
    expect(verify(fake.event('payment_intent.payment_failed', failed))[0]).toMatchObject({
      outcome: 'failed',
      failureReason: 'Your card was declined.',
      paymentId: request.paymentId,
    });
  });

  it('maps charge.refunded to refunded with the PaymentIntent, and other events to nothing', () => {
    const charge = { id: 'ch_1', object: 'charge', payment_intent: 'pi_1', metadata: { payment_id: 'pay_1' }, refunded: true };
    expect(verify(fake.event('charge.refunded', charge))[0]).toMatchObject({
      outcome: 'refunded',
      paymentId: 'pay_1',
      providerPaymentId: 'pi_1',
      providerCheckoutId: null,
    });
    expect(verify(fake.event('customer.created', { id: 'cus_1', object: 'customer' }))[0]).toMatchObject({
      eventType: 'customer.created',
      outcome: null,
      paymentId: null,
    });
  });
});

describe('stripeAdapter.references', () => {
  it('reads our payment id and the provider ids without verifying', async () => {
    const { request, session, paymentIntent } = await paidCheckout();
    const body = Buffer.from(JSON.stringify(fake.event('checkout.session.completed', session)));
    expect(stripeAdapter.references(body)).toEqual({ paymentIds: [request.paymentId], providerIds: [session.id, paymentIntent] });

    const charge = fake.event('charge.refunded', { id: 'ch_1', object: 'charge', payment_intent: { id: 'pi_2' }, metadata: {} });
    expect(stripeAdapter.references(Buffer.from(JSON.stringify(charge)))).toEqual({ paymentIds: [], providerIds: ['ch_1', 'pi_2'] });
  });

  it('is empty for a body it cannot parse', () => {
    expect(stripeAdapter.references(Buffer.from('{"id":'))).toEqual({ paymentIds: [], providerIds: [] });
    expect(stripeAdapter.references(Buffer.from('[1,2]'))).toEqual({ paymentIds: [], providerIds: [] });
  });
});
