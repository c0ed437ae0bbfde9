import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { WEBHOOK_EVENT_TYPES } from '../../domain/webhook-schedule';
import { InvalidTransition, NotFound } from '../../errors';
import { deliveryLabelsOf, startDelivery } from '../../webhooks/emit-event';
import { generateWebhookSecret } from '../../webhooks/signature';
import { findLive, listPage, live, softDelete, updateLive } from '../catalog';
import { idParams, listQuery, responses, sendList } from '../http';
import { toWebhookEndpointResource, webhookEndpointResource, webhookEndpointWithSecret } from '../../resources/webhook-endpoint';
import { toWebhookResource, webhookResource } from '../../resources/webhook';

const webhookUrl = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }).max(2048, 'at most 2048 characters');

const eventTypes = z
  .array(z.enum(WEBHOOK_EVENT_TYPES))
  .max(WEBHOOK_EVENT_TYPES.length)
  .transform((types) => [...new Set(types)])
  .describe('Event types to receive; empty or absent: all');

const endpointFields = {
  url: webhookUrl,
  signature_algo: z.literal('hmac'),
  status: z.enum(['active', 'inactive']),
  event_types: eventTypes,
};

const createEndpointBody = z.strictObject({
  url: endpointFields.url,
  signature_algo: endpointFields.signature_algo.default('hmac'),
  status: endpointFields.status.default('active'),
  event_types: endpointFields.event_types.default([]),
});

const updateEndpointBody = z.strictObject({
  url: endpointFields.url.optional(),
  signature_algo: endpointFields.signature_algo.optional(),
  status: endpointFields.status.optional(),
  event_types: endpointFields.event_types.optional(),
});

const endpointName = { name: 'Webhook endpoint', code: 'webhook_endpoint_not_found' };

export const webhookRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Webhook, WebhookEndpoint } = app.deps.db.models;
  const tags = ['webhooks'];

  app.post(
    '/webhook_endpoints',
    {
      schema: {
        tags,
        summary: 'Create a webhook endpoint; the signing secret is returned this once',
        body: createEndpointBody,
        response: responses({ 201: webhookEndpointWithSecret }),
      },
    },
    async (request, reply) => {
      const secret = generateWebhookSecret();
      const endpoint = await WebhookEndpoint.create({ ...request.body, secret, organization_id: request.organizationId });
      return reply.status(201).send({ ...toWebhookEndpointResource(endpoint.toObject()), secret });
    },
  );

  app.get(
    '/webhook_endpoints',
    {
      schema: {
        tags,
        summary: 'List webhook endpoints',
        querystring: listQuery,
        response: responses({ 200: z.array(webhookEndpointResource) }),
      },
    },
    async (request, reply) => listPage(reply, WebhookEndpoint, live(request.organizationId), request.query, toWebhookEndpointResource),
  );

  app.get(
    '/webhook_endpoints/:id',
    { schema: { tags, summary: 'Get a webhook endpoint', params: idParams, response: responses({ 200: webhookEndpointResource }) } },
    async (request) => toWebhookEndpointResource(await findLive(WebhookEndpoint, request.organizationId, request.params.id, endpointName)),
  );

  app.put(
    '/webhook_endpoints/:id',
    {
      schema: {
        tags,
        summary: 'Update a webhook endpoint (url, status, event_types)',
        params: idParams,
        body: updateEndpointBody,
        response: responses({ 200: webhookEndpointResource }),
      },
    },
    async (request) =>
      toWebhookEndpointResource(await updateLive(WebhookEndpoint, request.organizationId, request.params.id, request.body, endpointName)),
  );

  app.delete(
    '/webhook_endpoints/:id',
    {
      schema: {
        tags,
        summary: 'Delete a webhook endpoint (it receives nothing more)',
        params: idParams,
        response: responses({ 200: webhookEndpointResource }),
      },
    },
    async (request) =>
      toWebhookEndpointResource(
        await softDelete(WebhookEndpoint, request.organizationId, request.params.id, app.deps.now(), endpointName, { status: 'inactive' }),
      ),
  );

  app.post(
    '/webhook_endpoints/:id/rotate_secret',
    {
      schema: {
        tags,
        summary: 'Replace the signing secret; the new one is returned this once and signs every later attempt',
        params: idParams,
        response: responses({ 200: webhookEndpointWithSecret }),
      },
    },
    async (request) => {
      const secret = generateWebhookSecret();
      const updated = await updateLive(WebhookEndpoint, request.organizationId, request.params.id, { secret }, endpointName);
      return { ...toWebhookEndpointResource(updated), secret };
    },
  );

  app.get(
    '/webhooks',
    {
      schema: {
        tags,
        summary: 'List webhook deliveries, newest first',
        querystring: listQuery.extend({
          webhook_endpoint_id: z.string().max(255).optional(),
          webhook_type: z.string().max(100).optional(),
          status: z.enum(['pending', 'succeeded', 'failed']).optional(),
        }),
        response: responses({ 200: z.array(webhookResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, ...filters } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId };
      for (const [key, value] of Object.entries(filters)) if (value !== undefined) filter[key] = value;
      const [items, total] = await Promise.all([
        Webhook.find(filter).sort({ created_at: -1, _id: -1 }).skip(skip).limit(limit).lean(),
        Webhook.countDocuments(filter),
      ]);
      return sendList(reply, items.map(toWebhookResource), total);
    },
  );

  app.get(
    '/webhooks/:id',
    {
      schema: {
        tags,
        summary: 'Get a webhook delivery with its attempts',
        params: idParams,
        response: responses({ 200: webhookResource }),
      },
    },
    async (request) => {
      const webhook = await Webhook.findOne({ _id: request.params.id, organization_id: request.organizationId }).lean();
      if (!webhook) throw new NotFound('Webhook not found', 'webhook_not_found');
      return toWebhookResource(webhook);
    },
  );

  app.post(
    '/webhooks/:id/retry',
    {
      schema: {
        tags,
        summary: 'Deliver a failed webhook again (a new series of attempts)',
        params: idParams,
        response: responses({ 200: webhookResource }),
      },
    },
    async (request) => {
      const filter = { _id: request.params.id, organization_id: request.organizationId };
      const existing = await Webhook.findOne(filter, { status: 1 }).lean();
      if (!existing) throw new NotFound('Webhook not found', 'webhook_not_found');
      // Only a failed delivery goes back to pending; the guard makes two concurrent retries one.
      const reopened = await Webhook.findOneAndUpdate(
        { ...filter, status: 'failed' },
        { $set: { status: 'pending' } },
        { returnDocument: 'after' },
      ).lean();
      if (!reopened) throw new InvalidTransition(`Only a failed webhook can be retried (this one is ${existing.status})`);
      await startDelivery(
        app.deps.temporal,
        {
          deliveryId: reopened._id,
          organizationId: request.organizationId,
          customerId: null,
          labels: await deliveryLabelsOf(app.deps.db.models, reopened),
        },
        'again',
      );
      return toWebhookResource(reopened);
    },
  );
};
