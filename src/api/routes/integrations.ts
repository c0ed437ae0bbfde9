import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isDuplicateKeyError } from '../../db';
import type { IntegrationDoc } from '../../db/models/integration';
import { ApiError, Conflict, Validation } from '../../errors';
import { isPaymentProvider, missingRequired, normaliseSettings, sealSettings } from '../../payments/integrations';
import { SecretsNotConfigured } from '../../payments/secrets';
import { providerCodes } from '../../payments/providers/types';
import { integrationResource, toIntegrationResource } from '../../resources/integration';
import { findLive, listPage, live, softDelete, updateLive } from '../catalog';
import { errorBody, idParams, listQuery, responses } from '../http';

const integrationTypes = ['payment_provider', 'accounting', 'crm', 'tax'] as const;
const settings = z
  .record(z.string().regex(/^[A-Za-z0-9_]{1,100}$/, 'letters, digits and _ only'), z.unknown())
  .refine((s) => Object.keys(s).length <= 50, 'at most 50 settings');

const createBody = z.strictObject({
  integration_type: z.enum(integrationTypes),
  provider_type: z
    .string()
    .trim()
    .min(1)
    .max(50)
    .describe(`payment providers: ${providerCodes.join(', ')}`),
  settings: settings.default({}),
  status: z.enum(['active', 'inactive']).default('active'),
});

const updateBody = z.strictObject({
  integration_type: z.enum(integrationTypes).optional().describe('immutable: accepted only when unchanged'),
  provider_type: z.string().optional().describe('immutable: accepted only when unchanged'),
  settings: settings.optional().describe('merged into the current settings; a secret sent again replaces the old one'),
  status: z.enum(['active', 'inactive']).optional(),
});

const integrationName = { name: 'Integration', code: 'not_found' };

/** Integrations: /v1/integrations (api-contract.md, Integrations). */
export const integrationRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Integration } = app.deps.db.models;
  const tags = ['integrations'];
  const policy = { allowBaseUrlOverride: app.deps.config.PAYMENT_PROVIDER_BASE_URL_OVERRIDE ?? false };

  function seal(doc: Pick<IntegrationDoc, 'organization_id' | 'integration_type' | 'provider_type'>, values: Record<string, string>) {
    try {
      return sealSettings(app.deps.secrets, doc, values);
    } catch (err) {
      if (err instanceof SecretsNotConfigured) throw new ApiError(503, 'secrets_not_configured', err.message);
      throw err;
    }
  }

  app.post(
    '/integrations',
    {
      schema: {
        tags,
        summary: 'Configure an integration (one per provider and organization)',
        body: createBody,
        response: responses({ 201: integrationResource, 503: errorBody }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.integration_type === 'payment_provider' && !isPaymentProvider(body.provider_type)) {
        throw Validation.field('provider_type', `must be one of ${providerCodes.join(', ')} for a payment_provider`);
      }
      const values = normaliseSettings(body.integration_type, body.provider_type, body.settings, policy);
      const missing = missingRequired(body.integration_type, body.provider_type, Object.keys(values));
      if (missing.length) throw new Validation(missing);
      const owner = { organization_id: request.organizationId, integration_type: body.integration_type, provider_type: body.provider_type };
      const sealed = seal(owner, values);
      try {
        const created = await Integration.create({
          ...owner,
          settings: sealed.plain,
          secrets: sealed.secrets,
          secret_hints: sealed.hints,
          status: body.status,
        });
        return reply.status(201).send(toIntegrationResource(created.toObject()));
      } catch (err) {
        if (isDuplicateKeyError(err)) throw new Conflict(`An integration of ${body.provider_type} already exists`);
        throw err;
      }
    },
  );

  app.get(
    '/integrations',
    {
      schema: {
        tags,
        summary: 'List integrations, newest first',
        querystring: listQuery.extend({
          integration_type: z.enum(integrationTypes).optional(),
          provider_type: z.string().max(50).optional(),
        }),
        response: responses({ 200: z.array(integrationResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, integration_type, provider_type } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (integration_type) filter.integration_type = integration_type;
      if (provider_type) filter.provider_type = provider_type;
      return listPage(reply, Integration, filter, { skip, limit }, toIntegrationResource);
    },
  );

  app.get(
    '/integrations/:id',
    { schema: { tags, summary: 'Get an integration', params: idParams, response: responses({ 200: integrationResource }) } },
    async (request) => toIntegrationResource(await findLive(Integration, request.organizationId, request.params.id, integrationName)),
  );

  app.put(
    '/integrations/:id',
    {
      schema: {
        tags,
        summary: 'Update an integration: settings are merged, status changes',
        params: idParams,
        body: updateBody,
        response: responses({ 200: integrationResource, 503: errorBody }),
      },
    },
    async (request) => {
      const current = await findLive(Integration, request.organizationId, request.params.id, integrationName);
      const body = request.body;
      if (body.integration_type !== undefined && body.integration_type !== current.integration_type) {
        throw Validation.field('integration_type', 'is immutable');
      }
      if (body.provider_type !== undefined && body.provider_type !== current.provider_type)
        throw Validation.field('provider_type', 'is immutable');
      const set: Record<string, unknown> = {};
      if (body.status) set.status = body.status;
      if (body.settings) {
        const values = normaliseSettings(current.integration_type, current.provider_type, body.settings, policy);
        const sealed = seal(current, values);
        const names = new Set([...Object.keys(current.settings ?? {}), ...Object.keys(current.secrets ?? {}), ...Object.keys(values)]);
        const missing = missingRequired(current.integration_type, current.provider_type, names);
        if (missing.length) throw new Validation(missing);
        // A setting given again moves between the plain and sealed maps only by its own rule,
        // so each name lands in exactly one of them.
        for (const [name, value] of Object.entries(sealed.plain)) set[`settings.${name}`] = value;
        for (const [name, value] of Object.entries(sealed.secrets)) set[`secrets.${name}`] = value;
        for (const [name, value] of Object.entries(sealed.hints)) set[`secret_hints.${name}`] = value;
      }
      return toIntegrationResource(await updateLive(Integration, request.organizationId, current._id, set, integrationName));
    },
  );

  app.delete(
    '/integrations/:id',
    { schema: { tags, summary: 'Delete an integration (soft)', params: idParams, response: responses({ 200: integrationResource }) } },
    async (request) =>
      toIntegrationResource(await softDelete(Integration, request.organizationId, request.params.id, app.deps.now(), integrationName)),
  );
};
