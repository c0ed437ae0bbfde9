/**
 * What the outside world says to a paymentWorkflow (`payment/<id>`): how it is started (always
 * with a command: a payment's workflow ends whenever the payment rests, and the next command or
 * provider notification starts it again from the payment's record), its updates, its signal and
 * its query.
 *
 * The names inside define*() and the workflow type are recorded in every history: running
 * executions and test/workflows/histories depend on them, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { PaymentStatus } from '../src/db/models/payment';
import type { ProviderNotification } from '../src/payments/providers/types';
import type { PaymentResource } from '../src/resources/payment';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type { ClockRef } from '../src/test-clocks/time';
import type * as workflows from './index';

export const paymentWorkflowType = 'paymentWorkflow' satisfies keyof typeof workflows;
export type PaymentWorkflow = (typeof workflows)[typeof paymentWorkflowType];

export interface PaymentWorkflowInput {
  paymentId: string;
  organizationId: string;
  customerId: string;
  invoiceId: string;
  /** The payment's status when this run starts (read from its record). */
  status: PaymentStatus;
  /** Whether the provider's checkout exists already (a run started again after it was created). */
  checkoutCreated: boolean;
  /** ISO; the checkout's expiry, once known. */
  expiresAt: string | null;
  /** The payment request this payment is an attempt of (its workflow hears the outcome). */
  paymentRequestId?: string | null;
  /** The customer's test clock, if it is on one. */
  clock?: ClockRef | null;
  /** What names the payment to an operator (absent in runs started before them). */
  labels?: PaymentLabels;
}

/** The payment's amount, provider, invoice number and customer's external id, for search attributes and summaries. */
export interface PaymentLabels {
  /** Whole minor units of `currency`. */
  amountCents: number;
  currency: string;
  provider: string;
  /** The invoice it pays; null for a payment request's attempt (it pays the request's invoices). */
  invoiceNumber: string | null;
  customerExternalId: string | null;
}

/** What the payment still asks for, in cents (BillingAmountDueCents): its amount while open, else nothing. */
export function paymentAmountDueCents(status: PaymentStatus, amountCents: number): number {
  return status === 'pending' || status === 'processing' ? amountCents : 0;
}

/** `Payment of 1100 cents USD for invoice ACME-203101-000001 through provider_a`. */
export function paymentLabel(input: Pick<PaymentWorkflowInput, 'paymentId' | 'paymentRequestId' | 'labels'>): string {
  const labels = input.labels;
  if (!labels) return `Payment ${input.paymentId}`;
  const what = labels.invoiceNumber
    ? `invoice ${labels.invoiceNumber}`
    : input.paymentRequestId
      ? `payment request ${input.paymentRequestId}`
      : 'its invoice';
  return `Payment of ${labels.amountCents} cents ${labels.currency} for ${what} through ${labels.provider}`;
}

export interface MarkPaidCommand {
  reference: string | null;
  /** ISO; default: now. */
  paidAt: string | null;
}

export interface RefundCommand {
  /** Minor units; null: what is left of the payment. */
  amountCents: string | null;
}

/** Answers once the provider's checkout exists (creating it on the first call). */
export const checkoutPaymentUpdate = defineUpdate<PaymentResource>('checkout');
export const completeRedirectUpdate = defineUpdate<PaymentResource, [flowId: string]>('completeRedirect');
export const markPaidUpdate = defineUpdate<PaymentResource, [MarkPaidCommand]>('markPaid');
export const refundPaymentUpdate = defineUpdate<PaymentResource, [RefundCommand]>('refund');
export const deletePaymentUpdate = defineUpdate<PaymentResource>('delete');
/** A verified provider notification about this payment (the webhook route stored it first). */
export const providerEventSignal = defineSignal<[ProviderNotification]>('providerEvent');
export const paymentStateQuery = defineQuery<{ status: PaymentStatus; expiresAt: string | null }>('state');

/** Failure types the API maps to its answers. */
export const PAYMENT_INVALID_TRANSITION = 'InvalidTransition';
export const PAYMENT_PROVIDER_ERROR = 'ProviderError';

/** The start options of a payment's workflow; started with a command (src/payments/payment-workflow.ts). */
export function paymentStartOptions(temporal: TemporalClient, input: PaymentWorkflowInput) {
  const labels = input.labels;
  return {
    workflowId: workflowIds.payment(input.paymentId),
    taskQueue: temporal.taskQueue,
    args: [input] as Parameters<PaymentWorkflow>,
    typedSearchAttributes: entitySearchAttributes({
      organizationId: input.organizationId,
      customerId: input.customerId,
      entityType: 'payment',
      status: input.status,
      ...(labels
        ? {
            customerExternalId: labels.customerExternalId,
            invoiceNumber: labels.invoiceNumber,
            amountDueCents: paymentAmountDueCents(input.status, labels.amountCents),
          }
        : {}),
    }),
    ...(labels
      ? {
          staticSummary: `${paymentLabel(input)} (customer ${labels.customerExternalId ?? input.customerId})`,
          staticDetails: [
            `This run started with the payment ${input.status}${input.expiresAt ? `, its checkout expiring ${input.expiresAt}` : ''}; a run ends whenever the payment rests, the next command or notification starts another.`,
            `Ids: payment ${input.paymentId}, invoice ${input.invoiceId}${input.paymentRequestId ? `, payment request ${input.paymentRequestId}` : ''}, customer ${input.customerId}, organization ${input.organizationId}.`,
          ].join('\n'),
        }
      : {}),
  };
}
