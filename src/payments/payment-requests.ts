// Payment requests (api-contract.md, Dunning campaigns and payment requests): overdue invoices of
// one customer and currency collected by attempts, each attempt a payment through the payments'
// machinery (a charge of the customer's saved method, else a checkout). The steps below run as
// activities of the request's workflow, each idempotent: an attempt's payment id is derived from
// the request and the attempt number, events are keyed by request and type.
import type Decimal from 'decimal.js';
import { amountToSettle, settledAmount } from '../billing/settlements';
import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';
import { toDecimal128 } from '../db/decimal';
import type { InvoiceDoc } from '../db/models/invoice';
import type { PaymentRequestDoc } from '../db/models/payment-request';
import { roundCents, sum } from '../domain/money';
import { payments } from '../metrics/registry';
import { deterministicId } from '../ids';
import { toPaymentRequestResource } from '../resources/payment-request';
import type { TemporalClient } from '../temporal/client';
import { emitEvent, type EmitDeps } from '../webhooks/emit-event';
import { startPaymentRequestWorkflow } from '../../workflows/payment-request.messages';
import { clockOfCustomer, clockOfCustomerId } from '../test-clocks/time';
import { activeProviderIntegration } from './integrations';
import { paymentWorkflowInput, startPaymentWorkflow } from './payment-workflow';
import { adapterFor } from './providers';
import { isProviderCode } from './providers/types';

export interface PaymentRequestDeps extends EmitDeps {
  db: Db;
  temporal: TemporalClient;
}

/** What an attempt needs besides: the service's public address, where providers send the customer back. */
export interface AttemptDeps extends PaymentRequestDeps {
  publicUrl: string;
}

/** An invoice a request may hold: finalized, unpaid, with something left to pay. */
export interface OpenInvoice {
  invoice: InvoiceDoc;
  left: Decimal;
}

export async function openInvoices(db: Db, invoiceIds: readonly string[]): Promise<OpenInvoice[]> {
  const invoices = await db.models.Invoice.find({ _id: { $in: invoiceIds }, status: 'finalized', deleted_at: null }).lean();
  const open: OpenInvoice[] = [];
  for (const invoice of invoices) {
    const left = roundCents(amountToSettle(invoice).minus(await settledAmount(db, invoice._id)));
    if (left.greaterThan(0)) open.push({ invoice, left });
  }
  return open.sort((a, b) => invoiceIds.indexOf(a.invoice._id) - invoiceIds.indexOf(b.invoice._id));
}

/** Creates a request (pending, no attempt yet) and starts its workflow. */
export async function createPaymentRequest(
  deps: PaymentRequestDeps,
  input: {
    organizationId: string;
    customerId: string;
    currency: string;
    invoices: OpenInvoice[];
    dunningCampaignId: string | null;
    maxAttempts: number;
    daysBetweenAttempts: number;
    /** Derives the request's id: a retried creation finds the first one. */
    idempotencyKey: string;
    /** The customer's external id, for its workflow's search attributes and summary. */
    customerExternalId: string | null;
  },
): Promise<PaymentRequestDoc> {
  const id = deterministicId(`payment-request/${input.organizationId}/${input.idempotencyKey}`);
  let request: PaymentRequestDoc | null;
  try {
    request = (
      await deps.db.models.PaymentRequest.create({
        _id: id,
        organization_id: input.organizationId,
        customer_id: input.customerId,
        dunning_campaign_id: input.dunningCampaignId,
        amount_cents: toDecimal128(sum(input.invoices.map((i) => i.left))),
        currency: input.currency,
        max_attempts: input.maxAttempts,
        days_between_attempts: input.daysBetweenAttempts,
        invoice_ids: input.invoices.map((i) => i.invoice._id),
      })
    ).toObject();
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    request = await deps.db.models.PaymentRequest.findById(id).lean();
  }
  if (!request) throw new Error(`payment request ${id} vanished`);
  await startPaymentRequestWorkflow(deps.temporal, {
    paymentRequestId: request._id,
    organizationId: request.organization_id,
    customerId: request.customer_id,
    maxAttempts: request.max_attempts,
    daysBetweenAttempts: request.days_between_attempts,
    clock: await clockOfCustomerId(deps.db, request.customer_id),
    labels: {
      amountCents: Math.round(Number(request.amount_cents.toString())),
      currency: request.currency,
      customerExternalId: input.customerExternalId,
      invoiceNumbers: input.invoices.filter((i) => request.invoice_ids.includes(i.invoice._id)).map((i) => i.invoice.number),
      dunningCampaignId: request.dunning_campaign_id,
    },
  });
  return request;
}

async function load(db: Db, id: string): Promise<PaymentRequestDoc> {
  const request = await db.models.PaymentRequest.findById(id).lean();
  if (!request) throw new Error(`payment request ${id} not found`);
  return request;
}

type RequestEvent = 'payment_request.created' | 'payment_request.payment_succeeded' | 'payment_request.payment_failed';

async function announce(deps: PaymentRequestDeps, request: PaymentRequestDoc, type: RequestEvent, at: Date): Promise<void> {
  await emitEvent(deps, {
    organizationId: request.organization_id,
    type,
    idempotencyKey: `payment-request/${request._id}/${type}`,
    object: toPaymentRequestResource(request),
    occurredAt: at,
    customerId: request.customer_id,
  });
}

export interface AttemptResult {
  /** Nothing is left to pay: the request is succeeded. */
  done: boolean;
  paymentId: string | null;
  /** The attempt's payment status when its workflow was started (final when a retried step finds it so). */
  paymentStatus: string | null;
  /** What the request's open invoices leave to pay, in cents, as this attempt found it (absent: not looked at). */
  amountCents?: number;
}

/**
 * Attempt `attempt` (1-based): the request's invoices still open (paid or voided ones leave it),
 * one payment of what they leave to pay with the customer's provider, its workflow started.
 */
export async function startAttempt(deps: AttemptDeps, requestId: string, attempt: number, at: Date): Promise<AttemptResult> {
  const { Customer, Payment, PaymentRequest } = deps.db.models;
  const request = await load(deps.db, requestId);
  if (request.status !== 'pending') return { done: request.status === 'succeeded', paymentId: null, paymentStatus: null };
  const open = await openInvoices(deps.db, request.invoice_ids);
  if (open.length === 0) {
    await finishRequest(deps, requestId, 'succeeded', at);
    return { done: true, paymentId: null, paymentStatus: null };
  }
  const amount = sum(open.map((i) => i.left));
  const customer = await Customer.findById(request.customer_id).lean();
  const provider = customer?.payment_provider && isProviderCode(customer.payment_provider) ? customer.payment_provider : null;
  const paymentId = deterministicId(`payment-request/${requestId}/attempt/${attempt}`);
  await PaymentRequest.updateOne(
    { _id: requestId, status: 'pending' },
    {
      $set: { payment_attempts: Math.max(request.payment_attempts, attempt), amount_cents: toDecimal128(amount), next_attempt_at: null },
    },
  );
  const integration = provider ? await activeProviderIntegration(deps.db, request.organization_id, provider) : null;
  if (!provider || !integration) {
    // Nothing to attempt with: the attempt fails (the next one may find a provider configured).
    return { done: false, paymentId: null, paymentStatus: 'failed', amountCents: roundCents(amount).toNumber() };
  }
  const savedMethod = customer?.payment_method_id && adapterFor(provider).chargeSavedMethod ? customer.payment_method_id : null;
  // Nobody gave this checkout a page to return to: the integration's success_redirect_url, else the service's own page.
  const base = `${deps.publicUrl.replace(/\/$/, '')}/v1/payments/${paymentId}`;
  const landing = integration.settings?.success_redirect_url ?? `${base}/done`;
  try {
    await Payment.create({
      _id: paymentId,
      organization_id: request.organization_id,
      invoice_id: open[0]!.invoice._id,
      customer_id: request.customer_id,
      payment_request_id: requestId,
      amount: toDecimal128(amount),
      currency: request.currency,
      status: 'pending',
      provider,
      saved_method_id: savedMethod,
      success_url: landing,
      cancel_url: landing,
      return_url: `${base}/return`,
      // A request's payment is its own: it does not take the invoice's open-checkout slot.
      open_slot: paymentId,
    });
    payments.inc({ provider, status: 'pending' });
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
  }
  const payment = (await Payment.findById(paymentId).lean())!;
  // The payment exists before the request names it.
  await PaymentRequest.updateOne(
    { _id: requestId },
    { $set: { invoice_ids: open.map((i) => i.invoice._id) }, $addToSet: { payment_ids: paymentId } },
  );
  // Not waited for: the payment's workflow opens the checkout (or charges the saved method) and
  // tells the request's workflow, which then records the attempt (recordAttempt).
  const clock = customer ? await clockOfCustomer(deps.db, customer) : null;
  await startPaymentWorkflow(
    deps.temporal,
    paymentWorkflowInput(payment, clock, { customerExternalId: customer?.external_id ?? null, invoiceNumber: null }),
  );
  return { done: false, paymentId, paymentStatus: payment.status, amountCents: roundCents(amount).toNumber() };
}

/**
 * Once the attempt's payment has its checkout (or its outcome): its `checkout_url` on the request,
 * and payment_request.created after the first attempt.
 */
export async function recordAttempt(
  deps: PaymentRequestDeps,
  requestId: string,
  paymentId: string,
  attempt: number,
  at: Date,
): Promise<void> {
  const payment = await deps.db.models.Payment.findById(paymentId, { checkout_url: 1 }).lean();
  const updated = await deps.db.models.PaymentRequest.findOneAndUpdate(
    { _id: requestId },
    { $set: { checkout_url: payment?.checkout_url ?? null } },
    { returnDocument: 'after' },
  ).lean();
  if (attempt === 1 && updated) await announce(deps, updated, 'payment_request.created', at);
}

/** After a failed attempt: when the next one is due (or null once `max_attempts` are spent and the request failed). */
export async function afterFailedAttempt(deps: PaymentRequestDeps, requestId: string, nextAt: Date | null, at: Date): Promise<void> {
  if (nextAt === null) {
    await finishRequest(deps, requestId, 'failed', at);
    return;
  }
  await deps.db.models.PaymentRequest.updateOne({ _id: requestId, status: 'pending' }, { $set: { next_attempt_at: nextAt } });
}

/** The request's end: succeeded (its payment settled every invoice, or nothing is left) or failed; its event once. */
export async function finishRequest(deps: PaymentRequestDeps, requestId: string, status: 'succeeded' | 'failed', at: Date): Promise<void> {
  await deps.db.models.PaymentRequest.updateOne({ _id: requestId, status: 'pending' }, { $set: { status, next_attempt_at: null } });
  const request = await load(deps.db, requestId);
  if (request.status === 'succeeded') await announce(deps, request, 'payment_request.payment_succeeded', at);
  if (request.status === 'failed') await announce(deps, request, 'payment_request.payment_failed', at);
}

/** Whether anything is left to pay on the request's invoices (one paid or voided meanwhile leaves it). */
export async function anythingLeft(db: Db, requestId: string): Promise<boolean> {
  const request = await load(db, requestId);
  return (await openInvoices(db, request.invoice_ids)).length > 0;
}
