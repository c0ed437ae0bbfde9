// provider_d (UCP): the §8 vector through the production verifier, the notification mapping, and
// checkout / cancel / refund against the fake UCP business over real HTTP. Also the rows of the
// shared signatures module, which both UCP and manual rest on.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';

import {
  constantTimeEqual,
  hmacSha256Hex,
  parseJsonObject,
  sha256Hex,
  signatureHeader,
  verifyHexHmac,
} from '../../../src/payments/providers/signatures';
import {
  InvalidProviderSignature,
  ProviderRefused,
  type CheckoutRequest,
  type ProviderContext,
  type RawHeaders,
  type RefundRequest,
} from '../../../src/payments/providers/types';
import { ucpAdapter } from '../../../src/payments/providers/ucp';
import { startFakeUcp, type FakeUcp, type FakeUcpOptions } from '../../support/providers/fake-ucp';
import { startReceiver } from '../../support/receiver';

// payment-providers.md §8, exact bytes.
const B1 = '{"id":"evt_1","type":"checkout.session.completed"}';
const B2 = '{"events":[{"id":"EV1","resource_type":"payments","action":"confirmed","links":{"payment":"PM1"}}]}';
const B3 = '{"type":"checkout.completed","data":{"id":"chk_1","status":"completed"}}';
const B4 = '{"payment_id":"00000000-0000-0000-0000-000000000001","status":"succeeded"}';
const B3_SIGNATURE = '52ae9a5ca577d69912d97f35ac4def225b8b8713ea0446e438d5a6fd8f74aab1';
const B3_SHA256 = '35afbd303c580a154685104312f70da93351e6eafcbb7cf88300df8dbf774c63';

const SECRET = 'ucp_secret';
const NOW = new Date('2026-03-01T10:00:00.000Z');
const PAYMENT_ID = '6f1c2b8e-4d3a-4c1b-9e2f-0a1b2c3d4e5f';
const DAY_MS = 24 * 60 * 60 * 1000;

const webhookCtx: ProviderContext = { settings: { base_url: 'http://127.0.0.1:9', api_key: 'k', webhook_secret: SECRET } };

function input(body: string | Buffer, headers: RawHeaders) {
  return { rawBody: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'), headers, now: NOW };
}

/** A notification signed correctly with the UCP secret: what a well-behaved business sends. */
function signed(payload: unknown) {
  const body = JSON.stringify(payload);
  return input(body, { 'x-ucp-signature': hmacSha256Hex(SECRET, body) });
}

function verifyOne(payload: unknown) {
  const notifications = ucpAdapter.verifyNotification(webhookCtx, signed(payload));
  expect(notifications).toHaveLength(1);
  return notifications[0]!;
}

describe('signatures', () => {
  it.each([
    ['Stripe v1', 'whsec_test', `1700000000.${B1}`, '749721cbedbfa4cc1aa6c9c2bec1edd93766a07906c9d9b3dbc7626e4e660caf'],
    ['GoCardless', 'gc_secret', B2, '69199aca0b34a4fa68ad2705134bafe5b342c24149b010b8670a192156cfc997'],
    ['UCP', 'ucp_secret', B3, B3_SIGNATURE],
    ['manual', 'manual_secret', B4, 'cbdd579c80879b0e4bc76b9ed2be0ed8d751de969c04442d0c2ab0d941e101ee'],
  ])('hmacSha256Hex gives the §8 %s vector', (_name, key, message, expected) => {
    expect(hmacSha256Hex(key, message)).toBe(expected);
    expect(hmacSha256Hex(key, Buffer.from(message, 'utf8'))).toBe(expected);
  });

  it.each([
    ['the exact hex', B3_SIGNATURE, true],
    ['sha256= prefixed', `sha256=${B3_SIGNATURE}`, true],
    ['SHA256= prefixed', `SHA256=${B3_SIGNATURE}`, true],
    ['upper-case hex', B3_SIGNATURE.toUpperCase(), true],
    ['surrounded by spaces', ` ${B3_SIGNATURE} `, true],
    ['one digit changed', `${B3_SIGNATURE.slice(0, -1)}0`, false],
    ['one digit short', B3_SIGNATURE.slice(0, -1), false],
    ['trailing garbage', `${B3_SIGNATURE}zz`, false],
    ['another prefix', `sha1=${B3_SIGNATURE}`, false],
    ['the prefix alone', 'sha256=', false],
    ['empty', '', false],
  ])('verifyHexHmac: %s → %s', (_name, signature, expected) => {
    expect(verifyHexHmac(SECRET, Buffer.from(B3, 'utf8'), signature)).toBe(expected);
  });

  it.each([
    ['abc', 'abc', true],
    ['abc', 'abd', false],
    ['abc', 'abcd', false],
    ['é', 'e', false],
    ['', '', true],
  ])('constantTimeEqual(%j, %j) is %s', (a, b, expected) => {
    expect(constantTimeEqual(a, b)).toBe(expected);
  });

  it.each<[string, RawHeaders, string | null]>([
    ['the preferred header first', { 'webhook-signature': 'b', 'x-ucp-signature': 'a' }, 'a'],
    ['then Stripe-Signature', { 'x-webhook-signature': 'd', 'webhook-signature': 'c', 'stripe-signature': 'b' }, 'b'],
    ['then Webhook-Signature', { 'x-webhook-signature': 'd', 'webhook-signature': 'c' }, 'c'],
    ['then X-Webhook-Signature', { 'x-webhook-signature': 'd' }, 'd'],
    ['a blank header counts as absent', { 'x-ucp-signature': '  ', 'webhook-signature': 'c' }, 'c'],
    ['the first of repeated values', { 'x-ucp-signature': ['a', 'z'] }, 'a'],
    ['null when none is present', { 'content-type': 'application/json' }, null],
  ])('signatureHeader: %s', (_name, headers, expected) => {
    expect(signatureHeader(headers, 'x-ucp-signature')).toBe(expected);
    expect(signatureHeader(headers, 'X-UCP-Signature')).toBe(expected);
  });

  it('sha256Hex hashes the bytes as given', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex(Buffer.from(B3, 'utf8'))).toBe(B3_SHA256);
    expect(sha256Hex(`${B3}\n`)).not.toBe(B3_SHA256);
  });

  it.each([
    ['{"a":1}', { a: 1 }],
    ['[1,2]', null],
    ['null', null],
    ['"text"', null],
    ['{"a":', null],
    ['', null],
  ])('parseJsonObject(%j)', (raw, expected) => {
    expect(parseJsonObject(Buffer.from(raw, 'utf8'))).toEqual(expected);
  });
});

describe('ucpAdapter.verifyNotification', () => {
  const expected = {
    eventKey: B3_SHA256,
    eventType: 'checkout.completed',
    outcome: 'succeeded',
    paymentId: null,
    providerCheckoutId: 'chk_1',
    providerPaymentId: null,
    failureReason: null,
    providerCustomerId: null,
    paymentMethodId: null,
  };

  it('accepts the §8 vector (B3, ucp_secret) in X-UCP-Signature', () => {
    expect(ucpAdapter.verifyNotification(webhookCtx, input(B3, { 'x-ucp-signature': B3_SIGNATURE }))).toEqual([expected]);
  });

  it('accepts the §8 vector with a sha256= prefix', () => {
    expect(ucpAdapter.verifyNotification(webhookCtx, input(B3, { 'x-ucp-signature': `sha256=${B3_SIGNATURE}` }))).toEqual([expected]);
  });

  it.each(['stripe-signature', 'webhook-signature', 'x-webhook-signature'])(
    'accepts the signature from the fallback header %s',
    (header) => {
      expect(ucpAdapter.verifyNotification(webhookCtx, input(B3, { [header]: B3_SIGNATURE }))).toEqual([expected]);
    },
  );

  it('reads X-UCP-Signature before the fallbacks', () => {
    const headers = { 'x-ucp-signature': 'f'.repeat(64), 'webhook-signature': B3_SIGNATURE };
    expect(() => ucpAdapter.verifyNotification(webhookCtx, input(B3, headers))).toThrow(InvalidProviderSignature);
  });

  it.each<[string, ProviderContext, string, RawHeaders]>([
    ['a forged signature', webhookCtx, B3, { 'x-ucp-signature': `${B3_SIGNATURE.slice(0, -1)}0` }],
    ['the wrong secret', { settings: { webhook_secret: 'other_secret' } }, B3, { 'x-ucp-signature': B3_SIGNATURE }],
    ['no signature header', webhookCtx, B3, {}],
    ['a blank signature header', webhookCtx, B3, { 'x-ucp-signature': '' }],
    ['a truncated body', webhookCtx, B3.slice(0, -1), { 'x-ucp-signature': B3_SIGNATURE }],
    ['a body with a trailing newline', webhookCtx, `${B3}\n`, { 'x-ucp-signature': B3_SIGNATURE }],
    ['no webhook_secret configured', { settings: { base_url: 'http://x' } }, B3, { 'x-ucp-signature': B3_SIGNATURE }],
  ])('rejects %s with InvalidProviderSignature', (_name, ctx, body, headers) => {
    expect(() => ucpAdapter.verifyNotification(ctx, input(body, headers))).toThrow(InvalidProviderSignature);
  });

  it.each(['not json', '[{"id":"chk_1"}]'])('a correctly signed body that is not a JSON object (%s) is a plain error', (body) => {
    let thrown: unknown;
    try {
      ucpAdapter.verifyNotification(webhookCtx, input(body, { 'x-ucp-signature': hmacSha256Hex(SECRET, body) }));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown).not.toBeInstanceOf(InvalidProviderSignature);
  });
});

describe('UCP notification mapping', () => {
  it.each([
    ['completed', 'succeeded'],
    ['failed', 'failed'],
    ['canceled', 'canceled'],
    ['refunded', 'refunded'],
    ['complete_in_progress', 'processing'],
    ['incomplete', null],
    ['ready_for_complete', null],
    ['requires_escalation', null],
    ['something_new', null],
  ])('data.status %s → %s', (status, outcome) => {
    expect(verifyOne({ type: 'checkout.updated', data: { id: 'chk_1', status } }).outcome).toBe(outcome);
  });

  it('takes the status from data, not from the event name', () => {
    expect(verifyOne({ type: 'checkout.completed', data: { id: 'chk_1', status: 'incomplete' } }).outcome).toBeNull();
    expect(verifyOne({ type: 'checkout.completed', data: { id: 'chk_1' } }).outcome).toBeNull();
  });

  it('a failure carries the first error message, else "Payment failed"', () => {
    const messages = [
      { type: 'warning', content: 'Low stock' },
      { type: 'error', code: 'payment_declined', content: 'Card declined' },
      { type: 'error', content: 'Second error' },
    ];
    expect(verifyOne({ type: 'checkout.failed', data: { id: 'chk_1', status: 'failed', messages } }).failureReason).toBe('Card declined');
    expect(verifyOne({ type: 'checkout.failed', data: { id: 'chk_1', status: 'failed' } }).failureReason).toBe('Payment failed');
    expect(verifyOne({ type: 'checkout.completed', data: { id: 'chk_1', status: 'completed', messages } }).failureReason).toBeNull();
  });

  it('names the event from type, else event_type, else ucp.unknown', () => {
    expect(verifyOne({ type: 'a', event_type: 'b', data: {} }).eventType).toBe('a');
    expect(verifyOne({ event_type: 'b', data: {} }).eventType).toBe('b');
    expect(verifyOne({ data: {} }).eventType).toBe('ucp.unknown');
  });

  it('reads a checkout sent as the root, with checkout_id and a distinct order_id', () => {
    expect(
      verifyOne({
        event_type: 'order.created',
        checkout_id: 'chk_9',
        order_id: 'ord_9',
        status: 'completed',
        metadata: { payment_id: PAYMENT_ID },
      }),
    ).toMatchObject({
      eventType: 'order.created',
      outcome: 'succeeded',
      paymentId: PAYMENT_ID,
      providerCheckoutId: 'chk_9',
      providerPaymentId: 'ord_9',
    });
  });

  it('prefers data.id over data.checkout_id and drops an order_id equal to the checkout id', () => {
    const notification = verifyOne({ type: 't', data: { id: 'chk_2', checkout_id: 'chk_other', order_id: 'chk_2', status: 'completed' } });
    expect(notification.providerCheckoutId).toBe('chk_2');
    expect(notification.providerPaymentId).toBeNull();
  });

  it('finds our payment id in the metadata, else in a li_<uuid> line item', () => {
    const lineItems = [{ id: 'li_shirt' }, { id: `li_${PAYMENT_ID}`, item: { id: 'inv_INV-1' } }];
    expect(verifyOne({ type: 't', data: { id: 'chk_1', line_items: lineItems } }).paymentId).toBe(PAYMENT_ID);
    expect(
      verifyOne({ type: 't', data: { id: 'chk_1', metadata: { payment_id: 'from-metadata' }, line_items: lineItems } }).paymentId,
    ).toBe('from-metadata');
    expect(verifyOne({ type: 't', data: { id: 'chk_1', line_items: [{ id: 'li_shirt' }] } }).paymentId).toBeNull();
  });

  it('keys each event on the SHA-256 of its exact bytes', () => {
    const compact = '{"type":"t","data":{"id":"chk_1"}}';
    const spaced = '{"type": "t", "data": {"id": "chk_1"}}';
    const key = (body: string) =>
      ucpAdapter.verifyNotification(webhookCtx, input(body, { 'x-ucp-signature': hmacSha256Hex(SECRET, body) }))[0]!.eventKey;
    expect(key(compact)).toBe(sha256Hex(compact));
    expect(key(compact)).toBe(key(compact));
    expect(key(spaced)).not.toBe(key(compact));
  });
});

describe('ucpAdapter.references', () => {
  it('names the payment and the provider ids without verifying anything', () => {
    const body = JSON.stringify({ type: 't', data: { id: 'chk_5', order_id: 'ord_5', metadata: { payment_id: PAYMENT_ID } } });
    expect(ucpAdapter.references(Buffer.from(body))).toEqual({ paymentIds: [PAYMENT_ID], providerIds: ['chk_5', 'ord_5'] });
  });

  it('reads root-form payloads and line item ids, without duplicates', () => {
    const body = JSON.stringify({ id: 'chk_6', checkout_id: 'chk_6', order_id: 'chk_6', line_items: [{ id: `li_${PAYMENT_ID}` }] });
    expect(ucpAdapter.references(Buffer.from(body))).toEqual({ paymentIds: [PAYMENT_ID], providerIds: ['chk_6'] });
  });

  it.each(['', 'not json', '[]', '{}', B3.slice(0, 20)])('is empty for %j', (body) => {
    expect(ucpAdapter.references(Buffer.from(body))).toEqual({ paymentIds: [], providerIds: [] });
  });

  it('reads the §8 body B3', () => {
    expect(ucpAdapter.references(Buffer.from(B3))).toEqual({ paymentIds: [], providerIds: ['chk_1'] });
  });
});

describe('ucpAdapter against the fake UCP business', () => {
  let fake: FakeUcp;
  let ctx: ProviderContext;

  beforeAll(async () => {
    fake = await startFakeUcp();
    // settings.base_url points nowhere: every call below must go to apiBaseUrl (trailing slash trimmed).
    ctx = {
      settings: { base_url: 'http://127.0.0.1:9', api_key: fake.apiKey, webhook_secret: SECRET, merchant_id: 'merchant_42' },
      apiBaseUrl: `${fake.url}/`,
    };
  });
  afterAll(async () => {
    await fake.close();
  });

  async function fakeWith(options: FakeUcpOptions): Promise<FakeUcp> {
    const other = await startFakeUcp(options);
    onTestFinished(() => other.close());
    return other;
  }

  function checkout(overrides: Partial<CheckoutRequest> = {}): CheckoutRequest {
    return {
      paymentId: PAYMENT_ID,
      invoiceId: 'a4d8c0de-0000-4000-8000-000000000001',
      invoiceNumber: 'INV-2026-0001',
      amountMinor: 1999,
      currency: 'USD',
      successUrl: 'https://merchant.example/paid',
      cancelUrl: 'https://merchant.example/canceled',
      returnUrl: 'https://billing.example/v1/payments/x/return',
      customerEmail: 'payer@example.com',
      idempotencyKey: `checkout-${Math.random()}`,
      now: NOW,
      ...overrides,
    };
  }

  function refundOf(overrides: Partial<RefundRequest>): RefundRequest {
    return {
      paymentId: PAYMENT_ID,
      providerPaymentId: null,
      providerCheckoutId: null,
      amountMinor: 1999,
      currency: 'USD',
      idempotencyKey: `refund-${Math.random()}`,
      ...overrides,
    };
  }

  it('creates a checkout session: 1999 USD sent once as the price, with the UCP headers and our metadata', async () => {
    const result = await ucpAdapter.createCheckout(ctx, checkout({ idempotencyKey: 'checkout-usd' }));

    expect(result.providerCheckoutId).toMatch(/^chk_[0-9a-f]{24}$/);
    expect(result.checkoutUrl).toBe(`${fake.url}/pay/${result.providerCheckoutId}`);
    expect(result.expiresAt).toEqual(new Date(NOW.getTime() + DAY_MS));

    const sent = fake.requests.at(-1)!;
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe('/checkout-sessions');
    expect(sent.headers).toMatchObject({
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: `Bearer ${fake.apiKey}`,
      'ucp-agent': `profile="${fake.url}/.well-known/ucp"`,
      'idempotency-key': 'checkout-usd',
    });
    expect(sent.body).toEqual({
      line_items: [
        {
          id: `li_${PAYMENT_ID}`,
          item: { id: 'inv_INV-2026-0001', title: 'Invoice INV-2026-0001', price: 1999 },
          quantity: 1,
        },
      ],
      currency: 'USD',
      metadata: {
        payment_id: PAYMENT_ID,
        invoice_id: 'a4d8c0de-0000-4000-8000-000000000001',
        invoice_number: 'INV-2026-0001',
        success_url: 'https://merchant.example/paid',
        cancel_url: 'https://merchant.example/canceled',
      },
      buyer: { email: 'payer@example.com' },
      merchant_id: 'merchant_42',
    });
    expect(fake.sessions.get(result.providerCheckoutId)?.totals).toEqual([
      { type: 'subtotal', amount: 1999 },
      { type: 'total', amount: 1999 },
    ]);
  });

  it('sends 500 JPY as 500, names the invoice by id without a number, and leaves out what is unknown', async () => {
    const noMerchant: ProviderContext = { ...ctx, settings: { ...ctx.settings, merchant_id: '' } };
    const result = await ucpAdapter.createCheckout(
      noMerchant,
      checkout({ amountMinor: 500, currency: 'JPY', invoiceNumber: null, customerEmail: null, invoiceId: 'inv-id-7' }),
    );

    const body = fake.requests.at(-1)!.body as Record<string, unknown>;
    expect(body.line_items).toEqual([
      { id: `li_${PAYMENT_ID}`, item: { id: 'inv_inv-id-7', title: 'Invoice inv-id-7', price: 500 }, quantity: 1 },
    ]);
    expect(body.currency).toBe('JPY');
    expect(body).not.toHaveProperty('buyer');
    expect(body).not.toHaveProperty('merchant_id');
    expect(body.metadata).not.toHaveProperty('invoice_number');
    expect(fake.sessions.get(result.providerCheckoutId)?.currency).toBe('JPY');
  });

  it('creates one session for a repeated Idempotency-Key', async () => {
    const before = fake.sessions.size;
    const first = await ucpAdapter.createCheckout(ctx, checkout({ idempotencyKey: 'checkout-twice' }));
    const second = await ucpAdapter.createCheckout(ctx, checkout({ idempotencyKey: 'checkout-twice' }));
    expect(second.providerCheckoutId).toBe(first.providerCheckoutId);
    expect(fake.sessions.size).toBe(before + 1);
    const third = await ucpAdapter.createCheckout(ctx, checkout({ idempotencyKey: 'checkout-other' }));
    expect(third.providerCheckoutId).not.toBe(first.providerCheckoutId);
  });

  it('uses settings.base_url (trailing slashes trimmed) when no apiBaseUrl is given', async () => {
    const result = await ucpAdapter.createCheckout({ settings: { ...ctx.settings, base_url: `${fake.url}//` } }, checkout());
    expect(fake.sessions.has(result.providerCheckoutId)).toBe(true);
    expect(fake.requests.at(-1)!.headers['ucp-agent']).toBe(`profile="${fake.url}/.well-known/ucp"`);
  });

  it("takes the business's expires_at when it answers one", async () => {
    const other = await fakeWith({ expiresAt: '2026-03-01T16:00:00Z' });
    const result = await ucpAdapter.createCheckout({ ...ctx, apiBaseUrl: other.url }, checkout());
    expect(result.expiresAt).toEqual(new Date('2026-03-01T16:00:00Z'));
  });

  it('falls back to permalink_url, then to {base}/checkout/{id}', async () => {
    const permalink = await fakeWith({ link: 'permalink_url' });
    const viaPermalink = await ucpAdapter.createCheckout({ ...ctx, apiBaseUrl: permalink.url }, checkout());
    expect(viaPermalink.checkoutUrl).toBe(`${permalink.url}/p/${viaPermalink.providerCheckoutId}`);

    const bare = await fakeWith({ link: 'none' });
    const built = await ucpAdapter.createCheckout({ ...ctx, apiBaseUrl: `${bare.url}/` }, checkout());
    expect(built.checkoutUrl).toBe(`${bare.url}/checkout/${built.providerCheckoutId}`);
  });

  it('a 4xx is a ProviderRefused that keeps the status and the business message', async () => {
    const wrongKey = { ...ctx, settings: { ...ctx.settings, api_key: 'wrong' } };
    const unauthorized = await ucpAdapter.createCheckout(wrongKey, checkout()).catch((error: unknown) => error);
    expect(unauthorized).toBeInstanceOf(ProviderRefused);
    expect((unauthorized as ProviderRefused).status).toBe(401);
    expect((unauthorized as ProviderRefused).message).toContain('invalid API key');

    // A fractional amount is a caller bug the business refuses; it is never rounded or scaled here.
    const fractional = await ucpAdapter.createCheckout(ctx, checkout({ amountMinor: 19.99 })).catch((error: unknown) => error);
    expect(fractional).toBeInstanceOf(ProviderRefused);
    expect((fractional as ProviderRefused).status).toBe(400);
    expect((fake.requests.at(-1)!.body as { line_items: { item: { price: number } }[] }).line_items[0]!.item.price).toBe(19.99);
  });

  it.each([500, 503, 429])('a %s is a plain (retryable) error', async (status) => {
    fake.failNext(status);
    const error = await ucpAdapter.createCheckout(ctx, checkout()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(ProviderRefused);
    expect((error as Error).message).toContain(String(status));
    // The retry goes through.
    await expect(ucpAdapter.createCheckout(ctx, checkout())).resolves.toHaveProperty('providerCheckoutId');
  });

  it('a network failure is a plain (retryable) error', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const error = await ucpAdapter.createCheckout({ ...ctx, apiBaseUrl: `http://127.0.0.1:${port}` }, checkout()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(ProviderRefused);
  });

  it('refuses to call without a base URL or an API key', async () => {
    await expect(ucpAdapter.createCheckout({ settings: { api_key: 'k' } }, checkout())).rejects.toBeInstanceOf(ProviderRefused);
    await expect(ucpAdapter.createCheckout({ settings: {}, apiBaseUrl: fake.url }, checkout())).rejects.toBeInstanceOf(ProviderRefused);
  });

  it('expireCheckout cancels an open session through the cancel operation', async () => {
    const { providerCheckoutId } = await ucpAdapter.createCheckout(ctx, checkout());
    await ucpAdapter.expireCheckout(ctx, providerCheckoutId);
    expect(fake.sessions.get(providerCheckoutId)?.status).toBe('canceled');
    const sent = fake.requests.at(-1)!;
    expect([sent.method, sent.path]).toEqual(['POST', `/checkout-sessions/${providerCheckoutId}/cancel`]);
    expect(sent.headers.authorization).toBe(`Bearer ${fake.apiKey}`);
    expect(sent.headers['ucp-agent']).toBe(`profile="${fake.url}/.well-known/ucp"`);
  });

  it('expireCheckout accepts a session that is already completed or canceled', async () => {
    const completed = await ucpAdapter.createCheckout(ctx, checkout());
    fake.complete(completed.providerCheckoutId);
    await expect(ucpAdapter.expireCheckout(ctx, completed.providerCheckoutId)).resolves.toBeUndefined();
    expect(fake.sessions.get(completed.providerCheckoutId)?.status).toBe('completed');

    const canceled = await ucpAdapter.createCheckout(ctx, checkout());
    await ucpAdapter.expireCheckout(ctx, canceled.providerCheckoutId);
    await expect(ucpAdapter.expireCheckout(ctx, canceled.providerCheckoutId)).resolves.toBeUndefined();
  });

  it('expireCheckout takes any 409 Conflict as "no longer cancelable", whatever its message code', async () => {
    const { providerCheckoutId } = await ucpAdapter.createCheckout(ctx, checkout());
    fake.failNext(409);
    await expect(ucpAdapter.expireCheckout(ctx, providerCheckoutId)).resolves.toBeUndefined();
    fake.failNext(400);
    await expect(ucpAdapter.expireCheckout(ctx, providerCheckoutId)).rejects.toBeInstanceOf(ProviderRefused);
  });

  it('expireCheckout of an unknown session is refused', async () => {
    const error = await ucpAdapter.expireCheckout(ctx, 'chk_unknown').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderRefused);
    expect((error as ProviderRefused).status).toBe(404);
  });

  it('refunds the order with the amount once, in upper-case currency, idempotently', async () => {
    const { providerCheckoutId } = await ucpAdapter.createCheckout(ctx, checkout());
    const orderId = fake.complete(providerCheckoutId).order_id!;
    const request = refundOf({ providerPaymentId: orderId, providerCheckoutId, currency: 'usd', idempotencyKey: 'refund-once' });

    const result = await ucpAdapter.refund(ctx, request);
    expect(result.providerRefundId).toMatch(/^rfd_/);
    expect(result.status).toBe('pending');
    const sent = fake.requests.at(-1)!;
    expect([sent.method, sent.path, sent.headers['idempotency-key']]).toEqual(['POST', '/refunds', 'refund-once']);
    expect(sent.body).toEqual({ payment_id: orderId, amount: 1999, currency: 'USD', metadata: { payment_id: PAYMENT_ID } });

    const refundsBefore = fake.refunds.length;
    expect(await ucpAdapter.refund(ctx, request)).toEqual(result);
    expect(fake.refunds.length).toBe(refundsBefore);
  });

  it('refunds by checkout id when there is no order id', async () => {
    const { providerCheckoutId } = await ucpAdapter.createCheckout(ctx, checkout());
    fake.complete(providerCheckoutId);
    await ucpAdapter.refund(ctx, refundOf({ providerCheckoutId, amountMinor: 500 }));
    expect(fake.refunds.at(-1)).toMatchObject({ payment_id: providerCheckoutId, amount: 500, currency: 'USD' });
  });

  it('a refund the business refuses, or with nothing to refund, is ProviderRefused', async () => {
    const { providerCheckoutId } = await ucpAdapter.createCheckout(ctx, checkout());
    const unpaid = await ucpAdapter.refund(ctx, refundOf({ providerCheckoutId })).catch((e: unknown) => e);
    expect(unpaid).toBeInstanceOf(ProviderRefused);
    expect((unpaid as ProviderRefused).status).toBe(409);
    await expect(ucpAdapter.refund(ctx, refundOf({}))).rejects.toBeInstanceOf(ProviderRefused);
  });

  it("verifies and maps the fake business's signed notification as received over HTTP", async () => {
    const receiver = await startReceiver();
    onTestFinished(() => receiver.close());
    const { providerCheckoutId } = await ucpAdapter.createCheckout(ctx, checkout());
    const orderId = fake.complete(providerCheckoutId).order_id!;

    for (const prefixed of [false, true]) {
      const answer = await fake.notify(receiver.url('/hook'), SECRET, fake.eventFor(providerCheckoutId), { prefixed });
      expect(answer.status).toBe(200);
    }
    const [plain, prefixed] = receiver.requests('/hook');
    expect(prefixed!.headers['x-ucp-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    for (const received of [plain!, prefixed!]) {
      const rawBody = Buffer.from(received.body, 'utf8');
      expect(ucpAdapter.verifyNotification(ctx, { rawBody, headers: received.headers, now: NOW })).toEqual([
        {
          eventKey: sha256Hex(rawBody),
          eventType: 'checkout.completed',
          outcome: 'succeeded',
          paymentId: PAYMENT_ID,
          providerCheckoutId,
          providerPaymentId: orderId,
          failureReason: null,
          providerCustomerId: null,
          paymentMethodId: null,
        },
      ]);
      expect(ucpAdapter.references(rawBody)).toEqual({ paymentIds: [PAYMENT_ID], providerIds: [providerCheckoutId, orderId] });
    }
    const wrongSecret = { ...ctx, settings: { ...ctx.settings, webhook_secret: 'not_it' } };
    expect(() =>
      ucpAdapter.verifyNotification(wrongSecret, { rawBody: Buffer.from(plain!.body), headers: plain!.headers, now: NOW }),
    ).toThrow(InvalidProviderSignature);
  });
});

describe('the fake UCP business', () => {
  let fake: FakeUcp;
  beforeAll(async () => {
    fake = await startFakeUcp();
  });
  afterAll(async () => {
    await fake.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${fake.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${fake.apiKey}`,
        'ucp-agent': 'profile="https://agent.example/.well-known/ucp"',
        ...headers,
      },
      body: JSON.stringify(body),
    });

  it('answers 400 with UCP error messages to a session without line_items', async () => {
    const response = await post('/checkout-sessions', { currency: 'USD' });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      messages: [{ type: 'error', code: 'missing', content: 'line_items is required', severity: 'unrecoverable' }],
    });
  });

  it('checks the Bearer key and the UCP-Agent header', async () => {
    expect((await post('/checkout-sessions', {}, { authorization: 'Bearer nope' })).status).toBe(401);
    expect((await post('/checkout-sessions', {}, { 'ucp-agent': '' })).status).toBe(400);
  });

  it('serves a minimal profile at /.well-known/ucp', async () => {
    const response = await fetch(`${fake.url}/.well-known/ucp`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      ucp: { version: '2026-01-23', services: { 'dev.ucp.shopping': { rest: { endpoint: fake.url } } } },
    });
  });

  it('does not keep an error answer under an Idempotency-Key', async () => {
    const bad = await post('/checkout-sessions', { currency: 'USD' }, { 'idempotency-key': 'k1' });
    expect(bad.status).toBe(400);
    const item = { id: 'li_1', item: { id: 'i', title: 't', price: 100 }, quantity: 2 };
    const good = await post('/checkout-sessions', { currency: 'EUR', line_items: [item] }, { 'idempotency-key': 'k1' });
    expect(good.status).toBe(201);
    expect(await good.json()).toMatchObject({
      status: 'incomplete',
      currency: 'EUR',
      totals: [
        { type: 'subtotal', amount: 200 },
        { type: 'total', amount: 200 },
      ],
    });
  });
});
