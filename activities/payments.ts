import { paymentSettlements } from '../src/billing/settlements';
import type { Db } from '../src/db';
import type { PaymentDoc } from '../src/db/models/payment';
import {
  applyProviderNotification,
  completeRedirectFlow,
  createPaymentCheckout,
  deletePayment,
  expirePayment,
  failPaymentCheckout,
  markPaymentPaid,
  refundPayment,
  type MoveResult,
  type PaymentDeps,
} from '../src/payments/payments';
import type { ProviderNotification } from '../src/payments/providers/types';
import { toPaymentResource, type PaymentResource } from '../src/resources/payment';
import type { MarkPaidCommand } from '../workflows/payment.messages';

export interface PaymentStepResult {
  payment: PaymentResource;
  /** The invoice's workflow must hear of a settlement. */
  settled: boolean;
  /** The invoices the payment settled (a payment request's pays several); absent: the payment's invoice. */
  settledInvoiceIds?: string[];
}

/**
 * The paymentWorkflow's steps (src/payments/payments.ts). Each receives the instant it acts for
 * from the workflow (workflow or test-clock time), so a retried step records the same instants.
 */
export function createPaymentActivities(deps: PaymentDeps & { db: Db }) {
  async function plain(payment: PaymentDoc): Promise<PaymentStepResult> {
    if (payment.status !== 'succeeded') return { payment: toPaymentResource(payment), settled: false };
    const settlements = await paymentSettlements(deps.db, payment._id);
    return { payment: toPaymentResource(payment), settled: true, settledInvoiceIds: settlements.map((s) => s.invoice_id) };
  }
  const result = (moved: MoveResult) => plain(moved.payment);

  return {
    async readPaymentActivity(paymentId: string): Promise<PaymentResource> {
      const payment = await deps.db.models.Payment.findById(paymentId).lean();
      if (!payment) throw new Error(`payment ${paymentId} not found`);
      return toPaymentResource(payment);
    },
    async createPaymentCheckoutActivity(paymentId: string, at: string): Promise<PaymentStepResult> {
      return plain(await createPaymentCheckout(deps, paymentId, new Date(at)));
    },
    async failPaymentCheckoutActivity(paymentId: string, reason: string, at: string): Promise<PaymentStepResult> {
      return plain(await failPaymentCheckout(deps, paymentId, reason, new Date(at)));
    },
    async applyProviderNotificationActivity(paymentId: string, notification: ProviderNotification, at: string): Promise<PaymentStepResult> {
      return result(await applyProviderNotification(deps, paymentId, notification, new Date(at)));
    },
    async markPaymentPaidActivity(paymentId: string, command: MarkPaidCommand, at: string): Promise<PaymentStepResult> {
      return result(await markPaymentPaid(deps, paymentId, command, new Date(at)));
    },
    async refundPaymentActivity(paymentId: string, amountCents: string | null, at: string): Promise<PaymentStepResult> {
      return result(await refundPayment(deps, paymentId, amountCents, new Date(at)));
    },
    async expirePaymentActivity(paymentId: string, at: string): Promise<PaymentStepResult> {
      return result(await expirePayment(deps, paymentId, new Date(at)));
    },
    async deletePaymentActivity(paymentId: string, at: string): Promise<PaymentStepResult> {
      return plain(await deletePayment(deps, paymentId, new Date(at)));
    },
    async completeRedirectActivity(paymentId: string, flowId: string, at: string): Promise<PaymentStepResult> {
      return plain(await completeRedirectFlow(deps, paymentId, flowId, new Date(at)));
    },
  };
}
