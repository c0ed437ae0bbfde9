// Reaching a payment's workflow from the API: always with a start, since the workflow ends whenever
// the payment rests and the next command or notification starts it again from the payment's record.
import { WithStartWorkflowOperation } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { Db } from '../db';
import type { PaymentDoc } from '../db/models/payment';
import type { TemporalClient } from '../temporal/client';
import { clockOfCustomer, type ClockRef } from '../test-clocks/time';
import {
  paymentStartOptions,
  paymentWorkflowType,
  providerEventSignal,
  type PaymentWorkflow,
  type PaymentWorkflowInput,
} from '../../workflows/payment.messages';
import type { ProviderNotification } from './providers/types';

/** What names a payment to an operator besides its record: its customer's external id and its invoice's number. */
export interface PaymentNames {
  customerExternalId: string | null;
  /** Null for a payment request's attempt (it pays the request's invoices, not only the one it names). */
  invoiceNumber: string | null;
}

/** The input of a run started from the payment's record. */
export function paymentWorkflowInput(payment: PaymentDoc, clock: ClockRef | null, names: PaymentNames): PaymentWorkflowInput {
  return {
    paymentId: payment._id,
    organizationId: payment.organization_id,
    customerId: payment.customer_id,
    invoiceId: payment.invoice_id,
    status: payment.status,
    checkoutCreated: payment.provider_checkout_id !== null,
    expiresAt: payment.expires_at ? payment.expires_at.toISOString() : null,
    paymentRequestId: payment.payment_request_id ?? null,
    clock,
    labels: {
      amountCents: Math.round(Number(payment.amount.toString())),
      currency: payment.currency,
      provider: payment.provider,
      invoiceNumber: payment.payment_request_id ? null : names.invoiceNumber,
      customerExternalId: names.customerExternalId,
    },
  };
}

/**
 * The input of a run started from the payment's record, with what it reads for it: the customer
 * (its test clock and external id, one read by id) and the invoice's number (one read by id, not
 * for a payment request's attempt).
 */
export async function loadPaymentWorkflowInput(db: Db, payment: PaymentDoc): Promise<PaymentWorkflowInput> {
  const [customer, invoice] = await Promise.all([
    db.models.Customer.findById(payment.customer_id, { test_clock_id: 1, external_id: 1 }).lean(),
    payment.payment_request_id ? null : db.models.Invoice.findById(payment.invoice_id, { number: 1 }).lean(),
  ]);
  const clock = customer ? await clockOfCustomer(db, customer) : null;
  return paymentWorkflowInput(payment, clock, {
    customerExternalId: customer?.external_id ?? null,
    invoiceNumber: invoice?.number ?? null,
  });
}

/** Runs an update on the payment's workflow; a running one takes it, else one starts from the record. */
export function executePaymentUpdate<Ret, Args extends unknown[]>(
  temporal: TemporalClient,
  input: PaymentWorkflowInput,
  update: UpdateDefinition<Ret, Args>,
  ...args: Args
): Promise<Ret> {
  return temporal.client.workflow.executeUpdateWithStart(update, {
    args,
    startWorkflowOperation: new WithStartWorkflowOperation<PaymentWorkflow>(paymentWorkflowType, {
      ...paymentStartOptions(temporal, input),
      workflowIdConflictPolicy: 'USE_EXISTING',
    }),
  });
}

/**
 * Starts the payment's workflow without waiting for it (a payment request's attempt): it opens the
 * checkout or charges the saved method itself, and tells the request. A running one is left as is.
 */
export async function startPaymentWorkflow(temporal: TemporalClient, input: PaymentWorkflowInput): Promise<void> {
  await temporal.client.workflow.start<PaymentWorkflow>(paymentWorkflowType, {
    ...paymentStartOptions(temporal, input),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** Delivers a provider notification to the payment's workflow (started from the record if needed). */
export function signalProviderEvent(temporal: TemporalClient, input: PaymentWorkflowInput, notification: ProviderNotification) {
  return temporal.client.workflow.signalWithStart<PaymentWorkflow, [ProviderNotification]>(paymentWorkflowType, {
    ...paymentStartOptions(temporal, input),
    signal: providerEventSignal,
    signalArgs: [notification],
  });
}
