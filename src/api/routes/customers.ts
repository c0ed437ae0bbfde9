import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isDuplicateKeyError } from '../../db';
import type { CustomerDoc } from '../../db/models/customer';
import { BadRequest, Conflict, NotFound, Validation } from '../../errors';
import { customerNow } from '../../test-clocks/time';
import { emitEvent } from '../../webhooks/emit-event';
import { findLive, listPage, live, notFound, softDelete, updateLive } from '../catalog';
import { currencyCode, email, ianaTimezone, idParams, listQuery, responses } from '../http';
import { customerResource, toCustomerResource } from '../../resources/customer';
import { providerCodes } from '../../payments/providers/types';
import { newCustomerReadFlags } from '../../db/read-flags';

const billingMetadata = z
  .record(z.string().min(1).max(255), z.union([z.string().max(1000), z.number(), z.boolean()]))
  .refine((m) => Object.keys(m).length <= 50, 'at most 50 keys');

const customerFields = {
  name: z.string().max(255).nullable(),
  email: email.nullable(),
  currency: currencyCode,
  billing_metadata: billingMetadata,
  net_payment_term: z.number().int().min(0).max(365).nullable().describe("null: the organization's"),
  invoice_grace_period: z.number().int().min(0).max(365).nullable().describe("null: the organization's"),
  timezone: ianaTimezone.nullable().describe("IANA; null: the organization's"),
  payment_provider: z.enum(providerCodes).nullable().describe('the provider that collects this customer (dunning, off-session charges)'),
  provider_customer_id: z.string().trim().min(1).max(255).nullable().describe("the customer's id at the provider"),
  payment_method_id: z
    .string()
    .trim()
    .min(1)
    .max(255)
    .nullable()
    .describe('the saved method at the provider: a Stripe pm_..., a GoCardless mandate MD..., an Adyen storedPaymentMethodId'),
  applied_dunning_campaign_id: z
    .string()
    .trim()
    .min(1)
    .max(255)
    .nullable()
    .describe("a dunning campaign of the organization (its id); null, or a campaign deleted since: the organization's default"),
  exclude_from_dunning_campaign: z.boolean().describe('true: no campaign chases this customer'),
};

const testClockId = z.string().trim().min(1).max(255).nullable();

const createCustomerBody = z
  .strictObject({
    external_id: z.string().trim().min(1).max(255),
    ...Object.fromEntries(Object.entries(customerFields).map(([k, v]) => [k, v.optional()])),
  } as { external_id: z.ZodString } & { [K in keyof typeof customerFields]: z.ZodOptional<(typeof customerFields)[K]> })
  .extend({
    test_clock_id: testClockId.optional().describe('a test clock of the organization: everything of the customer follows it (immutable)'),
  });

const updateCustomerBody = z
  .strictObject({
    external_id: z.string().optional().describe('immutable: accepted only when unchanged'),
    ...Object.fromEntries(Object.entries(customerFields).map(([k, v]) => [k, v.optional()])),
  } as { external_id: z.ZodOptional<z.ZodString> } & {
    [K in keyof typeof customerFields]: z.ZodOptional<(typeof customerFields)[K]>;
  })
  .extend({ test_clock_id: testClockId.optional().describe('immutable: accepted only when unchanged') });

const customerName = { name: 'Customer', code: 'customer_not_found' };
const testClockName = { name: 'Test clock', code: 'test_clock_not_found' };

export const customerRoutes: FastifyPluginAsyncZod = async (app) => {
  const { Customer, DunningCampaign, Organization, TestClock } = app.deps.db.models;
  const tags = ['customers'];

  /** A live customer of the organization, by id or external_id (api-contract.md). */
  function findCustomer(organizationId: string, id: string): Promise<CustomerDoc> {
    return findLive(Customer, organizationId, id, customerName, ['external_id']);
  }

  /** A dunning campaign given for a customer must be a live one of the organization. */
  async function checkCampaign(organizationId: string, campaignId: string | null | undefined): Promise<void> {
    if (!campaignId) return;
    const campaign = await DunningCampaign.exists({ _id: campaignId, organization_id: organizationId, deleted_at: null });
    if (!campaign) throw new NotFound('Dunning campaign not found', 'dunning_campaign_not_found');
  }

  app.post(
    '/customers',
    { schema: { tags, summary: 'Create a customer', body: createCustomerBody, response: responses({ 201: customerResource }) } },
    async (request, reply) => {
      const body = request.body;
      await checkCampaign(request.organizationId, body.applied_dunning_campaign_id);
      if (body.test_clock_id) {
        const clock = await TestClock.exists({ _id: body.test_clock_id, organization_id: request.organizationId, deleted_at: null });
        if (!clock) throw notFound(testClockName);
      }
      let currency = body.currency;
      if (!currency) {
        const org = await Organization.findById(request.organizationId, { default_currency: 1 }).lean();
        currency = org?.default_currency ?? 'USD';
      }
      try {
        const customer = (
          await Customer.create({ ...body, currency, organization_id: request.organizationId, ...newCustomerReadFlags() })
        ).toObject();
        const resource = toCustomerResource(customer);
        // A test clock's customer is announced at the clock's time, like everything of it.
        const occurredAt = await customerNow(app.deps.db, customer, customer.created_at);
        // The customer exists whatever happens next: a failure to announce it is logged, not
        // turned into an error that would make the client retry into a 409.
        await emitEvent(
          { models: app.deps.db.models, temporal: app.deps.temporal },
          {
            organizationId: request.organizationId,
            type: 'customer.created',
            idempotencyKey: `customer/${customer._id}/created`,
            object: resource,
            occurredAt,
            customerId: customer._id,
          },
        ).catch((err: unknown) => request.log.error({ err, customerId: customer._id }, 'could not emit customer.created'));
        return reply.status(201).send(resource);
      } catch (err) {
        if (isDuplicateKeyError(err)) {
          const existing = await Customer.findOne(
            { organization_id: request.organizationId, external_id: body.external_id, deleted_at: null },
            { _id: 1 },
          ).lean();
          throw new Conflict(`A customer with external_id "${body.external_id}" already exists`, {
            existing_customer_id: existing?._id,
          });
        }
        throw err;
      }
    },
  );

  app.get(
    '/customers',
    {
      schema: {
        tags,
        summary: 'List customers, newest first',
        querystring: listQuery.extend({ external_id: z.string().max(255).optional() }),
        response: responses({ 200: z.array(customerResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, external_id } = request.query;
      const filter: Record<string, unknown> = live(request.organizationId);
      if (external_id !== undefined) filter.external_id = external_id;
      return listPage(reply, Customer, filter, { skip, limit }, toCustomerResource);
    },
  );

  app.get(
    '/customers/:id',
    { schema: { tags, summary: 'Get a customer by id or external_id', params: idParams, response: responses({ 200: customerResource }) } },
    async (request) => toCustomerResource(await findCustomer(request.organizationId, request.params.id)),
  );

  app.put(
    '/customers/:id',
    {
      schema: {
        tags,
        summary: 'Update a customer (external_id is immutable)',
        params: idParams,
        body: updateCustomerBody,
        response: responses({ 200: customerResource }),
      },
    },
    async (request) => {
      const current = await findCustomer(request.organizationId, request.params.id);
      const { external_id, test_clock_id, ...changes } = request.body;
      if (external_id !== undefined && external_id.trim() !== current.external_id) {
        throw Validation.field('external_id', 'is immutable');
      }
      if (test_clock_id !== undefined && test_clock_id !== (current.test_clock_id ?? null)) {
        throw Validation.field('test_clock_id', 'is immutable');
      }
      await checkCampaign(request.organizationId, changes.applied_dunning_campaign_id);
      return toCustomerResource(await updateLive(Customer, request.organizationId, current._id, changes, customerName));
    },
  );

  app.delete(
    '/customers/:id',
    {
      schema: {
        tags,
        summary: 'Delete a customer (soft); refused while it has a pending or active subscription',
        params: idParams,
        response: responses({ 200: customerResource }),
      },
    },
    async (request) => {
      const current = await findCustomer(request.organizationId, request.params.id);
      const running = await app.deps.db.models.Subscription.countDocuments({
        organization_id: request.organizationId,
        customer_id: current._id,
        status: { $in: ['pending', 'active', 'paused'] },
      });
      if (running > 0) {
        throw new BadRequest('The customer has pending or active subscriptions; terminate them first', 'customer_has_active_subscriptions');
      }
      return toCustomerResource(await softDelete(Customer, request.organizationId, current._id, app.deps.now(), customerName));
    },
  );
};
