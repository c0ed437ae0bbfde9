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
import { BillingAmountDueCents, BillingStatus } from '../src/temporal/search-attributes';
import { localTime, showDetails } from './details';
import {
  paymentOutcomeSignal,
  paymentRequestStateQuery,
  requestAmountDueCents,
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
/** Executions started before: an attempt that found a new amount left to pay did not upsert it. */
const AMOUNT_DUE_ATTRIBUTE = 'payment-request-amount-due-attribute';

export async function paymentRequestWorkflow(input: PaymentRequestWorkflowInput): Promise<{ status: string }> {
  useClock(input.clock);
  let status = 'pending';
  let attempts = input.attemptsMade ?? 0;
  let nextAttemptAt: number | null = null;
  const outcomes = new Map<string, string>();
  /** Attempts' payments whose checkout is open (or whose charge is under way), as their workflows said. */
  const opened = new Set<string>();
  let invoicesChanged = false;
  /** What the request's invoices leave to pay, in cents, as last seen (executions started with labels). */
  let amountDue: number | null = input.labels?.amountCents ?? null;
  const ofMax = `of ${input.maxAttempts}`;

  /** `Payment request pending: 1 of 3 attempt(s) made, 1100 cents USD left to pay (2 invoice(s)).` */
  const stateLine = () => {
    const left = input.labels && amountDue !== null ? `, ${amountDue} cents ${input.labels.currency} left to pay` : '';
    const invoices = input.labels ? ` (${input.labels.invoiceNumbers.length} invoice(s))` : '';
    return `Payment request ${status}: ${attempts} ${ofMax} attempt(s) made${left}${invoices}.`;
  };
  /** Executions started with labels keep the amount due current in the status upserts. */
  const amountDueAttribute = (end: string) =>
    input.labels && amountDue !== null ? [{ key: BillingAmountDueCents, value: requestAmountDueCents(end, amountDue) }] : [];

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
    await acts.finishPaymentRequestActivity.executeWithOptions({ summary: `finish: ${end}` }, [input.paymentRequestId, end, at()]);
    upsertSearchAttributes([{ key: BillingStatus, value: end }, ...amountDueAttribute(end)]);
  };
  /** Something paid or voided an invoice meanwhile: with nothing left, the request is done. */
  const nothingLeft = async () => {
    if (!invoicesChanged) return false;
    invoicesChanged = false;
    return !(await acts.paymentRequestHasSomethingLeftActivity.executeWithOptions(
      { summary: 'look at what its invoices leave to pay (one was paid or voided otherwise)' },
      [input.paymentRequestId],
    ));
  };

  while (status === 'pending') {
    attempts += 1;
    const attempt = await acts.startPaymentRequestAttemptActivity.executeWithOptions(
      { summary: `attempt ${attempts} ${ofMax}: a payment of what is left to pay` },
      [input.paymentRequestId, attempts, at()],
    );
    if (input.labels && attempt.amountCents !== undefined && attempt.amountCents !== amountDue) {
      amountDue = attempt.amountCents;
      if (patched(AMOUNT_DUE_ATTRIBUTE)) upsertSearchAttributes([{ key: BillingAmountDueCents, value: amountDue }]);
    }
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
      if (outcome === null) {
        showDetails(stateLine(), `no timer: waiting for payment ${paymentId} (attempt ${attempts} ${ofMax}) to open its checkout`);
        await waitForAnswer(() => opened.has(paymentId) || outcomes.has(paymentId));
      }
      await acts.recordPaymentRequestAttemptActivity.executeWithOptions({ summary: `record attempt ${attempts} (payment ${paymentId})` }, [
        input.paymentRequestId,
        paymentId,
        attempts,
        at(),
      ]);
    }
    if (outcome === null && attempt.paymentId !== null) {
      const paymentId = attempt.paymentId;
      const waitingFor = `no timer: waiting for the outcome of payment ${paymentId} (attempt ${attempts} ${ofMax}), or an invoice paid or voided otherwise`;
      showDetails(stateLine(), waitingFor);
      await waitFor(() => outcomes.has(paymentId) || invoicesChanged);
      while (!outcomes.has(paymentId)) {
        if (await nothingLeft()) break;
        showDetails(stateLine(), waitingFor);
        await waitFor(() => outcomes.has(paymentId) || invoicesChanged);
      }
      outcome = outcomes.get(paymentId) ?? 'succeeded';
    }
    if (outcome === 'succeeded') {
      await finish('succeeded');
      break;
    }
    if (attempts >= input.maxAttempts) {
      await acts.afterFailedPaymentRequestAttemptActivity.executeWithOptions({ summary: `fail the request after ${attempts} attempt(s)` }, [
        input.paymentRequestId,
        null,
        at(),
      ]);
      status = 'failed';
      upsertSearchAttributes([{ key: BillingStatus, value: status }, ...amountDueAttribute(status)]);
      break;
    }
    nextAttemptAt = now() + input.daysBetweenAttempts * DAY_MS;
    const next = `attempt ${attempts + 1} ${ofMax}`;
    await acts.afterFailedPaymentRequestAttemptActivity.executeWithOptions({ summary: `schedule ${next} at ${localTime(nextAttemptAt)}` }, [
      input.paymentRequestId,
      new Date(nextAttemptAt).toISOString(),
      at(),
    ]);
    for (;;) {
      showDetails(
        stateLine(),
        `waiting until ${localTime(nextAttemptAt)} for ${next} (attempt ${attempts} failed), or an invoice paid or voided otherwise`,
      );
      const waited = await waitUntil(nextAttemptAt, () => invoicesChanged, next);
      if (waited === 'elapsed') break;
      if (await nothingLeft()) {
        await finish('succeeded');
        break;
      }
    }
    nextAttemptAt = null;
  }
  showDetails(stateLine(), `nothing: the request is ${status}`);
  markFinished();
  return { status };
}
