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
import { showDetails } from './details';
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
  const label = `Dunning campaign ${input.labels?.code ?? input.campaignId}`;
  const customerOf = (notice: OverdueNotice) => `customer ${notice.customerExternalId ?? notice.customerId}`;
  let requests = 0;
  let last = '';
  const stateLine = () => `${label}: ${checks} check(s) and ${requests} payment request(s) in this run${last}.`;
  const ended = () => {
    showDetails(`${label} deleted.`, 'nothing: the campaign is over (its payment requests go on in their own workflows)');
    return { ended: 'deleted' as const };
  };
  for (;;) {
    showDetails(stateLine(), 'no timer: waiting for an overdue invoice of a customer it governs (or its deletion)');
    await waitFor(() => pending.length > 0 || deleted);
    if (deleted) return ended();
    // Off the queue before the check: a notice arriving during it asks for another look.
    const notice = pending.shift()!;
    const { campaignDeleted, paymentRequestId } = await acts.checkDunningActivity.executeWithOptions(
      { summary: `check ${customerOf(notice)} in ${notice.currency} against the threshold` },
      [input.campaignId, notice.customerId, notice.currency, nowIso()],
    );
    if (campaignDeleted) return ended();
    checks += 1;
    if (paymentRequestId) requests += 1;
    const outcome = paymentRequestId
      ? `payment request ${paymentRequestId} created`
      : 'no payment request (under the threshold, or nothing new to collect)';
    last = `; last check: ${customerOf(notice)} in ${notice.currency} at ${nowIso()}, ${outcome}`;
    if (workflowInfo().continueAsNewSuggested || (input.maxChecksPerRun !== undefined && checks >= input.maxChecksPerRun)) {
      await continueAsNew<typeof dunningCampaignWorkflow>({ ...input, pending });
    }
  }
}
