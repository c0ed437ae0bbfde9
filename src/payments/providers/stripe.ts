/**
 * provider_a: Stripe Checkout Sessions through the official SDK (payment-providers.md §2).
 *
 * One client per call: the adapter holds no state, and each organization has its own key. The SDK's
 * own retries are off because the calling activity is retried by Temporal with the same
 * idempotency key, which Stripe answers with the first result.
 */
import Stripe from 'stripe';

import { BadRequest } from '../../errors';
import { asRecord, asString, parseJsonObject, signatureHeader } from './signatures';
import {
  InvalidProviderSignature,
  ProviderRefused,
  type CheckoutRequest,
  type CheckoutResult,
  type NotificationInput,
  type NotificationOutcome,
  type NotificationReferences,
  type PaymentProviderAdapter,
  type ProviderContext,
  type ProviderNotification,
  type RefundRequest,
  type RefundResult,
  type SavedMethodCharge,
  type SavedMethodChargeResult,
} from './types';

const REQUEST_TIMEOUT_MS = 20_000;
const SIGNATURE_TOLERANCE_SECONDS = 300;
/** Stripe's default session lifetime, used only when an answer lacks `expires_at`. */
const DEFAULT_SESSION_LIFETIME_MS = 24 * 60 * 60 * 1000;

export const stripeAdapter: PaymentProviderAdapter = {
  code: 'provider_a',

  async createCheckout(ctx: ProviderContext, request: CheckoutRequest): Promise<CheckoutResult> {
    const invoiceLabel = request.invoiceNumber ?? request.invoiceId;
    const session = await call(() =>
      createClient(ctx).checkout.sessions.create(
        {
          mode: 'payment',
          line_items: [
            {
              price_data: {
                currency: request.currency.toLowerCase(),
                // Already minor units, zero-decimal currencies included: Stripe takes them as they are.
                unit_amount: request.amountMinor,
                product_data: { name: `Invoice ${invoiceLabel}` },
              },
              quantity: 1,
            },
          ],
          success_url: request.successUrl,
          cancel_url: request.cancelUrl,
          client_reference_id: request.paymentId,
          metadata: {
            payment_id: request.paymentId,
            invoice_id: request.invoiceId,
            ...(request.invoiceNumber ? { invoice_number: request.invoiceNumber } : {}),
          },
          // payment_intent.* events carry the intent's metadata, not the session's.
          payment_intent_data: { metadata: { payment_id: request.paymentId, invoice_id: request.invoiceId } },
          ...(request.customerEmail ? { customer_email: request.customerEmail } : {}),
        },
        { idempotencyKey: request.idempotencyKey },
      ),
    );
    return {
      providerCheckoutId: session.id,
      checkoutUrl: session.url,
      expiresAt:
        typeof session.expires_at === 'number'
          ? new Date(session.expires_at * 1000)
          : new Date(request.now.getTime() + DEFAULT_SESSION_LIFETIME_MS),
      providerPaymentId: typeof session.payment_intent === 'string' ? session.payment_intent : null,
    };
  },

  async expireCheckout(ctx: ProviderContext, providerCheckoutId: string): Promise<void> {
    try {
      await createClient(ctx).checkout.sessions.expire(providerCheckoutId);
    } catch (error) {
      // Stripe answers 400 for a session that is no longer open (expired or paid): the goal, ending
      // the checkout, is already reached, and the notification of a payment takes its own path.
      if (error instanceof Stripe.errors.StripeInvalidRequestError && error.statusCode === 400) return;
      throw refusal(error);
    }
  },

  async refund(ctx: ProviderContext, request: RefundRequest): Promise<RefundResult> {
    if (!request.providerPaymentId) {
      throw new ProviderRefused(`Payment ${request.paymentId} has no Stripe PaymentIntent to refund`);
    }
    const paymentIntent = request.providerPaymentId;
    const refund = await call(() =>
      createClient(ctx).refunds.create(
        { payment_intent: paymentIntent, amount: request.amountMinor },
        { idempotencyKey: request.idempotencyKey },
      ),
    );
    return { providerRefundId: refund.id, status: refund.status ?? 'pending' };
  },

  async chargeSavedMethod(ctx: ProviderContext, charge: SavedMethodCharge): Promise<SavedMethodChargeResult> {
    let intent: Stripe.PaymentIntent;
    try {
      intent = await createClient(ctx).paymentIntents.create(
        {
          amount: charge.amountMinor,
          currency: charge.currency.toLowerCase(),
          ...(charge.providerCustomerId ? { customer: charge.providerCustomerId } : {}),
          payment_method: charge.paymentMethodId,
          // The customer is not there: Stripe declines what would need them (3-D Secure) instead of waiting.
          off_session: true,
          confirm: true,
          description: charge.description,
          metadata: { payment_id: charge.paymentId },
        },
        { idempotencyKey: charge.idempotencyKey },
      );
    } catch (error) {
      // A decline (authentication_required included) is the card's answer, which a retry would not
      // change: the attempt failed, and Stripe's 402 carries the failed PaymentIntent.
      if (error instanceof Stripe.errors.StripeCardError && error.payment_intent) {
        return chargeResult(error.payment_intent, error.message);
      }
      throw refusal(error);
    }
    return chargeResult(intent, null);
  },

  verifyNotification(ctx: ProviderContext, input: NotificationInput): ProviderNotification[] {
    // Stripe's header first; the shared chain after it because the original service accepts any of them (§1.2).
    const header = signatureHeader(input.headers, 'stripe-signature');
    const secret = ctx.settings.webhook_secret;
    if (!header) throw new InvalidProviderSignature('Missing Stripe-Signature header');
    if (!secret) throw new InvalidProviderSignature('provider_a has no webhook_secret');
    let event: unknown;
    try {
      // receivedAt (milliseconds in this SDK) replaces the SDK's own clock read for the tolerance.
      event = Stripe.webhooks.constructEvent(input.rawBody, header, secret, SIGNATURE_TOLERANCE_SECONDS, undefined, input.now.getTime());
    } catch (error) {
      // The SDK parses the body only after the signature holds: a signed body that is not JSON is
      // a bad request (§1.3), not a forgery.
      if (error instanceof SyntaxError) throw new BadRequest('The provider_a notification body is not JSON');
      throw new InvalidProviderSignature(error instanceof Error ? error.message : 'Invalid Stripe-Signature');
    }
    // Stripe sends one event per request.
    return [toNotification(event)];
  },

  references(rawBody: Buffer): NotificationReferences {
    const event = parseJsonObject(rawBody);
    if (!event) return { paymentIds: [], providerIds: [] };
    const object = dataObject(event);
    return {
      paymentIds: unique([asString(record(object.metadata).payment_id), asString(object.client_reference_id)]),
      providerIds: unique([asString(object.id), idOf(object.payment_intent)]),
    };
  },
};

function createClient(ctx: ProviderContext): Stripe {
  const apiKey = ctx.settings.api_key;
  if (!apiKey) throw new ProviderRefused('provider_a has no api_key');
  return new Stripe(apiKey, {
    maxNetworkRetries: 0,
    timeout: REQUEST_TIMEOUT_MS,
    ...(ctx.apiBaseUrl ? apiAddress(ctx.apiBaseUrl) : {}),
  });
}

/** The SDK takes host, port and protocol apart and always requests under `/v1/`: a path in the URL is not used. */
function apiAddress(apiBaseUrl: string): Pick<Stripe.StripeConfig, 'host' | 'port' | 'protocol'> {
  const url = new URL(apiBaseUrl);
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  return { host: url.hostname, port: url.port || (protocol === 'http' ? 80 : 443), protocol };
}

async function call<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw refusal(error);
  }
}

/**
 * A 4xx answer will be the same on every retry, so the activity should fail for good; 409
 * (a concurrent request with the same idempotency key) and 429, network errors and 5xx are left to
 * Temporal's retries.
 */
function refusal(error: unknown): unknown {
  if (!(error instanceof Stripe.errors.StripeError)) return error;
  const status = error.statusCode;
  if (status === undefined || status < 400 || status >= 500 || status === 409 || status === 429) return error;
  return new ProviderRefused(`Stripe refused the request: ${error.message}`, status);
}

function chargeResult(intent: Stripe.PaymentIntent, declineMessage: string | null): SavedMethodChargeResult {
  switch (intent.status) {
    case 'succeeded':
      return { providerPaymentId: intent.id, outcome: 'succeeded', failureReason: null };
    case 'processing':
      // Bank debits settle days later; payment_intent.succeeded or payment_failed follows.
      return { providerPaymentId: intent.id, outcome: 'processing', failureReason: null };
    default:
      // requires_payment_method or canceled; requires_action too, which nobody is there to complete.
      return {
        providerPaymentId: intent.id,
        outcome: 'failed',
        failureReason: intent.last_payment_error?.message ?? declineMessage ?? `Stripe left the PaymentIntent ${intent.status}`,
      };
  }
}

function toNotification(event: unknown): ProviderNotification {
  const envelope = record(event);
  const eventKey = asString(envelope.id);
  const eventType = asString(envelope.type);
  if (!eventKey || !eventType) throw new BadRequest('The provider_a notification is not a Stripe event');
  const object = dataObject(event);
  const metadataPaymentId = asString(record(object.metadata).payment_id);
  const notification: ProviderNotification = {
    eventKey,
    eventType,
    outcome: outcomeOf(eventType, object),
    paymentId: metadataPaymentId,
    providerCheckoutId: null,
    providerPaymentId: null,
    failureReason: null,
    providerCustomerId: asString(object.customer),
    paymentMethodId: null,
  };
  // The kind of object follows from the event's name, which Stripe always sends.
  if (eventType.startsWith('checkout.session.')) {
    notification.paymentId = metadataPaymentId ?? asString(object.client_reference_id);
    notification.providerCheckoutId = asString(object.id);
    notification.providerPaymentId = idOf(object.payment_intent);
  } else if (eventType.startsWith('payment_intent.')) {
    notification.providerPaymentId = asString(object.id);
    notification.paymentMethodId = asString(object.payment_method);
    if (eventType === 'payment_intent.payment_failed') {
      notification.failureReason = asString(record(object.last_payment_error).message);
    }
  } else if (eventType.startsWith('charge.')) {
    notification.providerPaymentId = idOf(object.payment_intent);
  }
  return notification;
}

function outcomeOf(eventType: string, object: Record<string, unknown>): NotificationOutcome | null {
  switch (eventType) {
    case 'checkout.session.completed':
      // Delayed methods (bank debits) complete the session unpaid; the async_payment_* event follows.
      return object.payment_status === 'paid' ? 'succeeded' : 'processing';
    case 'checkout.session.async_payment_succeeded':
    case 'payment_intent.succeeded':
      return 'succeeded';
    case 'checkout.session.async_payment_failed':
    case 'payment_intent.payment_failed':
      return 'failed';
    case 'checkout.session.expired':
      return 'canceled';
    case 'payment_intent.processing':
      return 'processing';
    case 'charge.refunded':
      return 'refunded';
    default:
      return null;
  }
}

/** Absent or malformed parts read as empty: the mapping tolerates partial events (the §8 vector has no data). */
function record(value: unknown): Record<string, unknown> {
  return asRecord(value) ?? {};
}

function dataObject(event: unknown): Record<string, unknown> {
  return record(record(record(event).data).object);
}

/** A reference Stripe sends as an id, or as the object when the field was expanded. */
function idOf(value: unknown): string | null {
  return asString(value) ?? asString(record(value).id);
}

function unique(values: (string | null)[]): string[] {
  return [...new Set(values.filter((value): value is string => value !== null))];
}
