/**
 * A local stand-in for the part of Stripe's API that provider_a calls (payment-providers.md §2),
 * over real HTTP so the official SDK runs unmodified against it (`api_base_url` = `fake.url`).
 *
 * Speaks: POST /v1/checkout/sessions, POST /v1/checkout/sessions/{id}/expire, POST /v1/refunds,
 * POST /v1/payment_intents (confirmed off-session on a saved method: succeeded unless a test makes
 * the method decline or settle later), form-encoded like the SDK sends them, answering Stripe's
 * object shapes and its error shape `{ error: { type, message, code?, param? } }` (402 `card_error`
 * with the failed PaymentIntent for a decline), and replaying the first answer for a repeated
 * Idempotency-Key. Tests drive the customer's side with `complete()` and send Stripe's
 * notifications, signed by the SDK's own test signer, with `notify()`.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import Stripe from 'stripe';

export interface FakeStripeRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The form fields exactly as sent, nested keys flat: `line_items[0][price_data][unit_amount]`. */
  form: Record<string, string>;
}

export interface FakeCheckoutSession {
  id: string;
  object: 'checkout.session';
  mode: 'payment';
  status: 'open' | 'complete' | 'expired';
  payment_status: 'unpaid' | 'paid';
  amount_total: number;
  currency: string;
  client_reference_id: string | null;
  customer: string | null;
  customer_email: string | null;
  metadata: Record<string, string>;
  payment_intent: string | null;
  success_url: string;
  cancel_url: string | null;
  url: string | null;
  created: number;
  expires_at: number;
  livemode: false;
}

export interface FakePaymentIntent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  status: 'succeeded' | 'processing' | 'requires_payment_method';
  customer: string | null;
  payment_method: string;
  description: string | null;
  metadata: Record<string, string>;
  last_payment_error: (FakeCardDecline & { type: 'card_error'; payment_method: { id: string; object: 'payment_method' } }) | null;
  created: number;
  livemode: false;
}

/** How a saved card declines: Stripe's `code`, `decline_code` and message. */
export interface FakeCardDecline {
  code: string;
  decline_code: string;
  message: string;
}

export interface FakeRefund {
  id: string;
  object: 'refund';
  amount: number;
  currency: string;
  payment_intent: string;
  status: 'succeeded';
  metadata: Record<string, string>;
  created: number;
}

export interface FakeStripeEvent {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  livemode: false;
  pending_webhooks: number;
  request: { id: null; idempotency_key: null };
  type: string;
  data: { object: Record<string, unknown> };
}

export interface FakeStripe {
  /** Base URL to give the adapter as `api_base_url`. */
  url: string;
  sessions: Map<string, FakeCheckoutSession>;
  paymentIntents: Map<string, FakePaymentIntent>;
  refunds: Map<string, FakeRefund>;
  requests: FakeStripeRequest[];
  /** The customer pays: the session becomes complete and paid, with a new PaymentIntent. */
  complete(sessionId: string): FakeCheckoutSession;
  /**
   * Off-session charges on this method answer 402 `card_error` (default: card_declined,
   * generic_decline); with `times`, only the next `times` charges, then it pays again.
   */
  declinePaymentMethod(paymentMethodId: string, decline?: Partial<FakeCardDecline>, times?: number): void;
  /** Off-session charges on this method stay `processing`, as a bank debit does. */
  delayPaymentMethod(paymentMethodId: string): void;
  event(type: string, object: object): FakeStripeEvent;
  signedHeaders(rawBody: string, secret: string, timestamp?: number): Record<string, string>;
  /** POSTs the event as Stripe would, `Stripe-Signature` computed at `timestamp` (unix seconds, default now). */
  notify(url: string, secret: string, event: object, options?: { timestamp?: number }): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

interface Answer {
  status: number;
  body: unknown;
}

/** An answer serialized when made, so that a replay shows the object as it was then, not as it is now. */
interface Reply {
  status: number;
  json: string;
}

const SESSION_LIFETIME_SECONDS = 24 * 60 * 60;

const GENERIC_DECLINE: FakeCardDecline = { code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' };

export async function startFakeStripe(): Promise<FakeStripe> {
  const sessions = new Map<string, FakeCheckoutSession>();
  const paymentIntents = new Map<string, FakePaymentIntent>();
  const refunds = new Map<string, FakeRefund>();
  const requests: FakeStripeRequest[] = [];
  // What a session hands on to the PaymentIntent created when the customer pays.
  const intentMetadata = new Map<string, Record<string, string>>();
  const idempotent = new Map<string, { path: string; rawForm: string; answer: Reply }>();
  const declines = new Map<string, FakeCardDecline & { left: number }>();
  const delayed = new Set<string>();

  function route(method: string, path: string, form: Record<string, string>): Answer {
    if (method === 'POST' && path === '/v1/checkout/sessions') return createSession(form);
    const expire = /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(path);
    if (method === 'POST' && expire) return expireSession(decodeURIComponent(expire[1] ?? ''));
    if (method === 'POST' && path === '/v1/refunds') return createRefund(form);
    if (method === 'POST' && path === '/v1/payment_intents') return createPaymentIntent(form);
    return failure(404, `Unrecognized request URL (${method}: ${path}).`);
  }

  function createSession(form: Record<string, string>): Answer {
    for (const field of ['mode', 'success_url', 'line_items[0][price_data][currency]', 'line_items[0][price_data][product_data][name]']) {
      if (!form[field]) return failure(400, `Missing required param: ${field}.`, 'parameter_missing', field);
    }
    const unitAmount = integer(form['line_items[0][price_data][unit_amount]']);
    if (unitAmount === null) {
      return failure(400, 'Invalid integer: unit_amount.', 'parameter_invalid_integer', 'line_items[0][price_data][unit_amount]');
    }
    const quantity = integer(form['line_items[0][quantity]'] ?? '1') ?? 1;
    const id = `cs_test_${token()}`;
    const created = nowSeconds();
    const session: FakeCheckoutSession = {
      id,
      object: 'checkout.session',
      mode: 'payment',
      status: 'open',
      payment_status: 'unpaid',
      amount_total: unitAmount * quantity,
      currency: form['line_items[0][price_data][currency]'] ?? '',
      client_reference_id: form.client_reference_id ?? null,
      customer: null,
      customer_email: form.customer_email ?? null,
      metadata: nested(form, 'metadata'),
      payment_intent: null,
      success_url: form.success_url ?? '',
      cancel_url: form.cancel_url ?? null,
      url: `https://checkout.stripe.test/c/pay/${id}`,
      created,
      expires_at: integer(form.expires_at) ?? created + SESSION_LIFETIME_SECONDS,
      livemode: false,
    };
    sessions.set(id, session);
    intentMetadata.set(id, nested(form, 'payment_intent_data[metadata]'));
    return { status: 200, body: session };
  }

  function expireSession(id: string): Answer {
    const session = sessions.get(id);
    if (!session) return failure(404, `No such checkout.session: '${id}'`, 'resource_missing', 'id');
    if (session.status !== 'open') {
      return failure(400, `Only Checkout Sessions with a status of \`open\` can be expired; this one is \`${session.status}\`.`);
    }
    session.status = 'expired';
    session.url = null;
    return { status: 200, body: session };
  }

  /** Only the confirmed, off-session form provider_a sends; an unconfirmed intent is not modelled. */
  function createPaymentIntent(form: Record<string, string>): Answer {
    const amount = integer(form.amount);
    if (form.amount === undefined) return failure(400, 'Missing required param: amount.', 'parameter_missing', 'amount');
    if (amount === null || amount < 1) return failure(400, 'Invalid positive integer', 'parameter_invalid_integer', 'amount');
    if (!form.currency) return failure(400, 'Missing required param: currency.', 'parameter_missing', 'currency');
    if (form.confirm !== 'true') return failure(400, 'The fake only creates confirmed PaymentIntents.', 'parameter_unknown', 'confirm');
    const paymentMethod = form.payment_method ?? '';
    if (!paymentMethod.startsWith('pm_')) {
      return failure(400, `No such PaymentMethod: '${paymentMethod}'`, 'resource_missing', 'payment_method');
    }
    if (form.customer !== undefined && !form.customer.startsWith('cus_')) {
      return failure(400, `No such customer: '${form.customer}'`, 'resource_missing', 'customer');
    }
    const declining = declines.get(paymentMethod);
    const decline =
      declining && declining.left > 0 ? { code: declining.code, decline_code: declining.decline_code, message: declining.message } : null;
    if (declining) declining.left -= 1;
    const status = decline ? 'requires_payment_method' : delayed.has(paymentMethod) ? 'processing' : 'succeeded';
    const intent: FakePaymentIntent = {
      id: `pi_${token()}`,
      object: 'payment_intent',
      amount,
      amount_received: status === 'succeeded' ? amount : 0,
      currency: form.currency,
      status,
      customer: form.customer ?? null,
      payment_method: paymentMethod,
      description: form.description ?? null,
      metadata: nested(form, 'metadata'),
      last_payment_error: decline
        ? { type: 'card_error', ...decline, payment_method: { id: paymentMethod, object: 'payment_method' } }
        : null,
      created: nowSeconds(),
      livemode: false,
    };
    paymentIntents.set(intent.id, intent);
    if (!decline) return { status: 200, body: intent };
    // Stripe answers a failed confirmation with the error, the failed intent inside it.
    return {
      status: 402,
      body: {
        error: { type: 'card_error', ...decline, payment_intent: intent, payment_method: intent.last_payment_error?.payment_method },
      },
    };
  }

  function createRefund(form: Record<string, string>): Answer {
    const intentId = form.payment_intent;
    if (!intentId) {
      return failure(400, 'One of the following params should be provided: payment_intent or charge.', 'parameter_missing');
    }
    const intent = paymentIntents.get(intentId);
    if (!intent) return failure(400, `No such payment_intent: '${intentId}'`, 'resource_missing', 'payment_intent');
    const refunded = [...refunds.values()].filter((r) => r.payment_intent === intentId).reduce((sum, r) => sum + r.amount, 0);
    const amount = form.amount === undefined ? intent.amount_received - refunded : integer(form.amount);
    if (amount === null || amount <= 0) return failure(400, 'Invalid positive integer', 'parameter_invalid_integer', 'amount');
    if (amount > intent.amount_received - refunded) {
      return failure(
        400,
        `Refund amount (${amount}) is greater than unrefunded amount on charge (${intent.amount_received - refunded})`,
        'amount_too_large',
        'amount',
      );
    }
    const refund: FakeRefund = {
      id: `re_${token()}`,
      object: 'refund',
      amount,
      currency: intent.currency,
      payment_intent: intentId,
      status: 'succeeded',
      metadata: nested(form, 'metadata'),
      created: nowSeconds(),
    };
    refunds.set(refund.id, refund);
    return { status: 200, body: refund };
  }

  /** Stripe replays the first answer to a key; the same key with other parameters is an idempotency_error. */
  function answer(req: IncomingMessage, path: string, rawForm: string, form: Record<string, string>): Reply {
    if (!/^Bearer \S+/.test(req.headers.authorization ?? '')) return reply(failure(401, 'You did not provide an API key.'));
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || req.method !== 'POST') return reply(route(req.method ?? 'GET', path, form));
    const earlier = idempotent.get(key);
    if (earlier) {
      if (earlier.path === path && earlier.rawForm === rawForm) return earlier.answer;
      const message = 'Keys for idempotent requests can only be used with the same parameters they were first used with.';
      return reply({ status: 400, body: { error: { type: 'idempotency_error', message } } });
    }
    const fresh = reply(route('POST', path, form));
    idempotent.set(key, { path, rawForm, answer: fresh });
    return fresh;
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const rawForm = Buffer.concat(chunks).toString('utf8');
      const form = Object.fromEntries(new URLSearchParams(rawForm));
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      requests.push({ method: req.method ?? 'GET', path, headers: req.headers, form });
      const { status, json } = answer(req, path, rawForm, form);
      res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${token()}` }).end(json);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  function signedHeaders(rawBody: string, secret: string, timestamp?: number): Record<string, string> {
    return {
      'content-type': 'application/json',
      'stripe-signature': Stripe.webhooks.generateTestHeaderString({
        payload: rawBody,
        secret,
        ...(timestamp === undefined ? {} : { timestamp }),
      }),
    };
  }

  return {
    url: `http://127.0.0.1:${port}`,
    sessions,
    paymentIntents,
    refunds,
    requests,
    complete(sessionId) {
      const session = sessions.get(sessionId);
      if (!session || session.status !== 'open') throw new Error(`Session ${sessionId} is not open`);
      const intent: FakePaymentIntent = {
        id: `pi_${token()}`,
        object: 'payment_intent',
        amount: session.amount_total,
        amount_received: session.amount_total,
        currency: session.currency,
        status: 'succeeded',
        customer: session.customer,
        payment_method: `pm_${token()}`,
        description: null,
        metadata: intentMetadata.get(sessionId) ?? {},
        last_payment_error: null,
        created: nowSeconds(),
        livemode: false,
      };
      paymentIntents.set(intent.id, intent);
      Object.assign(session, { status: 'complete', payment_status: 'paid', payment_intent: intent.id, url: null });
      return session;
    },
    declinePaymentMethod(paymentMethodId, decline = {}, times) {
      declines.set(paymentMethodId, { ...GENERIC_DECLINE, ...decline, left: times ?? Infinity });
    },
    delayPaymentMethod(paymentMethodId) {
      delayed.add(paymentMethodId);
    },
    event(type, object) {
      return {
        id: `evt_${token()}`,
        object: 'event',
        api_version: Stripe.API_VERSION,
        created: nowSeconds(),
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type,
        data: { object: structuredClone(object) as Record<string, unknown> },
      };
    },
    signedHeaders,
    async notify(url, secret, event, options = {}) {
      const rawBody = JSON.stringify(event);
      const response = await fetch(url, { method: 'POST', headers: signedHeaders(rawBody, secret, options.timestamp), body: rawBody });
      return { status: response.status, body: await response.text() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function reply({ status, body }: Answer): Reply {
  return { status, json: JSON.stringify(body) };
}

function failure(status: number, message: string, code?: string, param?: string): Answer {
  return { status, body: { error: { type: 'invalid_request_error', message, ...(code ? { code } : {}), ...(param ? { param } : {}) } } };
}

/** The fields under `prefix[...]`, one level deep (metadata is flat in Stripe). */
function nested(form: Record<string, string>, prefix: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [key, value] of Object.entries(form)) {
    if (key.startsWith(`${prefix}[`) && key.endsWith(']')) fields[key.slice(prefix.length + 1, -1)] = value;
  }
  return fields;
}

function integer(value: string | undefined): number | null {
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : null;
}

function token(): string {
  return randomBytes(12).toString('hex');
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
