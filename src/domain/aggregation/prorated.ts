import type { ProrationRatio } from '../charges';
import { Dec } from '../money';
import { countDays, localDate, startOfLocalDayAfter } from '../periods';
import type { UsageEvent } from '../usage-types';
import type { ProrationContext } from './metric';

/**
 * Prorated units (lago-reference.md 2.10, api-contract.md Invoices): each recurring unit weighs the
 * part of the period it was present, in local calendar dates of the billed part `[from, to)` over the
 * whole period's days. Day counting is src/domain/periods.ts countDays, the base fee's: a partial day
 * is a whole day.
 *
 * The units are exact: Σ value × days is an exact decimal and is divided once by the period's days.
 * Lago rounds prorated units up to 5 decimals; api-contract.md decides that only the fee is rounded
 * (4 decimals), so nothing is rounded here (the metric's own rounding_function still applies, after).
 */

function periodDaysOf(prorate: ProrationContext): number {
  const { periodDays } = prorate;
  if (!Number.isInteger(periodDays) || periodDays <= 0) {
    throw new RangeError(`periodDays must be a positive integer, got ${periodDays}`);
  }
  return periodDays;
}

function later(a: Date, b: Date): Date {
  return a.getTime() >= b.getTime() ? a : b;
}

/**
 * The days a value arriving at `at` is billed for: the local dates from its date, or from the billed
 * part's start for a value carried in from before it, to the billed part's end. Its date counts
 * (partial day), `to` on a local midnight does not. 0 for an event at or after `to`.
 */
export function daysFromEvent(at: Date, prorate: ProrationContext): number {
  return countDays(later(at, prorate.from), prorate.to, prorate.timezone);
}

/**
 * Prorated sum: Σ value × daysFromEvent / period days. Values are deltas: a removal (negative value)
 * subtracts for the days from its own date, so the removed unit is billed up to the day before.
 * Ex. (30-day month): +2 on day 1, −1 on day 16 → (2 × 30 − 1 × 15) / 30 = 1.5.
 */
export function proratedSum(values: readonly { event: UsageEvent; value: Dec }[], prorate: ProrationContext): Dec {
  const periodDays = periodDaysOf(prorate);
  const weighted = values.reduce((acc, { event, value }) => acc.plus(value.times(daysFromEvent(event.timestamp, prorate))), new Dec(0));
  return weighted.div(periodDays);
}

/** One stay of a distinct value: from its add to its remove (`until`), or still present (null). */
export interface Presence {
  from: Date;
  until: Date | null;
}

/**
 * The local dates of the billed part on which a value was present, over its stays in time order.
 * The removal's date counts, as Lago's prorated unique count (DATE(removed) − DATE(added) + 1): the
 * value was there for part of that day. A date two stays touch (removed and added again the same
 * day) counts once.
 */
export function presenceDays(stays: readonly Presence[], prorate: ProrationContext): number {
  const { timezone } = prorate;
  let days = 0;
  let lastDate: string | null = null;
  for (const stay of stays) {
    const start = later(stay.from, prorate.from);
    // Present until the removal instant included, so the removal touches its date.
    const until = stay.until === null ? prorate.to.getTime() : Math.min(stay.until.getTime() + 1, prorate.to.getTime());
    const end = new Date(until);
    const n = countDays(start, end, timezone);
    if (n === 0) continue;
    days += localDate(start, timezone) === lastDate ? n - 1 : n;
    lastDate = localDate(new Date(until - 1), timezone);
  }
  return days;
}

/** Prorated unique count: Σ over distinct values of presenceDays / period days. */
export function proratedPresence(staysByValue: Iterable<readonly Presence[]>, prorate: ProrationContext): Dec {
  const periodDays = periodDaysOf(prorate);
  let days = 0;
  for (const stays of staysByValue) days += presenceDays(stays, prorate);
  return new Dec(days).div(periodDays);
}

/** A billed range as usage reads it (src/usage/period-usage.ts UsageRange). */
export interface BilledRange {
  /** Where billing starts: the period start, the subscription start, the trial end, a plan change. */
  from: Date;
  /** Where usage reading stops (exclusive). */
  to: Date;
  timezone: string;
  /** `usedDays` of the period's `periodDays` for a part of the period; undefined or usedDays = periodDays: the whole period. */
  ratio?: ProrationRatio | undefined;
  /** The end of the billed part when `to` stops earlier (progressive billing reads up to now). */
  billedTo?: Date | undefined;
}

/**
 * The ProrationContext of a billed range: the billed part `[from, billed end)` and the whole
 * period's days. A part of the period takes both from its ratio, so units carried in count for
 * exactly the days its base fee is prorated to (a termination mid-day bills its day, a trial ending
 * mid-period bills from its day): the billed end is the midnight after its `usedDays` dates. A whole
 * period is `[from, billedTo ?? to)`, whose days are the period's. An empty range (a period the trial
 * covers) bills no day.
 */
export function prorationFor(range: BilledRange): ProrationContext {
  const { from, timezone, ratio } = range;
  const partial = ratio !== undefined && ratio.usedDays < ratio.periodDays;
  // Nothing billed: no day to weigh. (Nothing read yet but days billed, as at a termination at the
  // segment's first instant, still weighs the units present from before over those days.)
  if (from.getTime() >= (range.billedTo ?? range.to).getTime()) {
    return { from, to: from, periodDays: partial ? ratio.periodDays : 1, timezone };
  }
  if (partial) {
    return { from, to: range.billedTo ?? startOfLocalDayAfter(from, ratio.usedDays, timezone), periodDays: ratio.periodDays, timezone };
  }
  const to = range.billedTo ?? range.to;
  return { from, to, periodDays: Math.max(1, countDays(from, to, timezone)), timezone };
}
