import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { bulkUpsert, isDuplicateKeyError } from '../../db';
import { newId } from '../../db/base';
import type { EntitlementDoc } from '../../db/models/entitlement';
import type { FeatureDoc } from '../../db/models/feature';
import { entitlementValueError } from '../../domain/entitlements';
import { bumpEntitlementsStamp, EntitlementView } from '../../entitlements/view';
import { Conflict, NotFound, Validation } from '../../errors';
import {
  entitlementResource,
  entitlementValue,
  subscriptionEntitlementsResource,
  toEntitlementResource,
  type EntitlementResource,
} from '../../resources/feature';
import { findByIdOrCode, notFound } from '../catalog';
import { idParams, listQuery, responses, sendList } from '../http';
import { featureNotFound } from './features';
import { findPlan } from './plans';

const reference = z.string().trim().min(1).max(255);

const createEntitlementBody = z.strictObject({
  plan_id: reference.describe('id or code of the plan'),
  feature_id: reference.describe('id or code of the feature'),
  value: entitlementValue,
});

const updateEntitlementBody = z.strictObject({ value: entitlementValue });

const copyEntitlementsBody = z.strictObject({
  from_plan_id: reference.describe('id or code of the plan whose entitlements are copied'),
  to_plan_id: reference.describe('id or code of the plan that receives them'),
  replace: z
    .boolean()
    .default(false)
    .describe("true: the target's entitlements to features the source does not grant are removed (an exact copy)"),
});

const entitlementNotFound = { name: 'Entitlement', code: 'entitlement_not_found' };

/** The stable order of a plan's entitlements in answers that are not pages: by feature code. */
const byFeatureCode = (a: EntitlementResource, b: EntitlementResource) =>
  a.feature_code < b.feature_code ? -1 : a.feature_code > b.feature_code ? 1 : 0;

export const entitlementRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db } = app.deps;
  const { Entitlement, Feature, Plan } = db.models;
  const tags = ['entitlements'];
  const view = new EntitlementView(db);

  function checkValue(feature: FeatureDoc, value: unknown): string {
    const error = entitlementValueError(feature.feature_type, value);
    if (error) throw Validation.field('value', `${error} ("${feature.code}" is a ${feature.feature_type} feature)`);
    return JSON.stringify(value);
  }

  /** The resources of entitlement documents, with their live features (others are left out). */
  async function withFeatures(organizationId: string, docs: EntitlementDoc[]): Promise<EntitlementResource[]> {
    if (docs.length === 0) return [];
    const features = await Feature.find({
      organization_id: organizationId,
      _id: { $in: docs.map((d) => d.feature_id) },
      deleted_at: null,
    }).lean();
    const byId = new Map(features.map((f) => [f._id, f]));
    return docs.flatMap((doc) => {
      const feature = byId.get(doc.feature_id);
      return feature ? [toEntitlementResource(doc, feature)] : [];
    });
  }

  /** An entitlement of the organization by id, while its plan and its feature are live. */
  async function findEntitlement(organizationId: string, id: string): Promise<{ doc: EntitlementDoc; resource: EntitlementResource }> {
    const doc = await Entitlement.findOne({ _id: id, organization_id: organizationId }).lean();
    const planIsLive = doc ? await Plan.exists({ _id: doc.plan_id, organization_id: organizationId, deleted_at: null }) : null;
    const [resource] = doc && planIsLive ? await withFeatures(organizationId, [doc]) : [];
    if (!doc || !resource) throw notFound(entitlementNotFound);
    return { doc, resource };
  }

  async function planEntitlements(organizationId: string, planId: string): Promise<EntitlementResource[]> {
    const docs = await Entitlement.find({ organization_id: organizationId, plan_id: planId }).lean();
    return (await withFeatures(organizationId, docs)).sort(byFeatureCode);
  }

  app.post(
    '/entitlements',
    {
      schema: {
        tags,
        summary: "Set a plan's value for a feature (409 when the plan already has one: PUT /v1/entitlements/{id} replaces it)",
        body: createEntitlementBody,
        response: responses({ 201: entitlementResource }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const { plan_id, feature_id, value } = request.body;
      const [plan, feature] = await Promise.all([
        findPlan(app, organizationId, plan_id),
        findByIdOrCode(Feature, organizationId, feature_id, featureNotFound),
      ]);
      const valueJson = checkValue(feature, value);
      let created: EntitlementDoc;
      try {
        created = (
          await Entitlement.create({ organization_id: organizationId, plan_id: plan._id, feature_id: feature._id, value_json: valueJson })
        ).toObject();
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
        const existing = await Entitlement.findOne(
          { organization_id: organizationId, plan_id: plan._id, feature_id: feature._id },
          { _id: 1 },
        ).lean();
        throw new Conflict(
          `The plan "${plan.code}" already grants "${feature.code}": PUT /v1/entitlements/{id} replaces its value`,
          existing ? { existing_entitlement_id: existing._id } : {},
        );
      }
      await bumpEntitlementsStamp(db, organizationId);
      return reply.status(201).send(toEntitlementResource(created, feature));
    },
  );

  app.get(
    '/entitlements',
    {
      schema: {
        tags,
        summary: "List entitlements, newest first; plan_id lists one plan's, feature_id the plans granting one feature",
        querystring: listQuery.extend({
          plan_id: reference.optional().describe('id or code of a plan'),
          feature_id: reference.optional().describe('id or code of a feature'),
        }),
        response: responses({ 200: z.array(entitlementResource) }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const { skip, limit, plan_id, feature_id } = request.query;
      const filter: Record<string, unknown> = { organization_id: organizationId };
      if (plan_id !== undefined) filter.plan_id = (await findPlan(app, organizationId, plan_id))._id;
      else {
        // Entitlements of deleted plans are not listed.
        const deleted = await Plan.find({ organization_id: organizationId, deleted_at: { $ne: null } }, { _id: 1 }).lean();
        if (deleted.length) filter.plan_id = { $nin: deleted.map((p) => p._id) };
      }
      if (feature_id !== undefined) filter.feature_id = (await findByIdOrCode(Feature, organizationId, feature_id, featureNotFound))._id;
      const [docs, total] = await Promise.all([
        Entitlement.find(filter).sort({ created_at: -1, _id: -1 }).skip(skip).limit(limit).lean(),
        Entitlement.countDocuments(filter),
      ]);
      return sendList(reply, await withFeatures(organizationId, docs), total);
    },
  );

  app.get(
    '/entitlements/:id',
    { schema: { tags, summary: 'Get an entitlement', params: idParams, response: responses({ 200: entitlementResource }) } },
    async (request) => (await findEntitlement(request.organizationId, request.params.id)).resource,
  );

  app.put(
    '/entitlements/:id',
    {
      schema: {
        tags,
        summary: 'Replace the value of an entitlement',
        params: idParams,
        body: updateEntitlementBody,
        response: responses({ 200: entitlementResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const { doc } = await findEntitlement(organizationId, request.params.id);
      const feature = await findByIdOrCode(Feature, organizationId, doc.feature_id, featureNotFound);
      const valueJson = checkValue(feature, request.body.value);
      const updated = await Entitlement.findOneAndUpdate(
        { _id: doc._id, organization_id: organizationId },
        { $set: { value_json: valueJson } },
        { returnDocument: 'after' },
      ).lean();
      if (!updated) throw notFound(entitlementNotFound);
      await bumpEntitlementsStamp(db, organizationId);
      return toEntitlementResource(updated, feature);
    },
  );

  app.delete(
    '/entitlements/:id',
    {
      schema: {
        tags,
        summary: 'Remove a feature from a plan (its customers lose it at their next request)',
        params: idParams,
        response: responses({ 200: entitlementResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const { doc, resource } = await findEntitlement(organizationId, request.params.id);
      const deleted = await Entitlement.findOneAndDelete({ _id: doc._id, organization_id: organizationId }).lean();
      if (!deleted) throw notFound(entitlementNotFound);
      await bumpEntitlementsStamp(db, organizationId);
      return resource;
    },
  );

  app.post(
    '/entitlements/copy',
    {
      schema: {
        tags,
        summary:
          "Copy every entitlement of a plan to another: the target's values for the same features are replaced, its others kept (unless replace)",
        body: copyEntitlementsBody,
        response: responses({
          200: z.array(entitlementResource).describe("the target plan's entitlements after the copy, by feature code"),
        }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const { from_plan_id, to_plan_id, replace } = request.body;
      const [from, to] = await Promise.all([findPlan(app, organizationId, from_plan_id), findPlan(app, organizationId, to_plan_id)]);
      if (from._id === to._id) throw Validation.field('to_plan_id', 'must be another plan than from_plan_id');
      const source = await planEntitlements(organizationId, from._id);
      // One round trip for all: each feature's value is set, or created with a new id.
      const now = new Date();
      await bulkUpsert(
        Entitlement.collection,
        source.map((entitlement) => ({
          updateOne: {
            filter: { organization_id: organizationId, plan_id: to._id, feature_id: entitlement.feature_id },
            update: {
              $set: { value_json: JSON.stringify(entitlement.value), updated_at: now },
              $setOnInsert: { _id: newId(), created_at: now },
            },
            upsert: true,
          },
        })),
      );
      if (replace) {
        await Entitlement.deleteMany({
          organization_id: organizationId,
          plan_id: to._id,
          feature_id: { $nin: source.map((e) => e.feature_id) },
        });
      }
      await bumpEntitlementsStamp(db, organizationId);
      const copied = await planEntitlements(organizationId, to._id);
      return sendList(reply, copied, copied.length);
    },
  );

  app.get(
    '/subscriptions/:id/entitlements',
    {
      schema: {
        tags,
        summary:
          "What the customer of a subscription (by external_id or id) may use now: its current plan's entitlements (none unless active)",
        params: idParams,
        response: responses({ 200: subscriptionEntitlementsResource }),
      },
    },
    async (request) => {
      const found = await view.forSubscription(request.organizationId, request.params.id);
      if (!found) throw new NotFound('Subscription not found', 'subscription_not_found');
      const { subscription, entitlements } = found;
      return {
        subscription_id: subscription._id,
        external_id: subscription.external_id,
        status: subscription.status,
        plan_id: subscription.plan_id,
        entitlements,
      };
    },
  );
};
