/**
 * provider_d: UCP, the Universal Commerce Protocol (payment-providers.md §5), over plain HTTP
 * since its REST binding is small and no SDK is worth the dependency.
 *
 * The business's API is `ctx.apiBaseUrl ?? settings.base_url`. Notifications carry
 * `X-UCP-Signature`: hex HMAC-SHA256 of the raw body with `webhook_secret`, no timestamp, so the
 * event key is the body's SHA-256 and replays are caught by the store, not here.
 */
import { asRecord, asString, parseJsonObject, sha256Hex, verifyHexSignedJson } from './signatures';
import {
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
} from './types';

const REQUEST_TIMEOUT_MS = 20_000;
/** What bxb assumes when the business does not say (payment-providers.md §1.7). */
const DEFAULT_CHECKOUT_LIFETIME_MS = 24 * 60 * 60 * 1000;

/**
 * Checkout statuses of the UCP lifecycle plus the two bxb adds for payments. The open states map
 * to null: the buyer has not finished, so there is nothing to record yet.
 */
const outcomeByStatus: Record<string, NotificationOutcome | null> = {
  incomplete: null,
  requires_escalation: null,
  ready_for_complete: null,
  complete_in_progress: 'processing',
  completed: 'succeeded',
  failed: 'failed',
  canceled: 'canceled',
  refunded: 'refunded',
};

const LINE_ITEM_PREFIX = 'li_';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface UcpAnswer {
  status: number;
  body: Record<string, unknown> | null;
}

function apiBase(ctx: ProviderContext): string {
  const base = ctx.apiBaseUrl ?? ctx.settings.base_url;
  if (!base) throw new ProviderRefused('provider_d: base_url is not configured');
  return base.replace(/\/+$/, '');
}

function apiKey(ctx: ProviderContext): string {
  const key = ctx.settings.api_key;
  if (!key) throw new ProviderRefused('provider_d: api_key is not configured');
  return key;
}

async function post(ctx: ProviderContext, path: string, body: unknown, idempotencyKey?: string): Promise<UcpAnswer> {
  const base = apiBase(ctx);
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/json',
    Authorization: `Bearer ${apiKey(ctx)}`,
    'UCP-Agent': `profile="${base}/.well-known/ucp"`,
  };
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  try {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Proxies answer errors in HTML; the status alone decides what happens next.
    }
    return { status: response.status, body: asRecord(parsed) };
  } catch (error) {
    // Network failures and timeouts: plain errors, so the activity retries.
    throw new Error(`provider_d: POST ${path} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** UCP's `messages` array (errors, warnings, info) of a checkout or an error answer. */
function messagesOf(body: Record<string, unknown> | null): Record<string, unknown>[] {
  const messages = body?.messages;
  return Array.isArray(messages) ? messages.map(asRecord).filter((m) => m !== null) : [];
}

/** The `content` of UCP's error messages, joined: what the business said was wrong. */
function errorText(answer: UcpAnswer): string {
  const texts = messagesOf(answer.body)
    .map((m) => asString(m.content) ?? asString(m.code))
    .filter((t) => t !== null);
  return texts.length > 0 ? texts.join('; ') : `HTTP ${answer.status}`;
}

function errorCodes(answer: UcpAnswer): string[] {
  return messagesOf(answer.body)
    .map((m) => asString(m.code))
    .filter((c) => c !== null);
}

/**
 * 2xx passes. Other 4xx answers are refusals a retry cannot fix, except 408 and 429 which
 * say "try later"; 5xx is the business's trouble and is retried.
 */
function ensureAccepted(answer: UcpAnswer, operation: string): Record<string, unknown> {
  if (answer.status >= 200 && answer.status < 300) return answer.body ?? {};
  const message = `provider_d: ${operation} answered ${answer.status}: ${errorText(answer)}`;
  if (answer.status >= 400 && answer.status < 500 && answer.status !== 408 && answer.status !== 429) {
    throw new ProviderRefused(message, answer.status);
  }
  throw new Error(message);
}

async function createCheckout(ctx: ProviderContext, request: CheckoutRequest): Promise<CheckoutResult> {
  const invoiceLabel = request.invoiceNumber ?? request.invoiceId;
  const metadata: Record<string, string> = {
    payment_id: request.paymentId,
    invoice_id: request.invoiceId,
    success_url: request.successUrl,
    cancel_url: request.cancelUrl,
  };
  if (request.invoiceNumber) metadata.invoice_number = request.invoiceNumber;
  const body: Record<string, unknown> = {
    line_items: [
      {
        id: `${LINE_ITEM_PREFIX}${request.paymentId}`,
        // UCP prices are minor units already, like ours: sent as they are.
        item: { id: `inv_${invoiceLabel}`, title: `Invoice ${invoiceLabel}`, price: request.amountMinor },
        quantity: 1,
      },
    ],
    currency: request.currency.toUpperCase(),
    metadata,
  };
  if (request.customerEmail) body.buyer = { email: request.customerEmail };
  if (ctx.settings.merchant_id) body.merchant_id = ctx.settings.merchant_id;

  const session = ensureAccepted(await post(ctx, '/checkout-sessions', body, request.idempotencyKey), 'create checkout session');
  const id = asString(session.id);
  if (!id) throw new Error('provider_d: the checkout session answer has no id');
  const expiresAt = new Date(asString(session.expires_at) ?? Number.NaN);
  return {
    providerCheckoutId: id,
    checkoutUrl: asString(session.continue_url) ?? asString(session.permalink_url) ?? `${apiBase(ctx)}/checkout/${encodeURIComponent(id)}`,
    expiresAt: Number.isNaN(expiresAt.getTime()) ? new Date(request.now.getTime() + DEFAULT_CHECKOUT_LIFETIME_MS) : expiresAt,
    providerPaymentId: null,
  };
}

/**
 * Cancels the session. A session already completed or canceled cannot be canceled, and that is
 * fine: the expiry timer only wants it closed, and a completion is reported by its notification.
 */
async function expireCheckout(ctx: ProviderContext, providerCheckoutId: string): Promise<void> {
  const answer = await post(ctx, `/checkout-sessions/${encodeURIComponent(providerCheckoutId)}/cancel`, {});
  if (answer.status === 409 || (answer.status >= 400 && answer.status < 500 && errorCodes(answer).some((c) => c.includes('cancel')))) {
    return;
  }
  ensureAccepted(answer, 'cancel checkout session');
}

/** Refunds are bxb's extension of UCP (payment-providers.md §5), not a standard operation. */
async function refund(ctx: ProviderContext, request: RefundRequest): Promise<RefundResult> {
  const paymentRef = request.providerPaymentId ?? request.providerCheckoutId;
  if (!paymentRef) throw new ProviderRefused('provider_d: the payment has no provider id to refund');
  const answer = await post(
    ctx,
    '/refunds',
    {
      payment_id: paymentRef,
      amount: request.amountMinor,
      currency: request.currency.toUpperCase(),
      metadata: { payment_id: request.paymentId },
    },
    request.idempotencyKey,
  );
  const created = ensureAccepted(answer, 'refund');
  return { providerRefundId: asString(created.id), status: asString(created.status) ?? 'pending' };
}

/** Notifications wrap the checkout in `data`, or are the checkout itself (bxb accepts both). */
function checkoutOf(root: Record<string, unknown>): Record<string, unknown> {
  return asRecord(root.data) ?? root;
}

/** Our payment id: the checkout's metadata, else the line item id we built as `li_<payment id>`. */
function paymentIdOf(checkout: Record<string, unknown>): string | null {
  const fromMetadata = asString(asRecord(checkout.metadata)?.payment_id);
  if (fromMetadata) return fromMetadata;
  const lineItems = Array.isArray(checkout.line_items) ? checkout.line_items : [];
  for (const lineItem of lineItems) {
    const id = asString(asRecord(lineItem)?.id);
    const candidate = id?.startsWith(LINE_ITEM_PREFIX) ? id.slice(LINE_ITEM_PREFIX.length) : null;
    // Other line items of a shared business may use `li_` too: only our UUIDs count.
    if (candidate && UUID.test(candidate)) return candidate;
  }
  return null;
}

function failureReasonOf(checkout: Record<string, unknown>): string {
  const error = messagesOf(checkout).find((m) => m.type === 'error' && asString(m.content) !== null);
  return asString(error?.content) ?? 'Payment failed';
}

function toNotification(root: Record<string, unknown>, rawBody: Buffer): ProviderNotification {
  const checkout = checkoutOf(root);
  const status = asString(checkout.status);
  const outcome = status !== null ? (outcomeByStatus[status] ?? null) : null;
  const checkoutId = asString(checkout.id) ?? asString(checkout.checkout_id);
  const orderId = asString(checkout.order_id);
  return {
    eventKey: sha256Hex(rawBody),
    eventType: asString(root.type) ?? asString(root.event_type) ?? 'ucp.unknown',
    outcome,
    paymentId: paymentIdOf(checkout),
    providerCheckoutId: checkoutId,
    providerPaymentId: orderId !== checkoutId ? orderId : null,
    failureReason: outcome === 'failed' ? failureReasonOf(checkout) : null,
    providerCustomerId: null,
    paymentMethodId: null,
  };
}

function verifyNotification(ctx: ProviderContext, input: NotificationInput): ProviderNotification[] {
  return [toNotification(verifyHexSignedJson('provider_d', ctx, input, 'x-ucp-signature', input.rawBody), input.rawBody)];
}

function references(rawBody: Buffer): NotificationReferences {
  const root = parseJsonObject(rawBody);
  if (!root) return { paymentIds: [], providerIds: [] };
  const checkout = checkoutOf(root);
  const paymentId = paymentIdOf(checkout);
  const providerIds = [checkout.id, checkout.checkout_id, checkout.order_id].map(asString).filter((id) => id !== null);
  return { paymentIds: paymentId ? [paymentId] : [], providerIds: [...new Set(providerIds)] };
}

export const ucpAdapter: PaymentProviderAdapter = {
  code: 'provider_d',
  createCheckout,
  expireCheckout,
  refund,
  verifyNotification,
  references,
};
