import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { FEATURE_TYPES } from '../../domain/entitlements';
import { bumpEntitlementsStamp } from '../../entitlements/view';
import { BadRequest } from '../../errors';
import { featureResource, toFeatureResource } from '../../resources/feature';
import { findByIdOrCode, listPage, live, softDelete, uniqueWrite, updateLive } from '../catalog';
import { idParams, listQuery, responses } from '../http';

const code = z.string().trim().min(1).max(255);

const featureFields = {
  name: z.string().trim().min(1).max(255),
  description: z.string().max(2000).nullable(),
};

const createFeatureBody = z.strictObject({
  code,
  name: featureFields.name,
  description: featureFields.description.optional(),
  feature_type: z.enum(FEATURE_TYPES).describe('boolean: on or off; quantity: a whole number; custom: a string or JSON value'),
});

// feature_type is fixed at creation: the plans' values were validated against it.
const updateFeatureBody = z.strictObject({
  code: code.optional(),
  name: featureFields.name.optional(),
  description: featureFields.description.optional(),
});

export const featureNotFound = { name: 'Feature', code: 'feature_not_found' };

export const featureRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db } = app.deps;
  const { Entitlement, Feature, Plan } = db.models;
  const tags = ['features'];

  app.post(
    '/features',
    {
      schema: {
        tags,
        summary: 'Create a feature (something plans grant)',
        body: createFeatureBody,
        response: responses({ 201: featureResource }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const feature = await uniqueWrite(
        () => Feature.create({ ...body, organization_id: request.organizationId }),
        `A feature with code "${body.code}" already exists`,
      );
      return reply.status(201).send(toFeatureResource(feature.toObject()));
    },
  );

  app.get(
    '/features',
    {
      schema: {
        tags,
        summary: 'List features, newest first',
        querystring: listQuery.extend({ feature_type: z.enum(FEATURE_TYPES).optional() }),
        response: responses({ 200: z.array(featureResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, feature_type } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (feature_type !== undefined) filter.feature_type = feature_type;
      return listPage(reply, Feature, filter, { skip, limit }, toFeatureResource);
    },
  );

  app.get(
    '/features/:id',
    { schema: { tags, summary: 'Get a feature by id or code', params: idParams, response: responses({ 200: featureResource }) } },
    async (request) => toFeatureResource(await findByIdOrCode(Feature, request.organizationId, request.params.id, featureNotFound)),
  );

  app.put(
    '/features/:id',
    {
      schema: {
        tags,
        summary: 'Update a feature (its code, name, description; feature_type is fixed)',
        params: idParams,
        body: updateFeatureBody,
        response: responses({ 200: featureResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(Feature, organizationId, request.params.id, featureNotFound);
      const changes: Record<string, unknown> = Object.fromEntries(Object.entries(request.body).filter(([, v]) => v !== undefined));
      const updated = await uniqueWrite(
        () => updateLive(Feature, organizationId, current._id, changes, featureNotFound),
        `A feature with code "${String(request.body.code)}" already exists`,
      );
      // Subscriptions' entitlements show the feature's code and name.
      await bumpEntitlementsStamp(db, organizationId);
      return toFeatureResource(updated);
    },
  );

  app.delete(
    '/features/:id',
    {
      schema: {
        tags,
        summary: 'Delete a feature (soft); refused (400 resource_in_use) while a live plan has an entitlement to it',
        params: idParams,
        response: responses({ 200: featureResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const current = await findByIdOrCode(Feature, organizationId, request.params.id, featureNotFound);
      // Refused rather than cascaded: removing a feature from plans takes it away from their
      // customers at once, which should be a deliberate DELETE of each entitlement (as deleting a
      // billable metric used by a plan is refused, api-contract.md).
      const planIds = (await Entitlement.find({ organization_id: organizationId, feature_id: current._id }, { plan_id: 1 }).lean()).map(
        (e) => e.plan_id,
      );
      const users = planIds.length
        ? await Plan.find({ _id: { $in: planIds }, ...live(organizationId) }, { code: 1 })
            .sort({ code: 1 })
            .lean()
        : [];
      if (users.length > 0) {
        const codes = users.slice(0, 5).map((p) => `"${p.code}"`);
        const more = users.length > 5 ? ` and ${users.length - 5} more` : '';
        throw new BadRequest(
          `The feature is granted by the plan(s) ${codes.join(', ')}${more}; delete those entitlements first`,
          'resource_in_use',
        );
      }
      const deleted = await softDelete(Feature, organizationId, current._id, app.deps.now(), featureNotFound);
      // What deleted plans held of it goes with it.
      if (planIds.length) await Entitlement.deleteMany({ organization_id: organizationId, feature_id: current._id });
      await bumpEntitlementsStamp(db, organizationId);
      return toFeatureResource(deleted);
    },
  );
};
