// provider_b (Adyen) through the production adapter, against the local fake over real HTTP.
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { adyenAdapter } from '../../../src/payments/providers/adyen';
import {
  InvalidProviderSignature,
  ProviderRefused,
  type CheckoutRequest,
  type ProviderContext,
  type ProviderNotification,
  type RawHeaders,
  type SavedMethodCharge,
} from '../../../src/payments/providers/types';
import { startFakeAdyen, type FakeAdyen, type NotificationRequestItem } from '../../support/providers/fake-adyen';

const HMAC_KEY = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const OTHER_KEY = '0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF';
const NOW = new Date('2026-03-01T12:00:00.000Z');
const HOUR_LATER = new Date('2026-03-01T13:00:00.000Z');

let fake: FakeAdyen;
let ctx: ProviderContext;

beforeAll(async () => {
  fake = await startFakeAdyen();
  ctx = {
    settings: { api_key: 'AQE_test_key', merchant_account: 'AcmeBillingECOM', hmac_key: HMAC_KEY },
    apiBaseUrl: fake.url,
  };
});

afterAll(async () => {
  await fake.close();
});

function checkoutRequest(overrides: Partial<CheckoutRequest> = {}): CheckoutRequest {
  return {
    paymentId: randomUUID(),
    invoiceId: randomUUID(),
    invoiceNumber: 'INV-0001',
    amountMinor: 1999,
    currency: 'EUR',
    successUrl: 'https://merchant.example/paid',
    cancelUrl: 'https://merchant.example/canceled',
    returnUrl: 'https://billing.example/v1/payments/x/return',
    customerEmail: 'ada@example.com',
    idempotencyKey: randomUUID(),
    now: NOW,
    ...overrides,
  };
}

function lastRequest() {
  const request = fake.requests.at(-1);
  if (!request) throw new Error('the fake received no request');
  return request;
}

function verify(body: string | Buffer, headers: RawHeaders = {}, context: ProviderContext = ctx): ProviderNotification[] {
  const rawBody = typeof body === 'string' ? Buffer.from(body) : body;
  return adyenAdapter.verifyNotification(context, { rawBody, headers, now: NOW });
}

function bodyOf(items: NotificationRequestItem[]): string {
  return JSON.stringify(fake.notification(items));
}

/** A paid session: the payment's pspReference and our payment id. */
async function paidCheckout(): Promise<{ psp: string; paymentId: string }> {
  const request = checkoutRequest();
  const checkout = await adyenAdapter.createCheckout(ctx, request);
  return { psp: fake.authorise(checkout.providerCheckoutId), paymentId: request.paymentId };
}

describe('createCheckout', () => {
  it('creates a hosted session with the payment as reference, metadata, expiry and idempotency key', async () => {
    const request = checkoutRequest();
    const result = await adyenAdapter.createCheckout(ctx, request);

    const sent = lastRequest();
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe('/v72/sessions');
    expect(sent.headers['x-api-key']).toBe('AQE_test_key');
    expect(sent.headers['idempotency-key']).toBe(request.idempotencyKey);
    expect(sent.body).toEqual({
      merchantAccount: 'AcmeBillingECOM',
      amount: { value: 1999, currency: 'EUR' },
      reference: request.paymentId,
      returnUrl: 'https://merchant.example/paid',
      expiresAt: HOUR_LATER.toISOString(),
      metadata: { payment_id: request.paymentId, invoice_id: request.invoiceId },
      mode: 'hosted',
      shopperEmail: 'ada@example.com',
    });

    const session = fake.sessions.get(result.providerCheckoutId);
    expect(result.providerCheckoutId).toMatch(/^CS[0-9A-F]{16}$/);
    expect(result.checkoutUrl).toBe(session?.url);
    expect(result.checkoutUrl).toMatch(/^https:\/\/checkoutshopper-test\.adyen\.com\/checkoutshopper\/pay\/CS/);
    expect(result.expiresAt).toEqual(HOUR_LATER);
  });

  it.each([
    [1999, 'EUR'],
    [500, 'JPY'],
    [1234, 'KWD'],
    [1, 'usd'],
  ])('sends %i %s as the minor units given, once', async (amountMinor, currency) => {
    await adyenAdapter.createCheckout(ctx, checkoutRequest({ amountMinor, currency }));
    expect((lastRequest().body as { amount: unknown }).amount).toEqual({ value: amountMinor, currency: currency.toUpperCase() });
  });

  it('leaves shopperEmail out when the customer has none', async () => {
    await adyenAdapter.createCheckout(ctx, checkoutRequest({ customerEmail: null }));
    expect(lastRequest().body).not.toHaveProperty('shopperEmail');
  });

  it('creates one session for a retried request with the same idempotency key', async () => {
    const request = checkoutRequest();
    const before = fake.sessions.size;
    const first = await adyenAdapter.createCheckout(ctx, request);
    const second = await adyenAdapter.createCheckout(ctx, request);
    expect(second.providerCheckoutId).toBe(first.providerCheckoutId);
    expect(fake.sessions.size).toBe(before + 1);
  });

  it('refuses without calling Adyen when a setting is missing or the environment is unknown', async () => {
    const count = fake.requests.length;
    const { merchant_account: _m, ...noMerchant } = ctx.settings;
    await expect(adyenAdapter.createCheckout({ ...ctx, settings: noMerchant }, checkoutRequest())).rejects.toThrow(ProviderRefused);
    const { api_key: _k, ...noKey } = ctx.settings;
    await expect(adyenAdapter.createCheckout({ ...ctx, settings: noKey }, checkoutRequest())).rejects.toThrow(ProviderRefused);
    const live = { settings: { ...ctx.settings, environment: 'live' } };
    await expect(adyenAdapter.createCheckout(live, checkoutRequest())).rejects.toThrow(/live_url_prefix/);
    const staging = { settings: { ...ctx.settings, environment: 'staging' } };
    await expect(adyenAdapter.createCheckout(staging, checkoutRequest())).rejects.toThrow(ProviderRefused);
    expect(fake.requests.length).toBe(count);
  });

  it('leaves an unreachable Adyen to the retries (not a refusal)', async () => {
    const closed = await startFakeAdyen();
    await closed.close();
    const error = await adyenAdapter.createCheckout({ ...ctx, apiBaseUrl: closed.url }, checkoutRequest()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(ProviderRefused);
  });
});

describe('refund', () => {
  it('refunds the captured payment by its pspReference', async () => {
    const { psp, paymentId } = await paidCheckout();
    const idempotencyKey = randomUUID();
    const result = await adyenAdapter.refund(ctx, {
      paymentId,
      providerPaymentId: psp,
      providerCheckoutId: null,
      amountMinor: 1500,
      currency: 'EUR',
      idempotencyKey,
    });

    const sent = lastRequest();
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe(`/v72/payments/${psp}/refunds`);
    expect(sent.headers['idempotency-key']).toBe(idempotencyKey);
    expect(sent.body).toEqual({ merchantAccount: 'AcmeBillingECOM', amount: { value: 1500, currency: 'EUR' }, reference: paymentId });
    expect(result.status).toBe('received');
    expect(result.providerRefundId).toMatch(/^\d{16}$/);
    expect(result.providerRefundId).not.toBe(psp);
    expect(fake.refunds.find((r) => r.pspReference === result.providerRefundId)?.paymentPspReference).toBe(psp);
  });

  it('is refused without a pspReference, and when Adyen does not know it', async () => {
    const base = { paymentId: randomUUID(), providerCheckoutId: 'CS1', amountMinor: 100, currency: 'EUR', idempotencyKey: randomUUID() };
    const count = fake.requests.length;
    await expect(adyenAdapter.refund(ctx, { ...base, providerPaymentId: null })).rejects.toThrow(ProviderRefused);
    expect(fake.requests.length).toBe(count);

    const error = await adyenAdapter.refund(ctx, { ...base, providerPaymentId: '8815000000000000' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderRefused);
    expect((error as ProviderRefused).status).toBe(422);
    expect(fake.refunds.some((r) => r.paymentPspReference === '8815000000000000')).toBe(false);
  });
});

describe('chargeSavedMethod', () => {
  const chargeSavedMethod = adyenAdapter.chargeSavedMethod!.bind(adyenAdapter);

  function storedMethodCharge(overrides: Partial<SavedMethodCharge> = {}): SavedMethodCharge {
    return {
      paymentId: randomUUID(),
      amountMinor: 4250,
      currency: 'eur',
      providerCustomerId: 'shopper-42',
      paymentMethodId: `M5N7TQ4TG5PF${randomUUID().slice(0, 4).toUpperCase()}`,
      description: 'Invoice INV-0042',
      idempotencyKey: randomUUID(),
      ...overrides,
    };
  }

  it('pays with the stored method, without the shopper, and reports Authorised as succeeded', async () => {
    const charge = storedMethodCharge();
    const result = await chargeSavedMethod(ctx, charge);

    const sent = lastRequest();
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe('/v72/payments');
    expect(sent.headers['x-api-key']).toBe('AQE_test_key');
    expect(sent.headers['idempotency-key']).toBe(charge.idempotencyKey);
    expect(sent.body).toEqual({
      merchantAccount: 'AcmeBillingECOM',
      amount: { value: 4250, currency: 'EUR' },
      reference: charge.paymentId,
      paymentMethod: { type: 'scheme', storedPaymentMethodId: charge.paymentMethodId },
      shopperReference: 'shopper-42',
      shopperInteraction: 'ContAuth',
      recurringProcessingModel: 'UnscheduledCardOnFile',
      metadata: { payment_id: charge.paymentId },
    });
    expect(result).toEqual({ providerPaymentId: expect.stringMatching(/^\d{16}$/), outcome: 'succeeded', failureReason: null });
    expect(fake.payments.get(result.providerPaymentId!)).toMatchObject({
      resultCode: 'Authorised',
      sessionId: null,
      amount: { value: 4250, currency: 'EUR' },
      storedPaymentMethodId: charge.paymentMethodId,
    });
  });

  it('creates one payment when a retried activity sends the same idempotency key', async () => {
    const charge = storedMethodCharge();
    const first = await chargeSavedMethod(ctx, charge);
    const retried = await chargeSavedMethod(ctx, charge);

    expect(retried).toEqual(first);
    expect([...fake.payments.values()].filter((p) => p.reference === charge.paymentId)).toHaveLength(1);
  });

  it('answers a refused card as a failed charge with the refusal reason, not a throw', async () => {
    const charge = storedMethodCharge();
    fake.refuseStoredMethod(charge.paymentMethodId, 'Not enough balance');
    const result = await chargeSavedMethod(ctx, charge);

    expect(result).toEqual({
      providerPaymentId: expect.stringMatching(/^\d{16}$/),
      outcome: 'failed',
      failureReason: 'Not enough balance',
    });
    expect(fake.payments.get(result.providerPaymentId!)?.resultCode).toBe('Refused');
  });

  it('keeps the payment, so its notification and refund find it by pspReference', async () => {
    const charge = storedMethodCharge();
    const { providerPaymentId: psp } = await chargeSavedMethod(ctx, charge);

    const [notification] = verify(bodyOf([fake.item({ eventCode: 'AUTHORISATION', pspReference: psp! }, HMAC_KEY)]));
    expect(notification).toMatchObject({ outcome: 'succeeded', paymentId: charge.paymentId, providerPaymentId: psp });

    const refund = await adyenAdapter.refund(ctx, {
      paymentId: charge.paymentId,
      providerPaymentId: psp,
      providerCheckoutId: null,
      amountMinor: 4250,
      currency: 'EUR',
      idempotencyKey: randomUUID(),
    });
    expect(refund.status).toBe('received');
  });

  it('refuses before any call without the shopper the stored method belongs to', async () => {
    const count = fake.requests.length;
    await expect(chargeSavedMethod(ctx, storedMethodCharge({ providerCustomerId: null }))).rejects.toThrow(ProviderRefused);
    const { merchant_account: _m, ...noMerchant } = ctx.settings;
    await expect(chargeSavedMethod({ ...ctx, settings: noMerchant }, storedMethodCharge())).rejects.toThrow(ProviderRefused);
    expect(fake.requests.length).toBe(count);
  });

  it('fails for good on a request Adyen rejects, and leaves an unreachable Adyen to the retries', async () => {
    const error = await chargeSavedMethod(ctx, storedMethodCharge({ amountMinor: 12.5 })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderRefused);
    expect((error as ProviderRefused).status).toBe(422);

    const closed = await startFakeAdyen();
    await closed.close();
    const unreachable = await chargeSavedMethod({ ...ctx, apiBaseUrl: closed.url }, storedMethodCharge()).catch((e: unknown) => e);
    expect(unreachable).toBeInstanceOf(Error);
    expect(unreachable).not.toBeInstanceOf(ProviderRefused);
  });
});

describe('the fake itself', () => {
  it("answers Adyen's validation error for a session without amount or merchant account", async () => {
    const post = (body: unknown) =>
      fetch(`${fake.url}/v72/sessions`, { method: 'POST', headers: { 'X-API-Key': 'k' }, body: JSON.stringify(body) });
    for (const body of [
      { merchantAccount: 'M', returnUrl: 'https://x' },
      { amount: { value: 1, currency: 'EUR' }, returnUrl: 'https://x' },
    ]) {
      const res = await post(body);
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ status: 422, errorType: 'validation', errorCode: expect.any(String) });
    }
  });
});

describe('verifyNotification: signatures', () => {
  it('verifies the payment-providers.md §8 Adyen vector and maps it to succeeded', () => {
    const message = '7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true';
    const vector = 'coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0=';
    expect(createHmac('sha256', Buffer.from(HMAC_KEY, 'hex')).update(message).digest('base64')).toBe(vector);

    const paymentId = '00000000-0000-4000-8000-000000000001';
    const body =
      '{"live":"false","notificationItems":[{"NotificationRequestItem":{' +
      '"eventCode":"AUTHORISATION","success":"true","pspReference":"7914073381342284",' +
      '"merchantAccountCode":"TestMerchant","merchantReference":"TestPayment-1407325143704",' +
      '"amount":{"value":1130,"currency":"EUR"},"eventDate":"2026-01-01T10:00:00+01:00",' +
      `"additionalData":{"hmacSignature":"${vector}","metadata.payment_id":"${paymentId}"}}}]}`;

    expect(verify(body)).toEqual([
      {
        eventKey: '7914073381342284:AUTHORISATION:true',
        eventType: 'AUTHORISATION',
        outcome: 'succeeded',
        paymentId,
        providerCheckoutId: null,
        providerPaymentId: '7914073381342284',
        failureReason: null,
        providerCustomerId: null,
        paymentMethodId: null,
      },
    ]);
    // The same item with another amount no longer matches its signature.
    expect(() => verify(body.replace('"value":1130', '"value":1131'))).toThrow(InvalidProviderSignature);
  });

  it('signs like the fake: a batch of two items is delivered over HTTP and both are mapped', async () => {
    const { psp, paymentId } = await paidCheckout();
    const receiver = await startReceiver();
    try {
      const answer = await fake.notify(receiver.url, HMAC_KEY, [
        { eventCode: 'AUTHORISATION', pspReference: psp },
        { eventCode: 'REFUND', originalReference: psp, amount: { value: 500, currency: 'EUR' } },
      ]);
      expect(answer).toEqual({ status: 200, body: '[accepted]' });
      const [authorisation, refund] = receiver.received.at(-1)!;
      expect(authorisation).toMatchObject({ outcome: 'succeeded', paymentId, providerPaymentId: psp });
      expect(refund).toMatchObject({ outcome: 'refunded', providerPaymentId: psp, eventType: 'REFUND' });
      expect(refund!.eventKey).not.toBe(authorisation!.eventKey);
    } finally {
      await receiver.close();
    }
  });

  it('rejects the whole batch when one item is forged', () => {
    const good = fake.item({ eventCode: 'AUTHORISATION', merchantReference: randomUUID() }, HMAC_KEY);
    const forged = fake.item({ eventCode: 'AUTHORISATION', merchantReference: randomUUID() }, OTHER_KEY);
    expect(verify(bodyOf([good]))).toHaveLength(1);
    expect(() => verify(bodyOf([good, forged]))).toThrow(InvalidProviderSignature);

    const tampered = fake.item({ eventCode: 'AUTHORISATION', success: 'false' }, HMAC_KEY);
    tampered.success = 'true' as NotificationRequestItem['success'];
    expect(() => verify(bodyOf([good, tampered]))).toThrow(InvalidProviderSignature);
  });

  it('answers 401 over HTTP for a notification signed with another key', async () => {
    const receiver = await startReceiver();
    try {
      expect((await fake.notify(receiver.url, OTHER_KEY, [{ eventCode: 'AUTHORISATION' }])).status).toBe(401);
      expect((await fake.notify(receiver.url, HMAC_KEY, [{ eventCode: 'AUTHORISATION' }])).status).toBe(200);
    } finally {
      await receiver.close();
    }
  });

  it('rejects an item without hmacSignature, and any notification when the key is missing or not hex', () => {
    const unsigned = fake.item({ eventCode: 'AUTHORISATION' });
    const signed = fake.item({ eventCode: 'AUTHORISATION' }, HMAC_KEY);
    expect(() => verify(bodyOf([signed, unsigned]))).toThrow(InvalidProviderSignature);

    const { hmac_key: _h, ...noKey } = ctx.settings;
    expect(() => verify(bodyOf([signed]), {}, { settings: noKey })).toThrow(InvalidProviderSignature);
    // 'secret' has no hex digit pairs: read as hex it would be an empty key anyone can sign with.
    const emptyKeySignature = createHmac('sha256', Buffer.alloc(0)).update('x').digest('base64');
    const headers = { hmacsignature: emptyKeySignature };
    expect(() => verify('x', headers, { settings: { ...ctx.settings, hmac_key: 'secret' } })).toThrow(InvalidProviderSignature);
  });

  it('rejects an empty batch and a body that is not a notification', () => {
    expect(() => verify(bodyOf([]))).toThrow(InvalidProviderSignature);
    expect(() => verify('{"notificationItems":[{"NotificationRequestItem":{}}]}')).toThrow(InvalidProviderSignature);
  });

  it('accepts the header form: HmacSignature or X-Webhook-Signature over the raw body', async () => {
    const receiver = await startReceiver();
    try {
      const answer = await fake.notify(receiver.url, HMAC_KEY, [{ eventCode: 'CANCELLATION', originalReference: '8815000000000001' }], {
        headerForm: true,
      });
      expect(answer.status).toBe(200);
      expect(receiver.received.at(-1)).toMatchObject([{ outcome: 'canceled', providerPaymentId: '8815000000000001' }]);
      expect((await fake.notify(receiver.url, OTHER_KEY, [{ eventCode: 'AUTHORISATION' }], { headerForm: true })).status).toBe(401);
    } finally {
      await receiver.close();
    }

    const body = bodyOf([fake.item({ eventCode: 'EXPIRE' })]);
    const signature = createHmac('sha256', Buffer.from(HMAC_KEY, 'hex')).update(body).digest('base64');
    expect(verify(body, { 'x-webhook-signature': signature })[0]?.outcome).toBe('canceled');
    const forged = createHmac('sha256', Buffer.from(OTHER_KEY, 'hex')).update(body).digest('base64');
    expect(() => verify(body, { hmacsignature: forged })).toThrow(InvalidProviderSignature);
    // A header signature decides alone: signed items do not rescue a wrong one.
    const signedBody = bodyOf([fake.item({ eventCode: 'EXPIRE' }, HMAC_KEY)]);
    expect(() => verify(signedBody, { hmacsignature: forged })).toThrow(InvalidProviderSignature);
  });

  it('treats a truncated body as unverifiable, or as a bad request when its header signature is authentic', () => {
    const body = Buffer.from(bodyOf([fake.item({ eventCode: 'AUTHORISATION' }, HMAC_KEY)]));
    const truncated = body.subarray(0, body.length - 7);
    expect(() => verify(truncated)).toThrow(InvalidProviderSignature);

    const overFull = createHmac('sha256', Buffer.from(HMAC_KEY, 'hex')).update(body).digest('base64');
    expect(() => verify(truncated, { hmacsignature: overFull })).toThrow(InvalidProviderSignature);

    const overTruncated = createHmac('sha256', Buffer.from(HMAC_KEY, 'hex')).update(truncated).digest('base64');
    const error = (() => {
      try {
        verify(truncated, { hmacsignature: overTruncated });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(InvalidProviderSignature);
  });
});

describe('verifyNotification: mapping', () => {
  const payment = '8815000000000042';
  it.each([
    ['AUTHORISATION', 'true', 'succeeded', null, undefined],
    ['AUTHORISATION', 'false', 'failed', 'Refused', undefined],
    ['CAPTURE', 'true', 'succeeded', null, payment],
    ['CAPTURE', 'false', null, 'Refused', payment],
    ['CANCELLATION', 'true', 'canceled', null, payment],
    ['CANCELLATION', 'false', null, 'Refused', payment],
    ['OFFER_CLOSED', 'true', 'canceled', null, undefined],
    ['EXPIRE', 'true', 'canceled', null, undefined],
    ['REFUND', 'true', 'refunded', null, payment],
    ['REFUND', 'false', null, 'Refused', payment],
    ['REFUND_FAILED', 'true', null, 'Refused', payment],
    ['CHARGEBACK', 'true', null, null, payment],
    ['REPORT_AVAILABLE', 'true', null, null, undefined],
  ] as const)('%s success=%s → %s', (eventCode, success, outcome, failureReason, originalReference) => {
    const item = fake.item({ eventCode, success, reason: 'Refused', ...(originalReference ? { originalReference } : {}) }, HMAC_KEY);
    const [notification] = verify(bodyOf([item]));
    expect(notification).toMatchObject({
      eventKey: `${item.pspReference}:${eventCode}:${success}`,
      eventType: eventCode,
      outcome,
      failureReason,
      providerCheckoutId: null,
      providerPaymentId: originalReference ?? item.pspReference,
    });
  });

  it('finds our payment id in metadata, else in a UUID merchantReference', () => {
    const fromMetadata = randomUUID();
    const fromReference = randomUUID();
    const items = [
      fake.item(
        { eventCode: 'AUTHORISATION', merchantReference: 'INV-7', additionalData: { 'metadata.payment_id': fromMetadata } },
        HMAC_KEY,
      ),
      fake.item({ eventCode: 'AUTHORISATION', merchantReference: fromReference }, HMAC_KEY),
      fake.item({ eventCode: 'AUTHORISATION', merchantReference: 'TestPayment-1407325143704' }, HMAC_KEY),
    ];
    expect(verify(bodyOf(items)).map((n) => n.paymentId)).toEqual([fromMetadata, fromReference, null]);
  });

  it('reports the saved payment method and shopper, flat or nested', () => {
    const flat = fake.item(
      {
        eventCode: 'AUTHORISATION',
        additionalData: { 'recurring.recurringDetailReference': 'M5N7TQ4TG5PFWR50', 'recurring.shopperReference': 'cus_1' },
      },
      HMAC_KEY,
    );
    const nested = fake.item({ eventCode: 'AUTHORISATION' }, HMAC_KEY);
    (nested.additionalData as Record<string, unknown>).recurring = { recurringDetailReference: 'QWERTY1234567890' };
    const [a, b] = verify(bodyOf([flat, nested]));
    expect(a).toMatchObject({ paymentMethodId: 'M5N7TQ4TG5PFWR50', providerCustomerId: 'cus_1' });
    expect(b).toMatchObject({ paymentMethodId: 'QWERTY1234567890', providerCustomerId: null });
  });
});

describe('references', () => {
  it('names payment ids and pspReferences without verifying', () => {
    const paymentId = randomUUID();
    const other = randomUUID();
    const body = bodyOf([
      fake.item({ eventCode: 'AUTHORISATION', pspReference: '8815000000000100', additionalData: { 'metadata.payment_id': paymentId } }),
      fake.item({ eventCode: 'REFUND', pspReference: '8815000000000101', originalReference: '8815000000000100', merchantReference: other }),
      fake.item({ eventCode: 'AUTHORISATION', pspReference: '8815000000000102', merchantReference: 'not-ours' }),
    ]);
    const refs = adyenAdapter.references(Buffer.from(body));
    expect(refs.paymentIds.sort()).toEqual([paymentId, other].sort());
    expect(refs.providerIds.sort()).toEqual(['8815000000000100', '8815000000000101', '8815000000000102']);
  });

  it('is empty for a body that cannot be read', () => {
    expect(adyenAdapter.references(Buffer.from('{"notificationItems":[{"Notif'))).toEqual({ paymentIds: [], providerIds: [] });
  });
});

/** A webhook endpoint the way the route uses the adapter: 200 `[accepted]`, 401 forged, 400 unreadable. */
async function startReceiver(): Promise<{ url: string; received: ProviderNotification[][]; close(): Promise<void> }> {
  const received: ProviderNotification[][] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        received.push(adyenAdapter.verifyNotification(ctx, { rawBody: Buffer.concat(chunks), headers: req.headers, now: NOW }));
        res.writeHead(200).end('[accepted]');
      } catch (err) {
        res.writeHead(err instanceof InvalidProviderSignature ? 401 : 400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/payments/webhook/provider_b`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
