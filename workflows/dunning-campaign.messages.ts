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
  /** What names the campaign to an operator (absent in executions started before them). */
  labels?: DunningCampaignLabels;
}

/** A campaign governs many customers (its own, or the organization's): it is named by its code, not by a customer. */
export interface DunningCampaignLabels {
  code: string;
  name: string;
}

export interface OverdueNotice {
  customerId: string;
  currency: string;
  invoiceId: string;
  /** The customer's external id, for the campaign's details (absent in notices sent before). */
  customerExternalId?: string | null;
}

/** An invoice of a customer the campaign governs became overdue (sent by the invoice's overdue step). */
export const invoiceOverdueSignal = defineSignal<[OverdueNotice]>('invoiceOverdue');

/** The campaign was deleted: its workflow ends (the requests it created go on in their own workflows). */
export const stopCampaignUpdate = defineUpdate<{ stopped: true }>('stop');

/** Tells the campaign's workflow of an overdue invoice, starting it when it is not running. */
export function signalInvoiceOverdue(
  temporal: TemporalClient,
  input: { campaignId: string; organizationId: string; labels: DunningCampaignLabels },
  notice: OverdueNotice,
) {
  const { campaignId, organizationId, labels } = input;
  return temporal.client.workflow.signalWithStart<DunningCampaignWorkflow, [OverdueNotice]>(dunningCampaignWorkflowType, {
    workflowId: workflowIds.dunningCampaign(campaignId),
    taskQueue: temporal.taskQueue,
    args: [{ campaignId, organizationId, labels }],
    signal: invoiceOverdueSignal,
    signalArgs: [notice],
    // Per organization: no customer's attributes (it is found by BillingOrganizationId and BillingEntityType).
    typedSearchAttributes: entitySearchAttributes({
      organizationId,
      entityType: 'dunning_campaign',
      status: 'active',
    }),
    staticSummary: `Dunning campaign ${labels.code} (${labels.name}) of organization ${organizationId}`,
    staticDetails: [
      'Reacts to the overdue invoices of the customers it governs (no timers): at its threshold for a currency, a payment request.',
      `Started by an overdue invoice of customer ${notice.customerExternalId ?? notice.customerId} (${notice.currency}).`,
      `Ids: dunning campaign ${campaignId}, organization ${organizationId}.`,
    ].join('\n'),
  });
}
