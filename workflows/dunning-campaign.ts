/**
 * dunningCampaignWorkflow: one dunning campaign (`dunning-campaign/<id>`), api-contract.md
 * "Dunning campaigns and payment requests".
 *
 * Signal: invoiceOverdue (from an invoice's overdue step, for a customer the campaign governs). For
 * each, the customer's overdue unpaid invoices of that currency that no open request holds are
 * totalled; at the campaign's threshold for the currency a payment request is created (its own
 * workflow makes the attempts). No timers: the campaign only reacts. Its history stays short with
 * continue-as-new; it ends once the campaign is deleted (update stop, or a check that
 * finds it deleted).
 */
import { continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  stopCampaignUpdate,
  invoiceOverdueSignal,
  type DunningCampaignWorkflowInput,
  type OverdueNotice,
} from './dunning-campaign.messages';
import { nowIso, waitFor } from './wait';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export async function dunningCampaignWorkflow(input: DunningCampaignWorkflowInput): Promise<{ ended: 'deleted' }> {
  const pending: OverdueNotice[] = [...(input.pending ?? [])];
  setHandler(invoiceOverdueSignal, (notice) => {
    // One look per customer and currency covers every invoice of it that is waiting.
    if (!pending.some((p) => p.customerId === notice.customerId && p.currency === notice.currency)) pending.push(notice);
  });

  let deleted = false;
  setHandler(stopCampaignUpdate, () => {
    deleted = true;
    return { stopped: true as const };
  });

  let checks = 0;
  for (;;) {
    await waitFor(() => pending.length > 0 || deleted);
    if (deleted) return { ended: 'deleted' };
    // Off the queue before the check: a notice arriving during it asks for another look.
    const notice = pending.shift()!;
    const { campaignDeleted } = await acts.checkDunningActivity(input.campaignId, notice.customerId, notice.currency, nowIso());
    if (campaignDeleted) return { ended: 'deleted' };
    checks += 1;
    if (workflowInfo().continueAsNewSuggested || (input.maxChecksPerRun !== undefined && checks >= input.maxChecksPerRun)) {
      await continueAsNew<typeof dunningCampaignWorkflow>({ ...input, pending });
    }
  }
}
