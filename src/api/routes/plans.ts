import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { newId } from '../../db/base';
import { type ChargeDoc, PLAN_INTERVALS, type PlanDoc } from '../../db/models/plan';
import { type ChargeModel, chargePropertiesSchemas } from '../../domain/charge-models';
import { filterKey } from '../../domain/charge-filters';
import { chargeRuleErrors } from '../../domain/charge-rules';
import { BadRequest, type FieldError, NotFound, Validation } from '../../errors';
import { findByIdOrCode, listPage, live, softDelete, uniqueWrite, updateLive } from '../catalog';
import { decimalInput } from '../decimal';
import { toDecimal128 } from '../../db/decimal';
import { currencyCode, idParams, listQuery, responses } from '../http';
import { planResource, toPlanResource } from '../../resources/plan';

const code = z.string().trim().min(1).max(255);
const displayName = z.string().max(255).nullable();

const filterValues = z
  .record(z.string().min(1).max(255), z.array(z.string().min(1).max(255)).min(1).max(1000))
  .refine((values) => Object.keys(values).length > 0, 'must name at least one filter key')
  .describe("metric filter key -> accepted values (keys and values among the billable metric's filters)");

/**
 * The body of one charge with the model's own `properties` schema, for the charge itself and for
 * each of its filters (a filter's properties replace the charge's for the events it matches). A
 * discriminated union on `charge_model` picks this shape, so a wrong property is reported at its
 * full path (`charges.0.properties.graduated_ranges.1.to_value`).
 */
function chargeBody<M extends ChargeModel, P extends z.ZodType<unknown, object>>(model: M, propertiesSchema: P) {
  // Absent properties are parsed as {}, so a model whose fields all have defaults needs none, and
  // any other names its missing fields.
  const properties = propertiesSchema.prefault({} as z.input<P>);
  return z.strictObject({
    billable_metric_id: code.describe('id or code of a billable metric of the organization'),
    charge_model: z.literal(model),
    properties,
    pay_in_advance: z.boolean().default(false),
    prorated: z.boolean().default(false),
    invoiceable: z.boolean().default(true),
    min_amount_cents: decimalInput({ min: 0 }).nullable().optional().describe("minimum of the charge's total per period, cents"),
    max_amount_cents: decimalInput({ min: 0 }).nullable().optional().describe("maximum of the charge's total per period, cents"),
    invoice_display_name: displayName.optional(),
    filters: z
      .array(z.strictObject({ values: filterValues, properties, invoice_display_name: displayName.optional() }))
      .max(100)
      .default([]),
  });
}

const chargeBodies = [
  chargeBody('standard', chargePropertiesSchemas.standard),
  chargeBody('graduated', chargePropertiesSchemas.graduated),
  chargeBody('volume', chargePropertiesSchemas.volume),
  chargeBody('package', chargePropertiesSchemas.package),
  chargeBody('percentage', chargePropertiesSchemas.percentage),
  chargeBody('graduated_percentage', chargePropertiesSchemas.graduated_percentage),
  chargeBody('dynamic', chargePropertiesSchemas.dynamic),
  chargeBody('custom', chargePropertiesSchemas.custom),
] as const;

const keepId = { id: z.string().min(1).max(255).optional().describe('the id of a charge of this plan, to keep it (and its id)') };

const createChargeBody = z.discriminatedUnion('charge_model', chargeBodies);
const updateChargeBody = z.discriminatedUnion('charge_model', [
  chargeBodies[0].extend(keepId),
  chargeBodies[1].extend(keepId),
  chargeBodies[2].extend(keepId),
  chargeBodies[3].extend(keepId),
  chargeBodies[4].extend(keepId),
  chargeBodies[5].extend(keepId),
  chargeBodies[6].extend(keepId),
  chargeBodies[7].extend(keepId),
]);

type ChargeInput = z.output<typeof createChargeBody> & { id?: string | undefined };

const planFields = {
  name: z.string().trim().min(1).max(255),
  description: z.string().max(2000).nullable(),
  interval: z.enum(PLAN_INTERVALS),
  amount_cents: z.number().int().min(0).describe('the base fee per period, an integer number of cents'),
  currency: currencyCode,
  trial_period_days: z.number().int().min(0).max(3650),
};

const createPlanBody = z.strictObject({
  code,
  name: planFields.name,
  description: planFields.description.optional(),
  interval: planFields.interval,
  amount_cents: planFields.amount_cents.default(0),
  currency: planFields.currency.default('USD'),
  trial_period_days: planFields.trial_period_days.default(0),
  charges: z.array(createChargeBody).max(100).default([]),
});

const updatePlanBody = z.strictObject({
  code: code.optional(),
  name: planFields.name.optional(),
  description: planFields.description.optional(),
  interval: planFields.interval.optional(),
  amount_cents: planFields.amount_cents.optional(),
  currency: planFields.currency.optional(),
  trial_period_days: planFields.trial_period_days.optional(),
  charges: z
    .array(updateChargeBody)
    .max(100)
    .optional()
    .describe('replaces every charge: a charge given with its id keeps it, the others get new ids, a charge left out is removed'),
});

export const planNotFound = { name: 'Plan', code: 'plan_not_found' };

/** A live plan of the organization, by id or code (404 plan_not_found otherwise). */
export function findPlan(app: FastifyInstance, organizationId: string, idOrCode: string): Promise<PlanDoc> {
  return findByIdOrCode(app.deps.db.models.Plan, organizationId, idOrCode, planNotFound);
}

/**
 * The `billable_metrics` documents this module reads. They are read from the collection rather
 * than through a model, so that plans depend on the shape of the documents only.
 */
interface MetricRow {
  _id: string;
  organization_id: string;
  code: string;
  aggregation_type: string;
  recurring?: boolean;
  filters?: { key: string; values: string[] }[];
  deleted_at?: Date | null;
}

/** Filter values without repeats, in the order given. */
function distinctValues(values: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(values).map(([key, list]) => [key, [...new Set(list)]]));
}

export const planRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Plan, Subscription } = app.deps.db.models;
  const tags = ['plans'];
  const metrics = () => app.deps.db.connection.collection<MetricRow>('billable_metrics');

  /**
   * The charges to store: each metric resolved (id or code) among the organization's live metrics,
   * every rule checked, and ids kept for charges given with theirs. A filter of a kept charge keeps
   * its id when its values are unchanged.
   */
  async function buildCharges(
    organizationId: string,
    inputs: readonly ChargeInput[],
    previous: readonly ChargeDoc[] = [],
  ): Promise<ChargeDoc[]> {
    const refs = [...new Set(inputs.map((c) => c.billable_metric_id))];
    const rows = refs.length
      ? await metrics()
          .find({ organization_id: organizationId, deleted_at: null, $or: [{ _id: { $in: refs } }, { code: { $in: refs } }] })
          .toArray()
      : [];
    const byId = new Map(rows.map((m) => [m._id, m]));
    const byCode = new Map(rows.map((m) => [m.code, m]));
    const previousById = new Map(previous.map((c) => [c._id, c]));

    const errors: FieldError[] = [];
    const kept = new Map<string, number>();
    const resolved = inputs.map((charge, i) => {
      const path = `charges.${i}`;
      const metric = byId.get(charge.billable_metric_id) ?? byCode.get(charge.billable_metric_id);
      if (!metric) {
        throw new NotFound(
          `${path}.billable_metric_id: no billable metric "${charge.billable_metric_id}" in this organization`,
          'billable_metric_not_found',
        );
      }
      let before: ChargeDoc | undefined;
      if (charge.id !== undefined) {
        before = previousById.get(charge.id);
        if (!before) throw new NotFound(`${path}.id: the plan has no charge "${charge.id}"`, 'charge_not_found');
        const first = kept.get(charge.id);
        if (first !== undefined) errors.push({ path: `${path}.id`, message: `the same charge as charges.${first}` });
        else kept.set(charge.id, i);
        if (before.billable_metric_id !== metric._id) {
          errors.push({
            path: `${path}.billable_metric_id`,
            message: 'a charge keeps its billable metric; leave out id to replace the charge with a new one',
          });
        }
      }
      errors.push(...chargeRuleErrors(charge, metric, path));
      return { charge, metric, before };
    });
    if (errors.length) throw new Validation(errors);

    return resolved.map(({ charge, metric, before }) => {
      const filterIds = new Map((before?.filters ?? []).map((f) => [filterKey(f.values), f._id]));
      return {
        _id: before?._id ?? newId(),
        billable_metric_id: metric._id,
        charge_model: charge.charge_model,
        properties: charge.properties as Record<string, unknown>,
        pay_in_advance: charge.pay_in_advance,
        prorated: charge.prorated,
        invoiceable: charge.invoiceable,
        min_amount_cents: charge.min_amount_cents == null ? null : toDecimal128(charge.min_amount_cents),
        max_amount_cents: charge.max_amount_cents == null ? null : toDecimal128(charge.max_amount_cents),
        invoice_display_name: charge.invoice_display_name ?? null,
        filters: charge.filters.map((filter) => ({
          _id: filterIds.get(filterKey(filter.values)) ?? newId(),
          values: distinctValues(filter.values),
          properties: filter.properties as Record<string, unknown>,
          invoice_display_name: filter.invoice_display_name ?? null,
        })),
      };
    });
  }

  /** A plan is in use while a pending or active subscription is on it or scheduled to switch to it. */
  async function usedBySubscriptions(organizationId: string, planId: string): Promise<boolean> {
    const count = await Subscription.countDocuments({
      organization_id: organizationId,
      status: { $in: ['pending', 'active', 'paused'] },
      $or: [{ plan_id: planId }, { previous_plan_id: planId }],
    });
    return count > 0;
  }

  app.post(
    '/plans',
    { schema: { tags, summary: 'Create a plan with its charges', body: createPlanBody, response: responses({ 201: planResource }) } },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const { charges, ...body } = request.body;
      const built = await buildCharges(organizationId, charges);
      const plan = await uniqueWrite(
        () => Plan.create({ ...body, charges: built, organization_id: organizationId }),
        `A plan with code "${body.code}" already exists`,
      );
      return reply.status(201).send(toPlanResource(plan.toObject()));
    },
  );

  app.get(
    '/plans',
    {
      schema: {
        tags,
        summary: 'List plans, newest first',
        querystring: listQuery.extend({ interval: z.enum(PLAN_INTERVALS).optional(), currency: currencyCode.optional() }),
        response: responses({ 200: z.array(planResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, interval, currency } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (interval !== undefined) filter.interval = interval;
      if (currency !== undefined) filter.currency = currency;
      return listPage(reply, Plan, filter, { skip, limit }, toPlanResource);
    },
  );

  app.get(
    '/plans/:id',
    { schema: { tags, summary: 'Get a plan by id or code', params: idParams, response: responses({ 200: planResource }) } },
    async (request) => toPlanResource(await findPlan(app, request.organizationId, request.params.id)),
  );

  app.put(
    '/plans/:id',
    {
      schema: {
        tags,
        summary: 'Update a plan; interval and currency are fixed while subscriptions use it',
        params: idParams,
        body: updatePlanBody,
        response: responses({ 200: planResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findPlan(app, organizationId, request.params.id);
      const { charges, ...rest } = request.body;
      const changes: Record<string, unknown> = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
      // Billing periods and the customer's currency were set from these: a running subscription
      // cannot follow a change of either.
      const fixed = (['interval', 'currency'] as const).filter((k) => changes[k] !== undefined && changes[k] !== current[k]);
      if (fixed.length && (await usedBySubscriptions(organizationId, current._id))) {
        throw new BadRequest(
          `The plan is used by pending or active subscriptions: its ${fixed.join(' and ')} cannot change`,
          'resource_in_use',
        );
      }
      if (charges !== undefined) changes.charges = await buildCharges(organizationId, charges, current.charges ?? []);
      const updated = await uniqueWrite(
        () => updateLive(Plan, organizationId, current._id, changes, planNotFound),
        `A plan with code "${String(rest.code)}" already exists`,
      );
      return toPlanResource(updated);
    },
  );

  app.delete(
    '/plans/:id',
    {
      schema: {
        tags,
        summary: 'Delete a plan (soft) with its charges; refused while a pending or active subscription uses it',
        params: idParams,
        response: responses({ 200: planResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findPlan(app, organizationId, request.params.id);
      if (await usedBySubscriptions(organizationId, current._id)) {
        throw new BadRequest('The plan is used by pending or active subscriptions; terminate them first', 'resource_in_use');
      }
      return toPlanResource(await softDelete(Plan, organizationId, current._id, app.deps.now(), planNotFound));
    },
  );
};
