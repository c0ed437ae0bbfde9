// A payment request whose worker dies after its writes (api-contract.md, Dunning campaigns and
// payment requests): the attempt's step dies after it made the payment and opened its checkout, and
// the step that settles the invoices dies after it recorded the settlements, as a killed worker
// would; each step is retried. Still one payment, one settlement per invoice, each event once.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PaymentResource } from '../../src/resources/payment';
import type { PaymentRequestResource } from '../../src/resources/payment-request';
import { eventually, injectAs, ok, type Method } from '../support/http';
import { waitForEventTypes } from '../support/lifecycle-events';
import { manualCustomerWithInvoices } from '../support/payment-fixtures';
import { notifyManual } from '../support/providers/manual-notifier';
import { createTestStack } from '../support/stack';
import { startStackWorker } from '../support/worker';

const SECRET = 'manual_secret_for_worker_restart';

describe('payment requests and a killed worker', () => {
  it('a worker killed during a payment request’s attempt and its settlement: one payment, one settlement per invoice', async () => {
    const stack = await createTestStack();
    await stack.app.listen({ host: '127.0.0.1', port: 0 });
    const publicUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
    const webhookUrl = `${publicUrl}/v1/payments/webhook/manual`;
    // Each wrapped step does the real work, then dies on its first call (after the write).
    const calls = { attempt: 0, attemptReturned: 0, settle: 0 };
    const worker = await startStackWorker(stack, {
      publicUrl,
      wrap: (real) => ({
        startPaymentRequestAttemptActivity: async (...args: Parameters<typeof real.startPaymentRequestAttemptActivity>) => {
          const result = await real.startPaymentRequestAttemptActivity(...args);
          if (calls.attempt++ === 0) throw new Error('the worker died after the write');
          calls.attemptReturned += 1;
          return result;
        },
        applyProviderNotificationActivity: async (...args: Parameters<typeof real.applyProviderNotificationActivity>) => {
          const result = await real.applyProviderNotificationActivity(...args);
          if (calls.settle++ === 0) throw new Error('the worker died after the write');
          return result;
        },
      }),
    });
    const alive = () => worker.assertAlive();

    try {
      // Finalizing the invoices needs the worker.
      const { org, customer, invoices } = await manualCustomerWithInvoices(stack.app, SECRET, [1000, 500]);
      const as = (method: Method, path: string, payload?: unknown) => injectAs(stack.app, org, method, path, payload);
      const created = ok<PaymentRequestResource>(
        await as('POST', '/v1/payment_requests', { customer_id: customer.id, invoice_ids: invoices.map((i) => i.id) }),
        201,
      );
      expect(created).toMatchObject({ status: 'pending', amount_cents: '1500.0000', max_attempts: 1 });

      // The attempt's payment is there and pending, and the retried attempt has answered.
      const payment = await eventually(
        async () => {
          alive();
          const request = ok<PaymentRequestResource>(await as('GET', `/v1/payment_requests/${created.id}`));
          if (request.payment_ids.length === 0 || calls.attemptReturned === 0) return undefined;
          const found = ok<PaymentResource>(await as('GET', `/v1/payments/${request.payment_ids[0]}`));
          return found.status === 'pending' ? found : undefined;
        },
        30_000,
        'the attempt’s payment, pending',
      );
      expect(payment).toMatchObject({ amount: '1500.0000', payment_request_id: created.id, provider: 'manual' });

      const body = { payment_id: payment.id, status: 'succeeded' };
      expect((await notifyManual(webhookUrl, SECRET, body)).status).toBe(200);
      const again = await notifyManual(webhookUrl, SECRET, body);
      expect(again.status).toBe(200);
      expect(again.body).toBe('{"status":"duplicate"}');

      const request = await eventually(
        async () => {
          alive();
          const r = ok<PaymentRequestResource>(await as('GET', `/v1/payment_requests/${created.id}`));
          return r.status === 'succeeded' ? r : undefined;
        },
        60_000,
        'the request to succeed',
      );
      for (const invoice of invoices) {
        await eventually(
          async () => {
            alive();
            return ok<InvoiceResource>(await as('GET', `/v1/invoices/${invoice.id}`)).status === 'paid' ? true : undefined;
          },
          30_000,
          `invoice ${invoice.id} to be paid`,
        );
      }

      expect(calls.attempt).toBeGreaterThanOrEqual(2);
      expect(calls.settle).toBeGreaterThanOrEqual(2);
      expect(await stack.db.models.Payment.countDocuments({ payment_request_id: created.id })).toBe(1);
      expect(await stack.db.models.Payment.countDocuments({ customer_id: customer.id })).toBe(1);
      expect(ok<PaymentResource>(await as('GET', `/v1/payments/${payment.id}`)).status).toBe('succeeded');
      expect(request.payment_ids).toEqual([payment.id]);
      expect(request.payment_attempts).toBe(1);

      for (const [invoice, cents] of [
        [invoices[0]!, '1000'],
        [invoices[1]!, '500'],
      ] as const) {
        const settlements = await stack.db.models.InvoiceSettlement.find({ invoice_id: invoice.id }).lean();
        expect(settlements.map((s) => [s.settlement_type, s.source_id, s.amount_cents.toString()])).toEqual([
          ['payment', payment.id, cents],
        ]);
      }

      // payment_request.payment_succeeded is written right after the request's status.
      const requestEvents = await waitForEventTypes(stack.db, org.id, created.id, ['payment_request.payment_succeeded']);
      expect(requestEvents).toEqual(['payment_request.created', 'payment_request.payment_succeeded']);
    } finally {
      await worker.stop();
      await stack.close();
    }
  }, 240_000);
});
