import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { DunningCampaignDoc } from '../../db/models/dunning-campaign';
import { Validation } from '../../errors';
import { stopCampaign } from '../../payments/dunning';
import { dunningCampaignResource, toDunningCampaignResource } from '../../resources/dunning-campaign';
import { findByIdOrCode, listPage, live, softDelete, uniqueWrite, updateLive } from '../catalog';
import { currencyCode, idParams, listQuery, responses } from '../http';

const thresholds = z
  .array(z.strictObject({ currency: currencyCode, amount_cents: z.number().int().min(0).describe('minor units') }))
  .min(1, 'at least one threshold')
  .max(50)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((t, i) => {
      if (seen.has(t.currency))
        ctx.addIssue({ code: 'custom', path: [i, 'currency'], message: `${t.currency} is given twice (one threshold per currency)` });
      seen.add(t.currency);
    });
  });

const fields = {
  name: z.string().trim().min(1).max(255),
  description: z.string().max(1000).nullable(),
  max_attempts: z.number().int().min(1).max(20),
  days_between_attempts: z.number().int().min(1).max(365),
  thresholds,
  applied_to_organization: z.boolean().describe("the organization's default campaign (setting it removes it from the others)"),
};

const createBody = z.strictObject({
  code: z.string().trim().min(1).max(255),
  ...fields,
  description: fields.description.optional(),
  applied_to_organization: fields.applied_to_organization.default(false),
});

const updateBody = z.strictObject({
  code: z.string().optional().describe('immutable: accepted only when unchanged'),
  name: fields.name.optional(),
  description: fields.description.optional(),
  max_attempts: fields.max_attempts.optional(),
  days_between_attempts: fields.days_between_attempts.optional(),
  thresholds: fields.thresholds.optional(),
  applied_to_organization: fields.applied_to_organization.optional(),
});

const campaignName = { name: 'Dunning campaign', code: 'dunning_campaign_not_found' };

/** Dunning campaigns: /v1/dunning_campaigns (api-contract.md, Dunning campaigns and payment requests). */
export const dunningCampaignRoutes: FastifyPluginAsyncZod = async (app) => {
  const { DunningCampaign } = app.deps.db.models;
  const tags = ['dunning_campaigns'];

  /**
   * At most one default per organization: the others lose it after this one got it. Each request
   * clears the others only after its own write, so two can never both keep it; but two requests
   * making two campaigns the default at the same instant may each clear the other, leaving the
   * organization with no default until it sets one again (a transaction would close this; two
   * clients racing to name different defaults is rare enough not to pay for one).
   */
  async function onlyDefault(campaign: DunningCampaignDoc): Promise<void> {
    if (!campaign.applied_to_organization) return;
    await DunningCampaign.updateMany(
      { ...live(campaign.organization_id), applied_to_organization: true, _id: { $ne: campaign._id } },
      { $set: { applied_to_organization: false } },
    );
  }

  app.post(
    '/dunning_campaigns',
    { schema: { tags, summary: 'Create a dunning campaign', body: createBody, response: responses({ 201: dunningCampaignResource }) } },
    async (request, reply) => {
      const created = await uniqueWrite(
        async () => (await DunningCampaign.create({ ...request.body, organization_id: request.organizationId })).toObject(),
        `A dunning campaign with code "${request.body.code}" already exists`,
      );
      await onlyDefault(created);
      return reply.status(201).send(toDunningCampaignResource(created));
    },
  );

  app.get(
    '/dunning_campaigns',
    {
      schema: {
        tags,
        summary: 'List dunning campaigns, newest first',
        querystring: listQuery,
        response: responses({ 200: z.array(dunningCampaignResource) }),
      },
    },
    async (request, reply) => listPage(reply, DunningCampaign, live(request.organizationId), request.query, toDunningCampaignResource),
  );

  app.get(
    '/dunning_campaigns/:id',
    {
      schema: {
        tags,
        summary: 'Get a dunning campaign by id or code',
        params: idParams,
        response: responses({ 200: dunningCampaignResource }),
      },
    },
    async (request) =>
      toDunningCampaignResource(await findByIdOrCode(DunningCampaign, request.organizationId, request.params.id, campaignName)),
  );

  app.put(
    '/dunning_campaigns/:id',
    {
      schema: {
        tags,
        summary: 'Update a dunning campaign',
        params: idParams,
        body: updateBody,
        response: responses({ 200: dunningCampaignResource }),
      },
    },
    async (request) => {
      const current = await findByIdOrCode(DunningCampaign, request.organizationId, request.params.id, campaignName);
      const { code, ...changes } = request.body;
      if (code !== undefined && code.trim() !== current.code) throw Validation.field('code', 'is immutable');
      const updated = await updateLive(DunningCampaign, request.organizationId, current._id, changes, campaignName);
      await onlyDefault(updated);
      return toDunningCampaignResource(updated);
    },
  );

  app.delete(
    '/dunning_campaigns/:id',
    {
      schema: {
        tags,
        summary: 'Delete a dunning campaign (soft): its running payment requests go on, no new ones start',
        params: idParams,
        response: responses({ 200: dunningCampaignResource }),
      },
    },
    async (request) => {
      const current = await findByIdOrCode(DunningCampaign, request.organizationId, request.params.id, campaignName);
      const deleted = await softDelete(DunningCampaign, request.organizationId, current._id, app.deps.now(), campaignName, {
        applied_to_organization: false,
      });
      // Its workflow would also end at its next check: a Temporal hiccup here does not undo the deletion.
      await stopCampaign(app.deps.temporal, deleted._id).catch((err: unknown) => {
        request.log.warn({ err, campaignId: deleted._id }, "the deleted campaign's workflow was not told");
      });
      return toDunningCampaignResource(deleted);
    },
  );
};
