import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { newId } from '../../db/base';
import { NotFound, Unauthorized, Validation } from '../../errors';
import { listPage } from '../catalog';
import { currencyCode, email, ianaTimezone, idParams, isoDateTimeInput, listQuery, responses } from '../http';
import {
  apiKeyResource,
  apiKeyWithRawKey,
  organizationResource,
  toApiKeyResource,
  toOrganizationResource,
} from '../../resources/organization';
import { API_KEY_PREFIX, bearerToken, hashApiKey } from '../plugins/auth';
import { newOrganizationReadFlags } from '../../db/read-flags';

const optionalText = (max: number) => z.string().max(max).nullable().optional();

const organizationFields = {
  name: z.string().trim().min(1).max(255),
  default_currency: currencyCode,
  timezone: ianaTimezone,
  net_payment_term: z.number().int().min(0).max(365),
  invoice_grace_period: z.number().int().min(0).max(365),
  document_number_prefix: z
    .string()
    .regex(/^[A-Za-z0-9-]{1,20}$/, 'letters, digits and dashes, at most 20 characters')
    .transform((s) => s.toUpperCase()),
  email: email.nullable().optional(),
  legal_name: optionalText(255),
  address_line1: optionalText(255),
  address_line2: optionalText(255),
  city: optionalText(255),
  zipcode: optionalText(255),
  state: optionalText(255),
  country: z
    .string()
    .regex(/^[A-Za-z]{2}$/, 'an ISO 3166-1 alpha-2 country code')
    .transform((s) => s.toUpperCase())
    .nullable()
    .optional(),
  events_rate_limit_per_minute: z.number().int().min(1).max(1_000_000),
};

const createOrganizationBody = z.strictObject({
  ...organizationFields,
  default_currency: organizationFields.default_currency.default('USD'),
  timezone: organizationFields.timezone.default('UTC'),
  net_payment_term: organizationFields.net_payment_term.default(30),
  invoice_grace_period: organizationFields.invoice_grace_period.default(0),
  document_number_prefix: organizationFields.document_number_prefix.optional(),
  events_rate_limit_per_minute: organizationFields.events_rate_limit_per_minute.default(1000),
});

const updateOrganizationBody = z.strictObject(
  Object.fromEntries(Object.entries(organizationFields).map(([k, v]) => [k, v.optional()])) as {
    [K in keyof typeof organizationFields]: z.ZodOptional<(typeof organizationFields)[K]>;
  },
);

/** `bsk_live_` + 43 url-safe characters (256 random bits). Only its SHA-256 is stored. */
function generateRawKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** First three letters of the name, upper-cased (api-contract.md); "ORG" when it has none. */
export function defaultDocumentPrefix(name: string): string {
  const letters = name
    .replace(/[^A-Za-z]/g, '')
    .slice(0, 3)
    .toUpperCase();
  return letters.length > 0 ? letters : 'ORG';
}

/** POST /v1/organizations: the one route that takes no API key (optionally a signup token). */
export const signupRoutes: FastifyPluginAsyncZod = async (app) => {
  const { ApiKey, Organization } = app.deps.db.models;

  app.post(
    '/organizations',
    {
      schema: {
        tags: ['organizations'],
        summary: 'Create an organization and its first API key',
        description:
          'Open when the server has no BILLING_SIGNUP_TOKEN; otherwise send `Authorization: Bearer <signup token>`. The answer carries `api_key.raw_key`, shown this once.',
        security: [],
        body: createOrganizationBody,
        response: responses({ 201: organizationResource.extend({ api_key: apiKeyWithRawKey }) }),
      },
    },
    async (request, reply) => {
      const signupToken = app.deps.config.BILLING_SIGNUP_TOKEN;
      if (signupToken && bearerToken(request) !== signupToken) {
        throw new Unauthorized('Organization sign-up requires "Authorization: Bearer <signup token>"');
      }
      const body = request.body;
      const organization = await Organization.create({
        ...body,
        document_number_prefix: body.document_number_prefix ?? defaultDocumentPrefix(body.name),
        ...newOrganizationReadFlags(),
      });
      const rawKey = generateRawKey();
      const key = await ApiKey.create({
        organization_id: organization._id,
        name: 'default',
        key_hash: hashApiKey(rawKey),
        key_prefix: rawKey.slice(0, API_KEY_PREFIX.length + 6),
      });
      return reply
        .status(201)
        .send({ ...toOrganizationResource(organization.toObject()), api_key: { ...toApiKeyResource(key.toObject()), raw_key: rawKey } });
    },
  );
};

/** The authenticated organization and its API keys. */
export const organizationRoutes: FastifyPluginAsyncZod = async (app) => {
  const { ApiKey, Organization } = app.deps.db.models;
  const tags = ['organizations'];

  app.get(
    '/organizations/current',
    { schema: { tags, summary: 'The organization of the API key', response: responses({ 200: organizationResource }) } },
    async (request) => {
      const organization = await Organization.findById(request.organizationId).lean();
      if (!organization) throw new NotFound('Organization not found');
      return toOrganizationResource(organization);
    },
  );

  app.put(
    '/organizations/current',
    {
      schema: {
        tags,
        summary: 'Update the organization of the API key',
        body: updateOrganizationBody,
        response: responses({ 200: organizationResource }),
      },
    },
    async (request) => {
      const organization = await Organization.findByIdAndUpdate(
        request.organizationId,
        { $set: request.body },
        { returnDocument: 'after', runValidators: true },
      ).lean();
      if (!organization) throw new NotFound('Organization not found');
      return toOrganizationResource(organization);
    },
  );

  app.get(
    '/organizations/current/api_keys',
    {
      schema: {
        tags,
        summary: 'List API keys (never the raw key)',
        querystring: listQuery,
        response: responses({ 200: z.array(apiKeyResource) }),
      },
    },
    async (request, reply) => listPage(reply, ApiKey, { organization_id: request.organizationId }, request.query, toApiKeyResource),
  );

  app.post(
    '/organizations/current/api_keys',
    {
      schema: {
        tags,
        summary: 'Create an API key; raw_key is returned this once',
        body: z.strictObject({ name: z.string().trim().min(1).max(255).optional(), expires_at: isoDateTimeInput.optional() }),
        response: responses({ 201: apiKeyWithRawKey }),
      },
    },
    async (request, reply) => {
      const { name, expires_at } = request.body;
      if (expires_at && expires_at.getTime() <= app.deps.now().getTime()) {
        throw Validation.field('expires_at', 'must be in the future');
      }
      const rawKey = generateRawKey();
      const key = await ApiKey.create({
        _id: newId(),
        organization_id: request.organizationId,
        name: name ?? null,
        key_hash: hashApiKey(rawKey),
        key_prefix: rawKey.slice(0, API_KEY_PREFIX.length + 6),
        expires_at: expires_at ?? null,
      });
      return reply.status(201).send({ ...toApiKeyResource(key.toObject()), raw_key: rawKey });
    },
  );

  app.delete(
    '/organizations/current/api_keys/:id',
    { schema: { tags, summary: 'Revoke an API key', params: idParams, response: responses({ 200: apiKeyResource }) } },
    async (request) => {
      const filter = { _id: request.params.id, organization_id: request.organizationId };
      // Revoking twice answers the same revoked key; revoked_at keeps the first revocation.
      await ApiKey.updateOne({ ...filter, status: 'active' }, { $set: { status: 'revoked', revoked_at: app.deps.now() } });
      const key = await ApiKey.findOne(filter).lean();
      if (!key) throw new NotFound('API key not found');
      return toApiKeyResource(key);
    },
  );
};
