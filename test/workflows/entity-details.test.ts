// Issue 18, "Temporal UI": for each entity type, the workflow started through the API is found
// through the Temporal API by what a support ticket carries (the customer's external id; the
// organization for the per-organization campaigns and clocks), and its current details (what
// `temporal workflow metadata` and the UI show) name the next timer and why. On the run's Temporal
// dev server (its visibility answers list queries), with a worker and the real activities.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerResource } from '../../src/resources/customer';
import type { DunningCampaignResource } from '../../src/resources/dunning-campaign';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentRequestResource } from '../../src/resources/payment-request';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { WalletResource } from '../../src/resources/wallet';
import {
  BillingAmountDueCents,
  BillingCustomerExternalId,
  BillingInvoiceNumber,
  BillingStatus,
  type BillingEntityTypeValue,
} from '../../src/temporal/search-attributes';
import { eventually, injectAs, ok, type Method } from '../support/http';
import { finalizedOneOff, manualOrganization } from '../support/payment-fixtures';
import { notifyManual } from '../support/providers/manual-notifier';
import { startReceiver, type Receiver } from '../support/receiver';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { bundleWorkflows } from '../support/temporal';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let receiver: Receiver;
let manualWebhookUrl: string;
const SECRET = 'manual_secret_for_entity_details';

beforeAll(async () => {
  stack = await createTestStack();
  await stack.app.listen({ host: '127.0.0.1', port: 0 });
  manualWebhookUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}/v1/payments/webhook/manual`;
  [worker, receiver] = await Promise.all([startStackWorker(stack), startReceiver()]);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await stack?.close();
});

const call = (org: TestOrganization, method: Method, url: string, payload?: unknown) => injectAs(stack.app, org, method, url, payload);
const uid = (prefix: string) => `${prefix}_${randomUUID()}`;

async function newCustomer(org: TestOrganization, fields: Record<string, unknown> = {}): Promise<CustomerResource> {
  return ok<CustomerResource>(
    await call(org, 'POST', '/v1/customers', { external_id: uid('cus'), currency: 'USD', timezone: 'UTC', ...fields }),
    201,
  );
}

/** The ids of the workflows a visibility query finds, once it finds some (visibility is eventually consistent). */
async function found(query: string): Promise<string[]> {
  return eventually(
    async () => {
      worker.assertAlive();
      const ids: string[] = [];
      for await (const wf of stack.temporal.client.workflow.list({ query })) ids.push(wf.workflowId);
      return ids.length > 0 ? ids.sort() : undefined;
    },
    20_000,
    `workflows for ${query}`,
  );
}

/** What an operator types with the external id a support ticket carries. */
const byCustomer = (externalId: string, type: BillingEntityTypeValue) =>
  found(`BillingCustomerExternalId = '${externalId}' AND BillingEntityType = '${type}'`);
const byOrganization = (organizationId: string, type: BillingEntityTypeValue) =>
  found(`BillingOrganizationId = '${organizationId}' AND BillingEntityType = '${type}'`);

/** Every workflow whose details were read, for the replay at the end. */
const seen = new Set<string>();

/** The workflow's current details (the SDK's built-in metadata query), once they match. */
async function detailsMatching(workflowId: string, pattern: RegExp): Promise<string> {
  seen.add(workflowId);
  const handle = stack.temporal.client.workflow.getHandle(workflowId);
  let last = '';
  return eventually(
    async () => {
      worker.assertAlive();
      const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      last = metadata.currentDetails ?? '';
      return pattern.test(last) ? last : undefined;
    },
    20_000,
    `details of ${workflowId} matching ${String(pattern)}`,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; last details: ${last}`);
  });
}

const describeWorkflow = (workflowId: string): Promise<WorkflowExecutionDescription> =>
  stack.temporal.client.workflow.getHandle(workflowId).describe();

const DAY_TIME = '\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2} UTC';

describe('every entity workflow is found by its customer and says what it waits for', () => {
  it('subscription: the period end that invoices it', async () => {
    const org = await createOrganization(stack.app, { name: 'Details subscriptions', default_currency: 'USD', timezone: 'UTC' });
    const customer = await newCustomer(org);
    const plan = ok<PlanResource>(
      await call(org, 'POST', '/v1/plans', { code: uid('plan'), name: 'Pro', interval: 'monthly', amount_cents: 5000, currency: 'USD' }),
      201,
    );
    const sub = ok<SubscriptionResource>(
      await call(org, 'POST', '/v1/subscriptions', { external_id: uid('sub'), customer_id: customer.id, plan_id: plan.id }),
      201,
    );

    expect(await byCustomer(customer.external_id, 'subscription')).toEqual([`subscription/${sub.id}`]);
    const details = await detailsMatching(`subscription/${sub.id}`, /Next: waiting for the period end/);
    expect(details).toMatch(
      new RegExp(`^Subscription active on plan ${plan.code} .*\\nNext: waiting for the period end ${DAY_TIME} to invoice `),
    );
    expect(await (await describeWorkflow(`subscription/${sub.id}`)).staticSummary()).toBe(
      `Subscription ${sub.external_id} of customer ${customer.external_id}`,
    );
  });

  it('invoice and payment: the due date that makes it overdue; the checkout expiry that cancels the payment', async () => {
    const org = await manualOrganization(stack.app, 'Details payments', SECRET);
    const customer = await newCustomer(org, { net_payment_term: 30, payment_provider: 'manual' });
    const invoice: InvoiceResource = await finalizedOneOff(stack.app, org, customer.id, 4200);

    const [invoiceWorkflow] = await byCustomer(customer.external_id, 'invoice');
    expect(invoiceWorkflow).toBe(`invoice/${invoice.id}`);
    expect(await detailsMatching(invoiceWorkflow!, /Next:/)).toMatch(
      new RegExp(
        `^Invoice ${invoice.number} finalized, total 4200 cents USD\\.\\nNext: waiting for a payment, or for the end of the due date ${DAY_TIME} to mark it overdue$`,
      ),
    );

    const checkout = ok<{ payment_id: string }>(
      await call(org, 'POST', '/v1/payments/checkout', {
        invoice_id: invoice.id,
        provider: 'manual',
        success_url: 'https://shop.example/paid',
        cancel_url: 'https://shop.example/canceled',
      }),
    );
    const paymentWorkflow = `payment/${checkout.payment_id}`;
    expect(await byCustomer(customer.external_id, 'payment')).toEqual([paymentWorkflow]);
    expect(await found(`BillingInvoiceNumber = '${invoice.number}' AND BillingEntityType = 'payment'`)).toEqual([paymentWorkflow]);
    expect(await detailsMatching(paymentWorkflow, /Next:/)).toMatch(
      new RegExp(
        `^Payment of 4200 cents USD for invoice ${invoice.number} through manual pending \\(checkout open\\)\\.\\nNext: waiting for manual's notification, or the checkout expiry ${DAY_TIME} to cancel the payment$`,
      ),
    );
    const description = await describeWorkflow(paymentWorkflow);
    expect(description.typedSearchAttributes.get(BillingCustomerExternalId)).toBe(customer.external_id);
    expect(description.typedSearchAttributes.get(BillingInvoiceNumber)).toBe(invoice.number);
    expect(description.typedSearchAttributes.get(BillingAmountDueCents)).toBe(4200);
    expect(await description.staticSummary()).toBe(
      `Payment of 4200 cents USD for invoice ${invoice.number} through manual (customer ${customer.external_id})`,
    );

    // Paid: the amount due follows the status (the workflow's upsert), and the run ends.
    expect((await notifyManual(manualWebhookUrl, SECRET, { payment_id: checkout.payment_id, status: 'succeeded' })).status).toBe(200);
    await stack.temporal.client.workflow.getHandle(paymentWorkflow).result();
    const paid = await describeWorkflow(paymentWorkflow);
    expect(paid.typedSearchAttributes.get(BillingStatus)).toBe('succeeded');
    expect(paid.typedSearchAttributes.get(BillingAmountDueCents)).toBe(0);
  });

  it('wallet: the expiration that terminates it', async () => {
    const org = await createOrganization(stack.app, { name: 'Details wallets', default_currency: 'USD', timezone: 'UTC' });
    const customer = await newCustomer(org);
    const wallet = ok<WalletResource>(
      await call(org, 'POST', '/v1/wallets', {
        customer_id: customer.id,
        name: 'Prepaid',
        rate_amount: '1',
        initial_granted_credits: '10',
        expiration_at: '2099-01-01T00:00:00Z',
      }),
      201,
    );
    expect(await byCustomer(customer.external_id, 'wallet')).toEqual([`wallet/${wallet.id}`]);
    expect(await detailsMatching(`wallet/${wallet.id}`, /Next:/)).toBe(
      'Wallet Prepaid active (USD), expires 2099-01-01 00:00 UTC.\nNext: waiting for the expiration 2099-01-01 00:00 UTC to terminate the wallet',
    );
    expect(await (await describeWorkflow(`wallet/${wallet.id}`)).staticSummary()).toBe(
      `Wallet Prepaid of customer ${customer.external_id}`,
    );
  });

  it('webhook delivery: the retry after a failed attempt', async () => {
    const org = await createOrganization(stack.app, { name: 'Details webhooks', timezone: 'UTC' });
    const path = `/failing/${randomUUID()}`;
    receiver.on(path, () => 500);
    ok(await call(org, 'POST', '/v1/webhook_endpoints', { url: receiver.url(path), event_types: ['customer.created'] }), 201);
    const customer = await newCustomer(org);

    const [delivery] = await byCustomer(customer.external_id, 'webhook');
    expect(delivery).toMatch(/^webhook\//);
    const host = new URL(receiver.url(path)).host;
    expect(await detailsMatching(delivery!, /Next: retry/)).toMatch(
      new RegExp(
        `^Webhook delivery of customer\\.created to ${host.replaceAll('.', '\\.')}: attempt 1 of 10 failed \\(HTTP 500\\)\\.\\nNext: retry 1 \\(attempt 2 of 10\\) at ${DAY_TIME}, after a 30 s backoff$`,
      ),
    );
    expect(await (await describeWorkflow(delivery!)).staticSummary()).toBe(
      `Webhook delivery of customer.created to ${host} (customer ${customer.external_id})`,
    );
    await stack.temporal.client.workflow.getHandle(delivery!).terminate('the test is done');
  });

  it('test clock advance, dunning campaign and payment request: no timer, no timer, the next attempt on the clock', async () => {
    const org = await manualOrganization(stack.app, 'Details dunning', SECRET);
    ok<DunningCampaignResource>(
      await call(org, 'POST', '/v1/dunning_campaigns', {
        code: 'default',
        name: 'Default',
        applied_to_organization: true,
        max_attempts: 3,
        days_between_attempts: 2,
        thresholds: [{ currency: 'USD', amount_cents: 1000 }],
      }),
      201,
    );
    const clock = ok<{ id: string }>(
      await call(org, 'POST', '/v1/test_clocks', { name: 'Dunning rehearsal', frozen_time: '2031-01-01T00:00:00Z' }),
      201,
    );
    const customer = await newCustomer(org, { net_payment_term: 1, payment_provider: 'manual', test_clock_id: clock.id });
    await finalizedOneOff(stack.app, org, customer.id, 600);
    await finalizedOneOff(stack.app, org, customer.id, 500);

    // Overdue once January 2 is over: the campaign makes a request of both, its first attempt a payment.
    ok(await call(org, 'POST', `/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2031-01-04T00:00:00Z' }), 202);
    const [advance] = await byOrganization(org.id, 'test_clock');
    expect(advance).toBe(`test-clock/${clock.id}/advance/2031-01-04T00:00:00.000Z`);
    expect(await detailsMatching(advance!, /Next: nothing/)).toMatch(
      new RegExp(
        `^Test clock Dunning rehearsal \\(${clock.id}\\) ready at 2031-01-04 00:00 UTC: \\d+ instant\\(s\\), \\d+ round\\(s\\), \\d+ workflow\\(s\\) caught up\\.\\nNext: nothing: the advance is done$`,
      ),
    );
    expect(await (await describeWorkflow(advance!)).staticSummary()).toBe(
      `Test clock Dunning rehearsal (${clock.id}) advance to 2031-01-04T00:00:00.000Z`,
    );

    // Per organization: found by it; a check per overdue notice (one or two), one request.
    const [campaign] = await byOrganization(org.id, 'dunning_campaign');
    expect(await detailsMatching(campaign!, /1 payment request\(s\)/)).toMatch(
      new RegExp(
        `^Dunning campaign default: [12] check\\(s\\) and 1 payment request\\(s\\) in this run; last check: customer ${customer.external_id} in USD at .*\\.\\nNext: no timer: waiting for an overdue invoice of a customer it governs \\(or its deletion\\)$`,
      ),
    );
    expect(await (await describeWorkflow(campaign!)).staticSummary()).toBe(`Dunning campaign default (Default) of organization ${org.id}`);

    const [requestWorkflow] = await byCustomer(customer.external_id, 'payment_request');
    const request = await eventually(
      async () => {
        const [r] = ok<PaymentRequestResource[]>(await call(org, 'GET', `/v1/payment_requests?customer_id=${customer.id}`));
        return r && r.payment_ids.length > 0 ? r : undefined;
      },
      20_000,
      'the request and its first attempt',
    );
    expect(requestWorkflow).toBe(`payment-request/${request.id}`);
    expect((await describeWorkflow(requestWorkflow!)).typedSearchAttributes.get(BillingAmountDueCents)).toBe(1100);
    expect(await detailsMatching(requestWorkflow!, /outcome of payment/)).toMatch(
      /^Payment request pending: 1 of 3 attempt\(s\) made, 1100 cents USD left to pay \(2 invoice\(s\)\)\.\nNext: no timer: waiting for the outcome of payment \S+ \(attempt 1 of 3\), or an invoice paid or voided otherwise/,
    );

    // The first attempt fails: the next one waits 2 days on the customer's clock.
    expect((await notifyManual(manualWebhookUrl, SECRET, { payment_id: request.payment_ids[0], status: 'failed' })).status).toBe(200);
    expect(await detailsMatching(requestWorkflow!, /Next: waiting until/)).toBe(
      'Payment request pending: 1 of 3 attempt(s) made, 1100 cents USD left to pay (2 invoice(s)).\n' +
        'Next: waiting until 2031-01-06 00:00 UTC for attempt 2 of 3 (attempt 1 failed), or an invoice paid or voided otherwise' +
        ` (on test clock ${clock.id}, now 2031-01-04T00:00:00.000Z: timers follow the clock's advances)`,
    );
  });

  // The executions started with labels (their extra attributes, the request's patched upsert) replay
  // through the same code, as the recorded histories of older executions do (replay.test.ts).
  it('replays the histories of every workflow above', async () => {
    const bundle = await bundleWorkflows();
    expect(seen.size).toBeGreaterThanOrEqual(8);
    for (const workflowId of seen) {
      const history = await stack.temporal.client.workflow.getHandle(workflowId).fetchHistory();
      await expect(Worker.runReplayHistory({ workflowBundle: bundle }, history, workflowId)).resolves.toBeUndefined();
    }
  }, 120_000);
});
