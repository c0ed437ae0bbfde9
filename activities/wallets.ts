import { ApplicationFailure } from '@temporalio/activity';
import { terminateWallet } from '../src/billing/wallets';
import { toWalletResource, type WalletResource } from '../src/resources/wallet';
import type { EmitDeps } from '../src/webhooks/emit-event';

export interface WalletTermination {
  /** `still_active`: an expiry that no longer holds (the expiration moved); nothing was written. */
  outcome: 'terminated' | 'still_active';
  wallet: WalletResource;
  /** The wallet's expiration_at as stored now (ISO), for the workflow to wait on again. */
  expirationAt: string | null;
}

/** The activities of walletWorkflow. Each is idempotent and acts for the instant it is given. */
export function createWalletActivities(deps: EmitDeps) {
  return {
    /**
     * Terminates the wallet at `at` (its expiration_at for an expiry, the workflow time of the
     * request for `terminate`) and announces wallet.terminated. A retry finds it terminated and
     * answers the same wallet.
     */
    async terminateWalletActivity(input: { walletId: string; at: string; reason: 'expired' | 'manual' }): Promise<WalletTermination> {
      const result = await terminateWallet(deps, { walletId: input.walletId, at: new Date(input.at), reason: input.reason });
      if (result.outcome === 'not_found') throw ApplicationFailure.nonRetryable(`wallet ${input.walletId} not found`, 'NotFound');
      return {
        outcome: result.outcome,
        wallet: toWalletResource(result.wallet),
        expirationAt: result.wallet.expiration_at ? result.wallet.expiration_at.toISOString() : null,
      };
    },
  };
}
