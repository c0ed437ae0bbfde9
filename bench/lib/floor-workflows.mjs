// The Temporal floor of a billing day (bench/billing-day.mjs --floor): the shape of one subscription
// boundary with no database and no billing. Bundled by the bench's own worker, never by the service.
//   floorSubscription: its first task (at T0, after a delayed start) runs one local activity that
//     starts the invoice's workflow, then starts the next period's timer (as subscriptionWorkflow:
//     a marker and a timer);
//   invoiceWorkflow: the service's invoice workflow type (the bench starts it through the
//     service's startInvoiceWorkflow, on the floor's own task queue); its first task starts its
//     overdue timer, as the service's does for a finalized invoice, and tells the bench through a
//     sink (no history event, no server call).
import { proxyLocalActivities, proxySinks, sleep } from '@temporalio/workflow';

const { startFloorInvoice } = proxyLocalActivities({ startToCloseTimeout: '1 minute' });
const { floor } = proxySinks();

export async function floorSubscription(input) {
  await startFloorInvoice(input);
  await sleep('30 days');
}

export async function invoiceWorkflow() {
  floor.invoiceStarted();
  await sleep('30 days');
}
