// Records workflow histories for the replay test (test/workflows/replay.test.ts). Runs only with
// RECORD_HISTORIES=1: `RECORD_HISTORIES=1 npx vitest run test/workflows/record-histories.test.ts`.
// Re-record only for a change that is meant to be incompatible (and then use patched() instead
// when executions of the old code may still be running).
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createActivities } from '../../activities';
import { createInvoice } from '../../src/billing/invoices';
import type { Db } from '../../src/db';
import { dec } from '../../src/domain/money';
import { wrapClient } from '../../src/temporal/client';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { emitEvent } from '../../src/webhooks/emit-event';
import { generateWebhookSecret } from '../../src/webhooks/signature';
import { payInvoiceUpdate } from '../../workflows/invoice.messages';
import { walletWorkflow } from '../../workflows/wallet';
import { expirationChangedSignal } from '../../workflows/wallet.messages';
import { createWallet } from '../../src/billing/wallets';
import { entitySearchAttributes } from '../../src/temporal/search-attributes';
import { startReceiver, type Receiver } from '../support/receiver';
import { createTestDb } from '../support/stack';
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
});
