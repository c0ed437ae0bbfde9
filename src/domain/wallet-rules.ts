import { DateTime } from 'luxon';
import type Decimal from 'decimal.js';
import type { BillingInterval } from './periods';

/**
 * A wallet's recurring transaction rules (api-contract.md, Wallets; lago-reference.md §5). Pure and
 * deterministic: the wallet's workflow imports the schedule of its interval rules from here.
 *
 * An interval rule tops up on the anniversaries of its `started_at` in the customer's time zone:
 * one interval after it, then every interval, each computed from `started_at` itself (never from
 * the previous run), so a rule started on January 31 runs on February 28 (29), March 31, April 30…
 * A threshold rule tops up when a consumption takes the credits balance from above its threshold
 * to at or below it: once per crossing.
 */

export type RuleInterval = BillingInterval;

export const RULE_INTERVALS = ['weekly', 'monthly', 'quarterly', 'yearly'] as const satisfies readonly RuleInterval[];

/** The k-th anniversary of `startedAt` (k >= 1), in `timezone`, with month-end clamping. */
export function intervalRun(startedAt: Date, interval: RuleInterval, timezone: string, k: number): Date {
  const start = DateTime.fromJSDate(startedAt, { zone: timezone });
  const step =
    interval === 'weekly'
      ? { weeks: k }
      : interval === 'monthly'
        ? { months: k }
        : interval === 'quarterly'
          ? { months: 3 * k }
          : { years: k };
  return start.plus(step).toJSDate();
}

const APPROXIMATE_MS: Record<RuleInterval, number> = {
  weekly: 7 * 86_400_000,
  monthly: 28 * 86_400_000,
  quarterly: 89 * 86_400_000,
  yearly: 365 * 86_400_000,
};

/**
 * The first anniversary of `startedAt` strictly after `after` (k >= 1): when an interval rule runs
 * next. A rule whose `started_at` lies in the past runs at its next anniversary, never for the ones
 * it missed before it existed.
 */
export function nextIntervalRun(startedAt: Date, interval: RuleInterval, timezone: string, after: Date): Date {
  // Start a little before the answer (the shortest length of an interval can only undershoot), then walk.
  const elapsed = after.getTime() - startedAt.getTime();
  let k = Math.max(1, Math.floor(elapsed / (APPROXIMATE_MS[interval] * 1.1)));
  while (k > 1 && intervalRun(startedAt, interval, timezone, k - 1) > after) k--;
  while (intervalRun(startedAt, interval, timezone, k) <= after) k++;
  return intervalRun(startedAt, interval, timezone, k);
}

/** A threshold rule as the crossing check needs it. */
export interface ThresholdRule {
  id: string;
  thresholdCredits: Decimal;
}

/** The threshold rules a change of the credits balance from `before` to `after` crosses downwards. */
export function crossedThresholds(rules: readonly ThresholdRule[], before: Decimal, after: Decimal): string[] {
  return rules.filter((r) => before.greaterThan(r.thresholdCredits) && after.lessThanOrEqualTo(r.thresholdCredits)).map((r) => r.id);
}
