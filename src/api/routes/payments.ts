import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publicUrlOf } from '../../config';
import { Validation } from '../../errors';
import { checkPaidAt, findPayment, openCheckout, runPaymentUpdate } from '../../payments/checkout';
import { providerCodes } from '../../payments/providers/types';
import { paymentResource, paymentStatuses, toPaymentResource } from '../../resources/payment';
import { customerNowById } from '../../test-clocks/time';
import { deletePaymentUpdate, markPaidUpdate, refundPaymentUpdate } from '../../../workflows/payment.messages';
import { listPage } from '../catalog';
import { errorBody, idParams, isoDateTimeInput, listQuery, responses } from '../http';
import { idempotencyHeaders } from '../plugins/idempotency';

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }).max(2048, 'at most 2048 characters');

const checkoutBody = z.strictObject({
  invoice_id: z.uuid(),
  provider: z.enum(providerCodes),
  success_url: httpUrl,
  cancel_url: httpUrl,
});

const checkoutAnswer = z
  .object({
    payment_id: z.string(),
    checkout_url: z.string().nullable().describe('where to send the customer; null for manual'),
    provider: z.enum(providerCodes),
    expires_at: z.string().nullable(),
  })
  .meta({ id: 'Checkout' });

const markPaidBody = z.strictObject({
  reference: z.string().trim().min(1).max(255).optional().describe('the offline payment reference (bank transfer, cheque)'),
  paid_at: isoDateTimeInput.optional().describe('default: now'),
});

const refundBody = z.strictObject({
  amount_cents: z.number().int().positive().optional().describe('minor units; default: the whole payment'),
});

/** Provider calls that fail answer 502 provider_error. */
const withProviderErrors = <T extends Record<number, z.ZodType>>(success: T) => responses({ ...success, 502: errorBody });

/** Payments: /v1/payments (api-contract.md, Payments). Provider notifications and returns: payment-webhooks.ts. */
export const paymentRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Payment } = db.models;
  const tags = ['payments'];
  // Where customers come back from a redirect flow: PUBLIC_URL, else the address the API listens on.
  const publicUrl = publicUrlOf(app.deps.config);

  app.post(
    '/payments/checkout',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: "Pay an invoice through a provider's hosted checkout (the same open payment is answered again)",
        headers: idempotencyHeaders,
        body: checkoutBody,
        response: withProviderErrors({ 200: checkoutAnswer }),
      },
    },
    async (request) => {
      const payment = await openCheckout(
        { db, temporal, publicUrl },
        {
          organizationId: request.organizationId,
          invoiceId: request.body.invoice_id,
          provider: request.body.provider,
          successUrl: request.body.success_url,
          cancelUrl: request.body.cancel_url,
        },
      );
      return { payment_id: payment.id, checkout_url: payment.checkout_url, provider: payment.provider, expires_at: payment.expires_at };
    },
  );

  app.get(
    '/payments',
    {
      schema: {
        tags,
        summary: 'List payments, newest first',
        querystring: listQuery.extend({
          invoice_id: z.string().max(255).optional(),
          customer_id: z.string().max(255).optional(),
          payment_request_id: z.string().max(255).optional(),
          status: z.enum(paymentStatuses).optional(),
          provider: z.enum(providerCodes).optional(),
        }),
        response: responses({ 200: z.array(paymentResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, ...filters } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId, deleted_at: null };
      for (const [key, value] of Object.entries(filters)) if (value !== undefined) filter[key] = value;
      return listPage(reply, Payment, filter, { skip, limit }, toPaymentResource);
    },
  );

  app.get(
    '/payments/:id',
    { schema: { tags, summary: 'Get a payment', params: idParams, response: responses({ 200: paymentResource }) } },
    async (request) => toPaymentResource(await findPayment(db, request.organizationId, request.params.id)),
  );

  app.post(
    '/payments/:id/mark-paid',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: 'Record an offline payment: pending, processing or failed to succeeded; the invoice is settled',
        params: idParams,
        headers: idempotencyHeaders,
        body: markPaidBody,
        response: withProviderErrors({ 200: paymentResource }),
      },
    },
    async (request) => {
      const payment = await findPayment(db, request.organizationId, request.params.id);
      checkPaidAt(request.body.paid_at, await customerNowById(db, payment.customer_id, app.deps.now()));
      return runPaymentUpdate({ db, temporal }, payment, markPaidUpdate, {
        reference: request.body.reference ?? null,
        paidAt: request.body.paid_at ? request.body.paid_at.toISOString() : null,
      });
    },
  );

  app.post(
    '/payments/:id/refund',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: "Refund a succeeded payment through the provider's refund API",
        params: idParams,
        headers: idempotencyHeaders,
        body: refundBody,
        response: withProviderErrors({ 200: paymentResource }),
      },
    },
    async (request) => {
      const payment = await findPayment(db, request.organizationId, request.params.id);
      const amount = request.body.amount_cents;
      if (amount !== undefined && amount > Number(toPaymentResource(payment).amount)) {
        throw Validation.field('amount_cents', 'must not exceed the payment amount');
      }
      return runPaymentUpdate({ db, temporal }, payment, refundPaymentUpdate, {
        amountCents: amount === undefined ? null : String(amount),
      });
    },
  );

  app.delete(
    '/payments/:id',
    {
      schema: {
        tags,
        summary: 'Delete a pending payment (its checkout is closed)',
        params: idParams,
        response: withProviderErrors({ 200: paymentResource }),
      },
    },
    async (request) =>
      runPaymentUpdate({ db, temporal }, await findPayment(db, request.organizationId, request.params.id), deletePaymentUpdate),
  );
};
