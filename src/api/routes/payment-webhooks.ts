// The payment routes the providers and the customers' browsers call, with no API key: provider
// notifications (verified by the provider's signature over the raw bytes), provider_c's return and
// the landing page of payment requests' checkouts.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BadRequest, NotFound } from '../../errors';
import { runPaymentUpdate } from '../../payments/checkout';
import { receiveNotification } from '../../payments/notifications';
import { isProviderCode, type ProviderCode } from '../../payments/providers/types';
import { completeRedirectUpdate } from '../../../workflows/payment.messages';
import { errorBody } from '../http';

const notificationAnswer = z.object({ status: z.enum(['processed', 'duplicate', 'ignored']) }).meta({ id: 'NotificationAnswer' });
const providerParams = z.object({ provider: z.string().max(50), organization_id: z.string().max(255).optional() });

function providerOf(value: string): ProviderCode {
  if (!isProviderCode(value)) throw new NotFound(`Unknown payment provider "${value}"`);
  return value;
}

export const paymentWebhookRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal, secrets } = app.deps;
  const tags = ['payments'];

  // Signatures cover the exact bytes received: every body of these routes is kept as a Buffer and
  // parsed only after verification (payment-providers.md §1.1).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  const responses = { 200: z.union([notificationAnswer, z.string()]), 400: errorBody, 401: errorBody, 404: errorBody, 500: errorBody };
  for (const url of ['/payments/webhook/:provider', '/payments/webhook/:provider/:organization_id']) {
    app.post(
      url,
      {
        schema: {
          tags,
          summary: "A payment provider's notification (no API key: verified with the integration's secret)",
          params: providerParams,
          response: responses,
        },
      },
      async (request, reply) => {
        const provider = providerOf(request.params.provider);
        const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const status = await receiveNotification(
          { db, temporal, secrets },
          { provider, organizationId: request.params.organization_id ?? null, rawBody, headers: request.headers, now: app.deps.now() },
        );
        // Adyen expects this literal acknowledgement (payment-providers.md §3).
        if (provider === 'provider_b') return reply.type('text/plain').send('[accepted]');
        return { status };
      },
    );
  }

  app.get(
    '/payments/:id/return',
    {
      schema: {
        tags,
        summary: "Where provider_c's redirect flow returns the customer: completes the flow, then redirects to success_url",
        params: z.object({ id: z.uuid() }),
        querystring: z.object({ redirect_flow_id: z.string().min(1).max(255) }),
        response: { 302: z.null().describe('to the success_url, or the cancel_url when the flow failed'), 400: errorBody, 404: errorBody },
      },
    },
    async (request, reply) => {
      const payment = await db.models.Payment.findOne({ _id: request.params.id, deleted_at: null }).lean();
      if (!payment) throw new NotFound('Payment not found');
      if (payment.provider_checkout_id !== request.query.redirect_flow_id) {
        throw new BadRequest('The redirect flow does not belong to this payment', 'invalid_redirect_flow');
      }
      let target = payment.success_url;
      try {
        const after = await runPaymentUpdate({ db, temporal }, payment, completeRedirectUpdate, request.query.redirect_flow_id);
        if (after.status === 'failed' || after.status === 'canceled') target = payment.cancel_url;
      } catch (err) {
        request.log.warn({ err, paymentId: payment._id }, 'the redirect flow could not be completed');
        target = payment.cancel_url;
      }
      return reply.redirect(target ?? '/', 302);
    },
  );

  app.get(
    '/payments/:id/done',
    {
      schema: {
        tags,
        summary:
          "Where a payment request's checkout returns the customer when its integration has no success_redirect_url: a page saying where the payment stands",
        params: z.object({ id: z.uuid() }),
        response: { 200: z.string().describe('text/html'), 404: errorBody },
      },
    },
    async (request, reply) => {
      const payment = await db.models.Payment.findOne({ _id: request.params.id, deleted_at: null }, { status: 1 }).lean();
      if (!payment) throw new NotFound('Payment not found');
      // The provider's notification may still be on its way: pending is not a failure yet.
      const sentence = landingSentences[payment.status] ?? landingSentences.pending!;
      return reply
        .type('text/html; charset=utf-8')
        .send(`<!doctype html><html lang="en"><meta charset="utf-8"><title>Payment</title><p>${sentence}</p></html>`);
    },
  );
};

/** What the customer reads on the landing page, by payment status. */
const landingSentences: Record<string, string> = {
  pending: 'Thank you. Your payment is being processed; you may close this page.',
  processing: 'Thank you. Your payment is being processed; you may close this page.',
  succeeded: 'Thank you. Your payment was received; you may close this page.',
  failed: 'Your payment did not go through. You will receive another request to pay.',
  canceled: 'This payment was canceled. You will receive another request to pay.',
  refunded: 'This payment was refunded.',
};
