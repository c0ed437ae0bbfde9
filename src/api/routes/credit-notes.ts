import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { idempotencyHeaders } from '../plugins/idempotency';
import { customerLookup } from '../../db/models/customer';
import { createCreditNote, finalizeCreditNote, voidCreditNote, type CreditNoteDeps } from '../../billing/credit-notes';
import { CREDIT_NOTE_REASONS, type CreditNoteDoc } from '../../db/models/credit-note';
import { NotFound } from '../../errors';
import { customerNowById } from '../../test-clocks/time';
import { listPage } from '../catalog';
import { idParams, listQuery, responses } from '../http';
import { creditNoteResource, toCreditNoteResource, type CreditNoteResource } from '../../resources/credit-note';

const reference = z.string().trim().min(1).max(255);

const createCreditNoteBody = z.strictObject({
  invoice_id: reference.describe('A finalized or paid invoice of this organization'),
  customer_id: reference.optional().describe("The invoice's customer (id or external_id); checked when given"),
  credit_note_type: z.literal('credit').default('credit'),
  reason: z.enum(CREDIT_NOTE_REASONS),
  description: z.string().max(1000).nullable().optional(),
  items: z
    .array(
      z.strictObject({
        fee_id: reference.describe('A fee of the invoice'),
        // The specification types it as an integer, and integers are JSON numbers (api-contract.md,
        // Conventions): a fraction of a cent, or a string, is 422. Must be > 0 and at most what
        // remains creditable on the fee (total_amount_cents - credited_amount_cents), that rounded
        // half up for a fee with a fraction of a cent (src/billing/credit-notes.ts).
        amount_cents: z
          .number({ error: 'must be an integer number of cents (a JSON number such as 1250)' })
          .int({ error: 'must be an integer number of cents, with no fraction' })
          .positive({ error: 'must be greater than 0 (a credit of zero is never created)' })
          .describe('cents to credit on the fee: an integer > 0'),
      }),
    )
    .min(1, 'at least one item')
    .max(100, 'at most 100 items'),
});

export const creditNoteRoutes: FastifyPluginAsyncZod = async (app) => {
  const { CreditNote, Customer } = app.deps.db.models;
  const tags = ['credit_notes'];

  const depsFor = (request: { log: CreditNoteDeps['log'] }): CreditNoteDeps => ({ temporal: app.deps.temporal, log: request.log });

  /** The present of a customer (its test clock's time when it is on one), for a note's dates. */
  function nowOf(customerId: string | null): Promise<Date> {
    return customerNowById(app.deps.db, customerId, app.deps.now());
  }

  async function invoiceCustomer(organizationId: string, invoiceId: string): Promise<string | null> {
    return (
      (await app.deps.db.models.Invoice.findOne({ _id: invoiceId, organization_id: organizationId }, { customer_id: 1 }).lean())
        ?.customer_id ?? null
    );
  }

  async function noteCustomer(organizationId: string, noteId: string): Promise<string | null> {
    return (await CreditNote.findOne({ _id: noteId, organization_id: organizationId }, { customer_id: 1 }).lean())?.customer_id ?? null;
  }

  app.post(
    '/credit_notes',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: 'Create a draft credit note on a finalized or paid invoice; its number is assigned now',
        headers: idempotencyHeaders,
        body: createCreditNoteBody,
        response: responses({ 201: creditNoteResource }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const note = await createCreditNote(app.deps.db, depsFor(request), {
        organizationId: request.organizationId,
        invoiceId: body.invoice_id,
        customerId: body.customer_id ?? null,
        reason: body.reason,
        description: body.description ?? null,
        items: body.items,
        at: await nowOf(await invoiceCustomer(request.organizationId, body.invoice_id)),
      });
      return reply.status(201).send(toCreditNoteResource(note));
    },
  );

  app.get(
    '/credit_notes',
    {
      schema: {
        tags,
        summary: 'List credit notes, newest first',
        querystring: listQuery.extend({
          customer_id: reference.optional().describe('id or external_id'),
          invoice_id: reference.optional(),
          status: z.enum(['draft', 'finalized', 'voided']).optional(),
        }),
        response: responses({ 200: z.array(creditNoteResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, customer_id, invoice_id, status } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId };
      if (customer_id !== undefined) {
        const customer = await Customer.findOne(customerLookup(request.organizationId, customer_id), { _id: 1 }).lean();
        // An unknown customer (or another organization's) simply has no credit notes here.
        filter.customer_id = customer?._id ?? customer_id;
      }
      if (invoice_id !== undefined) filter.invoice_id = invoice_id;
      if (status !== undefined) filter.status = status;
      return listPage<CreditNoteDoc, CreditNoteResource>(reply, CreditNote, filter, { skip, limit }, toCreditNoteResource);
    },
  );

  app.get(
    '/credit_notes/:id',
    { schema: { tags, summary: 'Get a credit note with its items', params: idParams, response: responses({ 200: creditNoteResource }) } },
    async (request) => {
      const note = await CreditNote.findOne({ _id: request.params.id, organization_id: request.organizationId }).lean();
      if (!note) throw new NotFound('Credit note not found', 'credit_note_not_found');
      return toCreditNoteResource(note);
    },
  );

  app.post(
    '/credit_notes/:id/finalize',
    {
      schema: {
        tags,
        summary: 'Finalize a draft credit note: its balance goes to the customer’s later invoices in its currency',
        params: idParams,
        response: responses({ 200: creditNoteResource }),
      },
    },
    async (request) =>
      toCreditNoteResource(
        await finalizeCreditNote(app.deps.db, depsFor(request), {
          organizationId: request.organizationId,
          creditNoteId: request.params.id,
          at: await nowOf(await noteCustomer(request.organizationId, request.params.id)),
        }),
      ),
  );

  app.post(
    '/credit_notes/:id/void',
    {
      schema: {
        tags,
        summary: 'Void a draft or finalized credit note: its balance becomes 0 and the unapplied credit returns to the fees',
        params: idParams,
        response: responses({ 200: creditNoteResource }),
      },
    },
    async (request) =>
      toCreditNoteResource(
        await voidCreditNote(app.deps.db, depsFor(request), {
          organizationId: request.organizationId,
          creditNoteId: request.params.id,
          at: await nowOf(await noteCustomer(request.organizationId, request.params.id)),
        }),
      ),
  );
};
