// Records workflow histories for the replay test (test/workflows/replay.test.ts). Runs only with
// RECORD_HISTORIES=1: `RECORD_HISTORIES=1 npx vitest run test/workflows/record-histories.test.ts`.
// Re-record only for a change that is meant to be incompatible (and then use patched() instead
// when executions of the old code may still be running).
import { createHmac, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { createInvoice } from '../../src/billing/invoices';
import type { Db } from '../../src/db';
import { dec } from '../../src/domain/money';
import { wrapClient } from '../../src/temporal/client';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { emitEvent } from '../../src/webhooks/emit-event';
import { toDecimal128 } from '../../src/db/decimal';
import { notifyOverdue } from '../../src/payments/dunning';
import { sealSettings } from '../../src/payments/integrations';
import { receiveNotification } from '../../src/payments/notifications';
import { createSecretBox } from '../../src/payments/secrets';
import { generateWebhookSecret } from '../../src/webhooks/signature';
import { payInvoiceUpdate } from '../../workflows/invoice.messages';
import { walletWorkflow } from '../../workflows/wallet';
import { expirationChangedSignal, rulesChangedSignal, thresholdCrossedSignal, walletStateQuery } from '../../workflows/wallet.messages';
import { createWallet, walletRuleDocs, walletWorkflowOf } from '../../src/billing/wallets';
import { entitySearchAttributes } from '../../src/temporal/search-attributes';
import { startReceiver, type Receiver } from '../support/receiver';
import { createTestDb, TEST_SECRETS_KEY } from '../support/stack';
import { bundleWorkflows, createTimeSkippingEnv, waitForTimers } from '../support/temporal';

const record = process.env.RECORD_HISTORIES === '1';
const dir = join(__dirname, 'histories');

describe.skipIf(!record)('record workflow histories', () => {
  let env: TestWorkflowEnvironment;
  let db: Db;
  let receiver: Receiver;
  const taskQueue = `record-${randomUUID()}`;

  beforeAll(async () => {
    [env, db, receiver] = await Promise.all([createTimeSkippingEnv(), createTestDb(), startReceiver()]);
  });
  afterAll(async () => {
    await receiver?.close();
    await env?.teardown();
    await db?.close();
  });

  async function save(name: string, workflowId: string) {
    const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
    // protobufjs messages serialize themselves as proto3 JSON (what runReplayHistory accepts).
    writeFileSync(join(dir, `${name}.json`), JSON.stringify(history, null, 1));
  }

  it('records an invoice (grace period, finalize, overdue, pay), a webhook delivery with retries and a wallet expiry', async () => {
    const temporal = wrapClient(env.client, taskQueue);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await bundleWorkflows(),
      activities: createActivities({ db, temporal }),
    });
    await worker.runUntil(async () => {
      const org = await db.models.Organization.create({
        name: 'Rec',
        default_currency: 'USD',
        timezone: 'UTC',
        net_payment_term: 10,
        invoice_grace_period: 2,
        document_number_prefix: 'REC',
        events_rate_limit_per_minute: 1000,
      });
      const customer = await db.models.Customer.create({ organization_id: org._id, external_id: 'rec', currency: 'USD' });
      await db.models.WebhookEndpoint.create({
        organization_id: org._id,
        url: receiver.url('/hook'),
        secret: generateWebhookSecret(),
        event_types: ['customer.created'],
      });
      receiver.on('/hook', (n) => (n <= 2 ? 500 : 200));

      const invoice = await createInvoice(
        db,
        { models: db.models, temporal },
        {
          organizationId: org._id,
          customerId: customer._id,
          invoiceType: 'one_off',
          currency: 'USD',
          idempotencyKey: 'rec/1',
          fees: [
            {
              key: 'line/000',
              fee_type: 'add_on',
              amount_cents: dec('1000'),
              units: dec(1),
              events_count: 0,
              unit_amount_cents: dec('1000'),
            },
          ],
          at: new Date(await env.currentTimeMs()),
        },
      );
      const invoiceId = workflowIds.invoice(invoice._id);
      await waitForTimers(env, invoiceId, 1);
      await env.sleep('2 days');
      await waitForTimers(env, invoiceId, 2);
      await env.sleep('12 days');
      await new Promise((r) => setTimeout(r, 1000));
      await env.client.workflow.getHandle(invoiceId).executeUpdate(payInvoiceUpdate);
      await env.client.workflow.getHandle(invoiceId).result();
      await save('invoice-grace-overdue-paid', invoiceId);

      const emitted = await emitEvent(
        { models: db.models, temporal },
        {
          organizationId: org._id,
          type: 'customer.created',
          idempotencyKey: 'rec/customer',
          object: { id: 'rec' },
          occurredAt: new Date(await env.currentTimeMs()),
        },
      );
      const deliveryId = workflowIds.webhook(emitted.deliveryIds[0]!);
      for (let attempt = 1; (await waitForTimers(env, deliveryId, attempt)) === 'timer'; attempt++) {
        await env.sleep(30_000 * 2 ** (attempt - 1));
      }
      await env.client.workflow.getHandle(deliveryId).result();
      await save('webhook-delivery-retries', deliveryId);

      // A wallet whose expiry is moved once (signal), then reached.
      const start = await env.currentTimeMs();
      const firstExpiry = new Date(start + 5 * 86_400_000);
      const { wallet } = await createWallet(db, {
        organizationId: org._id,
        customerId: customer._id,
        name: 'Prepaid',
        code: null,
        currency: 'USD',
        rateAmount: dec(1),
        priority: 1,
        expirationAt: firstExpiry,
        initialGrantedCredits: dec(10),
        at: new Date(start),
      });
      const walletHandle = await env.client.workflow.start(walletWorkflow, {
        taskQueue,
        workflowId: workflowIds.wallet(wallet._id),
        args: [{ walletId: wallet._id, expirationAt: firstExpiry.toISOString() }],
        typedSearchAttributes: entitySearchAttributes({
          organizationId: org._id,
          customerId: customer._id,
          entityType: 'wallet',
          status: 'active',
        }),
      });
      await waitForTimers(env, walletHandle.workflowId, 1);
      const later = new Date(start + 9 * 86_400_000);
      await db.models.Wallet.updateOne({ _id: wallet._id }, { $set: { expiration_at: later } });
      await walletHandle.signal(expirationChangedSignal, later.toISOString());
      await waitForTimers(env, walletHandle.workflowId, 2);
      await env.sleep('10 days');
      await walletHandle.result();
      await save('wallet-expiry-rearmed', walletHandle.workflowId);
    });
  }, 120_000);

  it('records a wallet with an interval rule, a threshold crossing, a rule added (rulesChanged), then its expiry', async () => {
    const temporal = wrapClient(env.client, taskQueue);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await bundleWorkflows(),
      activities: createActivities({ db, temporal }),
    });
    await worker.runUntil(async () => {
      const org = await db.models.Organization.create({
        name: 'Rec rules',
        default_currency: 'USD',
        timezone: 'UTC',
        net_payment_term: 0,
        invoice_grace_period: 0,
        document_number_prefix: 'RRU',
        events_rate_limit_per_minute: 1000,
      });
      const customer = await db.models.Customer.create({ organization_id: org._id, external_id: 'rec-rules', currency: 'USD' });
      const start = await env.currentTimeMs();
      const expiry = new Date(start + 70 * 86_400_000);
      const { wallet } = await createWallet(db, {
        organizationId: org._id,
        customerId: customer._id,
        name: 'Rules',
        code: null,
        currency: 'USD',
        rateAmount: dec(1),
        priority: 1,
        expirationAt: expiry,
        initialGrantedCredits: dec(10),
        rules: [
          {
            trigger: 'interval',
            interval: 'monthly',
            thresholdCredits: null,
            paidCredits: dec(0),
            grantedCredits: dec(5),
            startedAt: null,
          },
          { trigger: 'threshold', interval: null, thresholdCredits: dec(2), paidCredits: dec(0), grantedCredits: dec(3), startedAt: null },
        ],
        at: new Date(start),
      });
      const [input, owner] = await walletWorkflowOf(db, wallet);
      const handle = await env.client.workflow.start(walletWorkflow, {
        taskQueue,
        workflowId: workflowIds.wallet(wallet._id),
        args: [input],
        typedSearchAttributes: entitySearchAttributes({ ...owner, entityType: 'wallet' }),
      });
      await waitForTimers(env, handle.workflowId, 1);
      await env.sleep('35 days');
      const thresholdRule = wallet.recurring_transaction_rules[1]!;
      await db.models.Wallet.updateOne(
        { _id: wallet._id },
        {
          $push: {
            threshold_crossings: { rule_id: thresholdRule.id, transaction_id: randomUUID(), at: new Date(await env.currentTimeMs()) },
          },
        },
      );
      await handle.signal(thresholdCrossedSignal);
      await until(
        'the threshold top-up',
        async () => (await db.models.WalletTransaction.countDocuments({ wallet_id: wallet._id, source: 'threshold' })) === 1,
      );
      // The rules changed: the monthly one kept, a weekly one added (from now on).
      const now = new Date(await env.currentTimeMs());
      const [weekly] = walletRuleDocs(
        [{ trigger: 'interval', interval: 'weekly', thresholdCredits: null, paidCredits: dec(0), grantedCredits: dec(1), startedAt: now }],
        now,
      );
      await db.models.Wallet.updateOne({ _id: wallet._id }, { $push: { recurring_transaction_rules: weekly } });
      await handle.signal(rulesChangedSignal);
      await until('the weekly rule scheduled', async () => (await handle.query(walletStateQuery)).nextRuns?.length === 2);
      await env.sleep('40 days');
      await handle.result();
      // Monthly on days 30 and 60 (the wallet expires on day 70); weekly from day 35 + 7: 42, 49, 56, 63.
      expect(await db.models.WalletTransaction.countDocuments({ wallet_id: wallet._id, source: 'interval' })).toBe(6);
      await save('wallet-interval-and-threshold', handle.workflowId);
    });
  }, 120_000);

  /** Polls `probe` (real time: nothing here moves the test server's clock) until it answers. */
  async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = await probe();
      if (found !== null && found !== undefined && found !== false) return found;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const eventsOf = async (workflowId: string) => (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const closed = async (workflowId: string) =>
    (await eventsOf(workflowId)).some((e) => e.workflowExecutionCompletedEventAttributes || e.workflowExecutionFailedEventAttributes);

  it('records a dunning campaign that creates a payment request, and the request: a failed attempt, a retry a day later that succeeds', async () => {
    const temporal = wrapClient(env.client, taskQueue);
    const secrets = createSecretBox(TEST_SECRETS_KEY);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await bundleWorkflows(),
      activities: createActivities({ db, temporal, secretsKey: TEST_SECRETS_KEY, publicUrl: 'http://127.0.0.1:3000' }),
    });
    const webhookSecret = 'manual_secret_for_recording';
    await worker.runUntil(async () => {
      const now = new Date(await env.currentTimeMs());
      const org = await db.models.Organization.create({
        name: 'Rec dunning',
        default_currency: 'USD',
        timezone: 'UTC',
        net_payment_term: 1,
        invoice_grace_period: 0,
        document_number_prefix: 'RDN',
        events_rate_limit_per_minute: 1000,
      });
      const sealed = sealSettings(
        secrets,
        { organization_id: org._id, integration_type: 'payment_provider', provider_type: 'manual' },
        { webhook_secret: webhookSecret },
      );
      await db.models.Integration.create({
        organization_id: org._id,
        integration_type: 'payment_provider',
        provider_type: 'manual',
        settings: sealed.plain,
        secrets: sealed.secrets,
        secret_hints: sealed.hints,
      });
      const campaign = await db.models.DunningCampaign.create({
        organization_id: org._id,
        code: 'default',
        name: 'Default',
        max_attempts: 3,
        days_between_attempts: 1,
        thresholds: [{ currency: 'USD', amount_cents: 1000 }],
        applied_to_organization: true,
      });
      const customer = await db.models.Customer.create({
        organization_id: org._id,
        external_id: 'rec-dunning',
        currency: 'USD',
        payment_provider: 'manual',
      });
      // Two finalized invoices already overdue (1100 >= the 1000 threshold), made here without
      // their workflows: only the campaign's and the request's histories are recorded.
      const overdueInvoice = (n: number, cents: number) =>
        db.models.Invoice.create({
          organization_id: org._id,
          customer_id: customer._id,
          invoice_type: 'one_off',
          status: 'finalized',
          number: `RDN-00000${n}`,
          sequential_id: n,
          currency: 'USD',
          issuing_date: now.toISOString().slice(0, 10),
          payment_due_date: now.toISOString().slice(0, 10),
          net_payment_term: 1,
          grace_period_days: 0,
          payment_overdue: true,
          fees_amount_cents: toDecimal128(cents),
          subtotal: toDecimal128(cents),
          tax_amount: toDecimal128(0),
          coupons_amount_cents: toDecimal128(0),
          progressive_billing_credit_amount_cents: toDecimal128(0),
          credit_notes_amount_cents: toDecimal128(0),
          prepaid_credit_amount: toDecimal128(0),
          total: toDecimal128(cents),
          idempotency_key: `rec-dunning/${n}`,
          finalized_at: now,
        });
      await overdueInvoice(1, 600);
      const last = await overdueInvoice(2, 500);

      /** The manual provider's signed notification, through the webhook route's own function. */
      const notify = async (paymentId: string, status: 'failed' | 'succeeded') => {
        const rawBody = Buffer.from(JSON.stringify({ payment_id: paymentId, status }));
        const answer = await receiveNotification(
          { db, temporal, secrets },
          {
            provider: 'manual',
            organizationId: org._id,
            rawBody,
            headers: { 'x-webhook-signature': createHmac('sha256', webhookSecret).update(rawBody).digest('hex') },
            now: new Date(await env.currentTimeMs()),
          },
        );
        if (answer !== 'processed') throw new Error(`notification of ${paymentId} was ${answer}`);
      };
      /** The request's attempt `n` once its payment's checkout exists (the request names it then). */
      const attemptPayment = (requestId: string, n: number) =>
        until(`attempt ${n}'s payment`, async () => {
          const request = await db.models.PaymentRequest.findById(requestId).lean();
          return request && request.payment_ids.length >= n ? request.payment_ids[n - 1]! : null;
        });

      // One notice (the last invoice's overdue step would send it): the check finds both invoices.
      await notifyOverdue(db, temporal, last);
      const campaignId = workflowIds.dunningCampaign(campaign._id);
      const request = await until('the campaign to create a request', () =>
        db.models.PaymentRequest.findOne({ customer_id: customer._id, dunning_campaign_id: campaign._id }).lean(),
      );
      // The check's activity completed and the workflow went back to waiting for notices.
      await until('the campaign to rest', async () => {
        const events = await eventsOf(campaignId);
        return events.some((e) => e.activityTaskCompletedEventAttributes) && events.at(-1)?.workflowTaskCompletedEventAttributes;
      });
      await save('dunning-campaign-request', campaignId);

      expect(request.invoice_ids).toHaveLength(2);
      const requestId = workflowIds.paymentRequest(request._id);
      const first = await attemptPayment(request._id, 1);
      await notify(first, 'failed');
      await until('the first payment to end', () => closed(workflowIds.payment(first)));
      await save('payment-request-attempt-failed', workflowIds.payment(first));
      await waitForTimers(env, requestId, 1);
      await env.sleep('1 day');
      const second = await attemptPayment(request._id, 2);
      await notify(second, 'succeeded');
      // Polled rather than result(): awaiting a result lets the test server skip to the checkout's expiry.
      await until('the request to end', () => closed(requestId));
      expect(await env.client.workflow.getHandle(requestId).result()).toEqual({ status: 'succeeded' });
      expect(await db.models.PaymentRequest.findById(request._id).lean()).toMatchObject({ status: 'succeeded', payment_attempts: 2 });
      // (payment-request-retry-succeeded.json is the same from before the attempt stopped waiting for the checkout.)
      await save('payment-request-retry-succeeded-checkout-told', requestId);
    });
  }, 120_000);
});
