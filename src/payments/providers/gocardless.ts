/**
 * provider_c: GoCardless through gocardless-nodejs (payment-providers.md §4). The checkout is a
 * redirect flow: the customer sets up a Direct Debit mandate on GoCardless's pages and comes back
 * to our return address, where completeRedirect completes the flow and creates the payment on the
 * new mandate. Notifications are batches of events signed with the endpoint's secret.
 */
import { createHash } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { connect as netConnect } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import {
  ApiError,
  Environments,
  GoCardlessClient,
  InvalidStateError,
  PaymentCurrency,
  type Event,
  type JsonMap,
  type RedirectFlow,
} from 'gocardless-nodejs';
import { parse as parseWebhook } from 'gocardless-nodejs/webhooks';
import {
  InvalidProviderSignature,
  ProviderRefused,
  type CheckoutRequest,
  type CheckoutResult,
  type NotificationOutcome,
  type NotificationInput,
  type NotificationReferences,
  type PaymentProviderAdapter,
  type ProviderContext,
  type ProviderNotification,
  type RawHeaders,
  type RedirectCompletion,
  type RedirectCompletionResult,
  type RefundRequest,
  type RefundResult,
  type SavedMethodCharge,
  type SavedMethodChargeResult,
} from './types';

/** GoCardless gives redirect flows no expiry in its answer; the contract's default for provider_c. */
const checkoutLifetimeMs = 60 * 60 * 1000;

/** The scheme is fixed only where the currency leaves no doubt; elsewhere GoCardless chooses. */
const schemeByCurrency: Record<string, 'bacs' | 'sepa_core'> = { GBP: 'bacs', EUR: 'sepa_core' };

/** GoCardless's own header first; the others only for senders that follow bxb's shared header chain (§1.2). */
const signatureHeaders = ['webhook-signature', 'x-webhook-signature', 'stripe-signature', 'x-ucp-signature'];

const paymentOutcomes: Record<string, NotificationOutcome> = {
  confirmed: 'succeeded',
  paid_out: 'succeeded',
  failed: 'failed',
  customer_approval_denied: 'failed',
  charged_back: 'failed',
  cancelled: 'canceled',
  submitted: 'processing',
};

/** Refund statuses whose money did not reach (or came back from) the customer: not part of the refunded total. */
const unsuccessfulRefundStatuses = new Set<string>(['cancelled', 'bounced', 'funds_returned']);

const refundOutcomes: Record<string, NotificationOutcome> = { paid: 'refunded', refund_settled: 'refunded' };

export const gocardlessAdapter: PaymentProviderAdapter = {
  code: 'provider_c',

  async createCheckout(ctx: ProviderContext, request: CheckoutRequest): Promise<CheckoutResult> {
    // Refused now rather than after the customer has set up a mandate the payment could not be made on.
    const currency = supportedCurrency(request.currency);
    const scheme = schemeByCurrency[currency];
    const flow = await refusedWhenPermanent('redirect flow creation', () =>
      clientFor(ctx).redirectFlows.create(
        {
          ...(request.invoiceNumber ? { description: `Invoice ${request.invoiceNumber}` } : {}),
          session_token: request.paymentId,
          success_redirect_url: request.returnUrl,
          ...(request.customerEmail ? { prefilled_customer: { email: request.customerEmail } } : {}),
          ...(scheme ? { scheme } : {}),
          // GoCardless allows three metadata keys.
          metadata: { payment_id: request.paymentId, invoice_id: request.invoiceId },
        },
        request.idempotencyKey,
      ),
    );
    if (!flow.id || !flow.redirect_url) throw new ProviderRefused('GoCardless answered a redirect flow without id or URL');
    return {
      providerCheckoutId: flow.id,
      checkoutUrl: flow.redirect_url,
      expiresAt: new Date(request.now.getTime() + checkoutLifetimeMs),
      providerPaymentId: null,
    };
  },

  // Uncompleted redirect flows lapse at GoCardless by themselves; the payment's timer cancels our side.
  async expireCheckout(): Promise<void> {},

  async completeRedirect(ctx: ProviderContext, completion: RedirectCompletion): Promise<RedirectCompletionResult> {
    const client = clientFor(ctx);
    const flow = await completeFlow(client, completion);
    const mandateId = flow.links?.mandate;
    if (!mandateId) throw new ProviderRefused(`GoCardless redirect flow ${completion.flowId} has no mandate`);
    // A retry reaches GoCardless with the same idempotency key, which answers the payment created the first time.
    const payment = await refusedWhenPermanent('payment creation', () =>
      client.payments.create(
        {
          amount: completion.amountMinor,
          currency: supportedCurrency(completion.currency),
          links: { mandate: mandateId },
          metadata: { payment_id: completion.paymentId },
        },
        completion.idempotencyKey,
      ),
    );
    if (!payment.id) throw new ProviderRefused('GoCardless answered a payment without id');
    return { mandateId, providerCustomerId: flow.links?.customer ?? null, providerPaymentId: payment.id };
  },

  async chargeSavedMethod(ctx: ProviderContext, charge: SavedMethodCharge): Promise<SavedMethodChargeResult> {
    const currency = supportedCurrency(charge.currency);
    const client = clientFor(ctx);
    const mandate = charge.paymentMethodId;
    let paymentId: string | undefined;
    try {
      // A retry reaches GoCardless with the same idempotency key, which answers the payment created the first time.
      const payment = await client.payments.create(
        {
          amount: charge.amountMinor,
          currency,
          links: { mandate },
          description: charge.description,
          metadata: { payment_id: charge.paymentId },
        },
        charge.idempotencyKey,
      );
      paymentId = payment.id;
    } catch (error) {
      // A mandate cancelled, failed or expired is the customer's answer, as a card decline is: a
      // failed attempt for the dunning policy to count, not a broken call. GoCardless creates no
      // payment then: there is no provider id to record.
      const inactive = inactiveMandate(error);
      if (inactive !== null) {
        return {
          providerPaymentId: null,
          outcome: 'failed',
          failureReason: `GoCardless mandate ${mandate} can no longer be collected on: ${inactive}`,
        };
      }
      throw refusalOf(error, 'payment creation');
    }
    if (!paymentId) throw new ProviderRefused('GoCardless answered a payment without id');
    // Direct Debit is collected days later; payments.confirmed or payments.failed tells the outcome.
    return { providerPaymentId: paymentId, outcome: 'processing', failureReason: null };
  },

  async refund(ctx: ProviderContext, request: RefundRequest): Promise<RefundResult> {
    if (!request.providerPaymentId) {
      throw new ProviderRefused('No GoCardless payment to refund: the redirect flow was never completed');
    }
    const payment = request.providerPaymentId;
    const client = clientFor(ctx);
    // GoCardless asks for the payment's refunded total after this refund, as a guard against
    // duplicates; the request carries only this refund's amount, so the earlier ones are read back.
    const refundedBefore = await refusedWhenPermanent('refund lookup', () => refundedOn(client, payment));
    // A retry with the same idempotency key finds its own first refund among the earlier ones, so its
    // total differs; GoCardless still answers 409 idempotent_creation_conflict for the key, and the
    // SDK then fetches the refund named in links.conflicting_resource_id: one refund, answered again.
    const refund = await refusedWhenPermanent('refund', () =>
      client.refunds.create(
        {
          amount: request.amountMinor,
          total_amount_confirmation: refundedBefore + request.amountMinor,
          links: { payment },
          metadata: { payment_id: request.paymentId },
        },
        request.idempotencyKey,
      ),
    );
    return { providerRefundId: refund.id ?? null, status: refund.status ?? 'created' };
  },

  verifyNotification(ctx: ProviderContext, input: NotificationInput): ProviderNotification[] {
    const secret = ctx.settings.webhook_secret;
    if (!secret) throw new InvalidProviderSignature('No GoCardless webhook secret is configured');
    const signature = signatureFrom(input.headers);
    if (!signature) throw new InvalidProviderSignature('The GoCardless webhook carries no signature');
    let events: unknown;
    try {
      events = parseWebhook(input.rawBody, secret, signature);
    } catch {
      // The SDK throws InvalidSignatureError for a mismatch and SyntaxError for a body that is not JSON.
      throw new InvalidProviderSignature('The GoCardless webhook signature does not match');
    }
    return Array.isArray(events) ? (events as Event[]).map(toNotification) : [];
  },

  references(rawBody: Buffer): NotificationReferences {
    const paymentIds = new Set<string>();
    const providerIds = new Set<string>();
    for (const event of eventsOf(rawBody)) {
      const paymentId = paymentIdOf(event);
      if (paymentId) paymentIds.add(paymentId);
      for (const id of [event.links?.payment, event.links?.mandate]) if (id) providerIds.add(id);
    }
    return { paymentIds: [...paymentIds], providerIds: [...providerIds] };
  },
};

function clientFor(ctx: ProviderContext): GoCardlessClient {
  const token = ctx.settings.access_token;
  if (!token) throw new ProviderRefused('No GoCardless access token is configured');
  const environment = ctx.settings.environment === 'live' ? Environments.Live : Environments.Sandbox;
  return new GoCardlessClient(token, environment, ctx.apiBaseUrl ? { proxy: agentsReaching(new URL(ctx.apiBaseUrl)) } : {});
}

/**
 * The SDK fixes its base URL by environment, so an override is reached underneath it: the agents
 * open every connection to the override's host and port, and the SDK's request to
 * api(-sandbox).gocardless.com travels over it unchanged (its Host header stays GoCardless's). An
 * http: override gets plain TCP, so the HTTPS request goes as plain HTTP to, say, a local fake; an
 * https: override gets TLS to that host. A path in the override cannot be honoured.
 */
function agentsReaching(target: URL): { http: HttpAgent; https: HttpsAgent } {
  const secure = target.protocol === 'https:';
  const host = target.hostname.replace(/^\[|\]$/g, '');
  const port = Number(target.port || (secure ? 443 : 80));
  const connect = (): Duplex => (secure ? tlsConnect({ host, port, servername: host }) : netConnect({ host, port }));

  class OverrideHttpsAgent extends HttpsAgent {
    override createConnection(): Duplex {
      return connect();
    }
  }
  class OverrideHttpAgent extends HttpAgent {
    override createConnection(): Duplex {
      return connect();
    }
  }
  return { http: new OverrideHttpAgent(), https: new OverrideHttpsAgent() };
}

async function completeFlow(client: GoCardlessClient, completion: RedirectCompletion): Promise<RedirectFlow> {
  try {
    return await client.redirectFlows.complete(completion.flowId, { session_token: completion.sessionToken });
  } catch (error) {
    if (!isAlreadyCompleted(error)) throw refusalOf(error, 'redirect flow completion');
  }
  // A retried activity or a reloaded return page completes the flow again: GoCardless refuses, and
  // the mandate of the first completion is the one to collect on.
  const flow = await refusedWhenPermanent('redirect flow lookup', () => client.redirectFlows.find(completion.flowId));
  if (flow.session_token !== completion.sessionToken) {
    throw new ProviderRefused(`GoCardless redirect flow ${completion.flowId} belongs to another session`);
  }
  return flow;
}

function isAlreadyCompleted(error: unknown): boolean {
  return error instanceof InvalidStateError && (error.errors ?? []).some((detail) => detail.reason === 'redirect_flow_already_completed');
}

/** The amount already refunded on a payment (minor units): its refunds (GET /refunds?payment=, every page) that still stand. */
async function refundedOn(client: GoCardlessClient, payment: string): Promise<number> {
  let total = 0;
  for await (const refund of client.refunds.all({ payment })) {
    if (!unsuccessfulRefundStatuses.has(refund.status ?? '')) total += refund.amount ?? 0;
  }
  return total;
}

/** GoCardless's message when it refuses a payment because the mandate can no longer be collected on. */
function inactiveMandate(error: unknown): string | null {
  if (!(error instanceof ApiError) || Number(error.code) !== 422) return null;
  const detail = (error.errors ?? []).find((d) => d.reason === 'mandate_is_inactive');
  return detail ? (detail.message ?? error.message) : null;
}

async function refusedWhenPermanent<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw refusalOf(error, what);
  }
}

/**
 * A 4xx answer (bad token, validation, invalid state) comes back the same on every retry, so the
 * activity should fail for good; rate limits, GoCardless's 5xx and network errors are left to retries.
 */
function refusalOf(error: unknown, what: string): unknown {
  if (!(error instanceof ApiError)) return error;
  const status = Number(error.code);
  if (status >= 400 && status < 500 && status !== 429) {
    const reasons = (error.errors ?? []).map((detail) => detail.reason ?? detail.message).filter(Boolean);
    const detail = reasons.length > 0 ? ` (${reasons.join(', ')})` : '';
    return new ProviderRefused(`GoCardless refused the ${what}: ${error.message}${detail}`, status);
  }
  return error;
}

function supportedCurrency(currency: string): `${PaymentCurrency}` {
  const upper = currency.toUpperCase();
  const supported: string[] = Object.values(PaymentCurrency);
  if (!supported.includes(upper)) throw new ProviderRefused(`GoCardless does not collect ${upper}`);
  return upper as `${PaymentCurrency}`;
}

function signatureFrom(headers: RawHeaders): string | null {
  for (const name of signatureHeaders) {
    const value = headers[name];
    const first = Array.isArray(value) ? value[0] : value;
    if (first) return first;
  }
  return null;
}

function toNotification(event: Event): ProviderNotification {
  const links = event.links ?? {};
  const action = event.action ?? '';
  const notification: ProviderNotification = {
    // Event ids are unique and always sent; the hash only keeps a malformed event from sharing a key.
    eventKey: event.id ?? createHash('sha256').update(JSON.stringify(event)).digest('hex'),
    eventType: `${event.resource_type ?? 'unknown'}.${action}`,
    outcome: null,
    paymentId: paymentIdOf(event),
    providerCheckoutId: null,
    providerPaymentId: links.payment ?? null,
    failureReason: null,
    providerCustomerId: null,
    paymentMethodId: null,
  };
  switch (event.resource_type) {
    case 'payments': {
      const outcome = paymentOutcomes[action] ?? null;
      const failureReason = outcome === 'failed' ? (event.details?.description ?? event.details?.cause ?? null) : null;
      return { ...notification, outcome, failureReason };
    }
    case 'mandates':
      // An active mandate is the customer's saved method; its payment's own events move the payment.
      return action === 'active'
        ? { ...notification, providerCustomerId: links.customer ?? null, paymentMethodId: links.mandate ?? null }
        : notification;
    case 'refunds':
      return { ...notification, outcome: refundOutcomes[action] ?? null };
    default:
      return notification;
  }
}

/** `resource_metadata` is the resource's own metadata (ours); `metadata` only that of the API call that caused the event. */
function paymentIdOf(event: Event): string | null {
  return stringAt(event.resource_metadata, 'payment_id') ?? stringAt(event.metadata, 'payment_id');
}

function stringAt(map: JsonMap | undefined, key: string): string | null {
  const value = map?.[key];
  return typeof value === 'string' && value !== '' ? value : null;
}

function eventsOf(rawBody: Buffer): Event[] {
  try {
    const body: unknown = JSON.parse(rawBody.toString('utf8'));
    const events = (body as { events?: unknown } | null)?.events;
    return Array.isArray(events) ? (events as Event[]).filter((e) => typeof e === 'object' && e !== null) : [];
  } catch {
    return [];
  }
}
