/**
 * A local stand-in for GoCardless's API (the subset provider_c calls) and its webhook sender.
 * Requests and answers have GoCardless's shapes: bodies wrapped in the resource name, ids with its
 * prefixes, its error body `{error:{type, code, message, errors:[{reason, message, ...}]}}`, its
 * idempotency conflict (409 with the conflicting resource's id, which the SDK follows; answered for
 * a reused key whatever the new body says), its cursor-paginated lists and its refund guard
 * (`total_amount_confirmation` = the payment's refunded total including the new refund).
 *
 * The adapter reaches it through its agents (see gocardless.ts): requests arrive as plain HTTP
 * with the Host header of api-sandbox.gocardless.com.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  /** The query string's parameters (lists: payment, limit, after). */
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: unknown;
}

export interface FakeRedirectFlow {
  id: string;
  description: string | null;
  session_token: string;
  scheme: string | null;
  success_redirect_url: string;
  redirect_url: string;
  created_at: string;
  metadata: Record<string, string>;
  prefilled_customer?: Record<string, string>;
  confirmation_url?: string;
  mandate_reference?: string;
  links: { creditor: string; customer?: string; customer_bank_account?: string; mandate?: string };
}

export interface FakePayment {
  id: string;
  created_at: string;
  charge_date: string;
  amount: number;
  amount_refunded: number;
  currency: string;
  description: string | null;
  reference: string | null;
  status: string;
  retry_if_possible: boolean;
  metadata: Record<string, string>;
  links: { mandate: string; creditor: string };
}

export interface FakeRefund {
  id: string;
  created_at: string;
  amount: number;
  currency: string;
  reference: string | null;
  status: string;
  metadata: Record<string, string>;
  links: { payment: string; mandate: string };
}

export interface FakeMandate {
  id: string;
  status: string;
  scheme: string;
  metadata: Record<string, string>;
  links: { customer: string; creditor: string; customer_bank_account: string };
}

export interface GoCardlessEvent {
  id: string;
  created_at: string;
  resource_type: string;
  action: string;
  links: Record<string, string>;
  details: { origin: string; cause: string; description: string; [key: string]: unknown };
  metadata: Record<string, unknown>;
  resource_metadata: Record<string, unknown>;
}

export interface SignedWebhook {
  rawBody: Buffer;
  headers: Record<string, string>;
}

export interface FakeGoCardlessOptions {
  /** Like the real API: completing a flow the customer has not finished answers `redirect_flow_incomplete`. */
  requireCustomerApproval?: boolean;
}

export interface FakeGoCardless {
  /** Give it as the integration's api_base_url. */
  url: string;
  flows: Map<string, FakeRedirectFlow>;
  mandates: Map<string, FakeMandate>;
  payments: Map<string, FakePayment>;
  refunds: Map<string, FakeRefund>;
  requests: RecordedRequest[];
  /** The customer finishes the hosted pages; answers the address GoCardless sends them back to. */
  customerApproves(flowId: string): string;
  /** The mandate is cancelled (by the customer's bank, say): payments on it answer 422 `mandate_is_inactive`. */
  cancelMandate(mandateId: string): FakeMandate;
  /** Any mandate status; failed, cancelled, expired, consumed and blocked ones take no payment. */
  setMandateStatus(mandateId: string, status: string): FakeMandate;
  /** An event as GoCardless sends it; `resource_metadata` comes from the fake's payment or refund when linked. */
  event(fields?: Partial<GoCardlessEvent>): GoCardlessEvent;
  /** The body and headers GoCardless would POST for these events. */
  webhook(secret: string, events: GoCardlessEvent[]): SignedWebhook;
  notify(url: string, secret: string, events: GoCardlessEvent[]): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

const creditorId = 'CR000TESTCREDITOR';

/** Mandate statuses GoCardless collects no new payment on. */
const inactiveMandateStatuses = new Set(['failed', 'cancelled', 'expired', 'consumed', 'blocked']);

/** Refund statuses that do not count in a payment's refunded total. */
const unsuccessfulRefundStatuses = new Set(['cancelled', 'bounced', 'funds_returned']);

/** GoCardless's page size for lists, and the most `limit` may ask for. */
const defaultPageSize = 50;
const maxPageSize = 500;

export function goCardlessId(prefix: string): string {
  return `${prefix}${randomBytes(7).toString('hex').toUpperCase()}`;
}

class GoCardlessError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly errors: Record<string, unknown>[],
  ) {
    super(message);
  }
}

const notFound = (): GoCardlessError =>
  new GoCardlessError(404, 'invalid_api_usage', 'Resource not found', [{ reason: 'resource_not_found', message: 'Resource not found' }]);

const invalid = (field: string, message: string, pointer: string): GoCardlessError =>
  new GoCardlessError(422, 'validation_failed', 'Validation failed', [{ field, message, request_pointer: pointer }]);

const invalidState = (reason: string, message: string, status = 400): GoCardlessError =>
  new GoCardlessError(status, 'invalid_state', message, [{ reason, message }]);

export async function startFakeGoCardless(options: FakeGoCardlessOptions = {}): Promise<FakeGoCardless> {
  const flows = new Map<string, FakeRedirectFlow>();
  const mandates = new Map<string, FakeMandate>();
  const payments = new Map<string, FakePayment>();
  const refunds = new Map<string, FakeRefund>();
  const approved = new Set<string>();
  const requests: RecordedRequest[] = [];
  /** Per endpoint: Idempotency-Key → id of the resource it created. */
  const idempotency = new Map<string, string>();

  function createOnce<T extends { id: string }>(path: string, key: string | undefined, create: () => T): T {
    const earlier = key ? idempotency.get(`${path} ${key}`) : undefined;
    if (earlier) {
      const message = 'A resource has already been created with this idempotency key';
      throw new GoCardlessError(409, 'invalid_state', message, [
        { reason: 'idempotent_creation_conflict', message, links: { conflicting_resource_id: earlier } },
      ]);
    }
    const resource = create();
    if (key) idempotency.set(`${path} ${key}`, resource.id);
    return resource;
  }

  function createFlow(input: Record<string, unknown>): FakeRedirectFlow {
    const sessionToken = stringField(input.session_token);
    const successUrl = stringField(input.success_redirect_url);
    if (!sessionToken) throw invalid('session_token', 'is missing', '/redirect_flows/session_token');
    if (!successUrl) throw invalid('success_redirect_url', 'is missing', '/redirect_flows/success_redirect_url');
    const metadata = (input.metadata ?? {}) as Record<string, string>;
    if (Object.keys(metadata).length > 3) throw invalid('metadata', 'has too many keys', '/redirect_flows/metadata');
    const id = goCardlessId('RE');
    const flow: FakeRedirectFlow = {
      id,
      description: stringField(input.description),
      session_token: sessionToken,
      scheme: stringField(input.scheme),
      success_redirect_url: successUrl,
      redirect_url: `https://pay-sandbox.gocardless.com/flow/${id}`,
      created_at: new Date().toISOString(),
      metadata,
      links: { creditor: creditorId },
    };
    if (input.prefilled_customer) flow.prefilled_customer = input.prefilled_customer as Record<string, string>;
    flows.set(id, flow);
    return flow;
  }

  function completeFlow(id: string, data: Record<string, unknown>): FakeRedirectFlow {
    const flow = flows.get(id);
    if (!flow) throw notFound();
    if (data.session_token !== flow.session_token) {
      throw invalid('session_token', 'does not match the session token of the redirect flow', '/data/session_token');
    }
    if (flow.links.mandate) {
      throw invalidState('redirect_flow_already_completed', 'This redirect flow has already been completed');
    }
    if (options.requireCustomerApproval && !approved.has(id)) {
      throw invalidState('redirect_flow_incomplete', 'The customer has not yet completed the payment pages');
    }
    const mandate: FakeMandate = {
      id: goCardlessId('MD'),
      status: 'pending_submission',
      scheme: flow.scheme ?? 'bacs',
      metadata: {},
      links: { customer: goCardlessId('CU'), creditor: creditorId, customer_bank_account: goCardlessId('BA') },
    };
    mandates.set(mandate.id, mandate);
    flow.links = { ...flow.links, ...mandate.links, mandate: mandate.id };
    flow.mandate_reference = `REF-${mandate.id.slice(2, 8)}`;
    flow.confirmation_url = `https://pay-sandbox.gocardless.com/flow/${id}/success`;
    return flow;
  }

  function createPayment(input: Record<string, unknown>): FakePayment {
    const links = (input.links ?? {}) as Record<string, string>;
    const mandate = links.mandate ? mandates.get(links.mandate) : undefined;
    if (!mandate) throw invalid('links[mandate]', 'does not exist', '/payments/links/mandate');
    if (inactiveMandateStatuses.has(mandate.status)) {
      throw invalidState('mandate_is_inactive', 'Mandate is failed, cancelled or expired', 422);
    }
    if (!Number.isInteger(input.amount) || (input.amount as number) <= 0) {
      throw invalid('amount', 'must be a positive whole number of minor units', '/payments/amount');
    }
    if (typeof input.currency !== 'string') throw invalid('currency', 'is missing', '/payments/currency');
    const now = new Date();
    const payment: FakePayment = {
      id: goCardlessId('PM'),
      created_at: now.toISOString(),
      charge_date: new Date(now.getTime() + 3 * 86_400_000).toISOString().slice(0, 10),
      amount: input.amount as number,
      amount_refunded: 0,
      currency: input.currency,
      description: stringField(input.description),
      reference: null,
      status: 'pending_submission',
      retry_if_possible: true,
      metadata: (input.metadata ?? {}) as Record<string, string>,
      links: { mandate: mandate.id, creditor: creditorId },
    };
    payments.set(payment.id, payment);
    return payment;
  }

  /** What GoCardless counts as refunded on a payment: its refunds that still stand. */
  function refundedOn(paymentId: string): number {
    let total = 0;
    for (const refund of refunds.values()) {
      if (refund.links.payment === paymentId && !unsuccessfulRefundStatuses.has(refund.status)) total += refund.amount;
    }
    return total;
  }

  function createRefund(input: Record<string, unknown>): FakeRefund {
    const links = (input.links ?? {}) as Record<string, string>;
    const payment = links.payment ? payments.get(links.payment) : undefined;
    if (!payment) throw invalid('links[payment]', 'does not exist', '/refunds/links/payment');
    const amount = input.amount as number;
    if (!Number.isInteger(amount) || amount <= 0) {
      throw invalid('amount', 'must be a positive whole number of minor units', '/refunds/amount');
    }
    // Required with links[payment]: the refunded total including this refund, so a refund sent
    // twice (or computed from a stale total) is refused instead of paid twice.
    if (input.total_amount_confirmation === undefined || input.total_amount_confirmation === null) {
      throw invalid('total_amount_confirmation', 'is missing', '/refunds/total_amount_confirmation');
    }
    const refunded = refundedOn(payment.id);
    if (input.total_amount_confirmation !== refunded + amount) {
      throw invalidState('total_amount_confirmation_invalid', 'Total amount confirmation invalid', 422);
    }
    if (refunded + amount > payment.amount) {
      throw invalidState('available_refund_amount_insufficient', 'The amount left to refund on this payment is insufficient', 422);
    }
    payment.amount_refunded = refunded + amount;
    const refund: FakeRefund = {
      id: goCardlessId('RF'),
      created_at: new Date().toISOString(),
      amount,
      currency: payment.currency,
      reference: null,
      status: 'created',
      metadata: (input.metadata ?? {}) as Record<string, string>,
      links: { payment: payment.id, mandate: payment.links.mandate },
    };
    refunds.set(refund.id, refund);
    return refund;
  }

  /** GET /refunds: filtered by payment or mandate, `limit` a page, `after` the last id of the page before. */
  function listRefunds(query: URLSearchParams): Record<string, unknown> {
    const limit = query.has('limit') ? Number(query.get('limit')) : defaultPageSize;
    if (!Number.isInteger(limit) || limit < 1 || limit > maxPageSize) {
      throw invalid('limit', `must be between 1 and ${maxPageSize}`, '/limit');
    }
    const payment = query.get('payment');
    const mandate = query.get('mandate');
    const matching = [...refunds.values()].filter(
      (r) => (!payment || r.links.payment === payment) && (!mandate || r.links.mandate === mandate),
    );
    const after = query.get('after');
    const start = after ? matching.findIndex((r) => r.id === after) + 1 : 0;
    if (after && start === 0) throw invalid('after', 'is not a valid cursor', '/after');
    const page = matching.slice(start, start + limit);
    const more = start + limit < matching.length;
    return {
      refunds: page,
      meta: { cursors: { before: start > 0 ? (page[0]?.id ?? null) : null, after: more ? (page.at(-1)?.id ?? null) : null }, limit },
    };
  }

  function found<T>(map: Map<string, T>, id: string | undefined): T {
    const resource = id ? map.get(id) : undefined;
    if (!resource) throw notFound();
    return resource;
  }

  /** Answers [status, body] for one request, or throws a GoCardlessError. */
  function route(method: string, path: string, query: URLSearchParams, body: Record<string, unknown>, key?: string): [number, unknown] {
    const [, resource, id, action, verb] = path.split('/');
    const wrapped = (name: string): Record<string, unknown> => (body[name] ?? {}) as Record<string, unknown>;
    if (method === 'POST' && resource === 'redirect_flows' && !id) {
      return [201, { redirect_flows: createOnce(path, key, () => createFlow(wrapped('redirect_flows'))) }];
    }
    if (method === 'POST' && resource === 'redirect_flows' && action === 'actions' && verb === 'complete') {
      return [200, { redirect_flows: completeFlow(id ?? '', wrapped('data')) }];
    }
    if (method === 'POST' && resource === 'payments' && !id) {
      return [201, { payments: createOnce(path, key, () => createPayment(wrapped('payments'))) }];
    }
    if (method === 'POST' && resource === 'refunds' && !id) {
      return [201, { refunds: createOnce(path, key, () => createRefund(wrapped('refunds'))) }];
    }
    if (method === 'GET' && resource === 'refunds' && !id) return [200, listRefunds(query)];
    if (method === 'GET' && id && !action) {
      if (resource === 'redirect_flows') return [200, { redirect_flows: found(flows, id) }];
      if (resource === 'payments') return [200, { payments: found(payments, id) }];
      if (resource === 'refunds') return [200, { refunds: found(refunds, id) }];
      if (resource === 'mandates') return [200, { mandates: found(mandates, id) }];
    }
    throw notFound();
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const method = req.method ?? 'GET';
    const { pathname: path, searchParams: query } = new URL(req.url ?? '/', 'http://fake');
    let body: Record<string, unknown> = {};
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      body = {};
    }
    requests.push({ method, path, query: Object.fromEntries(query), headers: req.headers, body: text ? body : null });
    const requestId = goCardlessId('RQ');
    let status: number;
    let answer: unknown;
    try {
      if (!/^Bearer \S+$/.test(req.headers.authorization ?? '')) {
        throw new GoCardlessError(401, 'invalid_api_usage', 'Authentication failed', [
          { reason: 'authentication_failed', message: 'Authentication failed' },
        ]);
      }
      const key = req.headers['idempotency-key'];
      [status, answer] = route(method, path, query, body, typeof key === 'string' ? key : undefined);
    } catch (error) {
      if (!(error instanceof GoCardlessError)) throw error;
      status = error.status;
      const reason = String(error.errors[0]?.reason ?? error.type);
      answer = {
        error: {
          type: error.type,
          code: error.status,
          message: error.message,
          documentation_url: `https://developer.gocardless.com/api-reference#${reason}`,
          request_id: requestId,
          errors: error.errors,
        },
      };
    }
    res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': requestId }).end(JSON.stringify(answer));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  function setMandateStatus(mandateId: string, status: string): FakeMandate {
    const mandate = mandates.get(mandateId);
    if (!mandate) throw new Error(`no mandate ${mandateId}`);
    mandate.status = status;
    return mandate;
  }

  function event(fields: Partial<GoCardlessEvent> = {}): GoCardlessEvent {
    const resourceType = fields.resource_type ?? 'payments';
    const links = fields.links ?? {};
    const linked = resourceType === 'refunds' ? refunds.get(links.refund ?? '') : payments.get(links.payment ?? '');
    return {
      id: goCardlessId('EV'),
      created_at: new Date().toISOString(),
      resource_type: resourceType,
      action: 'confirmed',
      details: { origin: 'gocardless', cause: 'payment_confirmed', description: 'Payment was confirmed as collected' },
      metadata: {},
      ...fields,
      links,
      resource_metadata: fields.resource_metadata ?? { ...(linked?.metadata ?? {}) },
    };
  }

  function webhook(secret: string, events: GoCardlessEvent[]): SignedWebhook {
    const rawBody = Buffer.from(JSON.stringify({ events, meta: { webhook_id: goCardlessId('WB') } }));
    return {
      rawBody,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'gocardless-webhook-service/1.1',
        'webhook-signature': createHmac('sha256', secret).update(rawBody).digest('hex'),
      },
    };
  }

  return {
    url: `http://127.0.0.1:${port}`,
    flows,
    mandates,
    payments,
    refunds,
    requests,
    customerApproves(flowId) {
      const flow = flows.get(flowId);
      if (!flow) throw new Error(`no redirect flow ${flowId}`);
      approved.add(flowId);
      const back = new URL(flow.success_redirect_url);
      back.searchParams.set('redirect_flow_id', flowId);
      return back.toString();
    },
    cancelMandate: (mandateId) => setMandateStatus(mandateId, 'cancelled'),
    setMandateStatus,
    event,
    webhook,
    async notify(url, secret, events) {
      const { rawBody, headers } = webhook(secret, events);
      const response = await fetch(url, { method: 'POST', headers, body: rawBody });
      return { status: response.status, body: await response.text() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function stringField(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}
