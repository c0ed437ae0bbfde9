/**
 * What the outside world says to a dunningCampaignWorkflow (`dunning-campaign/<id>`): how it is
 * started (with the first signal), its signal and its update (stop). The names inside define*()
 * and the workflow type are recorded in every history, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type * as workflows from './index';

export const dunningCampaignWorkflowType = 'dunningCampaignWorkflow' satisfies keyof typeof workflows;
type DunningCampaignWorkflow = (typeof workflows)[typeof dunningCampaignWorkflowType];

export interface DunningCampaignWorkflowInput {
  campaignId: string;
  organizationId: string;
  /** Customers and currencies whose overdue invoices wait to be looked at (carried through continue-as-new). */
  pending?: OverdueNotice[];
  /** Continue as new after this many checks even when Temporal does not suggest it yet (tests; unset in production). */
  maxChecksPerRun?: number;
}

export interface OverdueNotice {
  customerId: string;
  currency: string;
  invoiceId: string;
}

/** An invoice of a customer the campaign governs became overdue (sent by the invoice's overdue step). */
export const invoiceOverdueSignal = defineSignal<[OverdueNotice]>('invoiceOverdue');

/** The campaign was deleted: its workflow ends (the requests it created go on in their own workflows). */
export const stopCampaignUpdate = defineUpdate<{ stopped: true }>('stop');

/** Tells the campaign's workflow of an overdue invoice, starting it when it is not running. */
export function signalInvoiceOverdue(
  temporal: TemporalClient,
  input: { campaignId: string; organizationId: string },
  notice: OverdueNotice,
) {
  return temporal.client.workflow.signalWithStart<DunningCampaignWorkflow, [OverdueNotice]>(dunningCampaignWorkflowType, {
    workflowId: workflowIds.dunningCampaign(input.campaignId),
    taskQueue: temporal.taskQueue,
    args: [{ campaignId: input.campaignId, organizationId: input.organizationId }],
    signal: invoiceOverdueSignal,
    signalArgs: [notice],
    typedSearchAttributes: entitySearchAttributes({
      organizationId: input.organizationId,
      entityType: 'dunning_campaign',
      status: 'active',
    }),
  });
}
