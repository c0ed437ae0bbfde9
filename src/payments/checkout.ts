// POST /v1/payments/checkout and the commands on a payment, as the API runs them: the checks that
// need the database (the invoice, the integration, what is left to pay), then the payment's
// workflow through update-with-start, whose answer is the API's.
import { ActivityFailure, WorkflowUpdateFailedError } from '@temporalio/client';
import { amountToSettle, settledAmount } from '../billing/settlements';
import { isDuplicateKeyError, type Db } from '../db';
import { newId } from '../db/base';
import { toDecimal128 } from '../db/decimal';
import type { PaymentDoc } from '../db/models/payment';
import { roundCents } from '../domain/money';
import { payments } from '../metrics/registry';
import { ApiError, InvalidTransition, NotFound, Validation } from '../errors';
import type { PaymentResource } from '../resources/payment';
import type { TemporalClient } from '../temporal/client';
import { checkoutPaymentUpdate, PAYMENT_INVALID_TRANSITION, PAYMENT_PROVIDER_ERROR } from '../../workflows/payment.messages';
import { activeProviderIntegration } from './integrations';
import { PROVIDER_REFUSED } from './payments';
import { executePaymentUpdate, loadPaymentWorkflowInput } from './payment-workflow';
import type { ProviderCode } from './providers/types';

export interface CheckoutDeps {
  db: Db;
  temporal: TemporalClient;
  /** The service's public address, for provider_c's return URL. */
  publicUrl: string;
}

export interface CheckoutRequest {
  organizationId: string;
  invoiceId: string;
  provider: ProviderCode;
  successUrl: string;
  cancelUrl: string;
}

export class ProviderError extends ApiError {
  override readonly name = 'ProviderError';
  constructor(message: string) {
    super(502, 'provider_error', message);
  }
}

/** A workflow's refusal, as the API answers it (null: not a refusal, a bug). */
export function paymentRefusal(err: unknown): ApiError | null {
  if (!(err instanceof WorkflowUpdateFailedError)) return null;
  let cause = err.cause as { type?: string; message?: string; cause?: unknown } | undefined;
  // An activity's failure inside the update: the provider's refusal is its cause.
  if (cause instanceof ActivityFailure) cause = cause.cause as typeof cause;
  if (cause?.type === PROVIDER_REFUSED) return new ProviderError(cause.message ?? 'The provider refused the call');
  const message = cause?.message ?? 'Invalid state transition';
  if (cause?.type === PAYMENT_INVALID_TRANSITION) return new InvalidTransition(message);
  if (cause?.type === PAYMENT_PROVIDER_ERROR) return new ProviderError(message);
  return null;
}

/**
 * Opens (or finds) the invoice's payment with the provider and answers it once its checkout
 * exists: while a pending or processing payment of the same provider exists for the invoice, that
 * payment is answered again.
 */
export async function openCheckout(deps: CheckoutDeps, request: CheckoutRequest): Promise<PaymentResource> {
  const { Invoice, Payment } = deps.db.models;
  const invoice = await Invoice.findOne({ _id: request.invoiceId, organization_id: request.organizationId, deleted_at: null }).lean();
  if (!invoice) throw new NotFound('Invoice not found', 'invoice_not_found');
  if (invoice.status !== 'finalized')
    throw new InvalidTransition(`Only a finalized, unpaid invoice can be paid (this one is ${invoice.status})`);
  if (!(await activeProviderIntegration(deps.db, request.organizationId, request.provider))) {
    throw new ApiError(422, 'provider_not_configured', `${request.provider} has no active integration in this organization`, [
      { path: 'provider', message: 'no active integration' },
    ]);
  }

  let payment: PaymentDoc | null = await Payment.findOne({ invoice_id: invoice._id, provider: request.provider, open_slot: 'open' }).lean();
  if (!payment) {
    const left = roundCents(amountToSettle(invoice).minus(await settledAmount(deps.db, invoice._id)));
    if (left.lessThanOrEqualTo(0)) throw new InvalidTransition('The invoice is fully paid');
    const id = newId();
    try {
      payment = (
        await Payment.create({
          _id: id,
          organization_id: request.organizationId,
          invoice_id: invoice._id,
          customer_id: invoice.customer_id,
          amount: toDecimal128(left),
          currency: invoice.currency,
          status: 'pending',
          provider: request.provider,
          success_url: request.successUrl,
          cancel_url: request.cancelUrl,
          return_url: `${deps.publicUrl.replace(/\/$/, '')}/v1/payments/${id}/return`,
          open_slot: 'open',
        })
      ).toObject();
      payments.inc({ provider: request.provider, status: 'pending' });
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      // A concurrent checkout for the same invoice and provider won: answer its payment.
      payment = await Payment.findOne({ invoice_id: invoice._id, provider: request.provider, open_slot: 'open' }).lean();
      if (!payment) throw err;
    }
  }
  return runPaymentUpdate(deps, payment, checkoutPaymentUpdate);
}

/** Runs a command on a payment's workflow and maps its refusal to the API's answer. */
export async function runPaymentUpdate<Args extends unknown[]>(
  deps: Pick<CheckoutDeps, 'db' | 'temporal'>,
  payment: PaymentDoc,
  update: Parameters<typeof executePaymentUpdate<PaymentResource, Args>>[2],
  ...args: Args
): Promise<PaymentResource> {
  const input = await loadPaymentWorkflowInput(deps.db, payment);
  try {
    return await executePaymentUpdate(deps.temporal, input, update, ...args);
  } catch (err) {
    throw paymentRefusal(err) ?? err;
  }
}

/** The payment of the organization (a deleted one is gone), or 404. */
export async function findPayment(db: Db, organizationId: string, id: string): Promise<PaymentDoc> {
  const payment = await db.models.Payment.findOne({ _id: id, organization_id: organizationId, deleted_at: null }).lean();
  if (!payment) throw new NotFound('Payment not found', 'not_found');
  return payment;
}

/** paid_at of mark-paid: not in the future of the customer's clock. */
export function checkPaidAt(paidAt: Date | undefined, now: Date): void {
  if (paidAt && paidAt.getTime() > now.getTime()) throw Validation.field('paid_at', 'must not be in the future');
}
