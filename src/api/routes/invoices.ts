import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { customerNow } from '../../test-clocks/time';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { createInvoice, ensureWorkflowOfInvoice } from '../../billing/invoices';
import { explainInvoice } from '../../billing/explain';
import { invoiceExplanation } from '../../resources/invoice-explanation';
import type { InvoiceDoc } from '../../db/models/invoice';
import type { PricedFee } from '../../domain/invoice-assembly';
import { Dec, roundFee } from '../../domain/money';
import { InvalidTransition, NotFound, Validation } from '../../errors';
import { workflowIds } from '../../temporal/workflow-ids';
import { newId } from '../../db/base';
import { decimalInput } from '../decimal';
import { fromDecimal128 } from '../../db/decimal';
import { currencyCode, idParams, listQuery, responses, sendList } from '../http';
import { idempotencyHeaders } from '../plugins/idempotency';
import { customerLookup } from '../../db/models/customer';
import { feeResource, invoiceResource, toFeeResource, toInvoiceResource, type InvoiceResource } from '../../resources/invoice';
import { settlementResource, toSettlementResource } from '../../resources/settlement';
import { invoiceCommands, type InvoiceCommand } from '../../../workflows/invoice.messages';

const isoDate = z.iso.date();

const oneOffBody = z.strictObject({
  customer_id: z.string().min(1).max(255),
  currency: currencyCode.optional().describe("Default: the customer's currency"),
  line_items: z
    .array(
      z.strictObject({
        add_on_code: z.string().min(1).max(255).optional(),
        description: z.string().min(1).max(1000).optional(),
        quantity: decimalInput({ min: 0 }).optional(),
        unit_price: decimalInput({ min: 0 }).optional().describe("cents; default: the add-on's amount_cents"),
      }),
    )
    .min(1)
    .max(100),
});

/** What each lifecycle command allows (the specification's invoice state table). */
const ALLOWED: Record<InvoiceCommand, InvoiceDoc['status'][]> = {
  finalize: ['draft'],
  pay: ['finalized'],
  void: ['finalized'],
  delete: ['draft'],
  refresh: ['draft'],
};

export const invoiceRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { AddOn, Customer, Fee, Invoice, InvoiceSettlement } = db.models;
  const tags = ['invoices'];

  async function findInvoice(organizationId: string, id: string): Promise<InvoiceDoc> {
    const invoice = await Invoice.findOne({ _id: id, organization_id: organizationId, deleted_at: null }).lean();
    if (!invoice) throw new NotFound('Invoice not found', 'invoice_not_found');
    return invoice;
  }

  async function withFees(invoice: InvoiceDoc): Promise<InvoiceResource> {
    return toInvoiceResource(invoice, await Fee.find({ invoice_id: invoice._id }).sort({ key: 1 }).lean());
  }

  /** Lifecycle changes go through the invoice's workflow; its validator's refusal is our 400. */
  async function lifecycle(organizationId: string, id: string, action: InvoiceCommand): Promise<InvoiceResource> {
    const invoice = await findInvoice(organizationId, id);
    const refusal = () => new InvalidTransition(`Cannot ${action} an invoice that is ${invoice.status}`);
    if (!ALLOWED[action].includes(invoice.status)) throw refusal();
    const command = () => temporal.client.workflow.getHandle(workflowIds.invoice(id)).executeUpdate(invoiceCommands[action]);
    try {
      try {
        return await command();
      } catch (err) {
        // An invoice issued a moment ago may be shown before its workflow is started: start it (as
        // its creation is about to) and ask again.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        await ensureWorkflowOfInvoice(db, temporal, id);
        return await command();
      }
    } catch (err) {
      if (err instanceof WorkflowUpdateFailedError) {
        const cause = err.cause as { type?: string; message?: string } | undefined;
        if (cause?.type === 'InvalidTransition') throw new InvalidTransition(cause.message ?? 'Invalid state transition');
      }
      // The workflow ended meanwhile (paid, voided): answer from the record.
      const now = await Invoice.findById(id).lean();
      if (now && !ALLOWED[action].includes(now.status)) throw new InvalidTransition(`Cannot ${action} an invoice that is ${now.status}`);
      throw err;
    }
  }

  async function createOneOff(organizationId: string, body: z.output<typeof oneOffBody>, invoiceType: 'one_off' | 'add_on', key: string) {
    const customer = await Customer.findOne(customerLookup(organizationId, body.customer_id)).lean();
    if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
    const currency = body.currency ?? customer.currency;
    const codes = [...new Set(body.line_items.flatMap((l) => (l.add_on_code ? [l.add_on_code] : [])))];
    const addOns = codes.length
      ? await AddOn.find({
          organization_id: organizationId,
          deleted_at: null,
          $or: [{ code: { $in: codes } }, { _id: { $in: codes } }],
        }).lean()
      : [];
    const fees: PricedFee[] = body.line_items.map((line, i) => {
      const addOn = line.add_on_code ? addOns.find((a) => a.code === line.add_on_code || a._id === line.add_on_code) : undefined;
      if (line.add_on_code && !addOn) throw new NotFound(`No add-on "${line.add_on_code}"`, 'add_on_not_found');
      if (!addOn && (line.description === undefined || line.unit_price === undefined)) {
        throw Validation.field(`line_items.${i}`, 'needs an add_on_code, or both a description and a unit_price');
      }
      if (addOn && addOn.amount_currency !== currency && line.unit_price === undefined) {
        throw Validation.field(
          `line_items.${i}.add_on_code`,
          `the add-on is priced in ${addOn.amount_currency}, the invoice in ${currency}: give a unit_price`,
        );
      }
      const quantity = line.quantity ?? new Dec(1);
      const unitPrice = line.unit_price ?? fromDecimal128(addOn!.amount_cents)!;
      return {
        key: `line/${String(i).padStart(3, '0')}`,
        fee_type: 'add_on',
        add_on_id: addOn?._id,
        invoice_display_name: line.description ?? addOn?.invoice_display_name ?? addOn?.name,
        amount_cents: roundFee(quantity.times(unitPrice)),
        units: quantity,
        events_count: 0,
        unit_amount_cents: roundFee(unitPrice),
      };
    });
    const invoice = await createInvoice(
      db,
      { models: db.models, temporal },
      {
        organizationId,
        customerId: customer._id,
        invoiceType,
        currency,
        idempotencyKey: key,
        fees,
        at: await customerNow(db, customer, app.deps.now()),
      },
    );
    return withFees(invoice);
  }

  app.post(
    '/invoices/one_off',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: 'Create a one-off invoice (add-ons or free lines), priced and taxed by the engine',
        headers: idempotencyHeaders,
        body: oneOffBody,
        response: responses({ 201: invoiceResource }),
      },
    },
    async (request, reply) => {
      const key = `one_off/${request.headers['idempotency-key'] ?? newId()}`;
      return reply.status(201).send(await createOneOff(request.organizationId, request.body, 'one_off', key));
    },
  );

  app.post(
    '/add_ons/apply',
    {
      config: { idempotent: true },
      schema: {
        tags: ['add_ons', 'invoices'],
        summary: 'Bill an add-on to a customer: a one-off invoice',
        headers: idempotencyHeaders,
        body: z.strictObject({
          add_on_code: z.string().min(1).max(255),
          customer_id: z.string().min(1).max(255),
          amount_cents: decimalInput({ min: 0 }).optional().describe("replaces the add-on's unit price"),
          units: decimalInput({ min: 0 }).optional(),
        }),
        response: responses({ 201: invoiceResource }),
      },
    },
    async (request, reply) => {
      const { add_on_code, customer_id, amount_cents, units } = request.body;
      const line = { add_on_code, ...(units ? { quantity: units } : {}), ...(amount_cents ? { unit_price: amount_cents } : {}) };
      return reply
        .status(201)
        .send(await createOneOff(request.organizationId, { customer_id, line_items: [line] }, 'add_on', `add_on/${newId()}`));
    },
  );

  app.get(
    '/invoices',
    {
      schema: {
        tags,
        summary: 'List invoices, newest first',
        querystring: listQuery.extend({
          customer_id: z.string().max(255).optional(),
          subscription_id: z.string().max(255).optional(),
          status: z.enum(['draft', 'finalized', 'paid', 'voided']).optional(),
          invoice_type: z.enum(['subscription', 'add_on', 'credit', 'one_off', 'progressive_billing']).optional(),
          payment_status: z.enum(['pending', 'succeeded', 'failed']).optional(),
          issuing_date_from: isoDate.optional(),
          issuing_date_to: isoDate.optional(),
        }),
        response: responses({ 200: z.array(invoiceResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, issuing_date_from, issuing_date_to, ...filters } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId, deleted_at: null };
      for (const [k, v] of Object.entries(filters)) if (v !== undefined) filter[k] = v;
      if (issuing_date_from || issuing_date_to) {
        filter.issuing_date = {
          ...(issuing_date_from ? { $gte: issuing_date_from } : {}),
          ...(issuing_date_to ? { $lte: issuing_date_to } : {}),
        };
      }
      const [invoices, total] = await Promise.all([
        Invoice.find(filter).sort({ created_at: -1, _id: -1 }).skip(skip).limit(limit).lean(),
        Invoice.countDocuments(filter),
      ]);
      return sendList(
        reply,
        invoices.map((i) => toInvoiceResource(i)),
        total,
      );
    },
  );

  app.get(
    '/invoices/:id',
    { schema: { tags, summary: 'Get an invoice with its fees', params: idParams, response: responses({ 200: invoiceResource }) } },
    async (request) => withFees(await findInvoice(request.organizationId, request.params.id)),
  );

  app.get(
    '/invoices/:id/explain',
    {
      schema: {
        tags,
        summary: 'Explain an invoice: each fee with the plan, charge and usage it was priced from, and the steps to the total',
        description:
          'For each fee: the plan and charge as they were when billed, the period, the units with the daily rows and events they ' +
          "came from, the charge model's steps; then taxes, coupons, credit notes and wallets in order, each step with the running " +
          'figure, and the workflow run and activity that issued and finalized the invoice (null for invoices issued before these ' +
          'were recorded).',
        params: idParams,
        response: responses({ 200: invoiceExplanation }),
      },
    },
    async (request) => explainInvoice(db, await findInvoice(request.organizationId, request.params.id)),
  );

  app.put(
    '/invoices/:id',
    {
      schema: {
        tags,
        summary: 'Update a draft invoice (metadata, net_payment_term)',
        params: idParams,
        body: z.strictObject({
          metadata: z.record(z.string(), z.unknown()).optional(),
          net_payment_term: z.number().int().min(0).max(365).optional(),
        }),
        response: responses({ 200: invoiceResource }),
      },
    },
    async (request) => {
      const invoice = await findInvoice(request.organizationId, request.params.id);
      const updated = await Invoice.findOneAndUpdate(
        { _id: invoice._id, status: 'draft', deleted_at: null },
        { $set: request.body },
        { returnDocument: 'after' },
      ).lean();
      if (!updated) throw new InvalidTransition(`Only a draft invoice can be updated (this one is ${invoice.status})`);
      return withFees(updated);
    },
  );

  for (const action of ['finalize', 'pay', 'void', 'refresh'] as const satisfies readonly InvoiceCommand[]) {
    app.post(
      `/invoices/:id/${action}`,
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: `${action[0]!.toUpperCase()}${action.slice(1)} an invoice`,
          headers: idempotencyHeaders,
          params: idParams,
          response: responses({ 200: invoiceResource }),
        },
      },
      async (request) => lifecycle(request.organizationId, request.params.id, action),
    );
  }

  app.delete(
    '/invoices/:id',
    { schema: { tags, summary: 'Delete a draft invoice', params: idParams, response: responses({ 200: invoiceResource }) } },
    async (request) => lifecycle(request.organizationId, request.params.id, 'delete'),
  );

  app.get(
    '/invoices/:id/settlements',
    {
      schema: {
        tags,
        summary: "The invoice's settlements (payments, credit notes, wallet credits)",
        params: idParams,
        querystring: listQuery,
        response: responses({ 200: z.array(settlementResource) }),
      },
    },
    async (request, reply) => {
      const invoice = await findInvoice(request.organizationId, request.params.id);
      const rows = await InvoiceSettlement.find({ invoice_id: invoice._id }).sort({ created_at: -1, _id: -1 }).lean();
      const page = rows.slice(request.query.skip, request.query.skip + request.query.limit);
      return sendList(reply, page.map(toSettlementResource), rows.length);
    },
  );

  app.get(
    '/fees',
    {
      schema: {
        tags: ['fees'],
        summary: 'List fees, newest first',
        querystring: listQuery.extend({
          invoice_id: z.string().max(255).optional(),
          customer_id: z.string().max(255).optional(),
          subscription_id: z.string().max(255).optional(),
          fee_type: z.enum(['subscription', 'charge', 'add_on', 'credit', 'commitment']).optional(),
        }),
        response: responses({ 200: z.array(feeResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, ...filters } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId };
      for (const [k, v] of Object.entries(filters)) if (v !== undefined) filter[k] = v;
      const [fees, total] = await Promise.all([
        Fee.find(filter).sort({ created_at: -1, _id: -1 }).skip(skip).limit(limit).lean(),
        Fee.countDocuments(filter),
      ]);
      return sendList(reply, fees.map(toFeeResource), total);
    },
  );

  app.get(
    '/fees/:id',
    { schema: { tags: ['fees'], summary: 'Get a fee', params: idParams, response: responses({ 200: feeResource }) } },
    async (request) => {
      const fee = await Fee.findOne({ _id: request.params.id, organization_id: request.organizationId }).lean();
      if (!fee) throw new NotFound('Fee not found', 'fee_not_found');
      return toFeeResource(fee);
    },
  );
};
