/**
 * A local stand-in for Adyen's Checkout API (provider_b, payment-providers.md §3): the sessions,
 * payments (a stored method, without the shopper) and refund calls the adapter makes, Adyen's JSON
 * and error shapes, Idempotency-Key replays, and standard notifications signed the way Adyen signs
 * them (per item, or over the raw body in an `HmacSignature` header for bxb's variant).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { hmacValidator, type Types } from '@adyen/api-library';

export type NotificationRequestItem = Types.notification.NotificationRequestItem;

export interface AdyenAmount {
  value: number;
  currency: string;
}

export interface FakeAdyenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

export interface FakeAdyenSession {
  id: string;
  sessionData: string;
  url: string;
  expiresAt: string;
  amount: AdyenAmount;
  reference: string;
  merchantAccount: string;
  returnUrl: string;
  mode: string;
  metadata?: Record<string, string>;
  shopperEmail?: string;
}

export interface FakeAdyenPayment {
  pspReference: string;
  /** The session the shopper paid; null for a /payments call on a stored method. */
  sessionId: string | null;
  resultCode: 'Authorised' | 'Refused';
  refusalReason?: string;
  merchantAccount: string;
  reference: string;
  amount: AdyenAmount;
  metadata: Record<string, string>;
  storedPaymentMethodId?: string;
  shopperReference?: string;
}

export interface FakeAdyenRefund {
  status: 'received';
  pspReference: string;
  paymentPspReference: string;
  merchantAccount: string;
  amount: AdyenAmount;
  reference?: string;
}

/** What a test sets on a notification item; the rest defaults from the payment it names. */
export interface NotificationItemFields {
  eventCode: string;
  success?: 'true' | 'false';
  pspReference?: string;
  originalReference?: string;
  merchantAccountCode?: string;
  merchantReference?: string;
  amount?: AdyenAmount;
  reason?: string;
  eventDate?: string;
  additionalData?: Record<string, string>;
}

export interface AdyenNotification {
  live: 'true' | 'false';
  notificationItems: { NotificationRequestItem: NotificationRequestItem }[];
}

export interface FakeAdyen {
  /** The base to give the adapter as `apiBaseUrl` (no trailing slash). */
  url: string;
  sessions: Map<string, FakeAdyenSession>;
  /** Payments by pspReference: paid sessions, and /payments answers whatever their resultCode. */
  payments: Map<string, FakeAdyenPayment>;
  refunds: FakeAdyenRefund[];
  requests: FakeAdyenRequest[];
  /** The shopper paid the session: records a payment under a new pspReference and returns it. */
  authorise(sessionId: string): string;
  /** /payments on this stored method answers resultCode `Refused` with `refusalReason` (default `Refused`). */
  refuseStoredMethod(storedPaymentMethodId: string, refusalReason?: string): void;
  /** A NotificationRequestItem, signed in `additionalData.hmacSignature` when a hex key is given. */
  item(fields: NotificationItemFields, hexKey?: string): NotificationRequestItem;
  notification(items: NotificationRequestItem[]): AdyenNotification;
  /** POSTs a notification of `items` to `url`: items signed one by one, or the body in an `HmacSignature` header. */
  notify(
    url: string,
    hexKey: string,
    items: NotificationItemFields[],
    options?: { headerForm?: boolean },
  ): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

const SESSIONS_PATH = /^\/v\d+\/sessions$/;
const PAYMENTS_PATH = /^\/v\d+\/payments$/;
const REFUNDS_PATH = /^\/v\d+\/payments\/([^/]+)\/refunds$/;

export async function startFakeAdyen(): Promise<FakeAdyen> {
  const sessions = new Map<string, FakeAdyenSession>();
  const payments = new Map<string, FakeAdyenPayment>();
  const refunds: FakeAdyenRefund[] = [];
  const requests: FakeAdyenRequest[] = [];
  const replays = new Map<string, { status: number; body: unknown }>();
  /** storedPaymentMethodId → refusalReason. */
  const refusedStoredMethods = new Map<string, string>();

  function newPspReference(): string {
    let psp: string;
    do psp = pspDigits();
    while (payments.has(psp) || refunds.some((r) => r.pspReference === psp));
    return psp;
  }

  function createSession(body: Record<string, unknown>): [number, unknown] {
    const amount = body.amount as Partial<AdyenAmount> | undefined;
    if (!amount || !Number.isInteger(amount.value) || typeof amount.currency !== 'string') {
      return validationError('100', 'No amount specified');
    }
    if (typeof body.merchantAccount !== 'string' || body.merchantAccount === '') {
      return validationError('901', 'Invalid Merchant Account');
    }
    if (typeof body.returnUrl !== 'string') return validationError('14_030', 'Return URL is missing.');
    const id = `CS${randomBytes(8).toString('hex').toUpperCase()}`;
    const session: FakeAdyenSession = {
      id,
      sessionData: `Ab02b4c0!${randomBytes(24).toString('base64')}`,
      url: `https://checkoutshopper-test.adyen.com/checkoutshopper/pay/${id}`,
      expiresAt: typeof body.expiresAt === 'string' ? body.expiresAt : new Date(Date.now() + 3_600_000).toISOString(),
      amount: { value: amount.value!, currency: amount.currency },
      reference: String(body.reference ?? ''),
      merchantAccount: body.merchantAccount,
      returnUrl: body.returnUrl,
      mode: typeof body.mode === 'string' ? body.mode : 'embedded',
      ...(body.metadata ? { metadata: body.metadata as Record<string, string> } : {}),
      ...(typeof body.shopperEmail === 'string' ? { shopperEmail: body.shopperEmail } : {}),
    };
    sessions.set(id, session);
    return [201, session];
  }

  /** Only the stored-method form provider_b sends: a card on file, charged without the shopper. */
  function createPayment(body: Record<string, unknown>): [number, unknown] {
    const amount = body.amount as Partial<AdyenAmount> | undefined;
    if (!amount || !Number.isInteger(amount.value) || typeof amount.currency !== 'string') {
      return validationError('100', 'No amount specified');
    }
    if (typeof body.merchantAccount !== 'string' || body.merchantAccount === '') {
      return validationError('901', 'Invalid Merchant Account');
    }
    if (typeof body.reference !== 'string' || body.reference === '') {
      return validationError('130', "Required field 'reference' is not provided.");
    }
    const method = (body.paymentMethod ?? {}) as Record<string, unknown>;
    const storedPaymentMethodId = method.storedPaymentMethodId;
    if (typeof storedPaymentMethodId !== 'string' || storedPaymentMethodId === '') {
      return validationError('000', 'The fake charges stored payment methods only: storedPaymentMethodId is missing');
    }
    // Stored methods belong to a shopper: Adyen finds none without one.
    if (typeof body.shopperReference !== 'string' || body.shopperReference === '') {
      return validationError('800', 'Contract not found');
    }
    const refusalReason = refusedStoredMethods.get(storedPaymentMethodId);
    const payment: FakeAdyenPayment = {
      pspReference: newPspReference(),
      sessionId: null,
      resultCode: refusalReason === undefined ? 'Authorised' : 'Refused',
      ...(refusalReason === undefined ? {} : { refusalReason }),
      merchantAccount: body.merchantAccount,
      reference: body.reference,
      amount: { value: amount.value!, currency: amount.currency },
      metadata: (body.metadata ?? {}) as Record<string, string>,
      storedPaymentMethodId,
      shopperReference: body.shopperReference,
    };
    payments.set(payment.pspReference, payment);
    return [
      200,
      {
        pspReference: payment.pspReference,
        resultCode: payment.resultCode,
        ...(refusalReason === undefined ? {} : { refusalReason, refusalReasonCode: '2' }),
        amount: payment.amount,
        merchantReference: payment.reference,
        paymentMethod: { brand: 'visa', type: 'scheme' },
      },
    ];
  }

  function createRefund(paymentPspReference: string, body: Record<string, unknown>): [number, unknown] {
    if (!payments.has(paymentPspReference)) {
      return validationError('167', 'Original pspReference required for this operation');
    }
    const amount = body.amount as Partial<AdyenAmount> | undefined;
    if (!amount || !Number.isInteger(amount.value) || typeof amount.currency !== 'string') {
      return validationError('100', 'No amount specified');
    }
    if (typeof body.merchantAccount !== 'string' || body.merchantAccount === '') {
      return validationError('901', 'Invalid Merchant Account');
    }
    const refund: FakeAdyenRefund = {
      status: 'received',
      pspReference: newPspReference(),
      paymentPspReference,
      merchantAccount: body.merchantAccount,
      amount: { value: amount.value!, currency: amount.currency },
      ...(typeof body.reference === 'string' ? { reference: body.reference } : {}),
    };
    refunds.push(refund);
    return [201, refund];
  }

  function route(method: string, path: string, body: Record<string, unknown>): [number, unknown] {
    if (method === 'POST' && SESSIONS_PATH.test(path)) return createSession(body);
    if (method === 'POST' && PAYMENTS_PATH.test(path)) return createPayment(body);
    const refund = method === 'POST' ? REFUNDS_PATH.exec(path) : null;
    if (refund) return createRefund(decodeURIComponent(refund[1]!), body);
    return [404, { status: 404, errorCode: '000', message: `No resource at ${path}`, errorType: 'validation' }];
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    let body: Record<string, unknown> = {};
    try {
      body = raw.length > 0 ? (JSON.parse(raw.toString('utf8')) as Record<string, unknown>) : {};
    } catch {
      return send(res, 400, { status: 400, errorCode: '702', message: 'Unable to parse the request body', errorType: 'validation' });
    }
    requests.push({ method: req.method ?? '', path, headers: req.headers, body });

    if (!req.headers['x-api-key']) {
      return send(res, 401, { status: 401, errorCode: '000', message: 'HTTP Status Response - Unauthorized', errorType: 'security' });
    }
    const key = req.headers['idempotency-key'];
    const replay = typeof key === 'string' ? replays.get(`${path}\n${key}`) : undefined;
    if (replay) return send(res, replay.status, replay.body);
    const [status, answer] = route(req.method ?? '', path, body);
    // Adyen keeps only successful answers for a key: a corrected retry may use it again.
    if (typeof key === 'string' && status < 300) replays.set(`${path}\n${key}`, { status, body: answer });
    send(res, status, answer);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) =>
      send(res, 500, { status: 500, errorCode: '905', message: String(err), errorType: 'internal' }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  function item(fields: NotificationItemFields, hexKey?: string): NotificationRequestItem {
    const pspReference = fields.pspReference ?? newPspReference();
    const payment = payments.get(fields.originalReference ?? pspReference);
    // Payment metadata travels only on the payment's own events, not on its modifications.
    const metadata = payment && !fields.originalReference ? prefixed('metadata.', payment.metadata) : {};
    const built = {
      eventCode: fields.eventCode,
      success: fields.success ?? 'true',
      pspReference,
      ...(fields.originalReference ? { originalReference: fields.originalReference } : {}),
      merchantAccountCode: fields.merchantAccountCode ?? payment?.merchantAccount ?? 'TestMerchant',
      merchantReference: fields.merchantReference ?? payment?.reference ?? '',
      amount: fields.amount ?? payment?.amount ?? { value: 0, currency: 'EUR' },
      eventDate: fields.eventDate ?? new Date().toISOString(),
      ...(fields.reason ? { reason: fields.reason } : {}),
      additionalData: { ...metadata, ...fields.additionalData },
    } as NotificationRequestItem;
    if (hexKey !== undefined) built.additionalData!.hmacSignature = new hmacValidator().calculateHmac(built, hexKey);
    return built;
  }

  function notification(items: NotificationRequestItem[]): AdyenNotification {
    return { live: 'false', notificationItems: items.map((i) => ({ NotificationRequestItem: i })) };
  }

  return {
    url: `http://127.0.0.1:${port}`,
    sessions,
    payments,
    refunds,
    requests,
    authorise(sessionId) {
      const session = sessions.get(sessionId);
      if (!session) throw new Error(`fake Adyen has no session ${sessionId}`);
      const pspReference = newPspReference();
      payments.set(pspReference, {
        pspReference,
        sessionId,
        resultCode: 'Authorised',
        merchantAccount: session.merchantAccount,
        reference: session.reference,
        amount: session.amount,
        metadata: session.metadata ?? {},
      });
      return pspReference;
    },
    refuseStoredMethod(storedPaymentMethodId, refusalReason = 'Refused') {
      refusedStoredMethods.set(storedPaymentMethodId, refusalReason);
    },
    item,
    notification,
    async notify(url, hexKey, fields, options = {}) {
      const items = fields.map((f) => item(f, options.headerForm ? undefined : hexKey));
      const raw = JSON.stringify(notification(items));
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (options.headerForm) headers.HmacSignature = new hmacValidator().calculateHmac(raw, hexKey);
      const res = await fetch(url, { method: 'POST', headers, body: raw });
      return { status: res.status, body: await res.text() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

function validationError(errorCode: string, message: string): [number, unknown] {
  return [422, { status: 422, errorCode, message, errorType: 'validation', pspReference: pspDigits() }];
}

/** Adyen's classic pspReference: 16 digits, no leading zero. */
function pspDigits(): string {
  return [randomInt(1, 10), ...Array.from({ length: 15 }, () => randomInt(0, 10))].join('');
}

function prefixed(prefix: string, values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [prefix + k, v]));
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}
