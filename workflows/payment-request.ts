/**
 * paymentRequestWorkflow: one payment request's attempts (`payment-request/<id>`), api-contract.md
 * "Dunning campaigns and payment requests".
 *
 * Each attempt is a payment of what the request's open invoices leave to pay (a charge of the
 * customer's saved method, else a checkout), made through the payment's own workflow, which
 * signals back (paymentOutcome) once its checkout is open and when it has an outcome. Success: the request is succeeded (the payment settled
 * every invoice). Failure: another attempt `days_between_attempts` days later (a timer, on the
 * customer's test clock when there is one), until `max_attempts`; then failed.
 * Signals: paymentOutcome, invoicesChanged (an invoice paid or voided meanwhile leaves the request;
 * with nothing left it ends succeeded). Query: state.
 */
import { patched, proxyActivities, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { BillingStatus } from '../src/temporal/search-attributes';
import {
  paymentOutcomeSignal,
  paymentRequestStateQuery,
  requestInvoicesChangedSignal,
  type PaymentRequestWorkflowInput,
} from './payment-request.messages';
import { markFinished, now, useClock, waitFor, waitForAnswer, waitUntil } from './wait';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

const DAY_MS = 86_400_000;
/** Histories from before: the attempt's step waited for the checkout and recorded it itself. */
const ATTEMPT_NOT_WAITING = 'payment-request-attempt-not-waiting';
const FINAL = new Set(['succeeded', 'failed', 'canceled', 'refunded']);

export async function paymentRequestWorkflow(input: PaymentRequestWorkflowInput): Promise<{ status: string }> {
  useClock(input.clock);
  let status = 'pending';
  let attempts = input.attemptsMade ?? 0;
  let nextAttemptAt: number | null = null;
  const outcomes = new Map<string, string>();
  /** Attempts' payments whose checkout is open (or whose charge is under way), as their workflows said. */
  const opened = new Set<string>();
  let invoicesChanged = false;

  setHandler(paymentRequestStateQuery, () => ({
    status,
    attempts,
    nextAttemptAt: nextAttemptAt === null ? null : new Date(nextAttemptAt).toISOString(),
  }));
  setHandler(paymentOutcomeSignal, ({ paymentId, status: outcome }) => {
    if (FINAL.has(outcome)) outcomes.set(paymentId, outcome);
    else opened.add(paymentId);
  });
  setHandler(requestInvoicesChangedSignal, () => {
    invoicesChanged = true;
  });

  const at = () => new Date(now()).toISOString();
  const finish = async (end: 'succeeded' | 'failed') => {
    status = end;
    await acts.finishPaymentRequestActivity(input.paymentRequestId, end, at());
    upsertSearchAttributes([{ key: BillingStatus, value: end }]);
  };
  /** Something paid or voided an invoice meanwhile: with nothing left, the request is done. */
  const nothingLeft = async () => {
    if (!invoicesChanged) return false;
    invoicesChanged = false;
    return !(await acts.paymentRequestHasSomethingLeftActivity(input.paymentRequestId));
  };

  while (status === 'pending') {
    attempts += 1;
    const attempt = await acts.startPaymentRequestAttemptActivity(input.paymentRequestId, attempts, at());
    if (attempt.done) {
      status = 'succeeded';
      break;
    }
    let outcome = attempt.paymentStatus !== null && FINAL.has(attempt.paymentStatus) ? attempt.paymentStatus : null;
    // The attempt's step starts the payment's workflow without waiting for its checkout (holding an
    // activity slot while another activity opens it could starve the worker on a busy day): the
    // payment's workflow says when the checkout is open, then the attempt is recorded.
    if (attempt.paymentId !== null && patched(ATTEMPT_NOT_WAITING)) {
      const paymentId = attempt.paymentId;
      if (outcome === null) await waitForAnswer(() => opened.has(paymentId) || outcomes.has(paymentId));
      await acts.recordPaymentRequestAttemptActivity(input.paymentRequestId, paymentId, attempts, at());
    }
    if (outcome === null && attempt.paymentId !== null) {
      const paymentId = attempt.paymentId;
      await waitFor(() => outcomes.has(paymentId) || invoicesChanged);
      while (!outcomes.has(paymentId)) {
        if (await nothingLeft()) break;
        await waitFor(() => outcomes.has(paymentId) || invoicesChanged);
      }
      outcome = outcomes.get(paymentId) ?? 'succeeded';
    }
    if (outcome === 'succeeded') {
      await finish('succeeded');
      break;
    }
    if (attempts >= input.maxAttempts) {
      await acts.afterFailedPaymentRequestAttemptActivity(input.paymentRequestId, null, at());
      status = 'failed';
      upsertSearchAttributes([{ key: BillingStatus, value: status }]);
      break;
    }
    nextAttemptAt = now() + input.daysBetweenAttempts * DAY_MS;
    await acts.afterFailedPaymentRequestAttemptActivity(input.paymentRequestId, new Date(nextAttemptAt).toISOString(), at());
    for (;;) {
      const waited = await waitUntil(nextAttemptAt, () => invoicesChanged);
      if (waited === 'elapsed') break;
      if (await nothingLeft()) {
        await finish('succeeded');
        break;
      }
    }
    nextAttemptAt = null;
  }
  markFinished();
  return { status };
}
