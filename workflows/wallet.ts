/**
 * walletWorkflow: one prepaid wallet (`wallet/<id>`), the only writer of its status (the balance
 * is shared with invoice finalizations and changes through guarded atomic updates instead).
 *
 * Timers: expiration_at, through waitUntil (none while the wallet has no expiration); when it is
 *   reached the wallet is terminated with terminated_at = expiration_at. Each interval rule's next
 *   anniversary (src/domain/wallet-rules.ts, in the customer's time zone): the rule tops up for
 *   that instant (walletIntervalTopUpActivity), then waits for the next one. The earliest of them
 *   all is the one timer; a run due at or after the expiration never happens.
 * Updates: terminate (DELETE /v1/wallets/{id}) answers the terminated wallet; its validator
 *   refuses a wallet that is terminated or being terminated, before anything is written.
 * Signals: expirationChanged(expirationAt | null) re-arms the timer (PUT /v1/wallets/{id});
 *   rulesChanged: the rules were changed (PUT with recurring_transaction_rules): the workflow reads
 *   them, and the customer's time zone, from the wallet (walletRulesActivity), so signals that
 *   arrive out of order or not at all (a run that finds its rule gone reads them too) never leave
 *   it with stale rules;
 *   thresholdCrossed: a consumption parked threshold top-ups on the wallet, which
 *   walletThresholdTopUpsActivity makes (each once, whatever the repeated signals).
 * Query: state. (All defined in wallet.messages.ts, with the start options.)
 * Ends when the wallet is terminated.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { WalletTermination } from '../activities/wallets';
import { BillingStatus } from '../src/temporal/search-attributes';
import {
  expirationChangedSignal,
  rulesChangedSignal,
  terminateWalletUpdate,
  thresholdCrossedSignal,
  WALLET_TERMINATED,
  walletStateQuery,
  walletLabel,
  type WalletIntervalRule,
  type WalletWorkflowInput,
} from './wallet.messages';
import { nextIntervalRun } from '../src/domain/wallet-rules';
import { localTime, showDetails } from './details';
import { currentClock, markFinished, now, useClock, waitFor, waitUntil } from './wait';

const { terminateWalletActivity, walletIntervalTopUpActivity, walletRulesActivity, walletThresholdTopUpsActivity } =
  proxyActivities<Activities>({
    startToCloseTimeout: '1 minute',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
  });

export interface WalletWorkflowResult {
  status: 'terminated';
  reason: 'expired' | 'manual';
  terminatedAt: string | null;
  /** Workflow time when the termination was decided (the timer fired or the update arrived). */
  decidedAt: string;
}

export async function walletWorkflow(input: WalletWorkflowInput): Promise<WalletWorkflowResult> {
  useClock(input.clock);
  let expirationAt: number | null = input.expirationAt ? Date.parse(input.expirationAt) : null;
  let rearm = false;
  let manual = false;
  let ended: WalletWorkflowResult | null = null;
  let terminatedAt: string | null = null;
  let timezone = input.timezone ?? 'UTC';
  let rules: WalletIntervalRule[] = input.intervalRules ?? [];
  let thresholdOwed = false;
  let rulesChanged = false;
  const label = walletLabel(input.walletId, input.labels);

  /** The wallet's state line in the UI: `Wallet Promo active (EUR), expires 2027-01-01 00:00 Europe/Paris, 1 interval rule(s).` */
  function stateLine(): string {
    const status = ended ? `terminated (${ended.reason})` : manual ? 'being terminated' : 'active';
    const currency = input.labels ? ` (${input.labels.currency})` : '';
    const expiry = ended
      ? terminatedAt
        ? `, terminated at ${localTime(terminatedAt, timezone)}`
        : ''
      : expirationAt === null
        ? ', no expiration'
        : `, expires ${localTime(expirationAt, timezone)}`;
    const ruleCount = !ended && rules.length > 0 ? `, ${rules.length} interval rule(s)` : '';
    return `${label} ${status}${currency}${expiry}${ruleCount}.`;
  }

  /** The rules as stored now; a rule it knows keeps the instant of its last run. */
  async function reloadRules(): Promise<void> {
    rulesChanged = false;
    const current = await walletRulesActivity.executeWithOptions({ summary: "read the wallet's rules and time zone" }, [
      { walletId: input.walletId },
    ]);
    timezone = current.timezone;
    rules = current.intervalRules.map((rule) => {
      const known = rules.find((r) => r.id === rule.id);
      return known && Date.parse(known.after) > Date.parse(rule.after) ? { ...rule, after: known.after } : rule;
    });
  }

  const nextRunOf = (rule: WalletIntervalRule): number =>
    nextIntervalRun(new Date(rule.startedAt), rule.interval, timezone, new Date(rule.after)).getTime();

  /** The earliest timer: an interval rule's run strictly before the expiration, else the expiration. */
  function nextTimer(): { at: number; rule: WalletIntervalRule | null } | null {
    let next: { at: number; rule: WalletIntervalRule | null } | null = expirationAt === null ? null : { at: expirationAt, rule: null };
    for (const rule of rules) {
      const at = nextRunOf(rule);
      if (next === null || at < next.at) next = { at, rule };
    }
    return next;
  }

  function finish(result: WalletTermination, reason: WalletWorkflowResult['reason'], decidedAt: number): boolean {
    if (result.outcome !== 'terminated') {
      expirationAt = result.expirationAt ? Date.parse(result.expirationAt) : null;
      return false;
    }
    terminatedAt = result.wallet.terminated_at;
    ended ??= { status: 'terminated', reason, terminatedAt, decidedAt: new Date(decidedAt).toISOString() };
    upsertSearchAttributes([{ key: BillingStatus, value: 'terminated' }]);
    return true;
  }

  setHandler(walletStateQuery, () => ({
    status: ended ? 'terminated' : manual ? 'terminating' : 'active',
    expirationAt: expirationAt === null ? null : new Date(expirationAt).toISOString(),
    terminatedAt,
    nextRuns: rules.map((rule) => ({ ruleId: rule.id, at: new Date(nextRunOf(rule)).toISOString() })),
  }));
  setHandler(rulesChangedSignal, () => {
    rulesChanged = true;
  });
  setHandler(thresholdCrossedSignal, () => {
    thresholdOwed = true;
  });
  setHandler(expirationChangedSignal, (next) => {
    expirationAt = next ? Date.parse(next) : null;
    rearm = true;
  });
  setHandler(
    terminateWalletUpdate,
    async () => {
      manual = true;
      const decidedAt = now();
      try {
        const at = new Date(decidedAt).toISOString();
        const result = await terminateWalletActivity.executeWithOptions({ summary: 'terminate on request' }, [
          { walletId: input.walletId, at, reason: 'manual' },
        ]);
        finish(result, 'manual', decidedAt);
        return result.wallet;
      } finally {
        manual = false;
      }
    },
    {
      validator: () => {
        if (ended) throw ApplicationFailure.nonRetryable('The wallet is terminated', WALLET_TERMINATED);
        if (manual) throw ApplicationFailure.nonRetryable('The wallet is being terminated', WALLET_TERMINATED);
      },
    },
  );

  while (!ended) {
    const interrupted = () => rearm || manual || thresholdOwed || rulesChanged || ended !== null;
    const timer = nextTimer();
    if (manual) {
      // A terminate update is running its activity: it ends the wallet (or fails and gives back).
      showDetails(stateLine(), 'no timer: a terminate request is running; the wallet ends with it');
      await waitFor(() => !manual || ended !== null);
    } else if (rulesChanged) {
      await reloadRules();
    } else if (thresholdOwed) {
      thresholdOwed = false;
      await walletThresholdTopUpsActivity.executeWithOptions({ summary: 'make the threshold top-ups parked on the wallet' }, [
        { walletId: input.walletId },
      ]);
    } else if (timer === null) {
      showDetails(stateLine(), 'no timer: waiting for a change (expiration, rules), a threshold crossing or a termination');
      await waitFor(interrupted);
    } else {
      const due = timer.at;
      const expiry = expirationAt === null ? '' : `; the expiration ${localTime(expirationAt, timezone)} terminates the wallet`;
      if (timer.rule) {
        showDetails(
          stateLine(),
          `waiting for the ${timer.rule.interval} anniversary ${localTime(due, timezone)} of rule ${timer.rule.id} to top up the wallet${expiry}`,
        );
      } else {
        showDetails(stateLine(), `waiting for the expiration ${localTime(due, timezone)} to terminate the wallet`);
      }
      const waited = await waitUntil(
        due,
        interrupted,
        timer.rule ? `${timer.rule.interval} top-up (rule ${timer.rule.id})` : 'expiration: terminate the wallet',
      );
      if (waited === 'elapsed' && !ended && !manual) {
        if (timer.rule) {
          const ruleId = timer.rule.id;
          const dueIso = new Date(due).toISOString();
          // For the anniversary itself, so a late timer tops up for the instant it was due.
          const run = await walletIntervalTopUpActivity.executeWithOptions(
            { summary: `${timer.rule.interval} top-up of rule ${ruleId} for ${localTime(due, timezone)}` },
            [{ walletId: input.walletId, ruleId, at: dueIso }],
          );
          rules = rules.map((rule) => (rule.id === ruleId ? { ...rule, after: dueIso } : rule));
          // Replaced or removed meanwhile (its signal not here yet, or lost): read them again.
          if (run.ruleGone) await reloadRules();
        } else {
          const firedAt = now();
          // Acts for the expiration instant itself, so a late timer (a worker that was down) still
          // records the wallet as terminated when it expired.
          const result = await terminateWalletActivity.executeWithOptions({ summary: `terminate: expired ${localTime(due, timezone)}` }, [
            { walletId: input.walletId, at: new Date(due).toISOString(), reason: 'expired' },
          ]);
          finish(result, 'expired', firedAt);
        }
      }
    }
    rearm = false;
    if (!ended && !manual && !thresholdOwed && !rulesChanged && workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof walletWorkflow>({
        walletId: input.walletId,
        expirationAt: expirationAt === null ? null : new Date(expirationAt).toISOString(),
        clock: currentClock(),
        ...(input.timezone === undefined && timezone === 'UTC' ? {} : { timezone }),
        ...(rules.length === 0 && input.intervalRules === undefined ? {} : { intervalRules: rules }),
        ...(input.labels ? { labels: input.labels } : {}),
      });
    }
  }
  // A terminate update in flight finishes (and answers) before the workflow ends.
  showDetails(stateLine(), 'nothing: the wallet is terminated');
  markFinished();
  await condition(allHandlersFinished);
  return ended!;
}
