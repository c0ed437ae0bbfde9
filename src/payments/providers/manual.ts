/**
 * manual: offline payments (payment-providers.md §6). Nothing is called: the checkout is a local
 * id, a refund is recorded only, and the outcome arrives as a signed notification from whoever
 * reconciles the money (or through `POST /v1/payments/{id}/mark-paid`).
 *
 * Signature: `X-Webhook-Signature` = hex HMAC-SHA256 of the raw body with `webhook_secret`
 * (bxb-compatible). A sender that adds `X-Webhook-Timestamp` signs `"<ts>.<raw body>"` instead
 * and gets replay protection: the timestamp must be within 300 s of now.
 */
import { asString, headerValue, parseJsonObject, sha256Hex, verifyHexSignedJson } from './signatures';
import {
  InvalidProviderSignature,
  type CheckoutRequest,
  type CheckoutResult,
  type NotificationInput,
  type NotificationOutcome,
  type NotificationReferences,
  type PaymentProviderAdapter,
  type ProviderContext,
  type ProviderNotification,
  type RefundResult,
} from './types';

/** How long an offline payment may stay open (payment-providers.md §1.7). */
const CHECKOUT_LIFETIME_MS = 30 * 24 * 60 * 60 * 1000;
const TIMESTAMP_TOLERANCE_S = 300;
const CHECKOUT_PREFIX = 'manual_';

const outcomeByStatus: Record<string, NotificationOutcome> = {
  succeeded: 'succeeded',
  failed: 'failed',
  canceled: 'canceled',
};

function createCheckout(_ctx: ProviderContext, request: CheckoutRequest): Promise<CheckoutResult> {
  return Promise.resolve({
    providerCheckoutId: `${CHECKOUT_PREFIX}${request.paymentId}`,
    checkoutUrl: null,
    expiresAt: new Date(request.now.getTime() + CHECKOUT_LIFETIME_MS),
    providerPaymentId: null,
  });
}

/** There is nothing open anywhere to close: the payment's own timer cancels it. */
function expireCheckout(): Promise<void> {
  return Promise.resolve();
}

/** The money goes back offline; the refund is recorded as done. */
function refund(): Promise<RefundResult> {
  return Promise.resolve({ providerRefundId: null, status: 'succeeded' });
}

/** The bytes that were signed: the raw body, or `"<ts>.<raw body>"` when a timestamp is sent. */
function signedMessage(input: NotificationInput): Buffer {
  const timestamp = headerValue(input.headers, 'x-webhook-timestamp');
  if (timestamp === null) return input.rawBody;
  if (!/^\d{1,12}$/.test(timestamp)) throw new InvalidProviderSignature('manual: the timestamp is not unix seconds');
  if (Math.abs(input.now.getTime() / 1000 - Number(timestamp)) > TIMESTAMP_TOLERANCE_S) {
    throw new InvalidProviderSignature('manual: the timestamp is outside the tolerance');
  }
  return Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), input.rawBody]);
}

function toNotification(body: Record<string, unknown>, rawBody: Buffer): ProviderNotification {
  const paymentId = asString(body.payment_id);
  // bxb's default: a bare `{payment_id}` reports money received.
  const status = body.status === undefined ? 'succeeded' : asString(body.status);
  const outcome = status !== null ? (outcomeByStatus[status] ?? null) : null;
  return {
    eventKey: sha256Hex(rawBody),
    eventType: asString(body.event_type) ?? 'payment.manual',
    outcome,
    paymentId,
    providerCheckoutId: paymentId ? `${CHECKOUT_PREFIX}${paymentId}` : null,
    // The interface has no field for an offline reference (bank transfer, cheque number): it is
    // the nearest thing manual payments have to a provider payment id.
    providerPaymentId: asString(body.reference),
    failureReason: outcome === 'failed' ? (asString(body.failure_reason) ?? 'Payment failed') : null,
    providerCustomerId: null,
    paymentMethodId: null,
  };
}

function verifyNotification(ctx: ProviderContext, input: NotificationInput): ProviderNotification[] {
  return [toNotification(verifyHexSignedJson('manual', ctx, input, 'x-webhook-signature', signedMessage(input)), input.rawBody)];
}

function references(rawBody: Buffer): NotificationReferences {
  const paymentId = asString(parseJsonObject(rawBody)?.payment_id);
  return paymentId ? { paymentIds: [paymentId], providerIds: [`${CHECKOUT_PREFIX}${paymentId}`] } : { paymentIds: [], providerIds: [] };
}

export const manualAdapter: PaymentProviderAdapter = {
  code: 'manual',
  createCheckout,
  expireCheckout,
  refund,
  verifyNotification,
  references,
};
