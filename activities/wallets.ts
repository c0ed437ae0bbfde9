import { ApplicationFailure } from '@temporalio/activity';
import { createCreditInvoice } from '../src/billing/invoices';
import {
  applyIntervalTopUp,
  applyThresholdTopUps,
  terminateWallet,
  walletWorkflowOf,
  type CreateCreditInvoice,
} from '../src/billing/wallets';
import type { WalletIntervalRule } from '../workflows/wallet.messages';
import type { Db } from '../src/db';
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
export function createWalletActivities(db: Db, deps: EmitDeps) {
  const creditInvoice: CreateCreditInvoice = (request) => createCreditInvoice(db, deps, request);
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

    /**
     * An interval rule's top-up for its anniversary `at` (source interval): its granted credits at
     * once, its paid credits as a purchase with its credit invoice. Once per (rule, anniversary),
     * whatever the retries; nothing when the rule is gone or the wallet terminated.
     */
    async walletIntervalTopUpActivity(input: {
      walletId: string;
      ruleId: string;
      at: string;
    }): Promise<{ applied: boolean; ruleGone: boolean }> {
      const result = await applyIntervalTopUp(deps, { ...input, at: new Date(input.at), createCreditInvoice: creditInvoice });
      return { applied: result.outcome === 'applied', ruleGone: result.outcome === 'rule_gone' };
    },

    /** The wallet's interval rules as stored, and the customer's time zone now. */
    async walletRulesActivity(input: { walletId: string }): Promise<{ timezone: string; intervalRules: WalletIntervalRule[] }> {
      const wallet = await db.models.Wallet.findById(input.walletId).lean();
      if (!wallet) throw ApplicationFailure.nonRetryable(`wallet ${input.walletId} not found`, 'NotFound');
      const [workflowInput] = await walletWorkflowOf(db, wallet);
      return { timezone: workflowInput.timezone ?? 'UTC', intervalRules: workflowInput.intervalRules ?? [] };
    },

    /** The threshold top-ups consumptions parked on the wallet, each once (source threshold). */
    async walletThresholdTopUpsActivity(input: { walletId: string }): Promise<{ applied: number }> {
      return { applied: await applyThresholdTopUps(deps, { walletId: input.walletId, createCreditInvoice: creditInvoice }) };
    },
  };
}
