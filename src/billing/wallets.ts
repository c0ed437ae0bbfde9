import type Decimal from 'decimal.js';
import type { Db, Models } from '../db';
import { isDuplicateKeyError } from '../db';
import { newId } from '../db/base';
import { walletCodeSlot, type PendingWalletTransaction, type WalletDoc } from '../db/models/wallet';
import type { WalletTransactionDoc, WalletTransactionSource } from '../db/models/wallet-transaction';
import { fromDecimal128, toDecimal128 } from '../db/decimal';
import { allocateWallets } from '../domain/wallet-allocation';
import { Dec } from '../domain/money';
import { deterministicId } from '../ids';
import { toWalletResource } from '../resources/wallet';
import { toWalletTransactionResource } from '../resources/wallet-transaction';
import { emitEvent, type EmitDeps } from '../webhooks/emit-event';
import { recordSettlement } from './settlements';

/**
 * Wallet balances (specification, Wallet; workflows.md). A balance is shared by every invoice
 * finalization of the customer and by top-ups, with no multi-document transaction to lean on, so
 * every change is ONE atomic findOneAndUpdate whose filter carries the guard (active, enough
 * balance) and the transaction id not yet applied, and whose update moves the balance, pushes that
 * id (the idempotency marker) and parks the transaction record in `pending_transactions`. The
 * wallet_transactions record is written next (a duplicate means a retry already did) and then
 * unparked; a crash in between is repaired by the next write on the wallet.
 *
 * balance_cents = credits x rate_amount x 100 holds after every change: credits in, cents follow
 * exactly; cents out (consumption), credits follow as amount / (rate x 100), rounded at
 * CREDIT_FRACTION_DIGITS; a consumption that empties the wallet sets both to zero, so rounding never
 * accumulates past an empty wallet.
 */

/** Fractional digits kept on credit amounts derived from cents (consumption). */
export const CREDIT_FRACTION_DIGITS = 12;

export type WalletDeps = Pick<Db, 'models'>;

/** Cents of `credits` at the wallet's rate: credits x rate_amount x 100 (exact). */
export function creditsToCents(credits: Decimal.Value, rateAmount: Decimal.Value): Decimal {
  return new Dec(credits).times(rateAmount).times(100);
}

/** Credits of `cents` at the wallet's rate, rounded at CREDIT_FRACTION_DIGITS. */
export function centsToCredits(cents: Decimal.Value, rateAmount: Decimal.Value): Decimal {
  return new Dec(cents).dividedBy(new Dec(rateAmount).times(100)).toDecimalPlaces(CREDIT_FRACTION_DIGITS, Dec.ROUND_HALF_UP);
}

/** The id of the consumption of `walletId` by `invoiceId`: the (wallet, invoice, type) key. */
export function walletConsumptionId(walletId: string, invoiceId: string): string {
  return deterministicId(`wallet-transaction/${walletId}/${invoiceId}/outbound`);
}

/**
 * A wallet that can pay at `at`: active then (active now, or terminated only after it; on a test
 * clock a wallet's workflow may already have terminated it for a later instant of the same advance)
 * and not expired.
 */
function usableAt(at: Date) {
  return {
    $and: [
      { $or: [{ status: 'active' as const }, { terminated_at: { $gt: at } }] },
      { $or: [{ expiration_at: null }, { expiration_at: { $gt: at } }] },
    ],
  };
}

/** "This change is not applied yet" to the wallet. */
function notAppliedYet(walletId: string, transactionId: string) {
  return { _id: walletId, applied_transaction_ids: { $ne: transactionId } };
}

function pendingEntry(
  transactionId: string,
  t: Pick<PendingWalletTransaction, 'transaction_type' | 'status' | 'source' | 'invoice_id' | 'created_at'>,
  amountCents: Decimal,
  credits: Decimal,
) {
  return { id: transactionId, ...t, amount: toDecimal128(amountCents), credit_amount: toDecimal128(credits) };
}

/**
 * Writes the wallet_transactions record of a parked change and unparks it. Idempotent: the record's
 * id is the change's id, so a duplicate means it was written already.
 */
async function recordPending(
  models: Models,
  wallet: Pick<WalletDoc, '_id' | 'organization_id' | 'customer_id'>,
  pending: PendingWalletTransaction,
): Promise<WalletTransactionDoc> {
  const { WalletTransaction, Wallet } = models;
  let record: WalletTransactionDoc | null = null;
  try {
    const [created] = await WalletTransaction.create(
      [
        {
          _id: pending.id,
          organization_id: wallet.organization_id,
          wallet_id: wallet._id,
          customer_id: wallet.customer_id,
          transaction_type: pending.transaction_type,
          status: pending.status,
          source: pending.source,
          amount: pending.amount,
          credit_amount: pending.credit_amount,
          invoice_id: pending.invoice_id ?? null,
          // The instant the change was made for (a retry records the same one).
          created_at: pending.created_at,
          updated_at: pending.created_at,
        },
      ],
      { timestamps: false },
    );
    record = created!.toObject();
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    record = await WalletTransaction.findById(pending.id).lean();
  }
  await Wallet.updateOne({ _id: wallet._id }, { $pull: { pending_transactions: { id: pending.id } } });
  if (!record) throw new Error(`wallet transaction ${pending.id} vanished`);
  return record;
}

/** Records every parked change of a wallet (after a crash between a balance change and its record). */
export async function recordPendingTransactions(deps: WalletDeps, walletId: string): Promise<number> {
  const wallet = await deps.models.Wallet.findById(walletId, { organization_id: 1, customer_id: 1, pending_transactions: 1 }).lean();
  if (!wallet) return 0;
  for (const pending of wallet.pending_transactions ?? []) await recordPending(deps.models, wallet, pending);
  return wallet.pending_transactions?.length ?? 0;
}

export interface CreateWalletInput {
  organizationId: string;
  customerId: string;
  name: string | null;
  code: string | null;
  currency: string;
  rateAmount: Decimal;
  priority: number;
  expirationAt: Date | null;
  /** Credits granted at creation (a granted inbound transaction); zero or absent: none. */
  initialGrantedCredits: Decimal | null;
  at: Date;
}

export type WalletCreateResult = { wallet: WalletDoc; transaction: WalletTransactionDoc | null };

/**
 * Inserts a wallet, its initial grant already applied: the grant is part of the inserted document
 * (balance, marker, parked record), so there is nothing to race with. A duplicate key means the
 * customer already has an active wallet with this code; the caller turns it into a 409.
 */
export async function createWallet(deps: WalletDeps, input: CreateWalletInput): Promise<WalletCreateResult> {
  const id = newId();
  const credits = input.initialGrantedCredits?.greaterThan(0) ? input.initialGrantedCredits : null;
  const grantId = deterministicId(`wallet/${id}/initial-grant`);
  const cents = credits ? creditsToCents(credits, input.rateAmount) : new Dec(0);
  const created = await deps.models.Wallet.create({
    _id: id,
    organization_id: input.organizationId,
    customer_id: input.customerId,
    name: input.name,
    code: input.code,
    code_slot: walletCodeSlot(id, input.code),
    currency: input.currency,
    status: 'active',
    rate_amount: toDecimal128(input.rateAmount),
    credits_balance: toDecimal128(credits ?? 0),
    balance_cents: toDecimal128(cents),
    priority: input.priority,
    expiration_at: input.expirationAt,
    terminated_at: null,
    applied_transaction_ids: credits ? [grantId] : [],
    pending_transactions: credits
      ? [
          pendingEntry(
            grantId,
            { transaction_type: 'inbound', status: 'granted', source: 'manual', invoice_id: null, created_at: input.at },
            cents,
            credits,
          ),
        ]
      : [],
  });
  const wallet = created.toObject();
  const transaction = credits ? await recordPending(deps.models, wallet, wallet.pending_transactions[0]!) : null;
  return { wallet: (await deps.models.Wallet.findById(id).lean())!, transaction };
}

export type TopUpResult =
  | { outcome: 'applied'; wallet: WalletDoc; transaction: WalletTransactionDoc }
  | { outcome: 'not_found' }
  | { outcome: 'terminated'; wallet: WalletDoc };

/**
 * Adds credits to an active wallet (a top-up or a grant): one guarded update raises both balances
 * by credits and credits x rate x 100 and records a granted inbound transaction. `transactionId`
 * is the idempotency marker: applying the same id twice changes the balance once. A terminated
 * wallet accepts nothing (specification, Errors).
 */
export async function topUpWallet(
  deps: WalletDeps,
  input: {
    organizationId: string;
    walletId: string;
    credits: Decimal;
    source: WalletTransactionSource;
    at: Date;
    transactionId?: string;
  },
): Promise<TopUpResult> {
  const { Wallet, WalletTransaction } = deps.models;
  const transactionId = input.transactionId ?? newId();
  const current = await Wallet.findOne({ _id: input.walletId, organization_id: input.organizationId }, { rate_amount: 1 }).lean();
  if (!current) return { outcome: 'not_found' };
  // Records an earlier change that a crash left parked, so the list of transactions stays whole.
  await recordPendingTransactions(deps, input.walletId);
  // rate_amount never changes after creation, so the cents computed from it stay exact.
  const rate = fromDecimal128(current.rate_amount)!;
  const cents = creditsToCents(input.credits, rate);
  const entry = pendingEntry(
    transactionId,
    { transaction_type: 'inbound', status: 'granted', source: input.source, invoice_id: null, created_at: input.at },
    cents,
    input.credits,
  );
  const updated = await Wallet.findOneAndUpdate(
    { ...notAppliedYet(input.walletId, transactionId), status: 'active', organization_id: input.organizationId },
    {
      $inc: { balance_cents: toDecimal128(cents), credits_balance: toDecimal128(input.credits) },
      $push: { applied_transaction_ids: transactionId, pending_transactions: entry },
    },
    { returnDocument: 'after' },
  ).lean();
  if (!updated) {
    const wallet = (await Wallet.findById(input.walletId).lean())!;
    if (!wallet.applied_transaction_ids.includes(transactionId)) return { outcome: 'terminated', wallet };
    // Applied by an earlier attempt with the same id.
    await recordPendingTransactions(deps, input.walletId);
    const transaction = (await WalletTransaction.findById(transactionId).lean())!;
    return { outcome: 'applied', wallet: (await Wallet.findById(input.walletId).lean())!, transaction };
  }
  const transaction = await recordPending(
    deps.models,
    updated,
    updated.pending_transactions.find((p) => p.id === transactionId)!,
  );
  return { outcome: 'applied', wallet: (await Wallet.findById(input.walletId).lean())!, transaction };
}

export interface WalletConsumption {
  walletId: string;
  amountCents: Decimal;
  transactionId: string;
}

export interface ConsumeWalletsInput {
  organizationId: string;
  customerId: string;
  currency: string;
  invoiceId: string;
  /** What remains due on the invoice (cents). */
  amountCents: Decimal;
  /** The finalization instant: wallets expired at it pay nothing; the transactions carry it. */
  at: Date;
}

/** Bound on re-reads after concurrent changes; reaching it means something is badly wrong. */
const MAX_CONSUMPTION_ROUNDS = 200;

/**
 * Consumes the customer's wallets for an invoice (specification, "Credit consumption at invoice
 * finalization"): active, unexpired wallets of the invoice's currency, by priority then age, each
 * paying the smaller of its balance and what remains. Per wallet: one guarded update (enough
 * balance, transaction id not applied), then the outbound `invoiced` transaction, then the
 * wallet_credit settlement.
 *
 * Idempotent per (wallet, invoice): the transaction id is derived from both, so calling this again
 * for the same invoice (a retried activity) applies nothing twice and answers the same total, as
 * long as `amountCents` is the same. Safe under concurrency: when another invoice drained a wallet
 * between the read and the update, the guard refuses, and the wallets are read and allocated again;
 * no wallet is ever overdrawn, and the consumptions add up to exactly what the balances lost.
 *
 * `emit` (optional): announces each new consumption as wallet_transaction.created.
 */
export async function consumeWalletsForInvoice(
  db: Db,
  input: ConsumeWalletsInput,
  emit?: Pick<EmitDeps, 'temporal'>,
): Promise<{ totalCents: Decimal; consumptions: WalletConsumption[] }> {
  // Attempts for the same invoice take turns (see WalletConsumptionLeaseDoc); other invoices don't wait.
  return withInvoiceLease(db.models, input, () => consumeUnderLease(db, input, emit));
}

/** How long a consumption may hold its invoice's lease before another attempt may take it over. */
const LEASE_MS = 60_000;

async function withInvoiceLease<T>(models: Models, input: ConsumeWalletsInput, work: () => Promise<T>): Promise<T> {
  const { WalletConsumptionLease } = models;
  const holder = newId();
  const deadline = Date.now() + 2 * LEASE_MS;
  for (let wait = 10; ; wait = Math.min(wait * 2, 500)) {
    // Wall-clock time on purpose: the lease guards real concurrent processes, not billing time.
    const now = new Date();
    try {
      await WalletConsumptionLease.findOneAndUpdate(
        { _id: input.invoiceId, expires_at: { $lte: now } },
        { $set: { holder, expires_at: new Date(now.getTime() + LEASE_MS), organization_id: input.organizationId } },
        { upsert: true },
      );
      break;
    } catch (err) {
      // Held by a live attempt: the upsert collides with its row.
      if (!isDuplicateKeyError(err)) throw err;
      if (Date.now() > deadline) throw new Error(`wallet consumption for invoice ${input.invoiceId} is held by another attempt`);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
  try {
    return await work();
  } finally {
    await WalletConsumptionLease.deleteOne({ _id: input.invoiceId, holder });
  }
}

async function consumeUnderLease(
  db: Db,
  input: ConsumeWalletsInput,
  emit?: Pick<EmitDeps, 'temporal'>,
): Promise<{ totalCents: Decimal; consumptions: WalletConsumption[] }> {
  const { Wallet, WalletTransaction } = db.models;
  const scope = { organization_id: input.organizationId, customer_id: input.customerId };

  // What earlier attempts for this invoice did: parked changes first, then the records.
  const parked = await Wallet.find({ ...scope, 'pending_transactions.0': { $exists: true } }, { _id: 1 }).lean();
  for (const w of parked) await recordPendingTransactions(db, w._id);
  const earlier = await WalletTransaction.find({ ...scope, invoice_id: input.invoiceId, transaction_type: 'outbound' }).lean();

  const consumptions: WalletConsumption[] = [];
  const records: WalletTransactionDoc[] = [...earlier];
  const used = new Set<string>();
  for (const t of earlier) {
    const amountCents = fromDecimal128(t.amount)!;
    consumptions.push({ walletId: t.wallet_id, amountCents, transactionId: t._id });
    used.add(t.wallet_id);
    // The settlement may be what the earlier attempt did not get to.
    await settle(db, input, t.wallet_id, amountCents);
  }
  let remaining = input.amountCents.minus(consumptions.reduce((acc, c) => acc.plus(c.amountCents), new Dec(0)));

  for (let round = 0; remaining.greaterThan(0); round++) {
    if (round >= MAX_CONSUMPTION_ROUNDS)
      throw new Error(`wallet consumption for invoice ${input.invoiceId} kept colliding with concurrent changes`);
    const wallets = await Wallet.find({ ...scope, ...usableAt(input.at), currency: input.currency, _id: { $nin: [...used] } }).lean();
    const allocation = allocateWallets(
      remaining,
      wallets.map((w) => ({
        id: w._id,
        balanceCents: fromDecimal128(w.balance_cents) ?? 0,
        priority: w.priority,
        createdAt: w.created_at,
        status: w.status,
        expirationAt: w.expiration_at,
        terminatedAt: w.terminated_at,
      })),
      input.at,
    );
    if (allocation.allocations.length === 0) break;

    for (const { walletId, amountCents } of allocation.allocations) {
      const wallet = wallets.find((w) => w._id === walletId)!;
      const transactionId = walletConsumptionId(walletId, input.invoiceId);
      const applied = await debitWallet(db.models, wallet, transactionId, amountCents, input);
      // Refused: either another attempt for this same invoice (an activity attempt still running
      // beside its retry) consumed this wallet already, which we adopt, or the wallet changed under
      // us: read and allocate again.
      const record = applied
        ? await recordPending(db.models, wallet, applied)
        : await consumedMeanwhile(db.models, walletId, transactionId);
      if (record) {
        const consumed = fromDecimal128(record.amount)!;
        used.add(walletId);
        consumptions.push({ walletId, amountCents: consumed, transactionId });
        remaining = remaining.minus(consumed);
        records.push(record);
        await settle(db, input, walletId, consumed);
      }
      if (!applied) break;
    }
  }
  // Every consumption of the invoice, earlier attempts' included (an event is emitted once by key).
  if (emit) {
    for (const record of records) await emitTransactionCreated({ models: db.models, temporal: emit.temporal }, record);
  }
  const totalCents = consumptions.reduce((acc, c) => acc.plus(c.amountCents), new Dec(0));
  return { totalCents, consumptions };
}

/** The record of a consumption another attempt applied to the wallet, or null when none did. */
async function consumedMeanwhile(models: Models, walletId: string, transactionId: string): Promise<WalletTransactionDoc | null> {
  const wallet = await models.Wallet.findOne({ _id: walletId, applied_transaction_ids: transactionId }).lean();
  if (!wallet) return null;
  const parked = wallet.pending_transactions.find((p) => p.id === transactionId);
  if (parked) return recordPending(models, wallet, parked);
  return models.WalletTransaction.findById(transactionId).lean();
}

async function settle(db: Db, input: ConsumeWalletsInput, walletId: string, amountCents: Decimal): Promise<void> {
  await recordSettlement(db, {
    organizationId: input.organizationId,
    invoiceId: input.invoiceId,
    type: 'wallet_credit',
    sourceId: walletId,
    amountCents,
  });
}

/**
 * The guarded debit of one wallet. A debit of the whole balance (as read) empties both balances
 * exactly, guarded by both values; a partial one decrements them, guarded by balance >= amount.
 * Either way the wallet must still be usable at the finalization instant (usableAt), and without
 * this transaction applied. Answers the parked record, or null when the guard refused.
 */
async function debitWallet(
  models: Models,
  wallet: WalletDoc,
  transactionId: string,
  amountCents: Decimal,
  input: ConsumeWalletsInput,
): Promise<PendingWalletTransaction | null> {
  const balance = fromDecimal128(wallet.balance_cents)!;
  const creditsBalance = fromDecimal128(wallet.credits_balance)!;
  const drains = amountCents.equals(balance);
  const credits = drains ? creditsBalance : centsToCredits(amountCents, fromDecimal128(wallet.rate_amount)!);
  const entry = pendingEntry(
    transactionId,
    { transaction_type: 'outbound', status: 'invoiced', source: 'manual', invoice_id: input.invoiceId, created_at: input.at },
    amountCents,
    credits,
  );
  const exactly = (d: Decimal) => ({ $gte: toDecimal128(d), $lte: toDecimal128(d) });
  const filter = {
    ...notAppliedYet(wallet._id, transactionId),
    ...usableAt(input.at),
    ...(drains
      ? { balance_cents: exactly(balance), credits_balance: exactly(creditsBalance) }
      : { balance_cents: { $gte: toDecimal128(amountCents) } }),
  };
  const change = drains
    ? { $set: { balance_cents: toDecimal128(0), credits_balance: toDecimal128(0) } }
    : { $inc: { balance_cents: toDecimal128(amountCents.negated()), credits_balance: toDecimal128(credits.negated()) } };
  const updated = await models.Wallet.findOneAndUpdate(
    filter,
    { ...change, $push: { applied_transaction_ids: transactionId, pending_transactions: entry } },
    { returnDocument: 'after', projection: { pending_transactions: 1 } },
  ).lean();
  return updated?.pending_transactions.find((p) => p.id === transactionId) ?? null;
}

/** Announces a wallet transaction (wallet_transaction.created); idempotent by transaction. */
export async function emitTransactionCreated(deps: EmitDeps, record: WalletTransactionDoc): Promise<void> {
  await emitEvent(deps, {
    organizationId: record.organization_id,
    type: 'wallet_transaction.created',
    idempotencyKey: `wallet-transaction/${record._id}/created`,
    object: toWalletTransactionResource(record),
    occurredAt: record.created_at,
    customerId: record.customer_id,
  });
}

export type TerminationResult =
  | { outcome: 'terminated'; wallet: WalletDoc }
  /** An expiry that no longer holds (expiration_at moved or was removed): still active. */
  | { outcome: 'still_active'; wallet: WalletDoc }
  | { outcome: 'not_found' };

/**
 * Terminates a wallet at `at` (status terminated, terminated_at, its code free again) and
 * announces wallet.terminated. `expired`: only when the wallet's expiration_at is at or before
 * `at`, so a timer that fires for an expiration the wallet no longer has terminates nothing.
 * Idempotent: a wallet terminated already is answered as is and announced (once, by key).
 */
export async function terminateWallet(
  deps: EmitDeps,
  input: { walletId: string; at: Date; reason: 'expired' | 'manual' },
): Promise<TerminationResult> {
  const { Wallet } = deps.models;
  const guard = input.reason === 'expired' ? { expiration_at: { $ne: null, $lte: input.at } } : {};
  let wallet = await Wallet.findOneAndUpdate(
    { _id: input.walletId, status: 'active', ...guard },
    { $set: { status: 'terminated', terminated_at: input.at, code_slot: input.walletId } },
    { returnDocument: 'after' },
  ).lean();
  wallet ??= await Wallet.findById(input.walletId).lean();
  if (!wallet) return { outcome: 'not_found' };
  if (wallet.status !== 'terminated') return { outcome: 'still_active', wallet };
  await emitEvent(deps, {
    organizationId: wallet.organization_id,
    type: 'wallet.terminated',
    idempotencyKey: `wallet/${wallet._id}/terminated`,
    object: toWalletResource(wallet),
    occurredAt: wallet.terminated_at ?? input.at,
    customerId: wallet.customer_id,
  });
  return { outcome: 'terminated', wallet };
}
