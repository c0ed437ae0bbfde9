// manual: the §8 vector through the production verifier, the timestamped form and its 300 s
// window, the notification mapping, and the local checkout / refund that call nobody.
import { onTestFinished, describe, expect, it } from 'vitest';

import { manualAdapter } from '../../../src/payments/providers/manual';
import { hmacSha256Hex } from '../../../src/payments/providers/signatures';
import { InvalidProviderSignature, type ProviderContext, type RawHeaders } from '../../../src/payments/providers/types';
import { notifyManual } from '../../support/providers/manual-notifier';
import { startReceiver } from '../../support/receiver';

// payment-providers.md §8, exact bytes (no trailing newline).
const B4 = '{"payment_id":"00000000-0000-0000-0000-000000000001","status":"succeeded"}';
const B4_SIGNATURE = 'cbdd579c80879b0e4bc76b9ed2be0ed8d751de969c04442d0c2ab0d941e101ee';
const B4_SHA256 = '58aa687280cb64f027943f18a8b8e99e36a39c8555ff910f3a8a181bca821e4c';
const B4_PAYMENT_ID = '00000000-0000-0000-0000-000000000001';

const SECRET = 'manual_secret';
const NOW = new Date('2026-03-01T10:00:00.000Z');
const NOW_S = 1_772_359_200;
/** HMAC-SHA256 of `"1772359200." + B4` with manual_secret, computed with node:crypto. */
const B4_AT_NOW_SIGNATURE = 'b121c87f9b408653deac66bfb748f790ae933cf70bb23282277320dc62329ba8';

const ctx: ProviderContext = { settings: { webhook_secret: SECRET } };

function input(body: string, headers: RawHeaders, now = NOW) {
  return { rawBody: Buffer.from(body, 'utf8'), headers, now };
}

function timestamped(body: string, timestamp: number, now = NOW) {
  return input(
    body,
    { 'x-webhook-signature': hmacSha256Hex(SECRET, `${timestamp}.${body}`), 'x-webhook-timestamp': String(timestamp) },
    now,
  );
}

function verifyOne(payload: unknown) {
  const body = JSON.stringify(payload);
  const notifications = manualAdapter.verifyNotification(ctx, input(body, { 'x-webhook-signature': hmacSha256Hex(SECRET, body) }));
  expect(notifications).toHaveLength(1);
  return notifications[0]!;
}

const B4_NOTIFICATION = {
  eventKey: B4_SHA256,
  eventType: 'payment.manual',
  outcome: 'succeeded',
  paymentId: B4_PAYMENT_ID,
  providerCheckoutId: `manual_${B4_PAYMENT_ID}`,
  providerPaymentId: null,
  failureReason: null,
  providerCustomerId: null,
  paymentMethodId: null,
};

describe('manualAdapter.verifyNotification', () => {
  it('accepts the §8 vector (B4, manual_secret) in X-Webhook-Signature', () => {
    expect(manualAdapter.verifyNotification(ctx, input(B4, { 'x-webhook-signature': B4_SIGNATURE }))).toEqual([B4_NOTIFICATION]);
  });

  it('accepts the §8 vector with a sha256= prefix', () => {
    expect(manualAdapter.verifyNotification(ctx, input(B4, { 'x-webhook-signature': `sha256=${B4_SIGNATURE}` }))).toEqual([
      B4_NOTIFICATION,
    ]);
  });

  it.each(['stripe-signature', 'x-ucp-signature', 'webhook-signature'])('accepts the signature from the §1.2 header %s', (header) => {
    expect(manualAdapter.verifyNotification(ctx, input(B4, { [header]: B4_SIGNATURE }))).toEqual([B4_NOTIFICATION]);
  });

  it.each<[string, ProviderContext, string, RawHeaders]>([
    ['a forged signature', ctx, B4, { 'x-webhook-signature': `${B4_SIGNATURE.slice(0, -1)}f` }],
    ['the wrong secret', { settings: { webhook_secret: 'ucp_secret' } }, B4, { 'x-webhook-signature': B4_SIGNATURE }],
    ['no signature header', ctx, B4, {}],
    ['a truncated body', ctx, B4.slice(0, -1), { 'x-webhook-signature': B4_SIGNATURE }],
    ['a changed status', ctx, B4.replace('succeeded', 'failed'), { 'x-webhook-signature': B4_SIGNATURE }],
    ['no webhook_secret configured', { settings: {} }, B4, { 'x-webhook-signature': B4_SIGNATURE }],
  ])('rejects %s with InvalidProviderSignature', (_name, context, body, headers) => {
    expect(() => manualAdapter.verifyNotification(context, input(body, headers))).toThrow(InvalidProviderSignature);
  });

  it('a correctly signed body that is not a JSON object is a plain error', () => {
    const body = 'payment_id=1';
    let thrown: unknown;
    try {
      manualAdapter.verifyNotification(ctx, input(body, { 'x-webhook-signature': hmacSha256Hex(SECRET, body) }));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown).not.toBeInstanceOf(InvalidProviderSignature);
  });
});

describe('manual timestamped signatures', () => {
  it('accepts the HMAC of "<ts>.<body>" for a fresh timestamp', () => {
    const headers = { 'x-webhook-signature': B4_AT_NOW_SIGNATURE, 'x-webhook-timestamp': String(NOW_S) };
    expect(manualAdapter.verifyNotification(ctx, input(B4, headers))).toEqual([B4_NOTIFICATION]);
    expect(
      manualAdapter.verifyNotification(ctx, input(B4, { ...headers, 'x-webhook-signature': `sha256=${B4_AT_NOW_SIGNATURE}` })),
    ).toHaveLength(1);
  });

  it.each([
    ['exactly 300 s old', NOW_S - 300, true],
    ['300 s ahead', NOW_S + 300, true],
    ['301 s old', NOW_S - 301, false],
    ['301 s ahead', NOW_S + 301, false],
    ['an hour old', NOW_S - 3600, false],
  ])('a timestamp %s is accepted: %s', (_name, timestamp, accepted) => {
    const verify = () => manualAdapter.verifyNotification(ctx, timestamped(B4, timestamp));
    if (accepted) expect(verify()).toHaveLength(1);
    else expect(verify).toThrow(InvalidProviderSignature);
  });

  it('with a timestamp, the plain-body HMAC no longer verifies', () => {
    const headers = { 'x-webhook-signature': B4_SIGNATURE, 'x-webhook-timestamp': String(NOW_S) };
    expect(() => manualAdapter.verifyNotification(ctx, input(B4, headers))).toThrow(InvalidProviderSignature);
  });

  it('a signature made for another timestamp does not verify', () => {
    const headers = { 'x-webhook-signature': B4_AT_NOW_SIGNATURE, 'x-webhook-timestamp': String(NOW_S + 1) };
    expect(() => manualAdapter.verifyNotification(ctx, input(B4, headers))).toThrow(InvalidProviderSignature);
  });

  it.each(['abc', '1772359200.5', '-1772359200', '1e9'])('a timestamp that is not unix seconds (%s) is rejected', (timestamp) => {
    const headers = { 'x-webhook-signature': hmacSha256Hex(SECRET, `${timestamp}.${B4}`), 'x-webhook-timestamp': timestamp };
    expect(() => manualAdapter.verifyNotification(ctx, input(B4, headers))).toThrow(InvalidProviderSignature);
  });
});

describe('manual notification mapping', () => {
  it.each([
    ['succeeded', 'succeeded'],
    ['failed', 'failed'],
    ['canceled', 'canceled'],
    ['refunded', null],
    ['pending', null],
    ['', null],
  ])('status %j → %s', (status, outcome) => {
    expect(verifyOne({ payment_id: B4_PAYMENT_ID, status }).outcome).toBe(outcome);
  });

  it('a body without a status reports money received', () => {
    expect(verifyOne({ payment_id: B4_PAYMENT_ID }).outcome).toBe('succeeded');
    expect(verifyOne({ payment_id: B4_PAYMENT_ID, status: 7 }).outcome).toBeNull();
  });

  it('carries the event type, the reference and the failure reason', () => {
    expect(
      verifyOne({
        payment_id: B4_PAYMENT_ID,
        status: 'failed',
        event_type: 'payment.bounced',
        reference: 'BANK-77',
        failure_reason: 'Cheque bounced',
      }),
    ).toEqual({
      eventKey: expect.stringMatching(/^[0-9a-f]{64}$/),
      eventType: 'payment.bounced',
      outcome: 'failed',
      paymentId: B4_PAYMENT_ID,
      providerCheckoutId: `manual_${B4_PAYMENT_ID}`,
      providerPaymentId: 'BANK-77',
      failureReason: 'Cheque bounced',
      providerCustomerId: null,
      paymentMethodId: null,
    });
    expect(verifyOne({ payment_id: B4_PAYMENT_ID, status: 'failed' }).failureReason).toBe('Payment failed');
    expect(verifyOne({ payment_id: B4_PAYMENT_ID, failure_reason: 'ignored' }).failureReason).toBeNull();
  });

  it('a body without payment_id verifies but points at no payment', () => {
    expect(verifyOne({ status: 'succeeded' })).toMatchObject({ paymentId: null, providerCheckoutId: null, outcome: 'succeeded' });
  });
});

describe('manualAdapter.references', () => {
  it('names the payment and its local checkout id without verifying', () => {
    expect(manualAdapter.references(Buffer.from(B4))).toEqual({ paymentIds: [B4_PAYMENT_ID], providerIds: [`manual_${B4_PAYMENT_ID}`] });
  });

  it.each(['', 'nope', '[]', '{"status":"succeeded"}', '{"payment_id":42}'])('is empty for %j', (body) => {
    expect(manualAdapter.references(Buffer.from(body))).toEqual({ paymentIds: [], providerIds: [] });
  });
});

describe('manual checkout and refund', () => {
  it('creates a local checkout: manual_<payment id>, no URL, open 30 days', async () => {
    const result = await manualAdapter.createCheckout(ctx, {
      paymentId: B4_PAYMENT_ID,
      invoiceId: 'inv',
      invoiceNumber: 'INV-1',
      amountMinor: 1999,
      currency: 'USD',
      successUrl: 'https://merchant.example/paid',
      cancelUrl: 'https://merchant.example/canceled',
      returnUrl: 'https://billing.example/return',
      customerEmail: null,
      idempotencyKey: 'k',
      now: NOW,
    });
    expect(result).toEqual({
      providerCheckoutId: `manual_${B4_PAYMENT_ID}`,
      checkoutUrl: null,
      expiresAt: new Date('2026-03-31T10:00:00.000Z'),
      providerPaymentId: null,
    });
  });

  it('expires nothing and records a refund as succeeded', async () => {
    await expect(manualAdapter.expireCheckout(ctx, `manual_${B4_PAYMENT_ID}`)).resolves.toBeUndefined();
    await expect(
      manualAdapter.refund(ctx, {
        paymentId: B4_PAYMENT_ID,
        providerPaymentId: null,
        providerCheckoutId: `manual_${B4_PAYMENT_ID}`,
        amountMinor: 1999,
        currency: 'USD',
        idempotencyKey: 'r',
      }),
    ).resolves.toEqual({ providerRefundId: null, status: 'succeeded' });
  });
});

describe('notifyManual', () => {
  it('sends what the adapter verifies, plain and timestamped', async () => {
    const receiver = await startReceiver();
    onTestFinished(() => receiver.close());

    expect((await notifyManual(receiver.url('/plain'), SECRET, B4)).status).toBe(200);
    expect(
      (await notifyManual(receiver.url('/stamped'), SECRET, { payment_id: B4_PAYMENT_ID, status: 'failed' }, { timestamp: NOW_S - 10 }))
        .status,
    ).toBe(200);

    const [plain] = receiver.requests('/plain');
    expect(plain!.body).toBe(B4);
    expect(plain!.headers['x-webhook-signature']).toBe(B4_SIGNATURE);
    expect(plain!.headers['x-webhook-timestamp']).toBeUndefined();
    expect(manualAdapter.verifyNotification(ctx, input(plain!.body, plain!.headers))).toEqual([B4_NOTIFICATION]);

    const [stamped] = receiver.requests('/stamped');
    expect(stamped!.headers['x-webhook-timestamp']).toBe(String(NOW_S - 10));
    expect(manualAdapter.verifyNotification(ctx, input(stamped!.body, stamped!.headers))[0]!.outcome).toBe('failed');
    // The same delivery replayed ten minutes later is refused.
    expect(() => manualAdapter.verifyNotification(ctx, input(stamped!.body, stamped!.headers, new Date(NOW.getTime() + 600_000)))).toThrow(
      InvalidProviderSignature,
    );
  });
});
