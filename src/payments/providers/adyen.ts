/**
 * provider_b: Adyen (payment-providers.md §3). Checkout is a hosted Checkout Session, a saved card
 * is charged through /payments with its stored method, refunds go through the Modifications API,
 * and standard notifications are verified item by item with the library's HMAC validator (or,
 * bxb's variant, over the raw body from a header).
 *
 * Settings: `api_key`, `merchant_account`, `hmac_key` (hex), `environment` (`test` default,
 * `live`), `live_url_prefix` (required for live: Adyen's live checkout host is per merchant).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

import { CheckoutAPI, Client, EnvironmentEnum, HttpClientException, hmacValidator, Types } from '@adyen/api-library';

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
  type RawHeaders,
  type RefundRequest,
  type RefundResult,
  type SavedMethodCharge,
  type SavedMethodChargeResult,
} from './types';

type NotificationRequestItem = Types.notification.NotificationRequestItem;
type PaymentResponse = Types.checkout.PaymentResponse;
type AdyenHttpClient = NonNullable<ConstructorParameters<typeof Client>[1]>;
type AdyenApiError = ConstructorParameters<typeof HttpClientException>[0]['apiError'];

/** Adyen's own session default, which the contract adopts for provider_b. */
const SESSION_LIFETIME_MS = 60 * 60 * 1000;

/** The host the library builds every checkout URL on in its test environment. */
const LIBRARY_TEST_CHECKOUT_ORIGIN = 'https://checkout-test.adyen.com';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HEX_KEY = /^(?:[0-9a-f]{2})+$/i;

export const adyenAdapter: PaymentProviderAdapter = {
  code: 'provider_b',

  async createCheckout(ctx: ProviderContext, request: CheckoutRequest): Promise<CheckoutResult> {
    const merchantAccount = requiredSetting(ctx, 'merchant_account');
    const defaultExpiry = new Date(request.now.getTime() + SESSION_LIFETIME_MS);
    const session = await refusalsMapped('session creation', () =>
      checkoutApi(ctx).PaymentsApi.sessions(
        {
          merchantAccount,
          // Minor units as given: Adyen's own minor units already follow the currency's exponent
          // (0 for JPY, 3 for KWD), and so do ours.
          amount: { value: request.amountMinor, currency: request.currency.toUpperCase() },
          reference: request.paymentId,
          // Adyen sessions have a single return address; the outcome comes by notification.
          returnUrl: request.successUrl,
          expiresAt: defaultExpiry,
          metadata: { payment_id: request.paymentId, invoice_id: request.invoiceId },
          // The default (embedded) mode answers no URL to redirect the customer to.
          mode: Types.checkout.CreateCheckoutSessionRequest.ModeEnum.Hosted,
          ...(request.customerEmail ? { shopperEmail: request.customerEmail } : {}),
        },
        { idempotencyKey: request.idempotencyKey },
      ),
    );
    if (!session.url) throw new ProviderRefused(`Adyen session ${session.id} came back without a hosted checkout url`);
    return {
      providerCheckoutId: session.id,
      checkoutUrl: session.url,
      expiresAt: isValidDate(session.expiresAt) ? session.expiresAt : defaultExpiry,
    };
  },

  // Sessions cannot be ended through the API: the payment's timer cancels it at expiresAt.
  async expireCheckout(): Promise<void> {},

  async chargeSavedMethod(ctx: ProviderContext, charge: SavedMethodCharge): Promise<SavedMethodChargeResult> {
    const merchantAccount = requiredSetting(ctx, 'merchant_account');
    const shopperReference = charge.providerCustomerId;
    // Adyen keeps stored methods per shopper: without the shopper it cannot find this one.
    if (!shopperReference) {
      throw new ProviderRefused(`payment ${charge.paymentId} has no Adyen shopperReference for its stored method`);
    }
    // The library types returnUrl as required; a ContAuth payment never redirects, and Adyen's own
    // token-payment examples send none, so there is no address to invent.
    const payment: Omit<Types.checkout.PaymentRequest, 'returnUrl'> = {
      merchantAccount,
      amount: { value: charge.amountMinor, currency: charge.currency.toUpperCase() },
      reference: charge.paymentId,
      paymentMethod: { type: Types.checkout.CardDetails.TypeEnum.Scheme, storedPaymentMethodId: charge.paymentMethodId },
      shopperReference,
      // Merchant-initiated on a card on file, at no fixed interval: the shopper is not there to authenticate.
      shopperInteraction: Types.checkout.PaymentRequest.ShopperInteractionEnum.ContAuth,
      recurringProcessingModel: Types.checkout.PaymentRequest.RecurringProcessingModelEnum.UnscheduledCardOnFile,
      metadata: { payment_id: charge.paymentId },
    };
    const answer = await refusalsMapped('payment', () =>
      checkoutApi(ctx).PaymentsApi.payments(payment as Types.checkout.PaymentRequest, { idempotencyKey: charge.idempotencyKey }),
    );
    if (!answer.pspReference) throw new ProviderRefused(`Adyen answered the payment of ${charge.paymentId} without pspReference`);
    return { providerPaymentId: answer.pspReference, ...chargeOutcome(answer) };
  },

  async refund(ctx: ProviderContext, request: RefundRequest): Promise<RefundResult> {
    const merchantAccount = requiredSetting(ctx, 'merchant_account');
    const pspReference = request.providerPaymentId;
    if (!pspReference) {
      throw new ProviderRefused(`payment ${request.paymentId} has no Adyen pspReference to refund`);
    }
    const answer = await refusalsMapped('refund', () =>
      checkoutApi(ctx).ModificationsApi.refundCapturedPayment(
        pspReference,
        {
          merchantAccount,
          amount: { value: request.amountMinor, currency: request.currency.toUpperCase() },
          reference: request.paymentId,
        },
        { idempotencyKey: request.idempotencyKey },
      ),
    );
    // `received` only: the outcome arrives later as a REFUND or REFUND_FAILED notification.
    return { providerRefundId: answer.pspReference ?? null, status: answer.status };
  },

  verifyNotification(ctx: ProviderContext, input: NotificationInput): ProviderNotification[] {
    const hexKey = ctx.settings.hmac_key;
    // Buffer.from(key, 'hex') silently drops what is not hex: a mistyped key could become an
    // empty HMAC key that anyone can sign with.
    if (!hexKey || !HEX_KEY.test(hexKey)) {
      throw new InvalidProviderSignature('provider_b has no hex hmac_key configured');
    }

    const headerSignature = firstHeader(input.headers, 'hmacsignature') ?? firstHeader(input.headers, 'x-webhook-signature');
    if (headerSignature !== undefined) {
      if (!bodySignatureMatches(input.rawBody, headerSignature, hexKey)) {
        throw new InvalidProviderSignature('Adyen notification body signature does not match');
      }
      // Authentic but unreadable: the sender's fault, not a forgery (the route answers 400).
      const items = requestItems(parseJson(input.rawBody));
      if (!items) throw new Error('Adyen notification body is not a standard notification');
      return items.map(toNotification);
    }

    // Without a header every item vouches for itself; one that does not voids the whole batch, so
    // nothing of a partly forged request is applied.
    const items = requestItems(parseJson(input.rawBody));
    if (!items || items.length === 0) {
      throw new InvalidProviderSignature('Adyen notification carries no items that can be verified');
    }
    for (const item of items) {
      if (!itemSignatureMatches(item, hexKey)) {
        throw new InvalidProviderSignature(`Adyen notification item ${String(item.pspReference)} has a missing or wrong hmacSignature`);
      }
    }
    return items.map(toNotification);
  },

  references(rawBody: Buffer): NotificationReferences {
    const paymentIds = new Set<string>();
    const providerIds = new Set<string>();
    for (const item of requestItems(parseJson(rawBody)) ?? []) {
      const paymentId = paymentIdOf(item);
      if (paymentId) paymentIds.add(paymentId);
      for (const id of [item.pspReference, item.originalReference]) {
        if (typeof id === 'string' && id !== '') providerIds.add(id);
      }
    }
    return { paymentIds: [...paymentIds], providerIds: [...providerIds] };
  },
};

function checkoutApi(ctx: ProviderContext): CheckoutAPI {
  const apiKey = requiredSetting(ctx, 'api_key');
  if (ctx.apiBaseUrl) {
    // The override replaces the whole address, so the test environment's URLs are the ones rewritten.
    return new CheckoutAPI(new Client({ apiKey, environment: EnvironmentEnum.TEST }, redirectedHttpClient(ctx.apiBaseUrl)));
  }
  const environment = ctx.settings.environment || 'test';
  if (environment === 'test') return new CheckoutAPI(new Client({ apiKey, environment: EnvironmentEnum.TEST }));
  if (environment !== 'live') throw new ProviderRefused(`provider_b environment must be test or live, not ${environment}`);
  const liveEndpointUrlPrefix = requiredSetting(ctx, 'live_url_prefix');
  return new CheckoutAPI(new Client({ apiKey, environment: EnvironmentEnum.LIVE, liveEndpointUrlPrefix }));
}

/**
 * The library (32.x) has no setting for the checkout address and its own HTTP client speaks HTTPS
 * only, so with `apiBaseUrl` the library still builds the request (path, API version, body,
 * headers' meaning) and this client only sends it to the other address, failing the way the
 * library's client does so that errors are handled alike.
 */
function redirectedHttpClient(apiBaseUrl: string): AdyenHttpClient {
  const base = apiBaseUrl.replace(/\/+$/, '');
  return {
    async request(endpoint, json, config, _isApiKeyRequired, requestOptions = {}) {
      if (!endpoint.startsWith(LIBRARY_TEST_CHECKOUT_ORIGIN)) {
        throw new Error(`unexpected Adyen endpoint ${endpoint}`);
      }
      const headers: Record<string, string> = { 'Content-Type': 'application/json', 'X-API-Key': config.apiKey ?? '' };
      if (requestOptions.idempotencyKey) headers['Idempotency-Key'] = requestOptions.idempotencyKey;
      const method = requestOptions.method ?? 'POST';
      const response = await fetch(base + endpoint.slice(LIBRARY_TEST_CHECKOUT_ORIGIN.length), {
        method,
        headers,
        ...(method === 'GET' ? {} : { body: json }),
      });
      const body = await response.text();
      if (response.ok) return body;
      const apiError = parseJson(Buffer.from(body)) as AdyenApiError;
      throw new HttpClientException({
        message: `HTTP Exception: ${response.status}. ${apiError?.message ?? body}`,
        statusCode: apiError?.status ?? response.status,
        errorCode: apiError?.errorCode,
        responseBody: body,
        apiError,
      });
    },
  };
}

/** 4xx other than 408/429 cannot be fixed by retrying; everything else is left to the caller's retries. */
async function refusalsMapped<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const status = (err as { statusCode?: unknown }).statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500 && status !== 408 && status !== 429) {
      throw new ProviderRefused(`Adyen refused the ${what}: ${(err as Error).message}`, status);
    }
    throw err;
  }
}

function requiredSetting(ctx: ProviderContext, name: string): string {
  const value = ctx.settings[name];
  if (!value) throw new ProviderRefused(`provider_b setting ${name} is missing`);
  return value;
}

function bodySignatureMatches(rawBody: Buffer, signature: string, hexKey: string): boolean {
  // Over the bytes as received: decoding to a string first would fold invalid UTF-8 together.
  const expected = createHmac('sha256', Buffer.from(hexKey, 'hex')).update(rawBody).digest();
  const given = Buffer.from(signature.trim(), 'base64');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function itemSignatureMatches(item: NotificationRequestItem, hexKey: string): boolean {
  if (typeof item.additionalData?.hmacSignature !== 'string') return false;
  try {
    return new hmacValidator().validateHMAC(item, hexKey);
  } catch {
    // An item without the signed fields (no amount) cannot be signed either.
    return false;
  }
}

function toNotification(item: NotificationRequestItem): ProviderNotification {
  const eventCode = String(item.eventCode);
  const success = String(item.success) === 'true';
  const additional = item.additionalData ?? {};
  const recurring = (additional as Record<string, unknown>).recurring as Record<string, unknown> | undefined;
  const failed = !success || eventCode === 'REFUND_FAILED';
  return {
    eventKey: `${item.pspReference}:${eventCode}:${String(item.success)}`,
    eventType: eventCode,
    outcome: outcomeOf(eventCode, success),
    paymentId: paymentIdOf(item),
    providerCheckoutId: null,
    // On modifications pspReference names the modification; originalReference is the payment.
    providerPaymentId: nonEmpty(item.originalReference) ?? item.pspReference,
    failureReason: failed ? (nonEmpty(item.reason) ?? null) : null,
    providerCustomerId: nonEmpty(additional['recurring.shopperReference']) ?? nonEmpty(recurring?.shopperReference) ?? null,
    paymentMethodId: nonEmpty(additional['recurring.recurringDetailReference']) ?? nonEmpty(recurring?.recurringDetailReference) ?? null,
  };
}

/** A refusal is Adyen's answer about the card, given as a 200: a failed attempt, not an error. */
function chargeOutcome(answer: PaymentResponse): Pick<SavedMethodChargeResult, 'outcome' | 'failureReason'> {
  const resultCode = answer.resultCode;
  switch (resultCode) {
    case Types.checkout.PaymentResponse.ResultCodeEnum.Authorised:
      return { outcome: 'succeeded', failureReason: null };
    // Asynchronous methods; the AUTHORISATION notification tells the outcome.
    case Types.checkout.PaymentResponse.ResultCodeEnum.Received:
    case Types.checkout.PaymentResponse.ResultCodeEnum.Pending:
      return { outcome: 'processing', failureReason: null };
    default:
      // Refused, Error, Cancelled; and any answer asking for the shopper, who is not there.
      return { outcome: 'failed', failureReason: nonEmpty(answer.refusalReason) ?? `Adyen answered ${resultCode ?? 'no resultCode'}` };
  }
}

function outcomeOf(eventCode: string, success: boolean): NotificationOutcome | null {
  switch (eventCode) {
    case 'AUTHORISATION':
      return success ? 'succeeded' : 'failed';
    // With manual capture the money is only taken here.
    case 'CAPTURE':
      return success ? 'succeeded' : null;
    case 'CANCELLATION':
      return success ? 'canceled' : null;
    case 'OFFER_CLOSED':
    case 'EXPIRE':
      return 'canceled';
    // A failed refund leaves the payment as it was; the reason is still reported.
    case 'REFUND':
      return success ? 'refunded' : null;
    default:
      return null;
  }
}

function paymentIdOf(item: NotificationRequestItem): string | null {
  const fromMetadata = nonEmpty(item.additionalData?.['metadata.payment_id']);
  if (fromMetadata) return fromMetadata;
  // The session reference is our payment id; references set elsewhere (the Customer Area) are not.
  return typeof item.merchantReference === 'string' && UUID.test(item.merchantReference) ? item.merchantReference : null;
}

/** The items of a standard notification, or undefined when the body is not one. */
function requestItems(body: unknown): NotificationRequestItem[] | undefined {
  const list = (body as { notificationItems?: unknown } | null)?.notificationItems;
  if (!Array.isArray(list)) return undefined;
  const items: NotificationRequestItem[] = [];
  for (const entry of list) {
    const item = (entry as { NotificationRequestItem?: unknown } | null)?.NotificationRequestItem as NotificationRequestItem | undefined;
    if (!item || typeof item.pspReference !== 'string' || typeof item.eventCode !== 'string') return undefined;
    items.push(item);
  }
  return items;
}

function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function firstHeader(headers: RawHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function isValidDate(value: unknown): value is Date {
  return value instanceof Date && !Number.isNaN(value.getTime());
}
