// A worker dies in the middle of finalizing an invoice: it has taken the invoice number and
// consumed the wallets, then never answers. Another worker takes the activity over once its
// timeout passes (real time, on the run's dev server: about a minute). The invoice ends with one
// number, one outbound transaction and one settlement per wallet, and balances decreased once.
import { randomUUID } from 'node:crypto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createActivities } from '../../activities';
import { takeDocumentNumber } from '../../src/billing/document-numbers';
import { createWallet, consumeWalletsForInvoice } from '../../src/billing/wallets';
import { dec } from '../../src/domain/money';
import { eventually } from '../support/http';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';
import { bundleWorkflows } from '../support/temporal';

let stack: TestStack;
let connection: NativeConnection;

beforeAll(async () => {
  stack = await createTestStack();
  connection = await NativeConnection.connect({ address: inject('temporalAddress') });
});
afterAll(async () => {
  await connection?.close();
  await stack?.close();
});

it('leaves one number, one set of wallet transactions and one settlement per wallet after a worker restart mid-finalization', async () => {
  const org = await createOrganization(stack.app, { invoice_grace_period: 0, document_number_prefix: 'RST' });
  const customer = (
    await stack.app.inject({ method: 'POST', url: '/v1/customers', headers: org.headers, payload: { external_id: `c-${randomUUID()}` } })
  ).json<{ id: string }>();
  const walletDeps = { models: stack.db.models, temporal: stack.temporal };
  const base = {
    organizationId: org.id,
    customerId: customer.id,
    name: null,
    code: null,
    currency: 'USD',
    rateAmount: dec(1),
    expirationAt: null,
    at: new Date(),
  };
  // 30.00 and 50.00 of credit (cents x 100), priorities 1 and 2: the invoice of 70.00 takes 30 then 40.
  const first = (await createWallet(walletDeps, { ...base, priority: 1, initialGrantedCredits: dec(30) })).wallet;
  const second = (await createWallet(walletDeps, { ...base, priority: 2, initialGrantedCredits: dec(50) })).wallet;

  const bundle = await bundleWorkflows();
  const real = createActivities({ db: stack.db, temporal: stack.temporal });
  let crashed = false;
  const dying = await Worker.create({
    connection,
    taskQueue: stack.taskQueue,
    workflowBundle: bundle,
    shutdownGraceTime: '1s',
    shutdownForceTime: '3s',
    activities: {
      ...real,
      // The first attempt does the side effects, then the process "dies": it never answers.
      async finalizeInvoiceActivity(invoiceId: string, at: string) {
        const invoice = (await stack.db.models.Invoice.findById(invoiceId).lean())!;
        await takeDocumentNumber(stack.db, { organizationId: org.id, kind: 'invoice', documentId: invoiceId });
        await consumeWalletsForInvoice(stack.db, {
          organizationId: org.id,
          customerId: customer.id,
          currency: 'USD',
          invoiceId,
          amountCents: dec(String(invoice.total)),
          at: new Date(at),
        });
        crashed = true;
        await new Promise(() => undefined);
        throw new Error('unreachable');
      },
    },
  });
  const dyingRun = dying.run().catch(() => undefined);

  const created = await stack.app.inject({
    method: 'POST',
    url: '/v1/invoices/one_off',
    headers: org.headers,
    payload: { customer_id: customer.id, line_items: [{ description: 'Consulting', unit_price: '7000' }] },
  });
  expect(created.statusCode, created.body).toBe(201);
  const invoiceId = created.json<{ id: string }>().id;
  await eventually(async () => (crashed ? true : undefined), 30_000, 'the first attempt to do its side effects');
  dying.shutdown();
  await dyingRun;

  const healthy = await Worker.create({ connection, taskQueue: stack.taskQueue, workflowBundle: bundle, activities: real });
  const invoice = await healthy.runUntil(
    eventually(
      async () => {
        const i = await stack.db.models.Invoice.findById(invoiceId).lean();
        return i?.status === 'paid' ? i : undefined;
      },
      120_000,
      'the invoice to be paid by the second worker',
    ),
  );

  expect(invoice.number).toBe('RST-000001');
  expect(await stack.db.models.DocumentNumber.countDocuments({ organization_id: org.id, kind: 'invoice' })).toBe(1);
  expect(String(invoice.prepaid_credit_amount)).toBe('7000');
  const outbound = await stack.db.models.WalletTransaction.find({ invoice_id: invoiceId, transaction_type: 'outbound' }).lean();
  expect(outbound.map((t) => [t.wallet_id, String(t.amount)]).sort()).toEqual(
    [
      [first._id, '3000'],
      [second._id, '4000'],
    ].sort(),
  );
  const settlements = await stack.db.models.InvoiceSettlement.find({ invoice_id: invoiceId }).lean();
  expect(settlements.map((s) => [s.settlement_type, s.source_id, String(s.amount_cents)]).sort()).toEqual(
    [
      ['wallet_credit', first._id, '3000'],
      ['wallet_credit', second._id, '4000'],
    ].sort(),
  );
  const wallets = await stack.db.models.Wallet.find({ _id: { $in: [first._id, second._id] } }).lean();
  expect(Object.fromEntries(wallets.map((w) => [w._id, String(w.balance_cents)]))).toEqual({ [first._id]: '0', [second._id]: '1000' });
}, 180_000);
