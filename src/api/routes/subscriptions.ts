// Subscriptions (specification sections 2, 3 and 4; api-contract.md "Subscriptions";
// billing-rules.md "Subscription lifecycle"). Reads come from the MongoDB document; every change
// goes through the subscription's workflow (its only writer), whose update validators refuse what
// the state tables forbid: those refusals are our 400s and 422s.
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { DateTime } from 'luxon';
import type { FastifyBaseLogger } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { QueryFilter } from 'mongoose';
import { z } from 'zod';
import { idempotencyHeaders } from '../plugins/idempotency';
import type { Config } from '../../config';
import { isDuplicateKeyError } from '../../db';
import { customerLookup } from '../../db/models/customer';
import type { PlanDoc } from '../../db/models/plan';
import type { SubscriptionDoc } from '../../db/models/subscription';
import { ApiError, Conflict, InvalidTransition, NotFound, Validation } from '../../errors';
import {
  BILLING_TIMES,
  bulkSubscriptionResult,
  nextBillingDateResource,
  ON_TERMINATION_ACTIONS,
  subscriptionLifecycleResource,
  SUBSCRIPTION_STATUSES,
  subscriptionResource,
  toSubscriptionResource,
  type SubscriptionResource,
} from '../../resources/subscription';
import {
  billingTimezone,
  configuredTiming,
  ensureSubscriptionWorkflow,
  initialState,
  planSnapshot,
  subscriptionLabels,
  timingFor,
} from '../../subscriptions/start';
import { isFinal, nextBillingAt, pastFromState, scheduledSteps, type SubscriptionState } from '../../subscriptions/state';
import { clockOfCustomer, clockOfCustomerId, type ClockRef } from '../../test-clocks/time';
import { workflowIds } from '../../temporal/workflow-ids';
import {
  cancelUpdate,
  changePlanUpdate,
  pauseUpdate,
  readyUpdate,
  resumeUpdate,
  subscriptionLifecycleQuery,
  terminateUpdate,
  type SubscriptionLifecycle,
} from '../../../workflows/subscription.messages';
import { findSubscription as findSubscriptionOf, listPage } from '../catalog';
import { idParams, isoDateTimeInput, listQuery, responses } from '../http';
import { findPlan } from './plans';

/** How long POST waits for the workflow's first step before answering from the document. */
const READY_TIMEOUT_MS = 20_000;

const reference = z.string().trim().min(1).max(255);
const subscriptionName = z.string().max(255).nullable();

const createSubscriptionBody = z.strictObject({
  external_id: reference.describe('unique per organization'),
  customer_id: reference.describe('id or external_id of the customer'),
  plan_id: reference.describe('id or code of the plan'),
  name: subscriptionName.optional(),
  billing_time: z.enum(BILLING_TIMES).default('calendar'),
  pay_in_advance: z.boolean().default(false),
  trial_period_days: z.number().int().min(0).max(3650).optional().describe("default: the plan's"),
  started_at: isoDateTimeInput
    .optional()
    .describe("default: now (the customer's test clock time, if it is on one); in the future the subscription stays pending until then"),
  on_termination_action: z.enum(ON_TERMINATION_ACTIONS).default('generate_invoice').describe('used when cancel or delete omit it'),
});

const updateSubscriptionBody = z
  .strictObject({
    plan_id: reference
      .optional()
      .describe(
        'id or code of the plan to change to: an upgrade is immediate, a downgrade scheduled; the current plan removes a pending downgrade',
      ),
    name: subscriptionName.optional(),
  })
  .refine((b) => b.plan_id !== undefined || b.name !== undefined, { path: ['plan_id'], message: 'Required (or give name)' });

const terminationQuery = z.object({
  on_termination_action: z.enum(ON_TERMINATION_ACTIONS).optional().describe("default: the subscription's on_termination_action"),
});

const subscriptionListQuery = listQuery.extend({
  customer_id: reference.optional().describe('id or external_id of the customer'),
  status: z.enum(SUBSCRIPTION_STATUSES).optional(),
  external_id: z.string().max(255).optional(),
  plan_id: reference.optional().describe('id or code of the plan'),
});

type Handle = WorkflowHandle;

const bulkBody = z.strictObject({
  ids: z.array(reference).min(1).max(100).describe('ids or external_ids of subscriptions, at most 100; each is answered on its own'),
});

const over = (doc: Pick<SubscriptionDoc, 'status'>) => new InvalidTransition(`The subscription is ${doc.status}`);

/** A workflow validator's refusal, as the API answers it. */
function refusal(err: WorkflowUpdateFailedError): Error | null {
  const cause = err.cause as { type?: string; message?: string } | undefined;
  const message = cause?.message ?? 'Invalid state transition';
  if (cause?.type === 'InvalidTransition') return new InvalidTransition(message);
  if (cause?.type === 'Validation') {
    // "plan_id: the plan is in EUR, ..." names its field.
    const named = /^([a-z_][a-z0-9_.]*): (.+)$/s.exec(message);
    return named ? Validation.field(named[1]!, named[2]!) : new Validation([{ path: '', message }]);
  }
  return null;
}

export const subscriptionRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Customer, Plan, Subscription } = db.models;
  const tags = ['subscriptions'];
  // The test stack passes a partial configuration: the defaults of src/config.ts apply.
  const config = app.deps.config as Partial<Config>;
  const timing = configuredTiming(config);

  const findSubscription = (organizationId: string, ref: string) => findSubscriptionOf(Subscription, organizationId, ref);

  /** The state the workflow resumes from: its last projection, else a first state rebuilt. */
  async function stateOf(doc: SubscriptionDoc): Promise<SubscriptionState> {
    if (doc.workflow_state) return doc.workflow_state as unknown as SubscriptionState;
    const plan = await Plan.findById(doc.plan_id).lean();
    const customer = await Customer.findById(doc.customer_id, { timezone: 1, test_clock_id: 1 }).lean();
    if (!plan) throw new Error(`plan ${doc.plan_id} of subscription ${doc._id} not found`);
    return initialState(
      doc,
      planSnapshot(plan),
      await billingTimezone(db.models, doc.organization_id, customer?.timezone),
      timingFor(timing, customer ?? {}),
    );
  }

  /**
   * Runs a command (an update) on the subscription's workflow. A validator's refusal is a 4xx; a
   * workflow that ended is answered from the document (400 once the subscription is over); one
   * that never started (its creation failed halfway) is started from the document and asked again.
   */
  async function command(doc: SubscriptionDoc, run: (handle: Handle) => Promise<SubscriptionResource>): Promise<SubscriptionResource> {
    if (isFinal(doc.status)) throw over(doc);
    const handle = temporal.client.workflow.getHandle(workflowIds.subscription(doc._id));
    const attempt = async () => {
      try {
        return await run(handle);
      } catch (err) {
        if (err instanceof WorkflowUpdateFailedError) throw refusal(err) ?? err;
        throw err;
      }
    };
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      const now = await Subscription.findById(doc._id).lean();
      if (!now) throw new NotFound('Subscription not found', 'subscription_not_found');
      if (isFinal(now.status)) throw over(now);
      await ensureSubscriptionWorkflow(temporal, await stateOf(now), await clockOfCustomerId(db, now.customer_id), subscriptionLabels(now));
      // Its first step first: the validators judge the state they hold, and a pending state whose
      // started_at has passed is only activated by that step.
      await handle.executeUpdate(readyUpdate);
      return attempt();
    }
  }

  /** The document as the workflow's first step left it, or as inserted when that cannot be had. */
  async function afterFirstStep(
    log: FastifyBaseLogger,
    doc: SubscriptionDoc,
    state: SubscriptionState,
    clock: ClockRef | null,
  ): Promise<SubscriptionResource> {
    try {
      await ensureSubscriptionWorkflow(temporal, state, clock, subscriptionLabels(doc));
      const handle = temporal.client.workflow.getHandle(workflowIds.subscription(doc._id));
      return await temporal.client.withDeadline(Date.now() + READY_TIMEOUT_MS, () => handle.executeUpdate(readyUpdate));
    } catch (err) {
      // The subscription exists: the reconciler starts (or the workflow finishes) what is missing.
      log.error({ err, subscriptionId: doc._id }, 'subscription workflow not started or not ready; answering from the document');
      const current = await Subscription.findById(doc._id).lean();
      return toSubscriptionResource(current ?? doc);
    }
  }

  app.post(
    '/subscriptions',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: 'Create a subscription and start its workflow (active at once unless started_at is in the future)',
        headers: idempotencyHeaders,
        body: createSubscriptionBody,
        response: responses({ 201: subscriptionResource }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const organizationId = request.organizationId;
      const customer = await Customer.findOne(customerLookup(organizationId, body.customer_id)).lean();
      if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
      const clock = await clockOfCustomer(db, customer);
      // The customer of a deleted clock is being deleted with it: it never falls back to real time.
      if (customer.test_clock_id && !clock) throw new NotFound('Customer not found', 'customer_not_found');
      const plan: PlanDoc = await findPlan(app, organizationId, body.plan_id);
      if (plan.currency !== customer.currency) {
        throw Validation.field('plan_id', `the plan is in ${plan.currency}, the customer in ${customer.currency}`);
      }
      const duplicate = () => new Conflict(`A subscription with external_id "${body.external_id}" already exists`);
      if (await Subscription.exists({ organization_id: organizationId, external_id: body.external_id })) throw duplicate();

      const draft = new Subscription({
        organization_id: organizationId,
        customer_id: customer._id,
        external_customer_id: customer.external_id,
        external_id: body.external_id,
        name: body.name ?? null,
        plan_id: plan._id,
        status: 'pending',
        billing_time: body.billing_time,
        pay_in_advance: body.pay_in_advance,
        trial_period_days: body.trial_period_days ?? plan.trial_period_days ?? 0,
        started_at: body.started_at ?? (clock ? new Date(clock.now) : app.deps.now()),
        on_termination_action: body.on_termination_action,
        state_version: 0,
      });
      const state = initialState(
        draft.toObject(),
        planSnapshot(plan),
        await billingTimezone(db.models, organizationId, customer.timezone),
        timingFor(timing, customer),
      );
      draft.workflow_state = state as unknown as Record<string, unknown>;
      let doc: SubscriptionDoc;
      try {
        doc = (await draft.save()).toObject();
      } catch (err) {
        if (isDuplicateKeyError(err)) throw duplicate();
        throw err;
      }
      return reply.status(201).send(await afterFirstStep(request.log, doc, state, clock));
    },
  );

  app.get(
    '/subscriptions',
    {
      schema: {
        tags,
        summary: 'List subscriptions, newest first',
        querystring: subscriptionListQuery,
        response: responses({ 200: z.array(subscriptionResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, customer_id, status, external_id, plan_id } = request.query;
      const organizationId = request.organizationId;
      const filter: QueryFilter<SubscriptionDoc> = { organization_id: organizationId };
      if (customer_id !== undefined) {
        // Addressed by id or external_id; an unknown customer simply has no subscriptions.
        const customer = await Customer.findOne(customerLookup(organizationId, customer_id), { _id: 1 }).lean();
        filter.customer_id = customer?._id ?? customer_id;
      }
      if (plan_id !== undefined) {
        const plan = await Plan.findOne(
          { organization_id: organizationId, deleted_at: null, $or: [{ _id: plan_id }, { code: plan_id }] },
          { _id: 1 },
        ).lean();
        filter.plan_id = plan?._id ?? plan_id;
      }
      if (status !== undefined) filter.status = status;
      if (external_id !== undefined) filter.external_id = external_id;
      return listPage(reply, Subscription, filter, { skip, limit }, toSubscriptionResource);
    },
  );

  app.get(
    '/subscriptions/:id',
    {
      schema: {
        tags,
        summary: 'Get a subscription by id or external_id',
        params: idParams,
        response: responses({ 200: subscriptionResource }),
      },
    },
    async (request) => toSubscriptionResource(await findSubscription(request.organizationId, request.params.id)),
  );

  app.put(
    '/subscriptions/:id',
    {
      schema: {
        tags,
        summary:
          'Change the plan (upgrade at once, downgrade at the next boundary, the current plan removes a pending downgrade) or the name',
        params: idParams,
        body: updateSubscriptionBody,
        response: responses({ 200: subscriptionResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const doc = await findSubscription(organizationId, request.params.id);
      if (isFinal(doc.status)) throw over(doc);
      const { plan_id, name } = request.body;
      let resource: SubscriptionResource | null = null;
      if (plan_id !== undefined) {
        const plan = await findPlan(app, organizationId, plan_id);
        resource = await command(doc, (handle) => handle.executeUpdate(changePlanUpdate, { args: [{ plan: planSnapshot(plan) }] }));
      }
      if (name !== undefined) {
        // Not the workflow's: the name is no part of its state, so it is written here.
        const updated = await Subscription.findOneAndUpdate(
          { _id: doc._id, organization_id: organizationId },
          { $set: { name } },
          { returnDocument: 'after' },
        ).lean();
        if (!updated) throw new NotFound('Subscription not found', 'subscription_not_found');
        resource = toSubscriptionResource(updated);
      }
      return resource!;
    },
  );

  app.post(
    '/subscriptions/:id/cancel',
    {
      schema: {
        tags,
        summary: 'Cancel at the end of the current period (the subscription stays active until then)',
        params: idParams,
        querystring: terminationQuery,
        response: responses({ 200: subscriptionResource }),
      },
    },
    async (request) => {
      const doc = await findSubscription(request.organizationId, request.params.id);
      const action = request.query.on_termination_action;
      return command(doc, (handle) => handle.executeUpdate(cancelUpdate, { args: [action ? { onTerminationAction: action } : {}] }));
    },
  );

  app.delete(
    '/subscriptions/:id',
    {
      schema: {
        tags,
        summary: 'Terminate now; on_termination_action decides the final billing',
        params: idParams,
        querystring: terminationQuery,
        response: responses({ 200: subscriptionResource }),
      },
    },
    async (request) => {
      const doc = await findSubscription(request.organizationId, request.params.id);
      const action = request.query.on_termination_action;
      return command(doc, (handle) => handle.executeUpdate(terminateUpdate, { args: [action ? { onTerminationAction: action } : {}] }));
    },
  );
  // ---- pause and resume (docs/subscriptions-pause.md) -----------------------------------------

  const pause = (doc: SubscriptionDoc) => command(doc, (handle) => handle.executeUpdate(pauseUpdate));
  const resume = (doc: SubscriptionDoc) => command(doc, (handle) => handle.executeUpdate(resumeUpdate));

  app.post(
    '/subscriptions/:id/pause',
    {
      schema: {
        tags,
        summary: 'Pause an active subscription: no period is billed while paused, events are stored but not billed',
        params: idParams,
        response: responses({ 200: subscriptionResource }),
      },
    },
    async (request) => pause(await findSubscription(request.organizationId, request.params.id)),
  );

  app.post(
    '/subscriptions/:id/resume',
    {
      schema: {
        tags,
        summary: 'Resume a paused subscription: billing restarts from the resume day, the base fee prorated',
        params: idParams,
        response: responses({ 200: subscriptionResource }),
      },
    },
    async (request) => resume(await findSubscription(request.organizationId, request.params.id)),
  );

  /** Each id on its own: its subscription, or the error a single call would have answered. */
  async function bulk(organizationId: string, ids: string[], outcome: 'paused' | 'resumed', run: typeof pause) {
    const results: z.output<typeof bulkSubscriptionResult>[] = [];
    // A few at a time: each is an update on its own workflow.
    for (let i = 0; i < ids.length; i += 10) {
      const chunk = ids.slice(i, i + 10);
      results.push(
        ...(await Promise.all(
          chunk.map(async (id) => {
            try {
              const subscription = await run(await findSubscription(organizationId, id));
              return { id, outcome, subscription, error: null };
            } catch (err) {
              if (!(err instanceof ApiError)) throw err;
              return {
                id,
                outcome: 'failed' as const,
                subscription: null,
                error: { status: err.status, code: err.code, message: err.message },
              };
            }
          }),
        )),
      );
    }
    return { results };
  }

  app.post(
    '/subscriptions/bulk_pause',
    {
      schema: {
        tags,
        summary: 'Pause several subscriptions by id; each answered with its own outcome',
        body: bulkBody,
        response: responses({ 200: z.object({ results: z.array(bulkSubscriptionResult) }) }),
      },
    },
    async (request) => bulk(request.organizationId, request.body.ids, 'paused', pause),
  );

  app.post(
    '/subscriptions/bulk_resume',
    {
      schema: {
        tags,
        summary: 'Resume several subscriptions by id; each answered with its own outcome',
        body: bulkBody,
        response: responses({ 200: z.object({ results: z.array(bulkSubscriptionResult) }) }),
      },
    },
    async (request) => bulk(request.organizationId, request.body.ids, 'resumed', resume),
  );

  // ---- what comes next (read from the workflow) -------------------------------------------------

  /** The workflow's lifecycle; without a workflow to ask (not started, or no longer retained), the document's last state. */
  async function lifecycleOf(doc: SubscriptionDoc): Promise<SubscriptionLifecycle> {
    // A closed workflow still answers while Temporal retains it.
    try {
      return await temporal.client.workflow.getHandle(workflowIds.subscription(doc._id)).query(subscriptionLifecycleQuery);
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    const state = await stateOf(doc);
    return { state, past: pastFromState(state), scheduled: scheduledSteps(state), nextBillingAt: nextBillingAt(state) };
  }

  app.get(
    '/subscriptions/:id/next_billing_date',
    {
      schema: {
        tags,
        summary: 'When the subscription next invoices (its period end, or in advance a trial end), from its workflow',
        params: idParams,
        response: responses({ 200: nextBillingDateResource }),
      },
    },
    async (request) => {
      const doc = await findSubscription(request.organizationId, request.params.id);
      const { state, nextBillingAt: at } = await lifecycleOf(doc);
      return {
        subscription_id: doc._id,
        status: state.status,
        next_billing_at: at,
        next_billing_date: at ? DateTime.fromISO(at, { zone: state.timezone }).toISODate() : null,
        timezone: state.timezone,
      };
    },
  );

  app.get(
    '/subscriptions/:id/lifecycle',
    {
      schema: {
        tags,
        summary:
          'The past and scheduled steps of the subscription (activation, trial end, boundaries, downgrade, pause, end), from its workflow',
        params: idParams,
        response: responses({ 200: subscriptionLifecycleResource }),
      },
    },
    async (request) => {
      const doc = await findSubscription(request.organizationId, request.params.id);
      const lifecycle = await lifecycleOf(doc);
      return {
        subscription_id: doc._id,
        status: lifecycle.state.status,
        past: lifecycle.past,
        scheduled: lifecycle.scheduled,
        next_billing_at: lifecycle.nextBillingAt,
      };
    },
  );
};
