import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { BillableMetricFilter } from '../../db/models/billable-metric';
import { AGGREGATION_TYPES } from '../../domain/aggregation/metric';
import { aggregationSettingsFields, aggregationSettingsSchema, checkAggregationSettings } from '../../domain/aggregation/schema';
import { BadRequest, Validation } from '../../errors';
import { findByIdOrCode, listPage, live, softDelete, uniqueWrite, updateLive } from '../catalog';
import { idParams, listQuery, responses } from '../http';
import { billableMetricResource, toBillableMetricResource } from '../../resources/billable-metric';

/** A charge filter value meaning "every value the metric declares for this key" (lago-reference.md 1.4). */
const ALL_FILTER_VALUES = '__ALL_FILTER_VALUES__';

const code = z.string().trim().min(1).max(255);
const name = z.string().trim().min(1).max(255);
const description = z.string().max(2000).nullable();

/**
 * The metric's filters (the specification's BillableMetricFilter): `key` unique within the metric,
 * `values` a non-empty list of distinct non-empty strings. Values are compared with event property
 * text as they are, so they are not trimmed.
 */
const metricFilters = z
  .array(
    z.strictObject({
      key: z.string().min(1).max(255),
      values: z.array(z.string().min(1).max(255)).min(1).max(1000),
    }),
  )
  .max(100)
  .superRefine((filters, ctx) => {
    const keys = new Set<string>();
    filters.forEach((filter, i) => {
      if (keys.has(filter.key)) ctx.addIssue({ code: 'custom', path: [i, 'key'], message: `duplicate filter key "${filter.key}"` });
      keys.add(filter.key);
      const values = new Set<string>();
      filter.values.forEach((value, j) => {
        if (values.has(value)) ctx.addIssue({ code: 'custom', path: [i, 'values', j], message: `duplicate value "${value}"` });
        values.add(value);
      });
    });
  });

const settings = aggregationSettingsFields.shape;

const createMetricBody = z
  .strictObject({
    code,
    name,
    description: description.optional(),
    ...settings,
    filters: metricFilters.default([]),
  })
  .superRefine(checkAggregationSettings);

// Every field optional; the cross-field rules run on the merge of the stored metric and the body.
const updateMetricBody = z.strictObject({
  code: code.optional(),
  name: name.optional(),
  description: description.optional(),
  aggregation_type: settings.aggregation_type.optional(),
  field_name: settings.field_name,
  expression: settings.expression,
  recurring: z.boolean().optional(),
  rounding_function: settings.rounding_function,
  rounding_precision: settings.rounding_precision,
  filters: metricFilters.optional(),
});

/** A blank expression means none (as the aggregation treats it); store null rather than "  ". */
function normalizedExpression(expression: string | null | undefined): string | null {
  return typeof expression === 'string' && expression.trim() !== '' ? expression : null;
}

/** The shape of the `plans` documents this module reads (the plans module owns them). */
interface PlanRow {
  _id: string;
  code?: string;
  charges?: { _id?: string; billable_metric_id?: string; filters?: { values?: Record<string, string[]> }[] }[];
}

const booleanQuery = z.enum(['true', 'false']).transform((v) => v === 'true');

const what = { name: 'Billable metric', code: 'billable_metric_not_found' };

export const billableMetricRoutes: FastifyPluginAsyncZod = async (app) => {
  const { BillableMetric } = app.deps.db.models;
  const tags = ['billable metrics'];
  const plans = () => app.deps.db.connection.collection<PlanRow>('plans');

  /** The live plans whose charges use the metric: while there are any, it cannot be deleted. */
  async function livePlansUsing(organizationId: string, metricId: string): Promise<PlanRow[]> {
    return plans()
      .find(
        { organization_id: organizationId, deleted_at: null, 'charges.billable_metric_id': metricId },
        { projection: { code: 1, charges: 1 } },
      )
      .toArray();
  }

  function inUse(message: string, users: PlanRow[]): BadRequest {
    const codes = users.slice(0, 5).map((p) => `"${p.code ?? p._id}"`);
    const more = users.length > 5 ? ` and ${users.length - 5} more` : '';
    return new BadRequest(`${message}: it is used by the plan(s) ${codes.join(', ')}${more}`, 'resource_in_use');
  }

  /**
   * Filter values that a live charge filter of the metric references and that `filters` no longer
   * declares ("key=value"); removing them would leave those charge filters matching nothing.
   */
  function removedFilterValues(users: PlanRow[], metricId: string, filters: BillableMetricFilter[]): string[] {
    const declared = new Map(filters.map((f) => [f.key, new Set(f.values)]));
    const missing = new Set<string>();
    for (const plan of users) {
      for (const charge of plan.charges ?? []) {
        if (charge.billable_metric_id !== metricId) continue;
        for (const filter of charge.filters ?? []) {
          for (const [key, values] of Object.entries(filter.values ?? {})) {
            const allowed = declared.get(key);
            if (!allowed) {
              missing.add(key);
              continue;
            }
            for (const value of values) if (value !== ALL_FILTER_VALUES && !allowed.has(value)) missing.add(`${key}=${value}`);
          }
        }
      }
    }
    return [...missing];
  }

  app.post(
    '/billable_metrics',
    {
      schema: {
        tags,
        summary: 'Create a billable metric',
        body: createMetricBody,
        response: responses({ 201: billableMetricResource }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const metric = await uniqueWrite(
        () =>
          BillableMetric.create({ ...body, expression: normalizedExpression(body.expression), organization_id: request.organizationId }),
        `A billable metric with code "${body.code}" already exists`,
      );
      return reply.status(201).send(toBillableMetricResource(metric.toObject()));
    },
  );

  app.get(
    '/billable_metrics',
    {
      schema: {
        tags,
        summary: 'List billable metrics, newest first',
        querystring: listQuery.extend({
          aggregation_type: z.enum(AGGREGATION_TYPES).optional(),
          recurring: booleanQuery.optional(),
        }),
        response: responses({ 200: z.array(billableMetricResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, aggregation_type, recurring } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (aggregation_type !== undefined) filter.aggregation_type = aggregation_type;
      if (recurring !== undefined) filter.recurring = recurring;
      return listPage(reply, BillableMetric, filter, { skip, limit }, toBillableMetricResource);
    },
  );

  app.get(
    '/billable_metrics/:id',
    {
      schema: {
        tags,
        summary: 'Get a billable metric by id or code',
        params: idParams,
        response: responses({ 200: billableMetricResource }),
      },
    },
    async (request) => toBillableMetricResource(await findByIdOrCode(BillableMetric, request.organizationId, request.params.id, what)),
  );

  app.put(
    '/billable_metrics/:id',
    {
      schema: {
        tags,
        summary:
          'Update a billable metric. code and aggregation_type cannot change, and filter values charges use cannot be removed, while a live plan uses the metric',
        params: idParams,
        body: updateMetricBody,
        response: responses({ 200: billableMetricResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(BillableMetric, organizationId, request.params.id, what);
      const changes = Object.fromEntries(Object.entries(request.body).filter(([, v]) => v !== undefined)) as typeof request.body;
      if ('expression' in changes) changes.expression = normalizedExpression(changes.expression);

      // The aggregation rules hold for the metric as it will be, not only for the fields sent.
      const merged = aggregationSettingsSchema.safeParse({
        aggregation_type: changes.aggregation_type ?? current.aggregation_type,
        field_name: 'field_name' in changes ? changes.field_name : current.field_name,
        expression: 'expression' in changes ? changes.expression : current.expression,
        recurring: changes.recurring ?? current.recurring,
        rounding_function: 'rounding_function' in changes ? changes.rounding_function : current.rounding_function,
        rounding_precision: 'rounding_precision' in changes ? changes.rounding_precision : current.rounding_precision,
      });
      if (!merged.success) {
        throw new Validation(merged.error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message })));
      }

      const codeChanges = changes.code !== undefined && changes.code !== current.code;
      const typeChanges = changes.aggregation_type !== undefined && changes.aggregation_type !== current.aggregation_type;
      if (codeChanges || typeChanges || changes.filters !== undefined) {
        const users = await livePlansUsing(organizationId, current._id);
        if (users.length > 0) {
          if (codeChanges) throw inUse('The code of the billable metric cannot change', users);
          if (typeChanges) throw inUse('The aggregation_type of the billable metric cannot change', users);
          const removed = removedFilterValues(users, current._id, changes.filters ?? []);
          if (removed.length > 0) throw inUse(`Filter values that charges use cannot be removed (${removed.join(', ')})`, users);
        }
      }

      const updated = await uniqueWrite(
        () => updateLive(BillableMetric, organizationId, current._id, changes, what),
        `A billable metric with code "${changes.code}" already exists`,
      );
      return toBillableMetricResource(updated);
    },
  );

  app.delete(
    '/billable_metrics/:id',
    {
      schema: {
        tags,
        summary: 'Delete a billable metric (soft); refused while a live plan uses it',
        params: idParams,
        response: responses({ 200: billableMetricResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(BillableMetric, organizationId, request.params.id, what);
      const users = await livePlansUsing(organizationId, current._id);
      if (users.length > 0) throw inUse('The billable metric cannot be deleted', users);
      return toBillableMetricResource(await softDelete(BillableMetric, organizationId, current._id, app.deps.now(), what));
    },
  );
};
