import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { QueryFilter } from 'mongoose';
import { z } from 'zod';
import { idempotencyHeaders } from '../plugins/idempotency';
import { createCreditInvoice } from '../../billing/invoices';
import {
  applyTopUp,
  createWallet,
  emitTransactionCreated,
  intervalRulesOf,
  recordPendingTransactions,
  walletRuleDocs,
  walletWorkflowOf,
  type CreateCreditInvoice,
  type WalletRuleInput,
} from '../../billing/wallets';
import { isDuplicateKeyError } from '../../db';
import { walletCodeSlot, type WalletDoc } from '../../db/models/wallet';
import { WALLET_TRANSACTION_SOURCES, type WalletTransactionDoc } from '../../db/models/wallet-transaction';
import { Dec } from '../../domain/money';
import { RULE_INTERVALS } from '../../domain/wallet-rules';
import { deterministicId } from '../../ids';
import { BadRequest, Conflict, NotFound, Validation } from '../../errors';
import { workflowIds } from '../../temporal/workflow-ids';
import { emitEvent } from '../../webhooks/emit-event';
import {
  signalWalletExpirationChanged,
  signalWalletRulesChanged,
  startWalletWorkflow,
  terminateWalletUpdate,
  WALLET_TERMINATED,
} from '../../../workflows/wallet.messages';
import { listPage } from '../catalog';
import { decimalInput } from '../decimal';
import { currencyCode, idParams, isoDateTimeInput, listQuery, responses } from '../http';
import { toWalletResource, walletResource, type WalletResource } from '../../resources/wallet';
import { toWalletTransactionResource, walletTransactionResource } from '../../resources/wallet-transaction';
import { customerLookup } from '../../db/models/customer';
import { customerNow, customerNowById } from '../../test-clocks/time';

const positiveDecimal = decimalInput({ min: 0 }).refine((v) => v.gt(0), 'must be greater than 0');
const priority = z.number().int().min(1).max(50).describe('1 to 50; lower is consumed first');
const walletName = z.string().trim().max(255).nullable();

const paidCredits = decimalInput({ min: 0 }).describe(
  'credits bought: a purchased inbound transaction and a finalized credit invoice of paid_credits x rate_amount x 100 cents; ' +
    'the credits reach the balance when that invoice is paid',
);
const grantedCredits = decimalInput({ min: 0 }).describe('free credits, granted at once (a granted inbound transaction)');

const ruleCredits = decimalInput({ min: 0 });
const recurringRule = z
  .strictObject({
    trigger: z.enum(['interval', 'threshold']),
    interval: z.enum(RULE_INTERVALS).optional().describe('interval rules (required): how often it tops up'),
    threshold_credits: decimalInput({ min: 0 })
      .optional()
      .describe('threshold rules (required): a consumption that leaves the credits balance at or below it tops up, once per crossing'),
    paid_credits: ruleCredits.optional().describe('credits bought at each top-up (a credit invoice); default "0"'),
    granted_credits: ruleCredits.optional().describe('credits granted at each top-up; default "0"'),
    started_at: isoDateTimeInput
      .optional()
      .describe(
        "interval rules: the anchor of the anniversaries (default: the wallet's creation); it tops up one interval after it, then every interval",
      ),
  })
  .superRefine((rule, ctx) => {
    if (rule.trigger === 'interval') {
      if (rule.interval === undefined) ctx.addIssue({ code: 'custom', path: ['interval'], message: 'is required for an interval rule' });
      if (rule.threshold_credits !== undefined)
        ctx.addIssue({ code: 'custom', path: ['threshold_credits'], message: 'applies to threshold rules only' });
    } else {
      if (rule.threshold_credits === undefined)
        ctx.addIssue({ code: 'custom', path: ['threshold_credits'], message: 'is required for a threshold rule' });
      if (rule.interval !== undefined) ctx.addIssue({ code: 'custom', path: ['interval'], message: 'applies to interval rules only' });
      if (rule.started_at !== undefined) ctx.addIssue({ code: 'custom', path: ['started_at'], message: 'applies to interval rules only' });
    }
    if (!rule.paid_credits?.greaterThan(0) && !rule.granted_credits?.greaterThan(0)) {
      ctx.addIssue({ code: 'custom', path: ['paid_credits'], message: 'give paid_credits or granted_credits greater than 0' });
    }
  });
const recurringRules = z.array(recurringRule).max(5).describe('at most 5; on PUT the list replaces the rules (an empty list removes them)');

function ruleInputs(rules: z.output<typeof recurringRules>): WalletRuleInput[] {
  return rules.map((rule) => ({
    trigger: rule.trigger,
    interval: rule.interval ?? null,
    thresholdCredits: rule.threshold_credits ?? null,
    paidCredits: rule.paid_credits ?? new Dec(0),
    grantedCredits: rule.granted_credits ?? new Dec(0),
    startedAt: rule.started_at ?? null,
  }));
}

const createWalletBody = z
  .strictObject({
    customer_id: z.string().trim().min(1).max(255).describe('id or external_id of the customer'),
    name: walletName.optional(),
    code: z.string().trim().min(1).max(255).nullable().optional().describe("unique among the customer's active wallets"),
    currency: currencyCode.optional().describe("ISO 4217; default and only accepted value: the customer's currency"),
    rate_amount: positiveDecimal.optional().describe('value of one credit in currency units; default "1"'),
    priority: priority.default(1),
    initial_granted_credits: decimalInput({ min: 0 })
      .optional()
      .describe('credits granted at creation (a granted inbound transaction); the same as granted_credits'),
    granted_credits: grantedCredits.optional(),
    paid_credits: paidCredits.optional(),
    expiration_at: isoDateTimeInput.nullable().optional().describe('in the future; the wallet is terminated then'),
    recurring_transaction_rules: recurringRules.optional(),
  })
  .refine((b) => b.initial_granted_credits === undefined || b.granted_credits === undefined, {
    path: ['granted_credits'],
    message: 'give either initial_granted_credits or granted_credits, not both',
  });

const updateWalletBody = z.strictObject({
  name: walletName.optional(),
  expiration_at: isoDateTimeInput.nullable().optional().describe('in the future, or null: no expiry'),
  priority: priority.optional(),
  recurring_transaction_rules: recurringRules.optional(),
});

const topUpBody = z
  .strictObject({
    credits: positiveDecimal
      .optional()
      .describe('free credits granted at once (the same as granted_credits); the balance grows by credits x rate_amount x 100 cents'),
    granted_credits: grantedCredits.optional(),
    paid_credits: paidCredits.optional(),
    voided_credits: decimalInput({ min: 0 })
      .optional()
      .describe('credits taken off the balance at once (a voided outbound transaction); not more than the balance'),
    source: z.enum(WALLET_TRANSACTION_SOURCES).default('manual'),
  })
  .refine((b) => b.credits === undefined || b.granted_credits === undefined, {
    path: ['granted_credits'],
    message: 'give either credits or granted_credits, not both',
  })
  .refine((b) => [b.credits, b.granted_credits, b.paid_credits, b.voided_credits].some((v) => v?.greaterThan(0)), {
    path: ['credits'],
    message: 'give credits, granted_credits, paid_credits or voided_credits greater than 0',
  });

const walletListQuery = listQuery.extend({
  customer_id: z.string().trim().min(1).max(255).optional().describe('id or external_id of the customer'),
  status: z.enum(['active', 'terminated']).optional(),
});

const transactionListQuery = listQuery.extend({
  transaction_type: z.enum(['inbound', 'outbound']).optional(),
  status: z.enum(['granted', 'purchased', 'voided', 'invoiced']).optional(),
});

const terminatedError = () => new BadRequest('The wallet is terminated and accepts no change', 'wallet_terminated');

export const walletRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Customer, Wallet, WalletTransaction } = db.models;
  const emitDeps = { models: db.models, temporal };
  const tags = ['wallets'];
  const creditInvoice: CreateCreditInvoice = (request) => createCreditInvoice(db, emitDeps, request);

  async function findWallet(organizationId: string, id: string): Promise<WalletDoc> {
    const wallet = await Wallet.findOne({ _id: id, organization_id: organizationId }).lean();
    if (!wallet) throw new NotFound('Wallet not found', 'wallet_not_found');
    return wallet;
  }

  async function findActiveWallet(organizationId: string, id: string): Promise<WalletDoc> {
    const wallet = await findWallet(organizationId, id);
    if (wallet.status !== 'active') throw terminatedError();
    return wallet;
  }

  function checkFuture(expiration: Date | null | undefined, now: Date): void {
    if (expiration && expiration.getTime() <= now.getTime()) throw Validation.field('expiration_at', 'must be in the future');
  }

  /** What the wallet's workflow starts with; a customer on a test clock gets its timers driven by the clock. */
  const workflowOf = (wallet: WalletDoc) => walletWorkflowOf(db, wallet);

  /** An event after the change is made: a failure is logged, not answered (the change stands). */
  function announce(log: FastifyBaseLogger, what: string, emit: () => Promise<unknown>): Promise<void> {
    return emit().then(
      () => undefined,
      (err: unknown) => log.error({ err }, `could not emit ${what}`),
    );
  }

  app.post(
    '/wallets',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary: 'Create a prepaid wallet for a customer (and grant its initial credits)',
        headers: idempotencyHeaders,
        body: createWalletBody,
        response: responses({ 201: walletResource }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const organizationId = request.organizationId;
      const customer = await Customer.findOne(customerLookup(organizationId, body.customer_id)).lean();
      if (!customer) throw new NotFound('Customer not found', 'customer_not_found');
      const currency = body.currency ?? customer.currency;
      if (currency !== customer.currency) throw Validation.field('currency', `must be the customer's currency (${customer.currency})`);
      const now = await customerNow(db, customer, app.deps.now());
      checkFuture(body.expiration_at, now);
      const code = body.code ?? null;
      const duplicate = () => new Conflict(`The customer already has an active wallet with code "${code}"`);
      if (
        code &&
        (await Wallet.exists({ organization_id: organizationId, customer_id: customer._id, code_slot: walletCodeSlot('', code) }))
      ) {
        throw duplicate();
      }

      let created: Awaited<ReturnType<typeof createWallet>>;
      try {
        created = await createWallet(db, {
          organizationId,
          customerId: customer._id,
          name: body.name ?? null,
          code,
          currency,
          rateAmount: body.rate_amount ?? new Dec(1),
          priority: body.priority,
          expirationAt: body.expiration_at ?? null,
          initialGrantedCredits: body.initial_granted_credits ?? body.granted_credits ?? null,
          paidCredits: body.paid_credits ?? null,
          createCreditInvoice: creditInvoice,
          rules: ruleInputs(body.recurring_transaction_rules ?? []),
          at: now,
        });
      } catch (err) {
        if (isDuplicateKeyError(err)) throw duplicate();
        throw err;
      }
      const { wallet, transactions } = created;
      // The workflow owns expiry and termination from here on.
      await startWalletWorkflow(temporal, ...(await workflowOf(wallet)));
      const resource = toWalletResource(wallet);
      await announce(request.log, 'wallet.created', () =>
        emitEvent(emitDeps, {
          organizationId,
          type: 'wallet.created',
          idempotencyKey: `wallet/${wallet._id}/created`,
          object: resource,
          occurredAt: now,
          customerId: wallet.customer_id,
        }),
      );
      for (const transaction of transactions) {
        await announce(request.log, 'wallet_transaction.created', () => emitTransactionCreated(emitDeps, transaction));
      }
      return reply.status(201).send(resource);
    },
  );

  app.get(
    '/wallets',
    {
      schema: {
        tags,
        summary: 'List wallets, newest first',
        querystring: walletListQuery,
        response: responses({ 200: z.array(walletResource) }),
      },
    },
    async (request, reply) => {
      const { skip, limit, customer_id, status } = request.query;
      const filter: QueryFilter<WalletDoc> = { organization_id: request.organizationId };
      if (customer_id !== undefined) {
        // Addressed by id or external_id; an unknown customer simply has no wallets.
        const customer = await Customer.findOne(customerLookup(request.organizationId, customer_id), { _id: 1 }).lean();
        filter.customer_id = customer?._id ?? customer_id;
      }
      if (status !== undefined) filter.status = status;
      return listPage(reply, Wallet, filter, { skip, limit }, toWalletResource);
    },
  );

  app.get(
    '/wallets/:id',
    { schema: { tags, summary: 'Get a wallet', params: idParams, response: responses({ 200: walletResource }) } },
    async (request) => toWalletResource(await findWallet(request.organizationId, request.params.id)),
  );

  app.put(
    '/wallets/:id',
    {
      schema: {
        tags,
        summary:
          'Update a wallet (name, expiration_at, priority, recurring_transaction_rules); a terminated wallet is 400 wallet_terminated',
        params: idParams,
        body: updateWalletBody,
        response: responses({ 200: walletResource }),
      },
    },
    async (request) => {
      const current = await findActiveWallet(request.organizationId, request.params.id);
      const body = request.body;
      const now = await customerNowById(db, current.customer_id, app.deps.now());
      checkFuture(body.expiration_at, now);
      const changes: Partial<Pick<WalletDoc, 'name' | 'expiration_at' | 'priority' | 'recurring_transaction_rules'>> = {};
      if (body.name !== undefined) changes.name = body.name;
      if (body.priority !== undefined) changes.priority = body.priority;
      if (body.expiration_at !== undefined) changes.expiration_at = body.expiration_at;
      if (body.recurring_transaction_rules !== undefined) {
        changes.recurring_transaction_rules = walletRuleDocs(
          ruleInputs(body.recurring_transaction_rules),
          now,
          current.recurring_transaction_rules,
        );
      }
      const updated = await Wallet.findOneAndUpdate(
        { _id: current._id, organization_id: request.organizationId, status: 'active' },
        { $set: changes },
        { returnDocument: 'after' },
      ).lean();
      if (!updated) throw terminatedError();

      // Re-arms the workflow's timers. With start: a wallet whose workflow never started gets one;
      // REJECT_DUPLICATE: a workflow that already ended (the wallet was just terminated) stays ended.
      const tell = async (signal: typeof signalWalletExpirationChanged) => {
        try {
          await signal(temporal, ...(await workflowOf(updated)));
        } catch (err) {
          if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
        }
      };
      const before = current.expiration_at?.getTime() ?? null;
      const after = updated.expiration_at?.getTime() ?? null;
      if (body.expiration_at !== undefined && before !== after) await tell(signalWalletExpirationChanged);
      const rulesBefore = JSON.stringify(intervalRulesOf(current));
      if (body.recurring_transaction_rules !== undefined && JSON.stringify(intervalRulesOf(updated)) !== rulesBefore) {
        await tell(signalWalletRulesChanged);
      }
      return toWalletResource(updated);
    },
  );

  app.delete(
    '/wallets/:id',
    {
      schema: {
        tags,
        summary: 'Terminate a wallet (through its workflow); its balance is no longer consumed',
        params: idParams,
        response: responses({ 200: walletResource }),
      },
    },
    async (request) => {
      const wallet = await findActiveWallet(request.organizationId, request.params.id);
      const handle = temporal.client.workflow.getHandle(workflowIds.wallet(wallet._id));
      const terminate = async (): Promise<WalletResource> => {
        try {
          return await handle.executeUpdate(terminateWalletUpdate);
        } catch (err) {
          if (err instanceof WorkflowUpdateFailedError) {
            const cause = err.cause as { type?: string } | undefined;
            if (cause?.type === WALLET_TERMINATED) throw terminatedError();
          }
          throw err;
        }
      };
      try {
        return await terminate();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        // The workflow ended (the wallet expired meanwhile) or never started (a failed creation).
        const now = await findWallet(request.organizationId, wallet._id);
        if (now.status !== 'active') throw terminatedError();
        await startWalletWorkflow(temporal, ...(await workflowOf(now)));
        return terminate();
      }
    },
  );

  app.post(
    '/wallets/:id/top_up',
    {
      config: { idempotent: true },
      schema: {
        tags,
        summary:
          'Top up an active wallet: grant credits (at once), buy credits (a credit invoice; they arrive when it is paid), ' +
          'void credits (at once, within the balance)',
        headers: idempotencyHeaders,
        params: idParams,
        body: topUpBody,
        response: responses({ 200: walletResource }),
      },
    },
    async (request) => {
      const active = await findActiveWallet(request.organizationId, request.params.id);
      const body = request.body;
      const changes = {
        grantedCredits: body.credits ?? body.granted_credits ?? null,
        paidCredits: body.paid_credits ?? null,
        voidedCredits: body.voided_credits ?? null,
      };
      // With an Idempotency-Key the changes' ids come from it (and from what the request asks), so
      // that a retry after a crash completes the same top-up (its credit invoice included) instead
      // of making another one.
      const key = request.headers['idempotency-key'];
      const what = [changes.grantedCredits, changes.paidCredits, changes.voidedCredits].map((d) => d?.toFixed() ?? '-').join('/');
      const idOf = (kind: string) =>
        key === undefined ? undefined : deterministicId(`wallet/${active._id}/top-up/${key}/${what}/${body.source}/${kind}`);
      const result = await applyTopUp(db, {
        organizationId: request.organizationId,
        walletId: request.params.id,
        changes,
        source: body.source,
        at: await customerNowById(db, active.customer_id, app.deps.now()),
        ids: { granted: idOf('granted'), paid: idOf('paid'), voided: idOf('voided') },
        createCreditInvoice: creditInvoice,
      });
      if (result.outcome === 'not_found') throw new NotFound('Wallet not found', 'wallet_not_found');
      if (result.outcome === 'terminated') throw terminatedError();
      if (result.outcome === 'insufficient_balance') {
        throw Validation.field(
          'voided_credits',
          `must not exceed the wallet's balance (${toWalletResource(result.wallet).credits_balance} credits)`,
        );
      }
      for (const transaction of result.transactions) {
        await announce(request.log, 'wallet_transaction.created', () => emitTransactionCreated(emitDeps, transaction));
      }
      return toWalletResource(result.wallet);
    },
  );

  app.get(
    '/wallets/:id/transactions',
    {
      schema: {
        tags,
        summary: "List a wallet's transactions, newest first",
        params: idParams,
        querystring: transactionListQuery,
        response: responses({ 200: z.array(walletTransactionResource) }),
      },
    },
    async (request, reply) => {
      const wallet = await findWallet(request.organizationId, request.params.id);
      // A change a crash left unrecorded is recorded now, so the list is whole.
      if (wallet.pending_transactions?.length) await recordPendingTransactions(db, wallet._id);
      const { skip, limit, transaction_type, status } = request.query;
      const filter: QueryFilter<WalletTransactionDoc> = { organization_id: request.organizationId, wallet_id: wallet._id };
      if (transaction_type !== undefined) filter.transaction_type = transaction_type;
      if (status !== undefined) filter.status = status;
      return listPage(reply, WalletTransaction, filter, { skip, limit }, toWalletTransactionResource);
    },
  );
};
