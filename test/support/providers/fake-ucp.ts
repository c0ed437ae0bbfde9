// A local UCP business (payment-providers.md §5): the REST subset provider_d calls, answering in
// UCP's shapes (checkout sessions `chk_…`, orders `ord_…`, refunds `rfd_…`, errors as
// `{messages:[{type:'error', code, content}]}`), and the signed notifications a business sends.
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const UCP_VERSION = '2026-01-23';

export interface UcpRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body, or the text when it is not JSON. */
  body: unknown;
}

export interface UcpTotal {
  type: 'subtotal' | 'total';
  amount: number;
}

export interface UcpLineItem {
  id: string;
  item: { id: string; title: string; price: number };
  quantity: number;
  totals: UcpTotal[];
}

export interface UcpSession {
  id: string;
  status: 'incomplete' | 'requires_escalation' | 'ready_for_complete' | 'complete_in_progress' | 'completed' | 'canceled';
  currency: string;
  line_items: UcpLineItem[];
  totals: UcpTotal[];
  metadata: Record<string, unknown>;
  buyer?: { email?: string };
  merchant_id?: string;
  continue_url?: string;
  permalink_url?: string;
  expires_at?: string;
  order_id?: string;
  messages: { type: string; code: string; content: string }[];
}

export interface UcpRefund {
  id: string;
  status: 'pending';
  payment_id: string;
  amount: number;
  currency: string;
  metadata: Record<string, unknown>;
}

export interface FakeUcpOptions {
  /** The Bearer token the business accepts (default `ucp_test_key`). */
  apiKey?: string;
  /** RFC 3339 instant answered as every session's `expires_at`; omitted when not given. */
  expiresAt?: string;
  /** Which link the session answer carries (default `continue_url`). */
  link?: 'continue_url' | 'permalink_url' | 'none';
}

export interface NotifyResult {
  status: number;
  body: string;
}

export interface FakeUcp {
  /** The business's API base URL (no trailing slash). */
  url: string;
  apiKey: string;
  sessions: Map<string, UcpSession>;
  refunds: UcpRefund[];
  requests: UcpRequest[];
  /** The buyer finished paying: status `completed` and an order `ord_…`. */
  complete(id: string): UcpSession;
  /** The next API request (not the profile) is answered with this status and a UCP error. */
  failNext(status: number): void;
  /** A notification payload for a session as it is now: `{type: 'checkout.<status>', data: session}`. */
  eventFor(id: string, type?: string): { type: string; data: UcpSession };
  /** POSTs `payload` (serialized once; a string is sent as is) with a correct `X-UCP-Signature`. */
  notify(url: string, secret: string, payload: unknown, options?: { prefixed?: boolean }): Promise<NotifyResult>;
  close(): Promise<void>;
}

const OPEN_STATUSES = new Set<UcpSession['status']>(['incomplete', 'requires_escalation', 'ready_for_complete']);

class UcpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`;
const isWhole = (value: unknown, min: number): value is number => Number.isInteger(value) && (value as number) >= min;

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parseLineItems(value: unknown): UcpLineItem[] {
  if (!Array.isArray(value) || value.length === 0) throw new UcpError(400, 'missing', 'line_items is required');
  return value.map((raw: unknown, index) => {
    const lineItem = raw as { id?: unknown; item?: { id?: unknown; title?: unknown; price?: unknown }; quantity?: unknown };
    const item = lineItem?.item;
    if (typeof lineItem?.id !== 'string' || typeof item?.id !== 'string' || typeof item.title !== 'string') {
      throw new UcpError(400, 'invalid', `line_items[${index}] needs id, item.id and item.title`);
    }
    if (!isWhole(item.price, 0)) throw new UcpError(400, 'invalid', `line_items[${index}].item.price must be whole minor units`);
    if (!isWhole(lineItem.quantity, 1)) throw new UcpError(400, 'invalid', `line_items[${index}].quantity must be a positive integer`);
    const amount = item.price * lineItem.quantity;
    return {
      id: lineItem.id,
      item: { id: item.id, title: item.title, price: item.price },
      quantity: lineItem.quantity,
      totals: [
        { type: 'subtotal', amount },
        { type: 'total', amount },
      ],
    };
  });
}

const totalOf = (session: UcpSession): number => session.totals.find((t) => t.type === 'total')?.amount ?? 0;

export async function startFakeUcp(options: FakeUcpOptions = {}): Promise<FakeUcp> {
  const apiKey = options.apiKey ?? 'ucp_test_key';
  const sessions = new Map<string, UcpSession>();
  const refunds: UcpRefund[] = [];
  const requests: UcpRequest[] = [];
  const idempotent = new Map<string, { status: number; body: unknown }>();
  let failure: number | null = null;
  let baseUrl = '';

  function createSession(body: Record<string, unknown>): UcpSession {
    const lineItems = parseLineItems(body.line_items);
    if (typeof body.currency !== 'string' || !/^[A-Z]{3}$/.test(body.currency)) {
      throw new UcpError(400, 'invalid', 'currency must be an upper-case ISO 4217 code');
    }
    const amount = lineItems.reduce((sum, li) => sum + li.totals[1]!.amount, 0);
    const id = newId('chk');
    const session: UcpSession = {
      id,
      status: 'incomplete',
      currency: body.currency,
      line_items: lineItems,
      totals: [
        { type: 'subtotal', amount },
        { type: 'total', amount },
      ],
      metadata: (body.metadata as Record<string, unknown> | undefined) ?? {},
      messages: [],
    };
    if (body.buyer) session.buyer = body.buyer as { email?: string };
    if (typeof body.merchant_id === 'string') session.merchant_id = body.merchant_id;
    if ((options.link ?? 'continue_url') === 'continue_url') session.continue_url = `${baseUrl}/pay/${id}`;
    if (options.link === 'permalink_url') session.permalink_url = `${baseUrl}/p/${id}`;
    if (options.expiresAt) session.expires_at = options.expiresAt;
    sessions.set(id, session);
    return session;
  }

  function cancelSession(id: string): UcpSession {
    const session = sessions.get(id);
    if (!session) throw new UcpError(404, 'not_found', `checkout session ${id} not found`);
    if (!OPEN_STATUSES.has(session.status)) throw new UcpError(409, 'not_cancelable', `checkout session is ${session.status}`);
    session.status = 'canceled';
    return session;
  }

  function createRefund(body: Record<string, unknown>): UcpRefund {
    const paymentId = body.payment_id;
    const session = [...sessions.values()].find((s) => s.id === paymentId || s.order_id === paymentId);
    if (typeof paymentId !== 'string' || !session) throw new UcpError(404, 'not_found', `payment ${String(paymentId)} not found`);
    if (session.status !== 'completed') throw new UcpError(409, 'not_refundable', `checkout session is ${session.status}`);
    const refunded = refunds
      .filter((r) => r.payment_id === session.id || r.payment_id === session.order_id)
      .reduce((s, r) => s + r.amount, 0);
    if (!isWhole(body.amount, 1) || body.amount > totalOf(session) - refunded) {
      throw new UcpError(400, 'invalid', 'amount must be whole minor units within what was paid');
    }
    if (body.currency !== session.currency) throw new UcpError(400, 'invalid', `currency must be ${session.currency}`);
    const created: UcpRefund = {
      id: newId('rfd'),
      status: 'pending',
      payment_id: paymentId,
      amount: body.amount,
      currency: session.currency,
      metadata: (body.metadata as Record<string, unknown> | undefined) ?? {},
    };
    refunds.push(created);
    return created;
  }

  /** Routes an authenticated API call; returns [status, body] or throws UcpError. */
  function route(method: string, path: string, body: Record<string, unknown>): [number, unknown] {
    if (method === 'POST' && path === '/checkout-sessions') return [201, createSession(body)];
    const cancel = /^\/checkout-sessions\/([^/]+)\/cancel$/.exec(path);
    if (method === 'POST' && cancel) return [200, cancelSession(decodeURIComponent(cancel[1]!))];
    if (method === 'POST' && path === '/refunds') return [201, createRefund(body)];
    throw new UcpError(404, 'not_found', `no route ${method} ${path}`);
  }

  function profile(): unknown {
    return {
      ucp: {
        version: UCP_VERSION,
        services: { 'dev.ucp.shopping': { version: UCP_VERSION, rest: { endpoint: baseUrl } } },
        capabilities: [{ name: 'dev.ucp.shopping.checkout', version: UCP_VERSION }],
      },
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const path = new URL(req.url ?? '/', baseUrl).pathname;
    const text = await readBody(req);
    let body: unknown = text;
    try {
      body = text === '' ? {} : JSON.parse(text);
    } catch {
      // kept as text; answered 400 below
    }
    requests.push({ method, path, headers: req.headers, body });

    if (method === 'GET' && path === '/.well-known/ucp') return send(res, 200, profile());
    try {
      if (failure !== null) {
        const status = failure;
        failure = null;
        throw new UcpError(status, 'internal_error', 'injected failure');
      }
      if (req.headers.authorization !== `Bearer ${apiKey}`) throw new UcpError(401, 'unauthorized', 'invalid API key');
      const agent = req.headers['ucp-agent'];
      if (typeof agent !== 'string' || !/^profile="[^"]+"$/.test(agent)) {
        throw new UcpError(400, 'invalid_ucp_agent', 'UCP-Agent profile is required');
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new UcpError(400, 'invalid', 'body must be a JSON object');

      const key = req.headers['idempotency-key'];
      const idempotencyKey = typeof key === 'string' ? `${path}\n${key}` : null;
      const replay = idempotencyKey ? idempotent.get(idempotencyKey) : undefined;
      if (replay) return send(res, replay.status, replay.body);
      const [status, answer] = route(method, path, body as Record<string, unknown>);
      if (idempotencyKey) idempotent.set(idempotencyKey, { status, body: answer });
      send(res, status, answer);
    } catch (error) {
      if (!(error instanceof UcpError)) throw error;
      send(res, error.status, { messages: [{ type: 'error', code: error.code, content: error.message, severity: 'unrecoverable' }] });
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) =>
      send(res, 500, { messages: [{ type: 'error', code: 'internal_error', content: String(error) }] }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url: baseUrl,
    apiKey,
    sessions,
    refunds,
    requests,
    complete(id) {
      const session = sessions.get(id);
      if (!session) throw new Error(`fake UCP: no checkout session ${id}`);
      session.status = 'completed';
      session.order_id = newId('ord');
      return session;
    },
    failNext(status) {
      failure = status;
    },
    eventFor(id, type) {
      const session = sessions.get(id);
      if (!session) throw new Error(`fake UCP: no checkout session ${id}`);
      return { type: type ?? `checkout.${session.status}`, data: structuredClone(session) };
    },
    async notify(url, secret, payload, notifyOptions = {}) {
      const raw = typeof payload === 'string' ? payload : JSON.stringify(payload);
      const signature = createHmac('sha256', secret).update(raw).digest('hex');
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-ucp-signature': notifyOptions.prefixed ? `sha256=${signature}` : signature },
        body: raw,
      });
      return { status: response.status, body: await response.text() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
