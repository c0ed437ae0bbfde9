import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { newId } from '../../db/base';
import { customerLookup } from '../../db/models/customer';
import { NotFound, Validation } from '../../errors';
import { createPaymentRequest, openInvoices } from '../../payments/payment-requests';
import { paymentRequestResource, toPaymentRequestResource } from '../../resources/payment-request';
import { listPage } from '../catalog';
import { currencyCode, idParams, listQuery, responses } from '../http';
import { idempotencyHeaders } from '../plugins/idempotency';

const createBody = z
  .strictObject({
    customer_id: z.string().min(1).max(255).optional().describe('the customer, by id or external_id'),
    external_customer_id: z.string().min(1).max(255).optional(),
    currency: currencyCode.optional().describe("default: the customer's currency"),
    invoice_ids: z.array(z.uuid()).min(1).max(100).optional().describe("default: the customer's overdue unpaid invoices of the currency"),
  })
  .refine((b) => b.customer_id !== undefined || b.external_customer_id !== undefined, {
    path: ['customer_id'],
    message: 'customer_id or external_customer_id is required',
  });

/** Payment requests: /v1/payment_requests (api-contract.md, Dunning campaigns and payment requests). */
export const paymentRequestRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Customer, Invoice, PaymentRequest } = db.models;
  const tags = ['payment_requests'];

  app.post(
    '/payment_requests',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: "Collect a customer's overdue invoices of one currency now (one attempt)",
        headers: idempotencyHeaders,
        body: createBody,
        response: responses({ 201: paymentRequestResource }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const customer = await Customer.findOne(
        customerLookup(request.organizationId, (body.customer_id ?? body.external_customer_id)!),
      ).lean();
      if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
      if (!customer.payment_provider) throw Validation.field('customer_id', 'the customer has no payment_provider to collect with');
      const currency = body.currency ?? customer.currency;
      let ids = body.invoice_ids;
      if (ids) {
        const invoices = await Invoice.find({ _id: { $in: ids }, organization_id: request.organizationId, deleted_at: null }).lean();
        ids.forEach((id, i) => {
          const invoice = invoices.find((v) => v._id === id);
          if (!invoice || invoice.customer_id !== customer._id)
            throw Validation.field(`invoice_ids.${i}`, 'is not an invoice of this customer');
          if (invoice.currency !== currency) throw Validation.field(`invoice_ids.${i}`, `is not in ${currency}`);
          if (invoice.status !== 'finalized') throw Validation.field(`invoice_ids.${i}`, `is ${invoice.status}, not finalized and unpaid`);
        });
      } else {
        const overdue = await Invoice.find(
          {
            organization_id: request.organizationId,
            customer_id: customer._id,
            currency,
            status: 'finalized',
            payment_overdue: true,
            deleted_at: null,
          },
          { _id: 1 },
        )
          .sort({ created_at: 1 })
          .lean();
        ids = overdue.map((i) => i._id);
      }
      const open = await openInvoices(db, ids);
      if (open.length === 0) throw Validation.field('invoice_ids', 'no finalized invoice with something left to pay');
      const created = await createPaymentRequest(
        { db, temporal, models: db.models },
        {
          organizationId: request.organizationId,
          customerId: customer._id,
          currency,
          invoices: open,
          dunningCampaignId: null,
          maxAttempts: 1,
          daysBetweenAttempts: 1,
          idempotencyKey: `manual/${request.headers['idempotency-key'] ?? newId()}`,
          customerExternalId: customer.external_id,
        },
      );
      return reply.status(201).send(toPaymentRequestResource(created));
    },
  );

  app.get(
    '/payment_requests',
    {
      schema: {
        tags,
        summary: 'List payment requests, newest first',
        querystring: listQuery.extend({
          customer_id: z.string().max(255).optional(),
          status: z.enum(['pending', 'succeeded', 'failed']).optional(),
          dunning_campaign_id: z.string().max(255).optional(),
        }),
        response: responses({ 200: z.array(paymentRequestResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, ...filters } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId };
      for (const [key, value] of Object.entries(filters)) if (value !== undefined) filter[key] = value;
      return listPage(reply, PaymentRequest, filter, { skip, limit }, toPaymentRequestResource);
    },
  );

  app.get(
    '/payment_requests/:id',
    { schema: { tags, summary: 'Get a payment request', params: idParams, response: responses({ 200: paymentRequestResource }) } },
    async (request) => {
      const found = await PaymentRequest.findOne({ _id: request.params.id, organization_id: request.organizationId }).lean();
      if (!found) throw new NotFound('Payment request not found');
      return toPaymentRequestResource(found);
    },
  );
};
