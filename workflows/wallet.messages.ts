/**
 * What the outside world says to a walletWorkflow (`wallet/<id>`): how it is started, its update,
 * signal and query, and the failure type its update refuses with. The workflow binds them; the API
 * uses them, so nothing reaches it by a string name.
 *
 * The names inside define*() and the workflow type are recorded in every history: running
 * executions and test/workflows/histories depend on them, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { WalletResource } from '../src/resources/wallet';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type { RuleInterval } from '../src/domain/wallet-rules';
import type { ClockRef } from '../src/test-clocks/time';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const walletWorkflowType = 'walletWorkflow' satisfies keyof typeof workflows;
type WalletWorkflow = (typeof workflows)[typeof walletWorkflowType];

export interface WalletWorkflowInput {
  walletId: string;
  /** ISO instant, or null: no expiry. */
  expirationAt: string | null;
  /** The customer's test clock, if it is on one. */
  clock?: ClockRef | null;
  /** The customer's time zone, for the anniversaries of interval rules (absent: UTC). */
  timezone?: string;
  /** The wallet's interval rules, each with the instant after which it runs next. */
  intervalRules?: WalletIntervalRule[];
  /** What names the wallet to an operator (absent in executions started before them). */
  labels?: WalletLabels;
}

/** The wallet's name or code, currency and its customer's external id, for search attributes and summaries. */
export interface WalletLabels {
  name: string | null;
  code: string | null;
  currency: string;
  customerExternalId: string | null;
}

/** `Wallet Promo credits (code promo)`, else its code, else its id. */
export function walletLabel(walletId: string, labels: WalletLabels | undefined): string {
  if (!labels) return `Wallet ${walletId}`;
  if (labels.name) return `Wallet ${labels.name}${labels.code ? ` (code ${labels.code})` : ''}`;
  return `Wallet ${labels.code ?? walletId}`;
}

/** An interval rule as its wallet's workflow schedules it (the rule's credits are read when it runs). */
export interface WalletIntervalRule {
  id: string;
  interval: RuleInterval;
  /** ISO: the anchor of its anniversaries (the rule's started_at, else the wallet's creation). */
  startedAt: string;
  /** ISO: it runs at its first anniversary strictly after this instant (its creation, then its last run). */
  after: string;
}

export interface WalletWorkflowState {
  status: 'active' | 'terminating' | 'terminated';
  expirationAt: string | null;
  terminatedAt: string | null;
  /** When each interval rule runs next (ISO). Absent in states answered before rules existed. */
  nextRuns?: { ruleId: string; at: string }[];
}

export const terminateWalletUpdate = defineUpdate<WalletResource>('terminate');
export const expirationChangedSignal = defineSignal<[expirationAt: string | null]>('expirationChanged');
/** The wallet's rules changed (PUT /v1/wallets/{id} with recurring_transaction_rules): the workflow reads them. */
export const rulesChangedSignal = defineSignal('rulesChanged');
/** A consumption crossed a threshold rule: the workflow makes the top-ups parked on the wallet. */
export const thresholdCrossedSignal = defineSignal('thresholdCrossed');
export const walletStateQuery = defineQuery<WalletWorkflowState>('state');

/** The failure type the API maps to 400 wallet_terminated. */
export const WALLET_TERMINATED = 'WalletTerminated';

/** Who owns the wallet, for the search attributes; `status`: the wallet's status at the start. */
export interface WalletOwner {
  organizationId: string;
  customerId: string;
  status: string;
}

function startOptions(temporal: TemporalClient, input: WalletWorkflowInput, owner: WalletOwner) {
  const labels = input.labels;
  return {
    workflowId: workflowIds.wallet(input.walletId),
    taskQueue: temporal.taskQueue,
    args: [input] as Parameters<WalletWorkflow>,
    typedSearchAttributes: entitySearchAttributes({ ...owner, entityType: 'wallet', customerExternalId: labels?.customerExternalId }),
    ...(labels
      ? {
          staticSummary: `${walletLabel(input.walletId, labels)} of customer ${labels.customerExternalId ?? owner.customerId}`,
          staticDetails: [
            `Currency ${labels.currency}, ${input.expirationAt ? `expires ${input.expirationAt}` : 'no expiration'}, ${input.intervalRules?.length ?? 0} interval rule(s) at start, time zone ${input.timezone ?? 'UTC'}.`,
            `Ids: wallet ${input.walletId}, customer ${owner.customerId}, organization ${owner.organizationId}.`,
          ].join('\n'),
        }
      : {}),
  };
}

/** Starts a wallet's workflow; USE_EXISTING: a running one is kept. */
export function startWalletWorkflow(temporal: TemporalClient, input: WalletWorkflowInput, owner: WalletOwner) {
  return temporal.client.workflow.start<WalletWorkflow>(walletWorkflowType, {
    ...startOptions(temporal, input, owner),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/**
 * Tells the wallet's workflow its new expiration (it re-arms its timer), starting it if it never
 * started. REJECT_DUPLICATE: a workflow that already ended (the wallet was just terminated) stays
 * ended, and the call throws WorkflowExecutionAlreadyStartedError.
 */
export function signalWalletExpirationChanged(temporal: TemporalClient, input: WalletWorkflowInput, owner: WalletOwner) {
  return temporal.client.workflow.signalWithStart<WalletWorkflow, [string | null]>(walletWorkflowType, {
    ...startOptions(temporal, input, owner),
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    signal: expirationChangedSignal,
    signalArgs: [input.expirationAt],
  });
}

/** Tells the wallet's workflow its interval rules changed; like signalWalletExpirationChanged otherwise. */
export function signalWalletRulesChanged(temporal: TemporalClient, input: WalletWorkflowInput, owner: WalletOwner) {
  return temporal.client.workflow.signalWithStart<WalletWorkflow, []>(walletWorkflowType, {
    ...startOptions(temporal, input, owner),
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    signal: rulesChangedSignal,
    signalArgs: [],
  });
}

/** Tells a wallet's workflow that threshold top-ups are parked on the wallet; like signalWalletExpirationChanged otherwise. */
export function signalWalletThresholdCrossed(temporal: TemporalClient, input: WalletWorkflowInput, owner: WalletOwner) {
  return temporal.client.workflow.signalWithStart<WalletWorkflow, []>(walletWorkflowType, {
    ...startOptions(temporal, input, owner),
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    signal: thresholdCrossedSignal,
    signalArgs: [],
  });
}
