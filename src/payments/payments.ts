// The steps of a payment's life (specification, Payment states; api-contract.md, Payments), each
// run by the payment's workflow through an activity. Every step is idempotent: status changes are
// guarded updates (a status never moves backwards), the settlement is unique per payment, provider
// calls carry idempotency keys derived from the payment, and events are keyed by payment and type.
import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../db';
import { fromDecimal128, toDecimal128 } from '../db/decimal';
import type { PaymentDoc, PaymentStatus } from '../db/models/payment';
import { paymentSettlements, recordSettlement } from '../billing/settlements';
import { Dec, dec, roundCents, sum } from '../domain/money';
import { payments } from '../metrics/registry';
import { toPaymentResource } from '../resources/payment';
import { emitEvent, type EmitDeps } from '../webhooks/emit-event';
import { activeProviderIntegration, providerContext } from './integrations';
import { openInvoices } from './payment-requests';
import { adapterFor } from './providers';
import { ProviderRefused, type NotificationOutcome, type ProviderContext, type ProviderNotification } from './providers/types';
import type { SecretBox } from './secrets';

export interface PaymentDeps extends EmitDeps {
  db: Db;
  secrets: SecretBox;
}

/** The failure type a provider's refusal becomes (the API answers 502 provider_error). */
export const PROVIDER_REFUSED = 'ProviderRefused';

/** Statuses a payment may move to from each status: forward only, so a late or reordered notification changes nothing. */
const NEXT: Record<PaymentStatus, readonly PaymentStatus[]> = {
  pending: ['processing', 'succeeded', 'failed', 'canceled'],
  processing: ['succeeded', 'failed', 'canceled'],
  // Money that moves after a failure or a cancellation (an async method that settled late) is
  // recorded: losing it would be worse than a status seen going "back".
  failed: ['succeeded'],
  canceled: ['succeeded'],
  succeeded: ['refunded'],
  refunded: [],
};

const OPEN: readonly PaymentStatus[] = ['pending', 'processing'];

export function canMove(from: PaymentStatus, to: PaymentStatus): boolean {
  return NEXT[from].includes(to);
}

async function load(db: Db, paymentId: string): Promise<PaymentDoc> {
  const payment = await db.models.Payment.findById(paymentId).lean();
  if (!payment) throw ApplicationFailure.nonRetryable(`payment ${paymentId} not found`, 'NotFound');
  return payment;
}

async function contextFor(deps: PaymentDeps, payment: PaymentDoc): Promise<ProviderContext> {
  const integration = await activeProviderIntegration(deps.db, payment.organization_id, payment.provider);
  if (!integration) {
    throw ApplicationFailure.nonRetryable(`no active ${payment.provider} integration for this organization`, PROVIDER_REFUSED);
  }
  return providerContext(deps.secrets, integration);
}

/** A provider's refusal fails the activity for good; anything else is left to the retry policy. */
async function callProvider<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof ProviderRefused) throw ApplicationFailure.nonRetryable(err.message, PROVIDER_REFUSED);
    throw err;
  }
}

const minorUnits = (payment: Pick<PaymentDoc, 'amount'>) => roundCents(fromDecimal128(payment.amount) ?? dec(0)).toNumber();

type PaymentEvent = 'payment.created' | 'payment.succeeded' | 'payment.failed' | 'payment.canceled' | 'payment.refunded';

async function announce(deps: PaymentDeps, payment: PaymentDoc, type: PaymentEvent, at: Date): Promise<void> {
  await emitEvent(deps, {
    organizationId: payment.organization_id,
    type,
    idempotencyKey: `payment/${payment._id}/${type}`,
    object: toPaymentResource(payment),
    occurredAt: at,
    customerId: payment.customer_id,
  });
}

/**
 * Creates the provider's checkout for a pending payment (once: a payment that has one keeps it) and
 * announces payment.created.
 */
export async function createPaymentCheckout(deps: PaymentDeps, paymentId: string, at: Date): Promise<PaymentDoc> {
  const payment = await load(deps.db, paymentId);
  if (payment.provider_checkout_id || payment.status !== 'pending') {
    await announce(deps, payment, 'payment.created', payment.created_at);
    return payment;
  }
  const [invoice, customer, ctx] = await Promise.all([
    deps.db.models.Invoice.findById(payment.invoice_id, { number: 1 }).lean(),
    deps.db.models.Customer.findById(payment.customer_id, { email: 1, provider_customer_id: 1 }).lean(),
    contextFor(deps, payment),
  ]);
  const adapter = adapterFor(payment.provider);
  if (payment.saved_method_id && adapter.chargeSavedMethod) {
    // A payment request's attempt on the saved method: charged at once, no checkout.
    const charge = await callProvider(() =>
      adapter.chargeSavedMethod!(ctx, {
        paymentId,
        amountMinor: minorUnits(payment),
        currency: payment.currency,
        providerCustomerId: customer?.provider_customer_id ?? null,
        paymentMethodId: payment.saved_method_id!,
        description: invoice?.number ? `Invoice ${invoice.number}` : `Payment ${paymentId}`,
        idempotencyKey: `payment/${paymentId}/charge`,
      }),
    );
    await deps.db.models.Payment.updateOne(
      { _id: paymentId, provider_checkout_id: null },
      { $set: { provider_checkout_id: `charge_${paymentId}`, provider_payment_id: charge.providerPaymentId } },
    );
    await announce(deps, (await load(deps.db, paymentId))!, 'payment.created', payment.created_at);
    const { payment: after } = await moveTo(
      deps,
      paymentId,
      charge.outcome,
      at,
      charge.outcome === 'failed' ? { failure_reason: charge.failureReason ?? 'Payment failed' } : {},
    );
    return after;
  }
  const checkout = await callProvider(() =>
    adapterFor(payment.provider).createCheckout(ctx, {
      paymentId,
      invoiceId: payment.invoice_id,
      invoiceNumber: invoice?.number ?? null,
      amountMinor: minorUnits(payment),
      currency: payment.currency,
      successUrl: payment.success_url ?? '',
      cancelUrl: payment.cancel_url ?? '',
      returnUrl: payment.return_url ?? '',
      customerEmail: customer?.email ?? null,
      idempotencyKey: `payment/${paymentId}/checkout`,
      now: at,
    }),
  );
  const updated = await deps.db.models.Payment.findOneAndUpdate(
    { _id: paymentId, provider_checkout_id: null },
    {
      $set: {
        provider_checkout_id: checkout.providerCheckoutId,
        checkout_url: checkout.checkoutUrl,
        expires_at: checkout.expiresAt,
        ...(checkout.providerPaymentId ? { provider_payment_id: checkout.providerPaymentId } : {}),
      },
    },
    { returnDocument: 'after' },
  ).lean();
  const current = updated ?? (await load(deps.db, paymentId));
  await announce(deps, current, 'payment.created', current.created_at);
  return current;
}

/** A checkout the provider refused: the payment fails with the provider's reason. */
export async function failPaymentCheckout(deps: PaymentDeps, paymentId: string, reason: string, at: Date): Promise<PaymentDoc> {
  return (await moveTo(deps, paymentId, 'failed', at, { failure_reason: reason })).payment;
}

export interface MoveResult {
  payment: PaymentDoc;
  /** True when the payment is succeeded: its settlement is recorded and the invoice's workflow must hear of it. */
  settled: boolean;
}

/**
 * Moves a payment to `to` when its status allows it (else leaves it), then does what follows the
 * status it has, idempotently: the settlement and the invoice's payment status, the event. A retry
 * after a crash between the two finds the status moved and does what follows again.
 */
async function moveTo(
  deps: PaymentDeps,
  paymentId: string,
  to: PaymentStatus,
  at: Date,
  also: Record<string, unknown> = {},
  /** The statuses this move is allowed from (a command's own rule); default: every status that may move to `to`. */
  allowedFrom?: readonly PaymentStatus[],
): Promise<MoveResult> {
  const { Payment } = deps.db.models;
  const from = (allowedFrom ?? (Object.keys(NEXT) as PaymentStatus[])).filter((s) => canMove(s, to));
  const stamps: Record<string, unknown> = {};
  if (to === 'succeeded') stamps.paid_at = at;
  if (to === 'refunded') stamps.refunded_at = at;
  const moved = await Payment.findOneAndUpdate(
    { _id: paymentId, status: { $in: from } },
    { $set: { status: to, ...stamps, ...also, open_slot: OPEN.includes(to) ? 'open' : paymentId } },
    { returnDocument: 'after' },
  ).lean();
  // Counted by the guarded status change only: a retry finds the status moved and counts nothing.
  if (moved) payments.inc({ provider: moved.provider, status: to });
  const payment = moved ?? (await load(deps.db, paymentId));
  if (payment.status !== to) return { payment, settled: payment.status === 'succeeded' };
  await afterStatus(deps, payment, at);
  return { payment, settled: payment.status === 'succeeded' };
}

/** What follows each status; every part is idempotent. */
async function afterStatus(deps: PaymentDeps, payment: PaymentDoc, at: Date): Promise<void> {
  const { Invoice, Fee } = deps.db.models;
  switch (payment.status) {
    case 'succeeded':
      if (payment.payment_request_id) {
        // A payment request's payment pays each of its invoices still open what it leaves to pay
        // (a retry finds the ones settled already closed).
        // What was collected is divided over the request's open invoices in order, never more than
        // each leaves to pay; what this payment settled already (a retry) counts first.
        const request = await deps.db.models.PaymentRequest.findById(payment.payment_request_id, { invoice_ids: 1 }).lean();
        const already = await paymentSettlements(deps.db, payment._id);
        let remaining = (fromDecimal128(payment.amount) ?? dec(0)).minus(sum(already.map((a) => fromDecimal128(a.amount_cents) ?? dec(0))));
        const done = new Set(already.map((a) => a.invoice_id));
        for (const { invoice, left } of await openInvoices(deps.db, request?.invoice_ids ?? [payment.invoice_id])) {
          if (remaining.lessThanOrEqualTo(0) || done.has(invoice._id)) continue;
          const part = Dec.min(left, remaining);
          await recordSettlement(deps.db, {
            organizationId: payment.organization_id,
            invoiceId: invoice._id,
            type: 'payment',
            sourceId: payment._id,
            amountCents: part,
          });
          remaining = remaining.minus(part);
        }
      } else {
        await recordSettlement(deps.db, {
          organizationId: payment.organization_id,
          invoiceId: payment.invoice_id,
          type: 'payment',
          sourceId: payment._id,
          amountCents: fromDecimal128(payment.amount) ?? dec(0),
        });
      }
      await announce(deps, payment, 'payment.succeeded', payment.paid_at ?? at);
      return;
    case 'failed': {
      // Each invoice it was to pay (a request's: all of them) shows the failure while nothing else paid it.
      const request = payment.payment_request_id
        ? await deps.db.models.PaymentRequest.findById(payment.payment_request_id, { invoice_ids: 1 }).lean()
        : null;
      const unpaid = await Invoice.find(
        { _id: { $in: request?.invoice_ids ?? [payment.invoice_id] }, status: 'finalized' },
        { _id: 1 },
      ).lean();
      const ids = unpaid.map((i) => i._id);
      await Invoice.updateMany({ _id: { $in: ids }, status: 'finalized' }, { $set: { payment_status: 'failed' } });
      await Fee.updateMany(
        { invoice_id: { $in: ids }, payment_status: { $in: ['pending', 'failed'] } },
        { $set: { payment_status: 'failed' } },
      );
      await announce(deps, payment, 'payment.failed', at);
      return;
    }
    case 'canceled':
      await announce(deps, payment, 'payment.canceled', at);
      return;
    case 'refunded': {
      // Each invoice the payment settled (a request's payment: several).
      const settled = await paymentSettlements(deps.db, payment._id);
      const ids = settled.length > 0 ? settled.map((s) => s.invoice_id) : [payment.invoice_id];
      await Invoice.updateMany({ _id: { $in: ids } }, { $set: { payment_status: 'refunded' } });
      await Fee.updateMany({ invoice_id: { $in: ids } }, { $set: { payment_status: 'refunded' } });
      await announce(deps, payment, 'payment.refunded', payment.refunded_at ?? at);
      return;
    }
    default:
      return;
  }
}

const OUTCOME_STATUS: Record<NotificationOutcome, PaymentStatus> = {
  processing: 'processing',
  succeeded: 'succeeded',
  failed: 'failed',
  canceled: 'canceled',
  refunded: 'refunded',
};

/**
 * A verified provider notification: the payment moves where it says when its status allows it (a
 * late `failed` after `succeeded` changes nothing), and a saved method or mandate it reports goes
 * on the customer.
 */
export async function applyProviderNotification(
  deps: PaymentDeps,
  paymentId: string,
  notification: ProviderNotification,
  at: Date,
): Promise<MoveResult> {
  const payment = await load(deps.db, paymentId);
  // A method is saved from a success or a report of its own (an active mandate), never from a
  // failure: dunning would charge a card that was just declined.
  const savesMethod = notification.outcome === 'succeeded' || notification.outcome === null;
  if (savesMethod && (notification.paymentMethodId || notification.providerCustomerId)) {
    await deps.db.models.Customer.updateOne(
      { _id: payment.customer_id },
      {
        $set: {
          payment_provider: payment.provider,
          ...(notification.providerCustomerId ? { provider_customer_id: notification.providerCustomerId } : {}),
          ...(notification.paymentMethodId ? { payment_method_id: notification.paymentMethodId } : {}),
        },
      },
    );
  }
  if (!notification.outcome) return { payment, settled: payment.status === 'succeeded' };
  const also: Record<string, unknown> = {};
  if (notification.providerPaymentId && !payment.provider_payment_id) also.provider_payment_id = notification.providerPaymentId;
  if (notification.outcome === 'failed') also.failure_reason = notification.failureReason ?? 'Payment failed';
  return moveTo(deps, paymentId, OUTCOME_STATUS[notification.outcome], at, also);
}

/** POST /v1/payments/{id}/mark-paid: an offline payment; an open checkout at the provider is closed. */
export async function markPaymentPaid(
  deps: PaymentDeps,
  paymentId: string,
  command: { reference: string | null; paidAt: string | null },
  at: Date,
): Promise<MoveResult> {
  const payment = await load(deps.db, paymentId);
  if (payment.status === 'pending') await expireAtProvider(deps, payment);
  const paidAt = command.paidAt ? new Date(command.paidAt) : at;
  // The command's rule, checked again here: the state may have moved since the update was accepted.
  return moveTo(deps, paymentId, 'succeeded', paidAt, command.reference ? { reference: command.reference } : {}, [
    'pending',
    'processing',
    'failed',
  ]);
}

/** POST /v1/payments/{id}/refund: requested from the provider (keyed by the payment), then refunded. */
export async function refundPayment(deps: PaymentDeps, paymentId: string, amountCents: string | null, at: Date): Promise<MoveResult> {
  const payment = await load(deps.db, paymentId);
  // A retry after the status moved: what follows it is done again (idempotent).
  if (payment.status === 'refunded') return moveTo(deps, paymentId, 'refunded', at);
  if (payment.status !== 'succeeded') return { payment, settled: false };
  const amount = amountCents ? dec(amountCents) : (fromDecimal128(payment.amount) ?? dec(0));
  const ctx = await contextFor(deps, payment);
  const refund = await callProvider(() =>
    adapterFor(payment.provider).refund(ctx, {
      paymentId,
      providerPaymentId: payment.provider_payment_id,
      providerCheckoutId: payment.provider_checkout_id,
      amountMinor: roundCents(amount).toNumber(),
      currency: payment.currency,
      idempotencyKey: `payment/${paymentId}/refund`,
    }),
  );
  if (refund.status === 'failed' || refund.status === 'canceled') {
    throw ApplicationFailure.nonRetryable(`the provider answered the refund ${refund.status}`, PROVIDER_REFUSED);
  }
  return moveTo(deps, paymentId, 'refunded', at, {
    refund_amount_cents: toDecimal128(amount),
    provider_refund_id: refund.providerRefundId,
  });
}

/** The checkout expired unpaid: closed at the provider (provider_a's session expire), the payment canceled. */
export async function expirePayment(deps: PaymentDeps, paymentId: string, at: Date): Promise<MoveResult> {
  const payment = await load(deps.db, paymentId);
  if (payment.status !== 'pending') return { payment, settled: payment.status === 'succeeded' };
  await expireAtProvider(deps, payment);
  return moveTo(deps, paymentId, 'canceled', at);
}

/** DELETE /v1/payments/{id} of a pending payment: closed at the provider, canceled and hidden. */
export async function deletePayment(deps: PaymentDeps, paymentId: string, at: Date): Promise<PaymentDoc> {
  const payment = await load(deps.db, paymentId);
  if (payment.status === 'pending') await expireAtProvider(deps, payment);
  const { payment: after } = await moveTo(deps, paymentId, 'canceled', at, { deleted_at: at }, ['pending']);
  return after;
}

async function expireAtProvider(deps: PaymentDeps, payment: PaymentDoc): Promise<void> {
  if (!payment.provider_checkout_id) return;
  const ctx = await contextFor(deps, payment).catch(() => null);
  // Without an integration (deleted since) there is nothing to close at the provider.
  if (!ctx) return;
  // Best effort: a provider that refuses (a revoked key, a session it no longer knows) must not
  // keep the payment open; the checkout then simply expires at the provider by itself.
  try {
    await adapterFor(payment.provider).expireCheckout(ctx, payment.provider_checkout_id);
  } catch (err) {
    if (!(err instanceof ProviderRefused)) throw err;
  }
}

/** The redirect flow came back (provider_c): the flow is completed, the payment created on the mandate, the mandate saved on the customer. */
export async function completeRedirectFlow(deps: PaymentDeps, paymentId: string, flowId: string, at: Date): Promise<PaymentDoc> {
  const payment = await load(deps.db, paymentId);
  if (!OPEN.includes(payment.status)) return payment;
  // A retry after the provider's payment was recorded: the status move may be what is missing.
  if (payment.provider_payment_id) return (await moveTo(deps, paymentId, 'processing', at, {}, ['pending'])).payment;
  const adapter = adapterFor(payment.provider);
  if (!adapter.completeRedirect) throw ApplicationFailure.nonRetryable(`${payment.provider} has no redirect flow`, PROVIDER_REFUSED);
  const ctx = await contextFor(deps, payment);
  const done = await callProvider(() =>
    adapter.completeRedirect!(ctx, {
      flowId,
      sessionToken: paymentId,
      paymentId,
      amountMinor: minorUnits(payment),
      currency: payment.currency,
      idempotencyKey: `payment/${paymentId}/mandate-payment`,
    }),
  );
  await deps.db.models.Customer.updateOne(
    { _id: payment.customer_id },
    {
      $set: {
        payment_provider: payment.provider,
        payment_method_id: done.mandateId,
        ...(done.providerCustomerId ? { provider_customer_id: done.providerCustomerId } : {}),
      },
    },
  );
  await deps.db.models.Payment.updateOne(
    { _id: paymentId, provider_payment_id: null },
    { $set: { provider_payment_id: done.providerPaymentId } },
  );
  return (await moveTo(deps, paymentId, 'processing', at)).payment;
}
