import { checkDunning } from '../src/payments/dunning';
import type { PaymentRequestDeps } from '../src/payments/payment-requests';

/** The dunningCampaignWorkflow's step (src/payments/dunning.ts). */
export function createDunningActivities(deps: PaymentRequestDeps) {
  return {
    async checkDunningActivity(
      campaignId: string,
      customerId: string,
      currency: string,
      _at: string,
    ): Promise<{ campaignDeleted: boolean; paymentRequestId: string | null }> {
      return checkDunning(deps, campaignId, customerId, currency);
    },
  };
}
