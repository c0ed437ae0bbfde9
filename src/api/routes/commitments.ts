import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { COMMITMENT_TYPES, type CommitmentDoc } from '../../db/models/commitment';
import { deleteOr404, findOfLivePlan, listPage, uniqueWrite, updateOr404 } from '../catalog';
import { decimalInput } from '../decimal';
import { toDecimal128 } from '../../db/decimal';
import { idParams, listQuery, responses } from '../http';
import { findPlan } from './plans';
import { commitmentResource, toCommitmentResource } from '../../resources/commitment';

const commitmentFields = {
  commitment_type: z.enum(COMMITMENT_TYPES),
  amount_cents: decimalInput({ min: 0 })
    .refine((v) => v.gt(0), 'must be greater than 0')
    .describe("the minimum of the period's usage charges, in cents of the plan's currency: Decimal(12,4)"),
  invoice_display_name: z.string().max(255).nullable(),
};

const createCommitmentBody = z.strictObject({
  commitment_type: commitmentFields.commitment_type.default('minimum_commitment'),
  amount_cents: commitmentFields.amount_cents,
  invoice_display_name: commitmentFields.invoice_display_name.optional(),
});

const updateCommitmentBody = z.strictObject({
  commitment_type: commitmentFields.commitment_type.optional(),
  amount_cents: commitmentFields.amount_cents.optional(),
  invoice_display_name: commitmentFields.invoice_display_name.optional(),
});

const what = { name: 'Commitment', code: 'commitment_not_found' };

// The specification's Commitment: a plan's minimum spend, one per plan. Deleting it removes the
// document (it has no life of its own beyond the plan).
export const commitmentRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Commitment, Plan } = app.deps.db.models;
  const tags = ['plans'];

  /** A commitment of the organization whose plan is live (a deleted plan's commitment is gone too). */
  function findCommitment(organizationId: string, id: string): Promise<CommitmentDoc> {
    return findOfLivePlan(Commitment, Plan, organizationId, id, what);
  }

  app.post(
    '/plans/:id/commitments',
    {
      schema: {
        tags,
        summary: "Set the plan's minimum commitment (one per plan)",
        params: idParams,
        body: createCommitmentBody,
        response: responses({ 201: commitmentResource }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const plan = await findPlan(app, organizationId, request.params.id);
      const { amount_cents, ...body } = request.body;
      const commitment = await uniqueWrite(
        () => Commitment.create({ ...body, amount_cents: toDecimal128(amount_cents), plan_id: plan._id, organization_id: organizationId }),
        `The plan "${plan.code}" already has a commitment; change it with PUT /v1/commitments/{id}`,
      );
      return reply.status(201).send(toCommitmentResource(commitment.toObject()));
    },
  );

  app.get(
    '/plans/:id/commitments',
    {
      schema: {
        tags,
        summary: "List the plan's commitments (at most one)",
        params: idParams,
        querystring: listQuery,
        response: responses({ 200: z.array(commitmentResource) }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const plan = await findPlan(app, organizationId, request.params.id);
      const { skip, limit } = request.query;
      return listPage(reply, Commitment, { organization_id: organizationId, plan_id: plan._id }, { skip, limit }, toCommitmentResource);
    },
  );

  app.put(
    '/commitments/:id',
    {
      schema: {
        tags,
        summary: 'Update a commitment',
        params: idParams,
        body: updateCommitmentBody,
        response: responses({ 200: commitmentResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findCommitment(organizationId, request.params.id);
      const { amount_cents, ...rest } = request.body;
      const changes: Record<string, unknown> = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
      if (amount_cents !== undefined) changes.amount_cents = toDecimal128(amount_cents);
      return toCommitmentResource(await updateOr404(Commitment, { _id: current._id, organization_id: organizationId }, changes, what));
    },
  );

  app.delete(
    '/commitments/:id',
    { schema: { tags, summary: 'Remove a commitment', params: idParams, response: responses({ 200: commitmentResource }) } },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findCommitment(organizationId, request.params.id);
      return toCommitmentResource(await deleteOr404(Commitment, organizationId, current._id, what));
    },
  );
};
