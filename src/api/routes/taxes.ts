import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { TAXABLE_TYPES, type AppliedTaxDoc, type TaxableType } from '../../db/models/applied-tax';
import { BadRequest, NotFound } from '../../errors';
import { deleteOr404, findByIdOrCode, listPage, live, notFound, softDelete, uniqueWrite, updateLive } from '../catalog';
import { decimalInput } from '../decimal';
import { toDecimal128 } from '../../db/decimal';
import { idParams, listQuery, responses, sendList } from '../http';
import { appliedTaxResource, taxResource, toAppliedTaxResource, toTaxResource } from '../../resources/tax';
import { customerLookup } from '../../db/models/customer';

const code = z.string().trim().min(1).max(255);
const name = z.string().trim().min(1).max(255);

/** A fraction, 0 to 1, at most 4 decimals (the specification's Decimal(5,4)): 0.0875 is 8.75 %. */
const rate = decimalInput({ min: 0, max: 1, maxFractionDigits: 4, maxDigits: 5 }).describe(
  'a fraction from 0 to 1 with at most 4 decimals ("0.2" is 20 %), as a string or a number',
);

const taxFields = {
  name,
  rate,
  applied_to_organization: z.boolean().describe("the organization's default tax, for fees no more specific level taxes"),
  description: z.string().max(2000).nullable(),
  category: z.string().max(255).nullable(),
};

const createTaxBody = z.strictObject({
  code,
  name: taxFields.name,
  rate: taxFields.rate,
  applied_to_organization: taxFields.applied_to_organization.default(false),
  description: taxFields.description.optional(),
  category: taxFields.category.optional(),
});

const updateTaxBody = z.strictObject({
  code: code.optional(),
  name: taxFields.name.optional(),
  rate: taxFields.rate.optional(),
  applied_to_organization: taxFields.applied_to_organization.optional(),
  description: taxFields.description.optional(),
  category: taxFields.category.optional(),
});

const applyTaxBody = z.strictObject({
  tax_code: code.describe('the code (or id) of the tax'),
  taxable_type: z.enum(TAXABLE_TYPES),
  taxable_id: z.string().trim().min(1).max(255).describe('customer: id or external_id; plan: id or code; charge: id; add_on: id or code'),
});

/** The shape of the `plans` documents this module reads (the plans module owns them). */
interface PlanRow {
  _id: string;
  code?: string;
}

const booleanQuery = z.enum(['true', 'false']).transform((v) => v === 'true');

const what = { name: 'Tax', code: 'tax_not_found' };
const appliedTaxName = { name: 'Applied tax', code: 'applied_tax_not_found' };

const TAXABLE_NAMES: Record<TaxableType, string> = { customer: 'Customer', plan: 'Plan', charge: 'Charge', add_on: 'Add-on' };

export const taxRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Tax, AppliedTax, Customer, AddOn } = app.deps.db.models;
  const tags = ['taxes'];
  const plans = () => app.deps.db.connection.collection<PlanRow>('plans');

  /**
   * The id of a live taxable of the organization, or null. Customers are found by id or
   * external_id, plans and add-ons by id or code, charges by id among the charges of live plans.
   */
  async function resolveTaxable(organizationId: string, type: TaxableType, idOrKey: string): Promise<string | null> {
    switch (type) {
      case 'customer': {
        const customer = await Customer.findOne(customerLookup(organizationId, idOrKey), { _id: 1 }).lean();
        return customer?._id ?? null;
      }
      case 'plan': {
        const plan = await plans().findOne(
          { organization_id: organizationId, deleted_at: null, $or: [{ _id: idOrKey }, { code: idOrKey }] },
          { projection: { _id: 1 } },
        );
        return plan?._id ?? null;
      }
      case 'charge': {
        const plan = await plans().findOne(
          { organization_id: organizationId, deleted_at: null, 'charges._id': idOrKey },
          { projection: { _id: 1 } },
        );
        return plan ? idOrKey : null;
      }
      case 'add_on': {
        const addOn = await AddOn.findOne({ ...live(organizationId), $or: [{ _id: idOrKey }, { code: idOrKey }] }, { _id: 1 }).lean();
        return addOn?._id ?? null;
      }
    }
  }

  /** How many of the tax's links point at a customer, plan, charge or add-on that is still live. */
  async function liveLinks(organizationId: string, links: AppliedTaxDoc[]): Promise<number> {
    const ids = (type: TaxableType) => links.filter((l) => l.taxable_type === type).map((l) => l.taxable_id);
    const [customers, planIds, chargeIds, addOns] = [ids('customer'), ids('plan'), ids('charge'), ids('add_on')];
    const counts = await Promise.all([
      customers.length ? Customer.countDocuments({ _id: { $in: customers }, organization_id: organizationId, deleted_at: null }) : 0,
      planIds.length ? plans().countDocuments({ _id: { $in: planIds }, organization_id: organizationId, deleted_at: null }) : 0,
      chargeIds.length
        ? plans().countDocuments({ organization_id: organizationId, deleted_at: null, 'charges._id': { $in: chargeIds } })
        : 0,
      addOns.length ? AddOn.countDocuments({ _id: { $in: addOns }, ...live(organizationId) }) : 0,
    ]);
    return counts.reduce((a, b) => a + b, 0);
  }

  /** The codes of these taxes, deleted ones included (a link outlives nothing, but a list may race a delete). */
  async function taxCodes(taxIds: string[]): Promise<Map<string, string>> {
    const taxes = await Tax.find({ _id: { $in: [...new Set(taxIds)] } }, { code: 1 }).lean();
    return new Map(taxes.map((t) => [t._id, t.code]));
  }

  app.post(
    '/taxes',
    { schema: { tags, summary: 'Create a tax', body: createTaxBody, response: responses({ 201: taxResource }) } },
    async (request, reply) => {
      const { rate: value, ...body } = request.body;
      const tax = await uniqueWrite(
        () => Tax.create({ ...body, rate: toDecimal128(value), organization_id: request.organizationId }),
        `A tax with code "${body.code}" already exists`,
      );
      return reply.status(201).send(toTaxResource(tax.toObject()));
    },
  );

  app.get(
    '/taxes',
    {
      schema: {
        tags,
        summary: 'List taxes, newest first',
        querystring: listQuery.extend({ applied_to_organization: booleanQuery.optional() }),
        response: responses({ 200: z.array(taxResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, applied_to_organization } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (applied_to_organization !== undefined) filter.applied_to_organization = applied_to_organization;
      return listPage(reply, Tax, filter, { skip, limit }, toTaxResource);
    },
  );

  app.post(
    '/taxes/apply',
    {
      schema: {
        tags,
        summary: 'Apply a tax to a customer, plan, charge or add-on',
        body: applyTaxBody,
        response: responses({ 201: appliedTaxResource }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const { tax_code, taxable_type, taxable_id } = request.body;
      const tax = await findByIdOrCode(Tax, organizationId, tax_code, what);
      const taxableId = await resolveTaxable(organizationId, taxable_type, taxable_id);
      if (taxableId === null) throw new NotFound(`${TAXABLE_NAMES[taxable_type]} not found`, `${taxable_type}_not_found`);
      const link = await uniqueWrite(
        () => AppliedTax.create({ organization_id: organizationId, tax_id: tax._id, taxable_type, taxable_id: taxableId }),
        `The tax "${tax.code}" is already applied to this ${taxable_type}`,
      );
      // A delete of the tax may have run between the lookup and the insert; its link goes with it.
      if (!(await Tax.exists({ _id: tax._id, deleted_at: null }))) {
        await AppliedTax.deleteOne({ _id: link._id });
        throw notFound(what);
      }
      return reply.status(201).send(toAppliedTaxResource(link.toObject(), tax.code));
    },
  );

  app.get(
    '/taxes/applied',
    {
      schema: {
        tags,
        summary: 'List the taxes applied to customers, plans, charges and add-ons, newest first',
        querystring: listQuery.extend({
          taxable_type: z.enum(TAXABLE_TYPES).optional(),
          taxable_id: z.string().trim().min(1).max(255).optional().describe('with taxable_type, also an external_id or a code'),
          tax_code: z.string().trim().min(1).max(255).optional().describe('the code (or id) of a tax'),
        }),
        response: responses({ 200: z.array(appliedTaxResource) }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const { skip, limit, taxable_type, taxable_id, tax_code } = request.query;
      const filter: Record<string, unknown> = { organization_id: organizationId };
      if (taxable_type !== undefined) filter.taxable_type = taxable_type;
      if (taxable_id !== undefined) {
        // Links store ids; an external_id or a code is translated when the type says where to look.
        const resolved = taxable_type === undefined ? null : await resolveTaxable(organizationId, taxable_type, taxable_id);
        filter.taxable_id = resolved ?? taxable_id;
      }
      if (tax_code !== undefined) {
        const tax = await Tax.findOne({ ...live(organizationId), $or: [{ _id: tax_code }, { code: tax_code }] }, { _id: 1 }).lean();
        if (!tax) return sendList(reply, [], 0);
        filter.tax_id = tax._id;
      }
      const [links, total] = await Promise.all([
        AppliedTax.find(filter).sort({ created_at: -1, _id: -1 }).skip(skip).limit(limit).lean(),
        AppliedTax.countDocuments(filter),
      ]);
      const codes = await taxCodes(links.map((l) => l.tax_id));
      return sendList(
        reply,
        links.map((l) => toAppliedTaxResource(l, codes.get(l.tax_id) ?? '')),
        total,
      );
    },
  );

  app.delete(
    '/taxes/applied/:id',
    {
      schema: {
        tags,
        summary: 'Remove a tax from a customer, plan, charge or add-on',
        params: idParams,
        response: responses({ 200: appliedTaxResource }),
      },
    },
    async (request) => {
      const link = await deleteOr404(AppliedTax, request.organizationId, request.params.id, appliedTaxName);
      const codes = await taxCodes([link.tax_id]);
      return toAppliedTaxResource(link, codes.get(link.tax_id) ?? '');
    },
  );

  app.get(
    '/taxes/:id',
    { schema: { tags, summary: 'Get a tax by id or code', params: idParams, response: responses({ 200: taxResource }) } },
    async (request) => toTaxResource(await findByIdOrCode(Tax, request.organizationId, request.params.id, what)),
  );

  app.put(
    '/taxes/:id',
    {
      schema: {
        tags,
        summary: 'Update a tax',
        params: idParams,
        body: updateTaxBody,
        response: responses({ 200: taxResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(Tax, organizationId, request.params.id, what);
      const { rate: value, ...rest } = request.body;
      const changes: Record<string, unknown> = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
      if (value !== undefined) changes.rate = toDecimal128(value);
      const updated = await uniqueWrite(
        () => updateLive(Tax, organizationId, current._id, changes, what),
        `A tax with code "${String(rest.code)}" already exists`,
      );
      return toTaxResource(updated);
    },
  );

  app.delete(
    '/taxes/:id',
    {
      schema: {
        tags,
        summary: 'Delete a tax (soft); refused while it is the organization default or applied to a live customer, plan, charge or add-on',
        params: idParams,
        response: responses({ 200: taxResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(Tax, organizationId, request.params.id, what);
      // Deleting an organization-wide tax would silently change every later invoice: that takes
      // an explicit PUT applied_to_organization=false first.
      if (current.applied_to_organization) {
        throw new BadRequest('The tax applies to the whole organization; set applied_to_organization to false first', 'resource_in_use');
      }
      const links = await AppliedTax.find({ organization_id: organizationId, tax_id: current._id }).lean();
      const inUse = await liveLinks(organizationId, links);
      if (inUse > 0) {
        throw new BadRequest(
          `The tax is applied to ${inUse} live customer(s), plan(s), charge(s) or add-on(s); remove it from them first (DELETE /v1/taxes/applied/{id})`,
          'resource_in_use',
        );
      }
      const deleted = await softDelete(Tax, organizationId, current._id, app.deps.now(), what);
      // What remains links the tax to deleted resources only: it goes with the tax.
      await AppliedTax.deleteMany({ organization_id: organizationId, tax_id: current._id });
      return toTaxResource(deleted);
    },
  );
};
