// The service's Prometheus metrics: one registry per process, served at GET /metrics by the API
// (summed over its cluster workers, src/metrics/cluster.ts) and by the worker's own metrics server
// (src/metrics/worker-server.ts). Process-wide figures only: a label never carries a tenant's id,
// only bounded values (route patterns, statuses, currencies, providers, reasons).
//
// A counter counts a change where it is written, once: call sites increment after the guarded
// write that made the change (a retried activity finds it done and counts nothing).
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

export const registry = new Registry();

export const httpRequests = new Counter({
  name: 'billing_http_requests_total',
  help: 'HTTP requests answered by the API, by method, route pattern (not the raw URL; "unmatched" for unknown routes) and status code',
  labelNames: ['method', 'route', 'status_code'] as const,
  registers: [registry],
});

export const httpRequestDuration = new Histogram({
  name: 'billing_http_request_duration_seconds',
  help: 'Time from the request arriving to its answer sent, by method, route pattern and status code',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

export const eventsIngested = new Counter({
  name: 'billing_events_ingested_total',
  help: 'Usage events stored (POST /v1/events and /v1/events/batch)',
  registers: [registry],
});

export const eventsRefused = new Counter({
  name: 'billing_events_refused_total',
  help: 'Usage events not stored, by reason: duplicate (transaction_id already stored), validation_error, billable_metric_not_found, customer_not_found, subscription_not_found',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const rateLimitRefusals = new Counter({
  name: 'billing_rate_limit_refusals_total',
  help: 'Requests refused with 429 by a rate limiter (events: the organization events rate limit per minute)',
  labelNames: ['limiter'] as const,
  registers: [registry],
});

export const invoicesIssued = new Counter({
  name: 'billing_invoices_issued_total',
  help: 'Invoices created (as drafts, or finalized at creation), by currency and invoice type',
  labelNames: ['currency', 'invoice_type'] as const,
  registers: [registry],
});

export const invoicesIssuedAmount = new Counter({
  name: 'billing_invoices_issued_amount_cents_total',
  help: 'Sum of the totals of the invoices created, in minor units of each currency',
  labelNames: ['currency'] as const,
  registers: [registry],
});

export const invoicesFinalized = new Counter({
  name: 'billing_invoices_finalized_total',
  help: 'Invoices finalized (numbered; paid at once when nothing is left due), by currency and invoice type',
  labelNames: ['currency', 'invoice_type'] as const,
  registers: [registry],
});

export const invoicesFinalizedAmount = new Counter({
  name: 'billing_invoices_finalized_amount_cents_total',
  help: 'Sum of the totals due of the invoices finalized (after coupons, credit notes and wallet credits), in minor units of each currency',
  labelNames: ['currency'] as const,
  registers: [registry],
});

export const payments = new Counter({
  name: 'billing_payments_total',
  help: 'Payments reaching a status (pending when created), by provider and status',
  labelNames: ['provider', 'status'] as const,
  registers: [registry],
});

export const webhookDeliveryAttempts = new Counter({
  name: 'billing_webhook_delivery_attempts_total',
  help: 'Webhook delivery attempts (POSTs to an endpoint), by outcome: succeeded (2xx) or failed',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookDeliveries = new Counter({
  name: 'billing_webhook_deliveries_total',
  help: 'Webhook deliveries ended, by outcome: succeeded, failed (every attempt failed) or abandoned (endpoint deleted or inactive)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

let processMetrics = false;

/** Node.js and process metrics (prom-client's defaults: CPU, memory, event loop, GC) into the registry; once per process. */
export function collectProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: registry });
}

/** An invoice just created (the write that created it, not a retry that found it). */
export function countInvoiceIssued(invoice: { currency: string; invoice_type: string; total: unknown }): void {
  invoicesIssued.inc({ currency: invoice.currency, invoice_type: invoice.invoice_type });
  invoicesIssuedAmount.inc({ currency: invoice.currency }, amountOf(invoice.total));
}

/** An invoice just finalized (the guarded status change, not a retry that found it finalized). */
export function countInvoiceFinalized(invoice: { currency: string; invoice_type: string; total: unknown }): void {
  invoicesFinalized.inc({ currency: invoice.currency, invoice_type: invoice.invoice_type });
  invoicesFinalizedAmount.inc({ currency: invoice.currency }, amountOf(invoice.total));
}

/** A stored amount (Decimal128, decimal.js or a number) as a non-negative number; counters only go up. */
function amountOf(value: unknown): number {
  const amount = Number(String(value ?? 0));
  return Number.isFinite(amount) && amount > 0 ? amount : 0;
}
