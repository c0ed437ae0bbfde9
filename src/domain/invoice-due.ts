import { DateTime } from 'luxon';
import { localDate } from './periods';

/**
 * When an invoice falls due (billing-rules.md, Invoice life), in the customer's time zone (else the
 * organization's):
 *
 *   created ── grace period ──> finalized: issuing date ── net_payment_term days ──> due date
 *                                                            overdue at the end of the due date
 *
 * - A draft is finalized when its grace period ends: `invoice_grace_period` days of 24 hours after
 *   its creation (a timer, not local dates: over a DST change it is still whole 24-hour days).
 * - The issuing date is the local date of the finalization; the payment due date is that date plus
 *   `net_payment_term` calendar days (0: due the day it is issued).
 * - Unpaid at the end of its due date, the invoice is overdue: at the local midnight that starts
 *   the next date (23 or 25 hours after the due date's own midnight on a DST day).
 */

const DAY_MS = 86_400_000;

/** The instant a draft's grace period ends (the draft is finalized then; at once when 0). */
export function gracePeriodEnd(createdAt: Date, gracePeriodDays: number): Date {
  return new Date(createdAt.getTime() + gracePeriodDays * DAY_MS);
}

export interface InvoiceDueDates {
  /** YYYY-MM-DD, local. */
  issuingDate: string;
  /** YYYY-MM-DD, local. */
  paymentDueDate: string;
}

/** The issuing and payment due dates of an invoice finalized at `finalizedAt`. */
export function invoiceDueDates(finalizedAt: Date, netPaymentTerm: number, timezone: string): InvoiceDueDates {
  const issuingDate = localDate(finalizedAt, timezone);
  const paymentDueDate = DateTime.fromISO(issuingDate, { zone: timezone }).plus({ days: netPaymentTerm }).toISODate()!;
  return { issuingDate, paymentDueDate };
}

/** The instant an invoice unpaid on its due date becomes overdue (ISO, UTC): the end of that date. */
export function overdueAt(paymentDueDate: string, timezone: string): string | null {
  return DateTime.fromISO(paymentDueDate, { zone: timezone }).plus({ days: 1 }).toUTC().toISO();
}
