import { DateTime, IANAZone } from 'luxon';
import { dec, roundFee, type Dec, type DecimalInput } from './money';

/**
 * Billing periods (billing-rules.md, "Billing periods"). Every boundary is a local midnight in the
 * customer's time zone; all calendar arithmetic is delegated to luxon on *dates*, and only the final
 * date is turned into an instant, so DST days (23 or 25 hours) and half-hour offsets never shift a
 * boundary.
 */

export type BillingInterval = 'weekly' | 'monthly' | 'quarterly' | 'yearly';
export type BillingTime = 'calendar' | 'anniversary';

export interface BillingSchedule {
  interval: BillingInterval;
  billingTime: BillingTime;
  /** The subscription's `started_at`: the first period starts at this instant. */
  anchor: Date;
  /** IANA zone name (customer's, else the organization's). */
  timezone: string;
}

/** Half-open `[from, to)`: an instant equal to `to` belongs to the next period. */
export interface Period {
  from: Date;
  to: Date;
}

export type ScheduleAt = BillingSchedule & { at: Date };

export class InvalidTimezone extends Error {
  override readonly name = 'InvalidTimezone';
  constructor(readonly timezone: string) {
    super(`unknown time zone: ${timezone}`);
  }
}

/** Asked for the period of an instant before the subscription started: no such period exists. */
export class PeriodBeforeStart extends Error {
  override readonly name = 'PeriodBeforeStart';
  constructor(
    readonly at: Date,
    readonly anchor: Date,
  ) {
    super(`${at.toISOString()} is before the subscription start ${anchor.toISOString()}`);
  }
}

interface LocalDate {
  year: number;
  month: number;
  day: number;
}

/**
 * `IANAZone.create` keeps one zone per name, validity included; `IANAZone.isValidZone` builds an
 * `Intl.DateTimeFormat` at every call (2 ms of worker CPU per invoice on a billing day).
 */
function assertTimezone(timezone: string): void {
  if (!IANAZone.create(timezone).isValid) throw new InvalidTimezone(timezone);
}

function assertValidInstant(value: Date, label: string): void {
  if (Number.isNaN(value.getTime())) throw new RangeError(`${label} is not a valid date`);
}

function toLocalDate(at: Date, timezone: string): LocalDate {
  const local = DateTime.fromJSDate(at, { zone: timezone });
  return { year: local.year, month: local.month, day: local.day };
}

/** A date as a UTC DateTime: a zone-free calendar on which luxon's month clamping is safe. */
function asCalendarDate(date: LocalDate): DateTime {
  return DateTime.utc(date.year, date.month, date.day);
}

function fromCalendarDate(date: DateTime): LocalDate {
  return { year: date.year, month: date.month, day: date.day };
}

/**
 * The first instant of a local date. Where midnight does not exist (America/Santiago springs
 * forward at 00:00) luxon moves to the first existing instant, 01:00, which is still the start of
 * that date; where it is ambiguous luxon takes the earlier offset, again the date's first instant.
 */
function localMidnight(date: LocalDate, timezone: string): Date {
  return DateTime.fromObject({ ...date, hour: 0 }, { zone: timezone }).toJSDate();
}

/** The local midnight that starts the date `at` falls on. */
export function startOfLocalDay(at: Date, timezone: string): Date {
  assertTimezone(timezone);
  return localMidnight(toLocalDate(at, timezone), timezone);
}

/** The local midnight that ends the date `at` falls on (the start of the next date). */
/** The local calendar date (YYYY-MM-DD) of an instant in a zone: daily usage rows, issuing dates. */
export function localDate(at: Date, timezone: string): string {
  return DateTime.fromJSDate(at, { zone: timezone }).toISODate()!;
}

export function startOfNextLocalDay(at: Date, timezone: string): Date {
  assertTimezone(timezone);
  const next = asCalendarDate(toLocalDate(at, timezone)).plus({ days: 1 });
  return localMidnight(fromCalendarDate(next), timezone);
}

/**
 * The local midnight `days` dates after the date `at` falls on (0: the midnight starting that date),
 * e.g. the end of `days` billed dates starting on the date of `at`.
 */
export function startOfLocalDayAfter(at: Date, days: number, timezone: string): Date {
  assertTimezone(timezone);
  if (!Number.isInteger(days)) throw new RangeError(`days must be an integer, got ${days}`);
  return localMidnight(fromCalendarDate(asCalendarDate(toLocalDate(at, timezone)).plus({ days })), timezone);
}

function daysBetweenDates(from: LocalDate, to: LocalDate): number {
  return Math.round(asCalendarDate(to).diff(asCalendarDate(from), 'days').days);
}

/**
 * Local calendar dates touched by `[from, toExclusive)`: the start date and the end date both
 * count, so a partial day is a whole day (billing-rules.md). `toExclusive` on a local midnight does
 * not touch that date. An empty or inverted range has 0 days.
 */
export function countDays(from: Date, toExclusive: Date, timezone: string): number {
  assertTimezone(timezone);
  assertValidInstant(from, 'from');
  assertValidInstant(toExclusive, 'toExclusive');
  if (toExclusive.getTime() <= from.getTime()) return 0;
  const lastInstant = new Date(toExclusive.getTime() - 1);
  return daysBetweenDates(toLocalDate(from, timezone), toLocalDate(lastInstant, timezone)) + 1;
}

/**
 * `amount * usedDays / periodDays`, kept at fee precision (4 digits, half up): the base fee of a
 * partial period, a prorated cap or commitment, a credit for unused days.
 */
export function prorate(amount: DecimalInput, usedDays: number, periodDays: number): Dec {
  if (!Number.isInteger(periodDays) || periodDays <= 0) {
    throw new RangeError(`periodDays must be a positive integer, got ${periodDays}`);
  }
  if (!Number.isInteger(usedDays) || usedDays < 0) {
    throw new RangeError(`usedDays must be a non-negative integer, got ${usedDays}`);
  }
  return roundFee(dec(amount).times(usedDays).div(periodDays));
}

function stepOf(interval: BillingInterval): { months?: number; weeks?: number } {
  switch (interval) {
    case 'weekly':
      return { weeks: 1 };
    case 'monthly':
      return { months: 1 };
    case 'quarterly':
      return { months: 3 };
    case 'yearly':
      return { months: 12 };
  }
}

function calendarUnitOf(interval: BillingInterval): 'week' | 'month' | 'quarter' | 'year' {
  switch (interval) {
    case 'weekly':
      return 'week';
    case 'monthly':
      return 'month';
    case 'quarterly':
      return 'quarter';
    case 'yearly':
      return 'year';
  }
}

/** Calendar periods ignore the anchor: Monday weeks (ISO), months, Jan/Apr/Jul/Oct quarters, years. */
function calendarDatesContaining(interval: BillingInterval, date: LocalDate): [DateTime, DateTime] {
  const start = asCalendarDate(date).startOf(calendarUnitOf(interval));
  return [start, start.plus(stepOf(interval))];
}

/**
 * The k-th anniversary date, always computed from the anchor date and never from the previous
 * boundary: luxon clamps Jan 31 + 1 month to Feb 28/29, and Jan 31 + 2 months is Mar 31 again, so a
 * short month never drags later periods to an earlier day.
 */
function anniversaryDate(interval: BillingInterval, anchor: LocalDate, k: number): DateTime {
  const base = asCalendarDate(anchor);
  const step = stepOf(interval);
  return step.weeks !== undefined ? base.plus({ weeks: step.weeks * k }) : base.plus({ months: (step.months ?? 0) * k });
}

function anniversaryDatesContaining(interval: BillingInterval, anchor: LocalDate, date: LocalDate): [DateTime, DateTime] {
  const target = asCalendarDate(date);
  // An estimate from whole units, then corrected: clamping can make the estimate one off.
  const step = stepOf(interval);
  let k =
    step.weeks !== undefined
      ? Math.floor(daysBetweenDates(anchor, date) / (7 * step.weeks))
      : Math.floor((date.year * 12 + date.month - (anchor.year * 12 + anchor.month)) / (step.months ?? 1));
  const targetMs = target.toMillis();
  while (anniversaryDate(interval, anchor, k).toMillis() > targetMs) k -= 1;
  while (anniversaryDate(interval, anchor, k + 1).toMillis() <= targetMs) k += 1;
  return [anniversaryDate(interval, anchor, k), anniversaryDate(interval, anchor, k + 1)];
}

function validateSchedule(schedule: BillingSchedule): void {
  assertTimezone(schedule.timezone);
  assertValidInstant(schedule.anchor, 'anchor');
}

function assertNotBeforeStart(schedule: BillingSchedule, at: Date): void {
  assertValidInstant(at, 'at');
  if (at.getTime() < schedule.anchor.getTime()) throw new PeriodBeforeStart(at, schedule.anchor);
}

/**
 * The whole period around `at`, from local midnight to local midnight, ignoring that the
 * subscription may have started inside it. Its length in days is the proration denominator
 * (Lago PR #6194: always the whole period).
 */
export function fullPeriodContaining(input: ScheduleAt): Period {
  validateSchedule(input);
  assertNotBeforeStart(input, input.at);
  const { interval, timezone } = input;
  const date = toLocalDate(input.at, timezone);
  const [start, end] =
    input.billingTime === 'calendar'
      ? calendarDatesContaining(interval, date)
      : anniversaryDatesContaining(interval, toLocalDate(input.anchor, timezone), date);
  return {
    from: localMidnight(fromCalendarDate(start), timezone),
    to: localMidnight(fromCalendarDate(end), timezone),
  };
}

/**
 * The billing period that contains `at`. The first period starts at `started_at` itself, not at
 * the midnight before it, so nothing that happened before the subscription started falls into it.
 * Throws `PeriodBeforeStart` when `at` precedes the anchor.
 */
export function periodContaining(input: ScheduleAt): Period {
  const full = fullPeriodContaining(input);
  const from = full.from.getTime() < input.anchor.getTime() ? input.anchor : full.from;
  return { from, to: full.to };
}

/** Start (a local midnight) of the whole period containing `at`. */
export function periodStart(input: ScheduleAt): Date {
  return fullPeriodContaining(input).from;
}

/**
 * The first boundary strictly after `at`. Before the subscription starts, that is `started_at`
 * (when a pending subscription's first period opens).
 */
export function nextBoundary(input: ScheduleAt): Date {
  validateSchedule(input);
  assertValidInstant(input.at, 'at');
  if (input.at.getTime() < input.anchor.getTime()) return input.anchor;
  return periodContaining(input).to;
}

/** Days in the whole period containing `at`: 7, 28 to 31, 89 to 92, 365 or 366. */
export function fullPeriodDays(input: ScheduleAt): number {
  const full = fullPeriodContaining(input);
  return countDays(full.from, full.to, input.timezone);
}

/**
 * Consecutive periods overlapping `[from, until)`, in order; the first may be partial (it is the
 * period containing `from`, or the first period when `from` precedes the start), the last may end
 * after `until`. They tile time: each `to` is the next `from`.
 */
export function listPeriods(input: BillingSchedule & { from: Date; until: Date }): Period[] {
  validateSchedule(input);
  assertValidInstant(input.from, 'from');
  assertValidInstant(input.until, 'until');
  const periods: Period[] = [];
  let cursor = input.from.getTime() < input.anchor.getTime() ? input.anchor : input.from;
  while (cursor.getTime() < input.until.getTime()) {
    const period = periodContaining({ ...input, at: cursor });
    periods.push(period);
    cursor = period.to;
  }
  return periods;
}

/**
 * Periods from `started_at` that have fully ended by `until`, in order: what a subscription started
 * in the past must bill at once, so that invoice numbers follow the periods.
 */
export function listEndedPeriods(input: BillingSchedule & { until: Date }): Period[] {
  return listPeriods({ ...input, from: input.anchor }).filter((period) => period.to.getTime() <= input.until.getTime());
}
