import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findByIdOrCode, listPage, live, softDelete, uniqueWrite, updateLive } from '../catalog';
import { decimalInput } from '../decimal';
import { toDecimal128 } from '../../db/decimal';
import { currencyCode, idParams, listQuery, responses } from '../http';
import { addOnResource, toAddOnResource } from '../../resources/add-on';

const code = z.string().trim().min(1).max(255);

const addOnFields = {
  name: z.string().trim().min(1).max(255),
  amount_cents: decimalInput({ min: 0 }).describe('the default unit price, in cents of amount_currency: Decimal(12,4)'),
  amount_currency: currencyCode,
  description: z.string().max(2000).nullable(),
  invoice_display_name: z.string().max(255).nullable(),
};

const createAddOnBody = z.strictObject({
  code,
  name: addOnFields.name,
  amount_cents: addOnFields.amount_cents,
  amount_currency: addOnFields.amount_currency.default('USD'),
  description: addOnFields.description.optional(),
  invoice_display_name: addOnFields.invoice_display_name.optional(),
});

const updateAddOnBody = z.strictObject({
  code: code.optional(),
  name: addOnFields.name.optional(),
  amount_cents: addOnFields.amount_cents.optional(),
  amount_currency: addOnFields.amount_currency.optional(),
  description: addOnFields.description.optional(),
  invoice_display_name: addOnFields.invoice_display_name.optional(),
});

const what = { name: 'Add-on', code: 'add_on_not_found' };

// POST /v1/add_ons/apply creates an invoice and belongs with the invoices.
export const addOnRoutes: FastifyPluginAsyncZod = async (app) => {
  const { AddOn } = app.deps.db.models;
  const tags = ['add-ons'];

  app.post(
    '/add_ons',
    {
      schema: { tags, summary: 'Create an add-on (a one-off charge)', body: createAddOnBody, response: responses({ 201: addOnResource }) },
    },
    async (request, reply) => {
      const { amount_cents, ...body } = request.body;
      const addOn = await uniqueWrite(
        () => AddOn.create({ ...body, amount_cents: toDecimal128(amount_cents), organization_id: request.organizationId }),
        `An add-on with code "${body.code}" already exists`,
      );
      return reply.status(201).send(toAddOnResource(addOn.toObject()));
    },
  );

  app.get(
    '/add_ons',
    {
      schema: {
        tags,
        summary: 'List add-ons, newest first',
        querystring: listQuery.extend({ amount_currency: currencyCode.optional() }),
        response: responses({ 200: z.array(addOnResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, amount_currency } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (amount_currency !== undefined) filter.amount_currency = amount_currency;
      return listPage(reply, AddOn, filter, { skip, limit }, toAddOnResource);
    },
  );

  app.get(
    '/add_ons/:id',
    { schema: { tags, summary: 'Get an add-on by id or code', params: idParams, response: responses({ 200: addOnResource }) } },
    async (request) => toAddOnResource(await findByIdOrCode(AddOn, request.organizationId, request.params.id, what)),
  );

  app.put(
    '/add_ons/:id',
    {
      schema: { tags, summary: 'Update an add-on', params: idParams, body: updateAddOnBody, response: responses({ 200: addOnResource }) },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(AddOn, organizationId, request.params.id, what);
      const { amount_cents, ...rest } = request.body;
      const changes: Record<string, unknown> = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
      if (amount_cents !== undefined) changes.amount_cents = toDecimal128(amount_cents);
      const updated = await uniqueWrite(
        () => updateLive(AddOn, organizationId, current._id, changes, what),
        `An add-on with code "${String(rest.code)}" already exists`,
      );
      return toAddOnResource(updated);
    },
  );

  app.delete(
    '/add_ons/:id',
    { schema: { tags, summary: 'Delete an add-on (soft)', params: idParams, response: responses({ 200: addOnResource }) } },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(AddOn, organizationId, request.params.id, what);
      return toAddOnResource(await softDelete(AddOn, organizationId, current._id, app.deps.now(), what));
    },
  );
};
