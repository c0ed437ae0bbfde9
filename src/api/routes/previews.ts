// Previews (issue 19; docs/previews.md): the invoice a subscription's current period would end with
// or a new subscription's first one, and what a plan change would invoice and credit. They write
// nothing and change no workflow: the billing steps run dry on the subscription's state
// (src/billing/preview.ts), read from its workflow (the `state` query), else from the document.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../config';
import { fromDecimal128 } from '../../db/decimal';
import { customerLookup } from '../../db/models/customer';
import type { SubscriptionDoc } from '../../db/models/subscription';
import type { AppliedCoupon } from '../../domain/coupons';
import { planChangeRefusal } from '../../domain/plan-change-refusal';
import { InvalidTransition, NotFound, Validation } from '../../errors';
import { previewFirstPeriod, previewPeriodEnd, previewPlanChange, type PreviewedInvoice } from '../../billing/preview';
import type { SubscriptionBillingDeps } from '../../billing/subscription/shared';
import {
  invoicesPreviewResource,
  planChangePreviewResource,
  toCreditNotePreviewResource,
  toInvoicePreviewResource,
} from '../../resources/invoice-preview';
import { BILLING_TIMES } from '../../resources/subscription';
import { billingTimezone, configuredTiming, initialState, planSnapshot, timingFor } from '../../subscriptions/start';
import { isFinal, type SubscriptionState } from '../../subscriptions/state';
import { customerNow } from '../../test-clocks/time';
import { workflowIds } from '../../temporal/workflow-ids';
import { subscriptionStateQuery } from '../../../workflows/subscription.messages';
import { idParams, isoDateTimeInput, responses } from '../http';
import { findPlan } from './plans';
import { findSubscription as findSubscriptionOf } from '../catalog';

const reference = z.string().trim().min(1).max(255);

const invoicePreviewBody = z
  .strictObject({
    customer_id: reference.describe('id or external_id of the customer'),
    subscription_id: reference
      .optional()
      .describe('id or external_id of one of its subscriptions: the invoice its current period ends with'),
    plan_id: reference.optional().describe('id or code of a plan: the first invoice of a new subscription on it'),
    billing_time: z.enum(BILLING_TIMES).optional().describe('with plan_id; default calendar'),
    pay_in_advance: z.boolean().optional().describe('with plan_id; default false'),
    at: isoDateTimeInput.optional().describe("with plan_id: the new subscription's started_at (default now, on the customer's clock)"),
    coupons: z
      .array(reference)
      .max(20)
      .optional()
      .describe('codes or ids of coupons to apply as if applied to the customer, after its own'),
  })
  .superRefine((b, ctx) => {
    if ((b.plan_id === undefined) === (b.subscription_id === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['plan_id'], message: 'Give plan_id or subscription_id (one of them)' });
    }
    if (b.subscription_id !== undefined) {
      for (const field of ['billing_time', 'pay_in_advance', 'at'] as const) {
        if (b[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: 'Only with plan_id' });
      }
    }
  });

const changePlanPreviewBody = z
  .strictObject({
    new_plan_id: reference.optional().describe('id or code of the plan to change to'),
    plan_id: reference.optional().describe('the same as new_plan_id'),
    effective_date: isoDateTimeInput
      .optional()
      .describe("when the change would be made (default now, on the customer's clock); within the current period"),
  })
  .refine((b) => b.new_plan_id !== undefined || b.plan_id !== undefined, { path: ['new_plan_id'], message: 'Required' });

export const previewRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Coupon, Customer, Subscription } = db.models;
  const tags = ['previews'];
  const deps: SubscriptionBillingDeps = { models: db.models, temporal };
  const config = app.deps.config as Partial<Config>;

  const findSubscription = (organizationId: string, ref: string) => findSubscriptionOf(Subscription, organizationId, ref);

  /** Its workflow's state (a closed one answers while Temporal keeps it), else the document's last projection. */
  async function stateOf(doc: SubscriptionDoc): Promise<SubscriptionState> {
    try {
      return await temporal.client.workflow.getHandle(workflowIds.subscription(doc._id)).query(subscriptionStateQuery);
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    if (!doc.workflow_state) throw new InvalidTransition('The subscription has no billing state yet');
    return doc.workflow_state as unknown as SubscriptionState;
  }

  /** What a preview cannot show: a subscription that bills no more. */
  function refuseIfOver(state: SubscriptionState): void {
    if (isFinal(state.status)) throw new InvalidTransition(`The subscription is ${state.status}`);
  }

  /** Coupons named in the request, as if applied to the customer now (the applied coupon's terms are the coupon's). */
  async function requestedCoupons(organizationId: string, refs: string[], at: Date): Promise<AppliedCoupon[]> {
    const coupons: AppliedCoupon[] = [];
    for (const [i, ref] of refs.entries()) {
      const coupon = await Coupon.findOne({
        organization_id: organizationId,
        status: 'active',
        deleted_at: null,
        $or: [{ _id: ref }, { code: ref }],
      }).lean();
      if (!coupon) throw new NotFound(`Coupon ${ref} not found`, 'coupon_not_found');
      const terms = {
        amount_cents: fromDecimal128(coupon.amount_cents),
        amount_currency: coupon.amount_currency,
        percentage_rate: fromDecimal128(coupon.percentage_rate),
        frequency_duration: coupon.frequency_duration,
      };
      coupons.push({
        id: `preview/${i}/${coupon._id}`,
        status: 'active',
        applied_at: at,
        coupon: {
          id: coupon._id,
          code: coupon.code,
          coupon_type: coupon.coupon_type,
          frequency: coupon.frequency,
          reusable: coupon.reusable,
          ...terms,
        },
        ...terms,
        frequency_duration_remaining: null,
      });
    }
    return coupons;
  }

  const previewOf = (invoice: PreviewedInvoice) => toInvoicePreviewResource(invoice.invoice, invoice.fees);
  /** `main` at the top level, and every invoice issued at the same instant (the same step), in issue order. */
  const withSiblings = (main: PreviewedInvoice, all: PreviewedInvoice[]) => ({
    ...previewOf(main),
    invoices: all.filter((i) => i.invoice.finalized_at?.getTime() === main.invoice.finalized_at?.getTime()).map(previewOf),
  });

  app.post(
    '/invoices/preview',
    {
      schema: {
        tags: ['invoices', ...tags],
        summary: "The invoice a subscription's current period would end with, or a new subscription's first one; nothing is written",
        body: invoicePreviewBody,
        response: responses({ 200: invoicesPreviewResource }),
      },
    },
    async (request) => {
      const body = request.body;
      const organizationId = request.organizationId;
      const customer = await Customer.findOne(customerLookup(organizationId, body.customer_id)).lean();
      if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
      const now = await customerNow(db, customer, app.deps.now());
      const coupons = await requestedCoupons(organizationId, body.coupons ?? [], now);

      if (body.subscription_id !== undefined) {
        const doc = await findSubscription(organizationId, body.subscription_id);
        if (doc.customer_id !== customer._id) throw new NotFound('Subscription not found', 'subscription_not_found');
        const state = await stateOf(doc);
        refuseIfOver(state);
        const { main, invoices } = await previewPeriodEnd(db, deps, doc, state, { coupons });
        if (!main && state.status === 'paused' && !state.currentPeriod) {
          throw new InvalidTransition('The subscription is paused and its period has ended: nothing is billed until it is resumed');
        }
        if (!main) throw new InvalidTransition('The subscription bills nothing at its current period end');
        return withSiblings(main, invoices);
      }

      const plan = await findPlan(app, organizationId, body.plan_id!);
      if (plan.currency !== customer.currency) {
        throw Validation.field('plan_id', `the plan is in ${plan.currency}, the customer in ${customer.currency}`);
      }
      // The subscription as POST /v1/subscriptions would make it, never saved.
      const doc = new Subscription({
        organization_id: organizationId,
        customer_id: customer._id,
        external_customer_id: customer.external_id,
        external_id: `preview-${customer._id}`,
        plan_id: plan._id,
        status: 'pending',
        billing_time: body.billing_time ?? 'calendar',
        pay_in_advance: body.pay_in_advance ?? false,
        trial_period_days: plan.trial_period_days ?? 0,
        started_at: body.at ?? now,
        on_termination_action: 'generate_invoice',
        state_version: 0,
      }).toObject();
      // As POST /v1/subscriptions would time it, without the billing-day spread (same amounts).
      const timing = { ...timingFor(configuredTiming(config), customer), jitterWindowMs: 0 };
      const state = initialState(doc, planSnapshot(plan), await billingTimezone(db.models, organizationId, customer.timezone), timing);
      const { main, invoices } = await previewFirstPeriod(db, deps, doc, state, { coupons });
      if (!main) throw new InvalidTransition('The subscription would bill nothing in its first period');
      return withSiblings(main, invoices);
    },
  );

  app.post(
    '/subscriptions/:id/change_plan_preview',
    {
      schema: {
        tags: ['subscriptions', ...tags],
        summary: 'What a plan change would invoice and credit now, and from when the new plan applies; nothing is written',
        params: idParams,
        body: changePlanPreviewBody,
        response: responses({ 200: planChangePreviewResource }),
      },
    },
    async (request) => {
      const organizationId = request.organizationId;
      const doc = await findSubscription(organizationId, request.params.id);
      const target = await findPlan(app, organizationId, (request.body.new_plan_id ?? request.body.plan_id)!);
      const state = await stateOf(doc);
      refuseIfOver(state);
      // The workflow's validator's refusals (workflows/subscription.ts, changePlan), answered alike.
      const refusal = planChangeRefusal(state, { id: target._id, currency: target.currency });
      if (refusal)
        throw refusal.kind === 'Validation' ? Validation.field('new_plan_id', refusal.message) : new InvalidTransition(refusal.message);
      if (state.status !== 'active' || !state.currentPeriod) throw new InvalidTransition(`The subscription is ${state.status}`);
      const customer = await Customer.findById(doc.customer_id, { test_clock_id: 1 }).lean();
      const at = request.body.effective_date ?? (await customerNow(db, customer ?? {}, app.deps.now()));
      const period = state.currentPeriod;
      const segmentFrom = Date.parse(state.segmentFrom ?? period.from);
      if (at.getTime() < segmentFrom || at.getTime() >= Date.parse(period.to)) {
        throw Validation.field(
          'effective_date',
          `must be within the current period, from ${state.segmentFrom ?? period.from} to before ${period.to}`,
        );
      }
      const preview = await previewPlanChange(db, deps, doc, state, planSnapshot(target), at);
      return {
        subscription_id: doc._id,
        plan_id: state.plan.id,
        new_plan_id: target._id,
        change: preview.change,
        effective_date: preview.effectiveAt.toISOString(),
        invoices: preview.invoices.map(previewOf),
        credit_notes: preview.creditNotes.map(toCreditNotePreviewResource),
        invoices_at_effective_date: preview.atEffectiveDate.invoices.map(previewOf),
      };
    },
  );
};
