import type { ProrationRatio } from './charges';
import { Dec, roundCents, ZERO, type DecimalInput } from './money';
import { countDays, fullPeriodDays, prorate, startOfLocalDay, startOfNextLocalDay, type BillingSchedule } from './periods';

/**
 * Day counting and proration of a subscription's segments (billing-rules.md, Billing periods and
 * Subscription lifecycle). A segment is the current plan's part of a period: the whole period, or
 * from the day a plan change took effect, or up to a termination. Its base fee is
 * `amount_cents * used_days / period_days` at fee precision, where
 *
 * - used days are the local calendar dates the segment touches: its first and its last date both
 *   count, so a partial day is a whole day (DST days are one day like any other);
 * - period days are those of the whole period, even when the segment is the partial first period
 *   of a subscription that started inside it (Lago PR #6194);
 * - nothing before the trial end is billed, and the day the trial ends is;
 * - the day of a plan change belongs to the new plan: the old plan's segment ends at that day's
 *   midnight (planChangeDay);
 * - the day of a termination is billed: the segment ends at the next midnight, or the period end
 *   (terminationBilledUntil);
 * - the unused part of a fee billed in advance is credited with its share of the fee's taxes, in
 *   whole cents (unusedCredit).
 */

export interface SegmentInput {
  /** The plan's schedule: its interval, billing time, the subscription's start and time zone. */
  schedule: BillingSchedule;
  /** Start of the period the segment is part of (the denominator is this whole period's days). */
  periodFrom: Date;
  /** The segment, half-open: `[from, to)`. */
  from: Date;
  to: Date;
  /** The trial end, if the subscription has one (days before it are free). */
  trialEndsAt: Date | null;
  amountCents: DecimalInput;
}

export interface SegmentProration {
  /** What is billed: from the segment's start, or the trial end when it is later, to its end. */
  from: Date;
  to: Date;
  usedDays: number;
  periodDays: number;
  /** usedDays of periodDays for a partial period (prorates charges and commitments); undefined for a whole one. */
  ratio: ProrationRatio | undefined;
  /** The base fee for the used days, at fee precision. */
  baseFee: Dec;
}

/** Where billing starts inside a range: never before the trial ends. */
export function billableFrom(from: Date, trialEndsAt: Date | null): Date {
  return trialEndsAt && trialEndsAt.getTime() > from.getTime() ? trialEndsAt : from;
}

/** The days and base fee of a segment; null when no day of it is billable (empty, or inside the trial). */
export function prorateSegment(input: SegmentInput): SegmentProration | null {
  const from = billableFrom(input.from, input.trialEndsAt);
  if (from.getTime() >= input.to.getTime()) return null;
  const usedDays = countDays(from, input.to, input.schedule.timezone);
  const periodDays = fullPeriodDays({ ...input.schedule, at: input.periodFrom });
  return {
    from,
    to: input.to,
    usedDays,
    periodDays,
    ratio: usedDays >= periodDays ? undefined : { usedDays, periodDays },
    baseFee: prorate(input.amountCents, usedDays, periodDays),
  };
}

/**
 * Where a plan change at `at` splits the segment that started at `segmentFrom`: the midnight
 * starting the change's local date (that day is the new plan's), never before the segment.
 */
export function planChangeDay(at: Date, segmentFrom: Date, timezone: string): Date {
  const midnight = startOfLocalDay(at, timezone);
  return midnight.getTime() >= segmentFrom.getTime() ? midnight : segmentFrom;
}

/** Where a termination at `at` ends what is billed: the midnight after its local date, at most the period end. */
export function terminationBilledUntil(at: Date, periodTo: Date, timezone: string): Date {
  const midnight = startOfNextLocalDay(at, timezone);
  return midnight.getTime() <= periodTo.getTime() ? midnight : periodTo;
}

/** A base fee as it was invoiced: its amount, its total with taxes, and what credit notes already took. */
export interface InvoicedFee {
  amount: Dec;
  total: Dec;
  credited: Dec;
}

/**
 * The credit note for the unused part (`unused`, the prorated base fee of the unused days) of a
 * fee billed in advance. The customer paid the fee with its taxes, so the unused days give back
 * their share of both. A credit note is money that can be refunded: whole cents, half up, never
 * more than what is left of the fee (rounded the same way, as its invoice's total was). Null
 * instead of zero: a zero credit note is never created.
 */
export function unusedCredit(unused: Dec, fee: InvoicedFee): Dec | null {
  const withTaxes = fee.amount.isZero() ? ZERO : unused.times(fee.total).dividedBy(fee.amount);
  const room = fee.total.minus(fee.credited);
  const amount = roundCents(Dec.min(withTaxes, room));
  return amount.lessThanOrEqualTo(0) ? null : amount;
}
