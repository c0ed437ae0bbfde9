/**
 * invoiceWorkflow: one invoice's life (`invoice/<id>`), following the specification's invoice
 * state table and billing-rules.md (Invoice life).
 *
 * Timers: the grace period (a draft is finalized `invoice_grace_period` days after creation, at
 *   once when it is 0); the payment due date (unpaid at the end of the due date: overdue). Both
 *   instants are src/domain/invoice-due.ts's.
 * Updates (answer the API synchronously; the validators refuse a wrong state before anything is
 *   written): finalize, pay, void, delete (drafts), refresh (drafts).
 * Signals: settlementRecorded (a payment or credit landed: paid once settlements cover the total).
 * Query: state. (All defined in invoice.messages.ts, with the start options.)
 * Ends when the invoice is paid, voided or deleted.
 */
import {
  ApplicationFailure,
  condition,
  proxyActivities,
  setHandler,
  allHandlersFinished,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { gracePeriodEnd } from '../src/domain/invoice-due';
import { type InvoiceResource } from '../src/resources/invoice';
import { BillingAmountDueCents, BillingInvoiceNumber, BillingStatus } from '../src/temporal/search-attributes';
import { localTime, showDetails } from './details';
import {
  amountDueCents,
  deleteInvoiceUpdate,
  finalizeInvoiceAtUpdate,
  finalizeInvoiceUpdate,
  invoiceStateQuery,
  payInvoiceUpdate,
  refreshInvoiceUpdate,
  settlementRecordedSignal,
  voidInvoiceUpdate,
  type InvoiceWorkflowInput,
  type InvoiceWorkflowStatus as Status,
} from './invoice.messages';
import { markFinished, nowIso, useClock, waitFor, waitUntil } from './wait';
import { stepLock } from './exclusive';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

function refuse(message: string): never {
  throw ApplicationFailure.nonRetryable(message, 'InvalidTransition');
}

export async function invoiceWorkflow(input: InvoiceWorkflowInput): Promise<{ status: Status }> {
  // Handlers are registered before the first await, so that an update sent right after the start
  // finds them; the state they validate against comes with the input.
  useClock(input.clock);
  let status: Status = input.status ?? 'draft';
  let overdue = input.paymentOverdue ?? false;
  let overdueAt: number | null = input.overdueAt ? Date.parse(input.overdueAt) : null;
  let settlementPending = false;
  // A finalization's activity writes the record before this workflow learns its result: while it
  // runs, the API already shows the invoice finalized, so pay and void are accepted then and
  // judged again once it is done (under the step lock they queue behind it).
  let finalizing = false;
  const { exclusive } = stepLock();

  let number = input.labels?.number ?? input.invoiceId;
  let totalCents = input.labels?.totalCents ?? null;

  function apply(result: { invoice: InvoiceResource; deleted?: boolean; overdueAt?: string | null }): InvoiceResource {
    status = result.deleted ? 'deleted' : result.invoice.status;
    overdue = result.invoice.payment_overdue;
    if (result.overdueAt !== undefined) overdueAt = result.overdueAt ? Date.parse(result.overdueAt) : null;
    number = result.invoice.number;
    totalCents = Math.round(Number(result.invoice.total));
    // Executions started with labels keep the number and the amount due current in the same upsert.
    upsertSearchAttributes([
      { key: BillingStatus, value: status },
      ...(input.labels
        ? [
            { key: BillingInvoiceNumber, value: number },
            { key: BillingAmountDueCents, value: amountDueCents(status, totalCents) },
          ]
        : []),
    ]);
    return result.invoice;
  }
  const stateLine = () =>
    `Invoice ${number} ${status}${overdue ? ' (payment overdue)' : ''}${totalCents !== null ? `, total ${totalCents} cents${input.labels ? ` ${input.labels.currency}` : ''}` : ''}.`;

  const now = nowIso;
  /** `at`: the instant the step acts for (a timer's due instant, or now for a request). */
  const finalize = (at = now()) =>
    exclusive(async () => {
      if (status !== 'draft') return await acts.readInvoice(input.invoiceId);
      finalizing = true;
      try {
        return apply(
          await acts.finalizeInvoiceActivity.executeWithOptions({ summary: `finalize ${number} at ${at}` }, [input.invoiceId, at]),
        );
      } finally {
        finalizing = false;
      }
    });
  /** Pay and void: from finalized, or from a finalization in flight (checked again when it is done). */
  const onceFinalized = (action: 'paid' | 'voided', step: () => Promise<{ invoice: InvoiceResource }>) => {
    const check = () => {
      if (status !== 'finalized') refuse(`Only a finalized invoice can be ${action} (this one is ${status})`);
    };
    return {
      run: () =>
        exclusive(async () => {
          check();
          return apply(await step());
        }),
      validator: () => {
        if (!(status === 'draft' && finalizing)) check();
      },
    };
  };
  const pay = onceFinalized('paid', () => acts.payInvoiceActivity(input.invoiceId, now()));
  const voidIt = onceFinalized('voided', () => acts.voidInvoiceActivity(input.invoiceId, now()));

  setHandler(invoiceStateQuery, () => ({
    status,
    paymentOverdue: overdue,
    overdueAt: overdueAt ? new Date(overdueAt).toISOString() : null,
  }));
  setHandler(settlementRecordedSignal, () => {
    settlementPending = true;
  });
  setHandler(finalizeInvoiceUpdate, () => finalize(), {
    validator: () => {
      if (status !== 'draft') refuse(`Only a draft invoice can be finalized (this one is ${status})`);
    },
  });
  setHandler(finalizeInvoiceAtUpdate, (at) => finalize(at), {
    validator: (_at) => {
      if (status !== 'draft') refuse(`Only a draft invoice can be finalized (this one is ${status})`);
    },
  });
  setHandler(payInvoiceUpdate, pay.run, { validator: pay.validator });
  setHandler(voidInvoiceUpdate, voidIt.run, { validator: voidIt.validator });
  setHandler(deleteInvoiceUpdate, () => exclusive(async () => apply(await acts.deleteInvoiceActivity(input.invoiceId, now()))), {
    validator: () => {
      if (status !== 'draft') refuse(`Only a draft invoice can be deleted (this one is ${status})`);
    },
  });
  setHandler(refreshInvoiceUpdate, () => exclusive(async () => apply(await acts.refreshInvoiceActivity(input.invoiceId, now()))), {
    validator: () => {
      if (status !== 'draft') refuse(`Only a draft invoice can be refreshed (this one is ${status})`);
    },
  });

  // Draft: finalized when the grace period ends (at once when it is 0), or earlier on request.
  if (status === 'draft') {
    const graceEnd = gracePeriodEnd(new Date(input.createdAt), input.gracePeriodDays).getTime();
    showDetails(
      stateLine(),
      `waiting for the grace period end ${localTime(graceEnd)} to finalize it (or a finalize, delete or refresh request)`,
    );
    const waited = await waitUntil(graceEnd, () => status !== 'draft', 'grace period end: finalize');
    if (waited === 'elapsed' && status === 'draft') await finalize(new Date(graceEnd).toISOString());
  }

  // Finalized: paid, voided, or overdue at the end of the due date.
  while (status === 'finalized') {
    const settledOrChanged = () => settlementPending || status !== 'finalized';
    if (!overdue && overdueAt !== null) {
      showDetails(stateLine(), `waiting for a payment, or for the end of the due date ${localTime(overdueAt)} to mark it overdue`);
      const waited = await waitUntil(overdueAt, settledOrChanged, 'end of the due date: overdue');
      if (waited === 'elapsed' && status === 'finalized' && !overdue) {
        const at = new Date(overdueAt).toISOString();
        await exclusive(async () =>
          apply(await acts.markInvoiceOverdueActivity.executeWithOptions({ summary: `mark ${number} overdue` }, [input.invoiceId, at])),
        );
      }
    } else {
      showDetails(stateLine(), 'no timer: waiting for a payment, a credit or a void');
      await waitFor(settledOrChanged);
    }
    if (settlementPending && status === 'finalized') {
      settlementPending = false;
      await exclusive(async () =>
        apply(
          await acts.settleInvoiceActivity.executeWithOptions({ summary: `record the settlement of ${number}` }, [input.invoiceId, now()]),
        ),
      );
    }
  }
  showDetails(stateLine(), 'nothing: the invoice is settled');
  markFinished();
  await condition(allHandlersFinished);
  return { status };
}
