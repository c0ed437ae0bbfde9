/**
 * What the outside world says to an invoiceWorkflow (`invoice/<id>`): how it is started, its
 * updates, its signal and its query. The workflow binds them; the API and the billing services use
 * them, so nothing reaches it by a string name.
 *
 * The names inside define*() and the workflow type are recorded in every history: running
 * executions and test/workflows/histories depend on them, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { InvoiceResource } from '../src/resources/invoice';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type { ClockRef } from '../src/test-clocks/time';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const invoiceWorkflowType = 'invoiceWorkflow' satisfies keyof typeof workflows;
type InvoiceWorkflow = (typeof workflows)[typeof invoiceWorkflowType];

export type InvoiceWorkflowStatus = 'draft' | 'finalized' | 'paid' | 'voided' | 'deleted';

export interface InvoiceWorkflowInput {
  invoiceId: string;
  /** When the draft was created (workflow or test-clock time), ISO. */
  createdAt: string;
  gracePeriodDays: number;
  /** The invoice's status when the workflow starts (a restarted workflow may find it finalized). */
  status?: InvoiceWorkflowStatus;
  paymentOverdue?: boolean;
  /** ISO instant the invoice becomes overdue (finalized invoices). */
  overdueAt?: string | null;
  /** The customer's test clock, if it is on one. */
  clock?: ClockRef | null;
  /** For operators: the number and total at start, the customer's external id (absent in older executions). */
  labels?: InvoiceLabels;
}

export interface InvoiceLabels {
  number: string;
  /** Whole minor units of the invoice's currency. */
  totalCents: number;
  currency: string;
  customerExternalId: string | null;
}

/** What is left to pay, in cents, for the BillingAmountDueCents search attribute. */
export function amountDueCents(status: InvoiceWorkflowStatus, totalCents: number): number {
  return status === 'draft' || status === 'finalized' ? totalCents : 0;
}

export const finalizeInvoiceUpdate = defineUpdate<InvoiceResource>('finalize');
/** Finalization acting for a given instant (a subscription step's, so its issuing date is that step's). */
export const finalizeInvoiceAtUpdate = defineUpdate<InvoiceResource, [at: string]>('finalizeAt');
export const payInvoiceUpdate = defineUpdate<InvoiceResource>('pay');
export const voidInvoiceUpdate = defineUpdate<InvoiceResource>('void');
export const deleteInvoiceUpdate = defineUpdate<InvoiceResource>('delete');
export const refreshInvoiceUpdate = defineUpdate<InvoiceResource>('refresh');
export const settlementRecordedSignal = defineSignal('settlementRecorded');
export const invoiceStateQuery = defineQuery<{ status: InvoiceWorkflowStatus; paymentOverdue: boolean; overdueAt: string | null }>('state');

/** The lifecycle commands the API exposes (POST /v1/invoices/{id}/<command>, DELETE for delete), each an update. */
export const invoiceCommands = {
  finalize: finalizeInvoiceUpdate,
  pay: payInvoiceUpdate,
  void: voidInvoiceUpdate,
  delete: deleteInvoiceUpdate,
  refresh: refreshInvoiceUpdate,
} as const;
export type InvoiceCommand = keyof typeof invoiceCommands;

/**
 * Starts an invoice's workflow. USE_EXISTING: a running one is kept (a retried start is no second
 * workflow); REJECT_DUPLICATE: one that ended (paid, voided, deleted) is not started again, the
 * start throws WorkflowExecutionAlreadyStartedError.
 */
export function startInvoiceWorkflow(
  temporal: TemporalClient,
  input: InvoiceWorkflowInput,
  owner: { organizationId: string; customerId: string },
) {
  return temporal.client.workflow.start<InvoiceWorkflow>(invoiceWorkflowType, {
    workflowId: workflowIds.invoice(input.invoiceId),
    taskQueue: temporal.taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    typedSearchAttributes: entitySearchAttributes({
      ...owner,
      entityType: 'invoice',
      status: input.status,
      ...(input.labels
        ? {
            customerExternalId: input.labels.customerExternalId,
            invoiceNumber: input.labels.number,
            amountDueCents: amountDueCents(input.status ?? 'draft', input.labels.totalCents),
          }
        : {}),
    }),
    ...(input.labels
      ? {
          staticSummary: `Invoice ${input.labels.number} of customer ${input.labels.customerExternalId ?? owner.customerId}`,
          staticDetails: `Total ${input.labels.totalCents} cents ${input.labels.currency}, created ${input.createdAt}, grace period ${input.gracePeriodDays} day(s). Ids: invoice ${input.invoiceId}, customer ${owner.customerId}, organization ${owner.organizationId}.`,
        }
      : {}),
  });
}
