/**
 * paymentWorkflow: one payment's life (`payment/<id>`), following the specification's payment
 * state table (api-contract.md, Payments).
 *
 * Timer: the checkout's `expires_at` (a payment still pending then is canceled, and provider_a's
 *   session expired at the provider).
 * Signal: providerEvent (a verified provider notification, stored once by the webhook route).
 * Updates (the validators refuse a wrong state before anything is written: 400
 *   invalid_state_transition): checkout (creates the provider's checkout once), completeRedirect
 *   (provider_c's flow came back), markPaid, refund, delete.
 * Query: state. (All defined in payment.messages.ts.)
 *
 * A run ends whenever the payment rests (succeeded, failed, canceled, refunded): the API reaches a
 * payment with update-with-start and signal-with-start, so a refund months later or a late
 * notification starts a short run from the payment's record instead of keeping a workflow open
 * per payment forever. A succeeded payment's settlement is announced to the invoice's workflow.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PaymentStepResult } from '../activities/payments';
import type { PaymentStatus } from '../src/db/models/payment';
import type { ProviderNotification } from '../src/payments/providers/types';
import type { PaymentResource } from '../src/resources/payment';
import { BillingAmountDueCents, BillingStatus } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import { localTime, showDetails } from './details';
import { stepLock } from './exclusive';
import { settlementRecordedSignal } from './invoice.messages';
import { paymentOutcomeSignal } from './payment-request.messages';
import {
  checkoutPaymentUpdate,
  completeRedirectUpdate,
  deletePaymentUpdate,
  markPaidUpdate,
  PAYMENT_INVALID_TRANSITION,
  PAYMENT_PROVIDER_ERROR,
  paymentAmountDueCents,
  paymentLabel,
  paymentStateQuery,
  providerEventSignal,
  refundPaymentUpdate,
  type PaymentWorkflowInput,
} from './payment.messages';
import { markFinished, nowIso, useClock, waitFor, waitUntil } from './wait';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Provider calls: a few attempts, then the provider's answer is the payment's (a checkout that cannot be made fails). */
const providerActs = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

function refuse(message: string): never {
  throw ApplicationFailure.nonRetryable(message, PAYMENT_INVALID_TRANSITION);
}

const OPEN: readonly PaymentStatus[] = ['pending', 'processing'];
/** Histories from before: a request's payment told it only its outcome. */
const TELL_REQUEST_CHECKOUT_OPEN = 'payment-tells-request-checkout-open';
const FINAL: readonly PaymentStatus[] = ['succeeded', 'failed', 'canceled'];

/** Why a provider call failed, for the payment's failure_reason and the API's 502. */
function reasonOf(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

export async function paymentWorkflow(input: PaymentWorkflowInput): Promise<{ status: PaymentStatus }> {
  useClock(input.clock);
  let status: PaymentStatus = input.status;
  let deleted = false;
  let expiresAt: number | null = input.expiresAt ? Date.parse(input.expiresAt) : null;
  let checkoutCreated = input.checkoutCreated;
  let checkoutError: string | null = null;
  const events: ProviderNotification[] = [];
  const seen = new Set<string>();
  const { exclusive } = stepLock();
  const label = paymentLabel(input);
  const provider = input.labels?.provider ?? 'the provider';
  const stateLine = () => `${label} ${status}${checkoutCreated ? ' (checkout open)' : ''}.`;

  async function apply(step: PaymentStepResult): Promise<PaymentResource> {
    const changed = step.payment.status !== status;
    status = step.payment.status;
    if (step.payment.expires_at) expiresAt = Date.parse(step.payment.expires_at);
    // Runs started with labels keep the amount due current in the same upsert.
    if (changed) {
      upsertSearchAttributes([
        { key: BillingStatus, value: status },
        ...(input.labels ? [{ key: BillingAmountDueCents, value: paymentAmountDueCents(status, input.labels.amountCents) }] : []),
      ]);
    }
    if (step.settled) await announceSettlement(step.settledInvoiceIds ?? [input.invoiceId]);
    if (changed && input.paymentRequestId && FINAL.includes(status)) await tellRequest(input.paymentRequestId);
    return step.payment;
  }

  const announced = new Set<string>();
  /** Each invoice's workflow settles its invoice (paid once its settlements cover it); one that ended has nothing left to settle. */
  async function announceSettlement(invoiceIds: string[]): Promise<void> {
    for (const invoiceId of invoiceIds) {
      if (announced.has(invoiceId)) continue;
      announced.add(invoiceId);
      try {
        await getExternalWorkflowHandle(workflowIds.invoice(invoiceId)).signal(settlementRecordedSignal);
      } catch {
        // Not running: the invoice was paid, voided or is handled by the reconciler.
      }
    }
  }

  /** A payment request's attempt: its workflow waits for the checkout and for the outcome. */
  async function tellRequest(paymentRequestId: string): Promise<void> {
    try {
      await getExternalWorkflowHandle(workflowIds.paymentRequest(paymentRequestId)).signal(paymentOutcomeSignal, {
        paymentId: input.paymentId,
        status,
      });
    } catch {
      // The request ended meanwhile (its invoices were paid otherwise).
    }
  }

  const now = nowIso;

  const ensureCheckout = () =>
    exclusive(async () => {
      if (checkoutCreated || status !== 'pending')
        return await acts.readPaymentActivity.executeWithOptions({ summary: 'read the payment' }, [input.paymentId]);
      try {
        const payment = await apply(
          await providerActs.createPaymentCheckoutActivity.executeWithOptions({ summary: `open the checkout at ${provider}` }, [
            input.paymentId,
            now(),
          ]),
        );
        checkoutCreated = true;
        // A payment request's attempt waits for its checkout (an outcome already told it otherwise).
        if (input.paymentRequestId && OPEN.includes(status) && patched(TELL_REQUEST_CHECKOUT_OPEN)) {
          await tellRequest(input.paymentRequestId);
        }
        return payment;
      } catch (err) {
        checkoutError = reasonOf(err);
        await apply(
          await acts.failPaymentCheckoutActivity.executeWithOptions({ summary: `record the checkout ${provider} refused` }, [
            input.paymentId,
            checkoutError,
            now(),
          ]),
        );
        throw ApplicationFailure.nonRetryable(`the provider refused the checkout: ${checkoutError}`, PAYMENT_PROVIDER_ERROR);
      }
    });

  setHandler(paymentStateQuery, () => ({ status, expiresAt: expiresAt ? new Date(expiresAt).toISOString() : null }));
  setHandler(providerEventSignal, (notification) => {
    if (seen.has(notification.eventKey)) return;
    seen.add(notification.eventKey);
    events.push(notification);
  });
  setHandler(checkoutPaymentUpdate, async () => {
    const payment = await ensureCheckout();
    // The checkout failed in the main loop's attempt while this update waited for it.
    if (checkoutError) throw ApplicationFailure.nonRetryable(`the provider refused the checkout: ${checkoutError}`, PAYMENT_PROVIDER_ERROR);
    return payment;
  });
  setHandler(
    completeRedirectUpdate,
    (flowId) =>
      exclusive(async () =>
        apply(
          await providerActs.completeRedirectActivity.executeWithOptions({ summary: `complete the redirect flow at ${provider}` }, [
            input.paymentId,
            flowId,
            now(),
          ]),
        ),
      ),
    {
      validator: (_flowId) => {
        if (!OPEN.includes(status)) refuse(`Only a pending payment's flow can be completed (this one is ${status})`);
      },
    },
  );
  setHandler(
    markPaidUpdate,
    (command) =>
      exclusive(async () => {
        // Checked again under the lock: an expiry or a notification may have moved it meanwhile.
        if (!['pending', 'processing', 'failed'].includes(status))
          refuse(`Only a pending, processing or failed payment can be marked paid (this one is ${status})`);
        return apply(await acts.markPaymentPaidActivity.executeWithOptions({ summary: 'mark paid' }, [input.paymentId, command, now()]));
      }),
    {
      validator: (_command) => {
        if (!['pending', 'processing', 'failed'].includes(status))
          refuse(`Only a pending, processing or failed payment can be marked paid (this one is ${status})`);
      },
    },
  );
  setHandler(
    refundPaymentUpdate,
    (command) =>
      exclusive(async () => {
        if (status !== 'succeeded') refuse(`Only a succeeded payment can be refunded (this one is ${status})`);
        try {
          const what = command.amountCents === null ? 'what is left' : `${command.amountCents} cents`;
          return await apply(
            await providerActs.refundPaymentActivity.executeWithOptions({ summary: `refund ${what} at ${provider}` }, [
              input.paymentId,
              command.amountCents,
              now(),
            ]),
          );
        } catch (err) {
          if (err instanceof ActivityFailure)
            throw ApplicationFailure.nonRetryable(`the provider refused the refund: ${reasonOf(err)}`, PAYMENT_PROVIDER_ERROR);
          throw err;
        }
      }),
    {
      validator: (_command) => {
        if (status !== 'succeeded') refuse(`Only a succeeded payment can be refunded (this one is ${status})`);
      },
    },
  );
  setHandler(
    deletePaymentUpdate,
    () =>
      exclusive(async () => {
        if (status !== 'pending' || deleted) refuse(`Only a pending payment can be deleted (this one is ${status})`);
        const payment = await apply(await acts.deletePaymentActivity.executeWithOptions({ summary: 'delete' }, [input.paymentId, now()]));
        deleted = true;
        return payment;
      }),
    {
      validator: () => {
        if (status !== 'pending' || deleted) refuse(`Only a pending payment can be deleted (this one is ${status})`);
      },
    },
  );

  // The checkout first (an API checkout request waits for it through the update).
  if (status === 'pending' && !checkoutCreated) await ensureCheckout().catch(() => undefined);

  for (;;) {
    while (events.length > 0) {
      const notification = events.shift()!;
      await exclusive(async () =>
        apply(
          await acts.applyProviderNotificationActivity.executeWithOptions(
            { summary: `apply ${provider}'s ${notification.eventType} (${notification.outcome ?? 'no outcome'})` },
            [input.paymentId, notification, now()],
          ),
        ),
      );
    }
    if (status === 'pending' && expiresAt !== null) {
      const expiry = expiresAt;
      showDetails(stateLine(), `waiting for ${provider}'s notification, or the checkout expiry ${localTime(expiry)} to cancel the payment`);
      const waited = await waitUntil(expiry, () => events.length > 0 || status !== 'pending', 'checkout expiry: cancel');
      if (waited === 'elapsed' && status === 'pending') {
        const at = new Date(expiry).toISOString();
        await exclusive(async () =>
          apply(
            await acts.expirePaymentActivity.executeWithOptions({ summary: `expire the checkout (${localTime(expiry)})` }, [
              input.paymentId,
              at,
            ]),
          ),
        );
      }
    } else if (OPEN.includes(status)) {
      showDetails(stateLine(), `no timer: waiting for ${provider}'s notification (or a command: mark paid, delete)`);
      await waitFor(() => events.length > 0 || !OPEN.includes(status));
    } else {
      // Resting: end once no command is running and no notification waits (one that arrived
      // meanwhile is handled first; a later one starts the next run). Through waitFor, so that a
      // test clock's advance (itself a running handler) sees this workflow caught up meanwhile.
      showDetails(stateLine(), 'nothing: the payment rests; this run ends (a later command or notification starts another)');
      await waitFor(allHandlersFinished);
      if (events.length === 0 && !OPEN.includes(status)) break;
    }
  }
  markFinished();
  return { status };
}
