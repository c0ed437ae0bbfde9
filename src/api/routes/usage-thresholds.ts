import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { deleteOr404, findOfLivePlan, listPage, uniqueWrite } from '../catalog';
import { decimalInput } from '../decimal';
import { toDecimal128 } from '../../db/decimal';
import { idParams, listQuery, responses } from '../http';
import { findPlan } from './plans';
import { toUsageThresholdResource, usageThresholdResource } from '../../resources/usage-threshold';

const createThresholdBody = z.strictObject({
  amount_cents: decimalInput({ min: 0 })
    .refine((v) => v.gt(0), 'must be greater than 0')
    .describe("usage above this amount (cents of the plan's currency) is invoiced at once: Decimal(12,4)"),
  recurring: z.boolean().default(false).describe('repeat every amount_cents after the last fixed threshold (one per plan)'),
  threshold_display_name: z.string().max(255).nullable().optional(),
});

const what = { name: 'Usage threshold', code: 'usage_threshold_not_found' };

// Progressive billing thresholds of a plan. A plan has at most one recurring threshold, and its
// fixed thresholds have distinct amounts (a second one at the same amount could never trigger
// anything): both are unique rules, so both are 409.
export const usageThresholdRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Plan, UsageThreshold } = app.deps.db.models;
  const tags = ['plans'];

  app.post(
    '/plans/:id/usage_thresholds',
    {
      schema: {
        tags,
        summary: 'Add a usage threshold (progressive billing) to a plan',
        params: idParams,
        body: createThresholdBody,
        response: responses({ 201: usageThresholdResource }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const plan = await findPlan(app, organizationId, request.params.id);
      const { amount_cents, recurring, threshold_display_name } = request.body;
      const amount = amount_cents.toFixed(4);
      const threshold = await uniqueWrite(
        () =>
          UsageThreshold.create({
            organization_id: organizationId,
            plan_id: plan._id,
            amount_cents: toDecimal128(amount_cents),
            recurring,
            threshold_display_name: threshold_display_name ?? null,
            uniqueness_key: recurring ? 'recurring' : `amount:${amount}`,
          }),
        recurring
          ? `The plan "${plan.code}" already has a recurring usage threshold`
          : `The plan "${plan.code}" already has a usage threshold of ${amount} cents`,
      );
      return reply.status(201).send(toUsageThresholdResource(threshold.toObject()));
    },
  );

  app.get(
    '/plans/:id/usage_thresholds',
    {
      schema: {
        tags,
        summary: "List the plan's usage thresholds, newest first",
        params: idParams,
        querystring: listQuery,
        response: responses({ 200: z.array(usageThresholdResource) }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const plan = await findPlan(app, organizationId, request.params.id);
      const { skip, limit } = request.query;
      return listPage(
        reply,
        UsageThreshold,
        { organization_id: organizationId, plan_id: plan._id },
        { skip, limit },
        toUsageThresholdResource,
      );
    },
  );

  app.delete(
    '/usage_thresholds/:id',
    { schema: { tags, summary: 'Remove a usage threshold', params: idParams, response: responses({ 200: usageThresholdResource }) } },
    async (request) => {
      const organizationId = request.organizationId;
      const threshold = await findOfLivePlan(UsageThreshold, Plan, organizationId, request.params.id, what);
      return toUsageThresholdResource(await deleteOr404(UsageThreshold, organizationId, threshold._id, what));
    },
  );
};
