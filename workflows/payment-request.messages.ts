/**
 * What the outside world says to a paymentRequestWorkflow (`payment-request/<id>`): how it is
 * started, its signals and its query. The names inside define*() and the workflow type are
 * recorded in every history, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type { ClockRef } from '../src/test-clocks/time';
import type * as workflows from './index';

export const paymentRequestWorkflowType = 'paymentRequestWorkflow' satisfies keyof typeof workflows;
type PaymentRequestWorkflow = (typeof workflows)[typeof paymentRequestWorkflowType];

export interface PaymentRequestWorkflowInput {
  paymentRequestId: string;
  organizationId: string;
  customerId: string;
  maxAttempts: number;
  daysBetweenAttempts: number;
  /** Attempts made before this run (continue-as-new, a restart). */
  attemptsMade?: number;
  clock?: ClockRef | null;
  /** What names the request to an operator (absent in executions started before them). */
  labels?: PaymentRequestLabels;
}

/** The request's amount, its invoices' numbers and its customer's external id, for search attributes and summaries. */
export interface PaymentRequestLabels {
  /** What its invoices left to pay at its creation, in whole minor units of `currency`. */
  amountCents: number;
  currency: string;
  customerExternalId: string | null;
  invoiceNumbers: string[];
  /** The campaign that created it; null: created through the API. */
  dunningCampaignId: string | null;
}

/** What the request still asks for, in cents (BillingAmountDueCents): nothing once it succeeded. */
export function requestAmountDueCents(status: string, amountCents: number): number {
  return status === 'succeeded' ? 0 : amountCents;
}

/** An attempt's payment reached an outcome (sent by the payment's workflow). */
export const paymentOutcomeSignal = defineSignal<[{ paymentId: string; status: string }]>('paymentOutcome');
/** An invoice of the request was paid or voided by other means: what is left is looked at again. */
export const requestInvoicesChangedSignal = defineSignal('invoicesChanged');
export const paymentRequestStateQuery = defineQuery<{ status: string; attempts: number; nextAttemptAt: string | null }>('state');

/** Starts a request's workflow; USE_EXISTING: a retried start finds the running one. */
export function startPaymentRequestWorkflow(temporal: TemporalClient, input: PaymentRequestWorkflowInput) {
  return temporal.client.workflow.start<PaymentRequestWorkflow>(paymentRequestWorkflowType, {
    workflowId: workflowIds.paymentRequest(input.paymentRequestId),
    taskQueue: temporal.taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: entitySearchAttributes({
      organizationId: input.organizationId,
      customerId: input.customerId,
      entityType: 'payment_request',
      status: 'pending',
      ...(input.labels ? { customerExternalId: input.labels.customerExternalId, amountDueCents: input.labels.amountCents } : {}),
    }),
    ...(input.labels
      ? {
          staticSummary: `Payment request of ${input.labels.amountCents} cents ${input.labels.currency} from customer ${input.labels.customerExternalId ?? input.customerId} (${input.labels.invoiceNumbers.length} invoice(s))`,
          staticDetails: [
            `Invoices ${input.labels.invoiceNumbers.join(', ')}; up to ${input.maxAttempts} attempt(s), ${input.daysBetweenAttempts} day(s) apart; ${input.labels.dunningCampaignId ? `created by dunning campaign ${input.labels.dunningCampaignId}` : 'created through the API'}.`,
            `Ids: payment request ${input.paymentRequestId}, customer ${input.customerId}, organization ${input.organizationId}.`,
          ].join('\n'),
        }
      : {}),
  });
}
