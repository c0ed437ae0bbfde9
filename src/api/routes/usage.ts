import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { sum } from '../../domain/money';
import { computeFeeTaxes, NO_TAXES } from '../../domain/taxes';
import { NotFound, Validation } from '../../errors';
import { CatalogView } from '../../usage/catalog-view';
import { CURRENT_RANGE_FIELDS, currentRange, type RangeSubscription } from '../../usage/current-range';
import { computeChargeUsage } from '../../usage/period-usage';
import { loadTaxSets } from '../../usage/tax-sets';
import { idParams, responses } from '../http';
import { currentUsageResource, toCurrentUsageResource } from '../../resources/current-usage';
import { customerLookup } from '../../db/models/customer';
import type { SubscriptionDoc } from '../../db/models/subscription';
import { customerNow } from '../../test-clocks/time';
import { mayHave } from '../../db/read-flags';

export const usageRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db } = app.deps;
  const catalog = new CatalogView(db);

  app.get(
    '/customers/:id/current_usage',
    {
      schema: {
        tags: ['customers', 'usage'],
        summary: "The customer's usage of a subscription's current period, priced",
        description: 'subscription_id (id or external_id) may be left out when the customer has one active subscription.',
        params: idParams,
        querystring: z.strictObject({ subscription_id: z.string().min(1).max(255).optional() }),
        response: responses({ 200: currentUsageResource }),
      },
    },
    async (request) => {
      const { Customer, Organization, Subscription } = db.models;
      // The organization does not depend on the customer: both in one round trip.
      const [customer, organization] = await Promise.all([
        Customer.findOne(customerLookup(request.organizationId, request.params.id)).lean(),
        Organization.findById(request.organizationId, { timezone: 1, has_taxes: 1 }).lean(),
      ]);
      if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
      const wanted = request.query.subscription_id;
      const candidates = await Subscription.find(
        {
          organization_id: request.organizationId,
          customer_id: customer._id,
          status: 'active',
          ...(wanted ? { $or: [{ _id: wanted }, { external_id: wanted }] } : {}),
        },
        // What currentRange reads, not the rest of the workflow's state.
        { plan_id: 1, ...CURRENT_RANGE_FIELDS },
      ).lean<(RangeSubscription & Pick<SubscriptionDoc, '_id' | 'plan_id'>)[]>();
      if (candidates.length === 0)
        throw new NotFound(wanted ? 'Subscription not found' : 'The customer has no active subscription', 'subscription_not_found');
      if (candidates.length > 1) {
        throw Validation.field('subscription_id', `is required: the customer has ${candidates.length} active subscriptions`);
      }
      const subscription = candidates[0]!;
      const [plans, now] = await Promise.all([
        catalog.plansById([subscription.plan_id], { fresh: true }),
        customerNow(db, customer, app.deps.now()),
      ]);
      const plan = plans.get(subscription.plan_id);
      if (!plan) throw new NotFound('Plan not found', 'plan_not_found');
      const timezone = customer.timezone ?? organization?.timezone ?? 'UTC';

      const { period, from, proration } = currentRange(subscription, plan, timezone, now);

      const metrics = await catalog.metricsById(request.organizationId, [...new Set(plan.charges.map((c) => c.billable_metric_id))]);
      const [usage, taxSets] = await Promise.all([
        computeChargeUsage(db, plan, metrics, {
          subscriptionId: subscription._id,
          organizationId: request.organizationId,
          from,
          to: period.to,
          subscriptionStartedAt: subscription.started_at,
          timezone,
          now,
          proration,
        }),
        // An organization that never had a tax taxes nothing (src/db/read-flags.ts).
        mayHave(organization, 'has_taxes')
          ? loadTaxSets(db, {
              organizationId: request.organizationId,
              customerId: customer._id,
              planId: plan._id,
              chargeIds: plan.charges.map((c) => c._id),
            })
          : NO_TAXES,
      ]);

      const taxes = sum(
        usage.map(
          (u) => computeFeeTaxes({ fee_type: 'charge', charge_id: u.charge._id, amount_cents: u.fees.amount }, taxSets).taxes_amount_cents,
        ),
      );
      return toCurrentUsageResource({
        customerId: customer._id,
        subscriptionId: subscription._id,
        currency: plan.currency,
        from,
        to: period.to,
        usage,
        taxesAmountCents: taxes,
      });
    },
  );
};
