import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { toDecimal128 } from '../../db/decimal';
import type { SubscriptionDoc } from '../../db/models/subscription';
import { USAGE_ALERT_TYPES, type UsageAlertDoc } from '../../db/models/usage-alert';
import type { UsageAlertTriggerDoc } from '../../db/models/usage-alert-trigger';
import { toDecimal4String } from '../../domain/money';
import { NotFound } from '../../errors';
import {
  toUsageAlertResource,
  toUsageAlertTriggerResource,
  usageAlertResource,
  usageAlertStatusResource,
  usageAlertTriggerResource,
} from '../../resources/usage-alert';
import { customerNow } from '../../test-clocks/time';
import { countUsageAlert, measureAlerts } from '../../usage/alerts';
import { CatalogView } from '../../usage/catalog-view';
import { findLive, findSubscription as findSubscriptionOf, listPage, live, softDelete, updateLive } from '../catalog';
import { decimalInput } from '../decimal';
import { idParams, listQuery, responses, sendList } from '../http';

const what = { name: 'Usage alert', code: 'usage_alert_not_found' };

const threshold = decimalInput({ min: 0 })
  .refine((v) => v.gt(0), 'must be greater than 0')
  .describe("units of the metric, or cents of the plan's currency for the amount types");

const createBody = z
  .strictObject({
    subscription_id: z.string().min(1).max(255).describe('The subscription, by id or external_id'),
    alert_type: z.enum(USAGE_ALERT_TYPES),
    billable_metric_code: z
      .string()
      .min(1)
      .max(255)
      .nullable()
      .optional()
      .describe('Required for the billable_metric_* types; absent for current_usage_amount'),
    threshold,
    recurring: z.boolean().default(false).describe('Fire again at every multiple of the threshold'),
    name: z.string().max(255).nullable().optional(),
  })
  .superRefine((body, ctx) => {
    const perMetric = body.alert_type !== 'current_usage_amount';
    if (perMetric && !body.billable_metric_code)
      ctx.addIssue({ code: 'custom', path: ['billable_metric_code'], message: `is required for ${body.alert_type}` });
    if (!perMetric && body.billable_metric_code)
      ctx.addIssue({ code: 'custom', path: ['billable_metric_code'], message: 'must be absent for current_usage_amount' });
  });

const updateBody = z.strictObject({
  threshold: threshold.optional(),
  recurring: z.boolean().optional(),
  name: z.string().max(255).nullable().optional(),
});

const listFilters = listQuery.extend({
  subscription_id: z.string().min(1).max(255).optional().describe('id or external_id'),
  alert_type: z.enum(USAGE_ALERT_TYPES).optional(),
});

// Usage alerts of subscriptions (docs/usage-alerts.md). Checked by ingestion (src/usage/alerts.ts);
// the subscription's `usage_alerts_count` tells ingestion whether to look, so it is incremented
// before an alert exists and decremented after it is gone: a crash in between leaves a count too
// high (one needless query per event), never too low (an alert never checked).
export const usageAlertRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db } = app.deps;
  const { BillableMetric, Customer, Organization, Subscription, UsageAlert, UsageAlertTrigger } = db.models;
  const catalog = new CatalogView(db);
  const tags = ['usage alerts'];

  const findSubscription = (organizationId: string, ref: string) =>
    findSubscriptionOf(Subscription, organizationId, ref, { status: { $in: ['pending', 'active'] } });

  app.post(
    '/usage_alerts',
    { schema: { tags, summary: 'Create a usage alert', body: createBody, response: responses({ 201: usageAlertResource }) } },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const body = request.body;
      const subscription = await findSubscription(organizationId, body.subscription_id);
      const metric = body.billable_metric_code
        ? await BillableMetric.findOne({ ...live(organizationId), code: body.billable_metric_code }, { code: 1 }).lean()
        : null;
      if (body.billable_metric_code && !metric) throw new NotFound('Billable metric not found', 'billable_metric_not_found');
      await countUsageAlert(db, subscription._id, 1);
      try {
        const alert = await UsageAlert.create({
          organization_id: organizationId,
          subscription_id: subscription._id,
          external_subscription_id: subscription.external_id,
          customer_id: subscription.customer_id,
          alert_type: body.alert_type,
          billable_metric_id: metric?._id ?? null,
          billable_metric_code: metric?.code ?? null,
          name: body.name ?? null,
          threshold: toDecimal128(body.threshold),
          recurring: body.recurring,
        });
        return reply.status(201).send(toUsageAlertResource(alert.toObject()));
      } catch (err) {
        await countUsageAlert(db, subscription._id, -1);
        throw err;
      }
    },
  );

  app.get(
    '/usage_alerts',
    {
      schema: {
        tags,
        summary: 'List usage alerts, newest first',
        querystring: listFilters,
        response: responses({ 200: z.array(usageAlertResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, subscription_id, alert_type } = request.query;
      const filter: Record<string, unknown> = { ...live(request.organizationId) };
      if (subscription_id) filter.$or = [{ subscription_id }, { external_subscription_id: subscription_id }];
      if (alert_type) filter.alert_type = alert_type;
      return listPage(reply, UsageAlert, filter, { skip, limit }, toUsageAlertResource);
    },
  );

  app.get(
    '/usage_alerts/:id',
    { schema: { tags, summary: 'A usage alert', params: idParams, response: responses({ 200: usageAlertResource }) } },
    async (request) => toUsageAlertResource(await findLive(UsageAlert, request.organizationId, request.params.id, what)),
  );

  app.put(
    '/usage_alerts/:id',
    {
      schema: {
        tags,
        summary: 'Update a usage alert (a new threshold or recurring counts crossings afresh)',
        params: idParams,
        body: updateBody,
        response: responses({ 200: usageAlertResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const alert = await findLive(UsageAlert, organizationId, request.params.id, what);
      const { threshold: newThreshold, recurring, name } = request.body;
      const set: Record<string, unknown> = {};
      if (name !== undefined) set.name = name;
      if (recurring !== undefined) set.recurring = recurring;
      if (newThreshold !== undefined) set.threshold = toDecimal128(newThreshold);
      const ruleChanged =
        (recurring !== undefined && recurring !== alert.recurring) ||
        (newThreshold !== undefined && toDecimal4String(newThreshold) !== toUsageAlertResource(alert).threshold);
      if (ruleChanged) Object.assign(set, { revision: alert.revision + 1, last_crossing: null });
      if (Object.keys(set).length === 0) return toUsageAlertResource(alert);
      return toUsageAlertResource(await updateLive(UsageAlert, organizationId, alert._id, set, what));
    },
  );

  app.delete(
    '/usage_alerts/:id',
    { schema: { tags, summary: 'Delete a usage alert', params: idParams, response: responses({ 200: usageAlertResource }) } },
    async (request) => {
      const deleted = await softDelete(UsageAlert, request.organizationId, request.params.id, app.deps.now(), what);
      await countUsageAlert(db, deleted.subscription_id, -1);
      return toUsageAlertResource(deleted);
    },
  );

  app.get(
    '/usage_alerts/:id/status',
    {
      schema: {
        tags,
        summary: "The alert's current period: usage so far against the threshold",
        params: idParams,
        response: responses({ 200: usageAlertStatusResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const alert = await findLive(UsageAlert, organizationId, request.params.id, what);
      const [subscription, customer, organization] = await Promise.all([
        Subscription.findById(alert.subscription_id).lean<SubscriptionDoc>(),
        Customer.findById(alert.customer_id, { timezone: 1, test_clock_id: 1 }).lean(),
        Organization.findById(organizationId, { timezone: 1 }).lean(),
      ]);
      if (!subscription || !customer) throw new NotFound('Subscription not found', 'subscription_not_found');
      const now = await customerNow(db, customer, app.deps.now());
      const timezone = customer.timezone ?? organization?.timezone ?? 'UTC';
      const [measure] = await measureAlerts(db, catalog, { subscription, timezone, now }, [alert]);
      if (!measure) throw new NotFound('Plan not found', 'plan_not_found');
      const fired = measure.crossings;
      const next = alert.recurring || fired === 0 ? measure.threshold.times(fired + 1) : null;
      return {
        usage_alert_id: alert._id,
        subscription_id: alert.subscription_id,
        alert_type: alert.alert_type,
        billable_metric_code: alert.billable_metric_code,
        period_from: measure.range.period.from.toISOString(),
        period_to: measure.range.period.to.toISOString(),
        current_value: toDecimal4String(measure.value),
        threshold: toDecimal4String(measure.threshold),
        recurring: alert.recurring,
        crossings: fired,
        next_threshold_value: next ? toDecimal4String(next) : null,
        last_triggered_at: alert.last_triggered_at ? alert.last_triggered_at.toISOString() : null,
      };
    },
  );

  app.get(
    '/usage_alerts/:id/triggers',
    {
      schema: {
        tags,
        summary: "The alert's crossings, newest first",
        params: idParams,
        querystring: listQuery,
        response: responses({ 200: z.array(usageAlertTriggerResource) }),
      },
    },
    async (request, reply) => {
      const alert: UsageAlertDoc = await findLive(UsageAlert, request.organizationId, request.params.id, what);
      const { skip, limit } = request.query;
      // Newest first; the crossings one check recorded share created_at, the highest first.
      const [triggers, total] = await Promise.all([
        UsageAlertTrigger.find({ usage_alert_id: alert._id })
          .sort({ created_at: -1, crossing: -1, _id: -1 })
          .skip(skip)
          .limit(limit)
          .lean<UsageAlertTriggerDoc[]>(),
        UsageAlertTrigger.countDocuments({ usage_alert_id: alert._id }),
      ]);
      return sendList(
        reply,
        triggers.map((t) => toUsageAlertTriggerResource(t, alert)),
        total,
      );
    },
  );
};
