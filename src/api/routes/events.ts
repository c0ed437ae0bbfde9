import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { workflowIds } from '../../temporal/workflow-ids';
import { usageInAdvanceSignal } from '../../../workflows/subscription.messages';
import type { EventDoc } from '../../db/models/event';
import type { OrganizationDoc } from '../../db/models/organization';
import { Conflict, NotFound, RateLimited, Validation } from '../../errors';
import { CatalogView } from '../../usage/catalog-view';
import { type EventInput, Ingestor, type IngestOutcome } from '../../usage/ingest';
import { EventGroups } from '../../usage/group-commit';
import { UsageAlertChecker } from '../../usage/alerts';
import { eventsRefused, rateLimitRefusals } from '../../metrics/registry';
import { consumeEventsRateLimit, sweepRateLimitWindows } from '../../usage/rate-limit';
import { errorBody, listQuery, responses, sendList } from '../http';
import { eventResource, toEventResource } from '../../resources/event';

const MAX_BATCH = 100;

/** ISO 8601 with an offset, or Unix seconds (a number or a string of digits). */
const eventTimestamp = z
  .union([z.iso.datetime({ offset: true }), z.number(), z.string().regex(/^\d+(\.\d+)?$/)], {
    error: 'must be an ISO 8601 timestamp or Unix seconds',
  })
  .transform((raw, ctx) => {
    const date = typeof raw === 'number' || /^\d+(\.\d+)?$/.test(raw) ? new Date(Number(raw) * 1000) : new Date(raw);
    const year = date.getUTCFullYear();
    if (Number.isNaN(date.getTime()) || year < 1970 || year > 2200) {
      ctx.addIssue({ code: 'custom', message: 'is out of range' });
      return z.NEVER;
    }
    return date;
  })
  .meta({ description: "ISO 8601 or Unix seconds; default now (a test clock customer's: the clock's time, which it may not be after)" });

const identifier = z.string().trim().min(1).max(255);

export const eventInputSchema = z.strictObject({
  transaction_id: identifier.describe('Unique per organization: the idempotency key'),
  external_customer_id: identifier,
  external_subscription_id: identifier.optional().describe("Default: the customer's active subscriptions whose plan charges this metric"),
  code: identifier.describe('A billable metric code'),
  timestamp: eventTimestamp.optional(),
  properties: z.record(z.string(), z.unknown()).default({}),
});

const batchResult = z
  .object({
    ingested: z.number().int(),
    duplicates: z.number().int(),
    events: z.array(eventResource),
    errors: z.array(z.object({ index: z.number().int(), code: z.string(), message: z.string() })),
  })
  .meta({ id: 'EventBatchResult' });

export const eventRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  // Events of in-advance charges: their subscriptions' workflows bill them at once (not waited for
  // here). A notice that fails is logged: the period's close bills what it missed.
  const catalog = new CatalogView(db);
  const ingestor = new Ingestor(
    db,
    catalog,
    (subscriptionId, eventIds) =>
      temporal.client.workflow
        .getHandle(workflowIds.subscription(subscriptionId))
        .signal(usageInAdvanceSignal, { eventIds })
        .catch((err: unknown) => app.log.warn({ err, subscriptionId }, 'in-advance usage not signalled')),
    // Usage alerts: checked before the events are acknowledged (src/usage/alerts.ts).
    new UsageAlertChecker(db, catalog, { models: db.models, temporal }),
  );
  // Single events arriving together are stored by one write (group commit: at most 2 ms or 100 events).
  const groups = new EventGroups(ingestor);
  const tags = ['events'];

  // The organization's rate limit and time zone, read at most every few seconds per instance.
  const orgMemo = new Map<string, { at: number; org: Pick<OrganizationDoc, '_id' | 'timezone' | 'events_rate_limit_per_minute'> }>();
  async function organizationOf(id: string) {
    const hit = orgMemo.get(id);
    if (hit && Date.now() - hit.at < 3000) return hit.org;
    const org = await db.models.Organization.findById(id, { timezone: 1, events_rate_limit_per_minute: 1 }).lean();
    if (!org) throw new NotFound('Organization not found');
    orgMemo.set(id, { at: Date.now(), org });
    return org;
  }

  // Every answer of /v1/events* carries the rate limit headers; over the limit is 429.
  app.addHook('onRequest', async (request, reply) => {
    const org = await organizationOf(request.organizationId);
    const decision = await consumeEventsRateLimit(db, request.organizationId, org.events_rate_limit_per_minute, app.deps.now());
    void reply.headers({
      'x-ratelimit-limit': String(decision.limit),
      'x-ratelimit-remaining': String(decision.remaining),
      'x-ratelimit-reset': String(decision.resetAt),
    });
    if (!decision.allowed) {
      rateLimitRefusals.inc({ limiter: 'events' });
      throw new RateLimited(`Rate limit of ${decision.limit} event requests per minute exceeded`, decision.retryAfter);
    }
  });

  const sweep = setInterval(() => {
    sweepRateLimitWindows(db, app.deps.now()).catch((err: unknown) => app.log.warn({ err }, 'rate limit sweep failed'));
  }, 60_000);
  sweep.unref();
  app.addHook('onClose', () => {
    clearInterval(sweep);
  });

  app.post(
    '/events',
    {
      schema: {
        tags,
        summary: 'Send one usage event',
        description:
          'Durable in MongoDB before the answer. A duplicate transaction_id is 409 with existing_event_id; an unknown metric code or customer is 422.',
        body: eventInputSchema,
        response: responses({ 201: eventResource, 429: errorBody }),
      },
      // An event whose body fails the schema is refused before the handler (the ingestor counts the rest).
      onError: async (_request, _reply, error) => {
        if (error.validation) eventsRefused.inc({ reason: 'validation_error' });
      },
    },
    async (request, reply) => {
      const org = await organizationOf(request.organizationId);
      const outcome = await groups.ingestOne(org, request.body as EventInput, app.deps.now());
      if (outcome.status === 'duplicate') {
        throw new Conflict(`An event with transaction_id "${request.body.transaction_id}" already exists`, {
          existing_event_id: outcome.existingEventId,
        });
      }
      if (outcome.status === 'invalid') throw new Validation([{ path: outcome.path, message: outcome.message }]);
      return reply.status(201).send(toEventResource(outcome.event));
    },
  );

  app.post(
    '/events/batch',
    {
      schema: {
        tags,
        summary: `Send 1 to ${MAX_BATCH} usage events`,
        description: 'Every valid event is stored even when others fail; duplicates are counted, not errors.',
        body: z.strictObject({ events: z.array(z.unknown()).min(1).max(MAX_BATCH) }),
        response: responses({ 201: batchResult, 429: errorBody }),
      },
    },
    async (request, reply) => {
      const errors: { index: number; code: string; message: string }[] = [];
      const valid: { index: number; input: EventInput }[] = [];
      request.body.events.forEach((raw, index) => {
        const parsed = eventInputSchema.safeParse(raw);
        if (parsed.success) valid.push({ index, input: parsed.data });
        else
          errors.push({
            index,
            code: 'validation_error',
            message: parsed.error.issues.map((i) => `${i.path.join('.') || '(event)'}: ${i.message}`).join('; '),
          });
      });
      if (errors.length > 0) eventsRefused.inc({ reason: 'validation_error' }, errors.length);
      const org = await organizationOf(request.organizationId);
      const outcomes: IngestOutcome[] =
        valid.length > 0
          ? await ingestor.ingest(
              org,
              valid.map((v) => v.input),
              app.deps.now(),
            )
          : [];
      const events: EventDoc[] = [];
      let duplicates = 0;
      outcomes.forEach((outcome, i) => {
        if (outcome.status === 'created') events.push(outcome.event);
        else if (outcome.status === 'duplicate') duplicates++;
        else errors.push({ index: valid[i]!.index, code: outcome.code, message: `${outcome.path}: ${outcome.message}` });
      });
      errors.sort((a, b) => a.index - b.index);
      return reply.status(201).send({ ingested: events.length, duplicates, events: events.map(toEventResource), errors });
    },
  );

  app.get(
    '/events',
    {
      schema: {
        tags,
        summary: 'List events, newest first',
        querystring: listQuery.extend({
          external_customer_id: z.string().max(255).optional(),
          code: z.string().max(255).optional(),
          from: z.iso.datetime({ offset: true }).optional().describe('timestamp >= from'),
          to: z.iso.datetime({ offset: true }).optional().describe('timestamp < to'),
        }),
        response: responses({ 200: z.array(eventResource), 429: errorBody }),
      },
    },
    async (request, reply) => {
      const { skip, limit, external_customer_id, code, from, to } = request.query;
      const filter: Record<string, unknown> = { organization_id: request.organizationId };
      if (external_customer_id !== undefined) filter.external_customer_id = external_customer_id;
      if (code !== undefined) filter.code = code;
      if (from || to) filter.timestamp = { ...(from ? { $gte: new Date(from) } : {}), ...(to ? { $lt: new Date(to) } : {}) };
      const [events, total] = await Promise.all([
        db.models.Event.find(filter).sort({ created_at: -1, _id: -1 }).skip(skip).limit(limit).lean(),
        db.models.Event.countDocuments(filter),
      ]);
      return sendList(reply, events.map(toEventResource), total);
    },
  );

  app.get(
    '/events/:transaction_id',
    {
      schema: {
        tags,
        summary: 'Get an event by its transaction_id',
        params: z.strictObject({ transaction_id: z.string().min(1).max(255) }),
        response: responses({ 200: eventResource, 429: errorBody }),
      },
    },
    async (request) => {
      const event = await db.models.Event.findOne({
        organization_id: request.organizationId,
        transaction_id: request.params.transaction_id,
      }).lean();
      if (!event) throw new NotFound('Event not found', 'event_not_found');
      return toEventResource(event);
    },
  );
};
