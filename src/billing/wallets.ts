import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type Decimal from 'decimal.js';
import type { Db, Models } from '../db';
import { isDuplicateKeyError } from '../db';
import { newId } from '../db/base';
import {
  walletCodeSlot,
  type PendingWalletTransaction,
  type ThresholdCrossing,
  type WalletDoc,
  type WalletRuleDoc,
  type WalletRuleTrigger,
} from '../db/models/wallet';
import type { InvoiceDoc } from '../db/models/invoice';
import type { WalletTransactionDoc, WalletTransactionSource } from '../db/models/wallet-transaction';
import { fromDecimal128, toDecimal128 } from '../db/decimal';
import { allocateWallets } from '../domain/wallet-allocation';
import { crossedThresholds, type RuleInterval, type ThresholdRule } from '../domain/wallet-rules';
import { Dec } from '../domain/money';
import { deterministicId, invoiceIdFor } from '../ids';
import { toWalletResource } from '../resources/wallet';
import { toWalletTransactionResource } from '../resources/wallet-transaction';
import type { TemporalClient } from '../temporal/client';
import { clockOfCustomer } from '../test-clocks/time';
import { emitEvent, type EmitDeps } from '../webhooks/emit-event';
import {
  signalWalletThresholdCrossed,
  type WalletIntervalRule,
  type WalletOwner,
  type WalletWorkflowInput,
} from '../../workflows/wallet.messages';
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
 * CREDIT_FRACTION_DIGITS; a consumption or a void that empties the wallet sets both to zero, so
 * rounding never accumulates past an empty wallet.
 *
 * Top-ups (api-contract.md, Wallets): granted credits arrive at once, voided credits leave at once
 * (outbound `voided`, never more than the balance), purchased credits (`purchased`, settled_at null)
 * arrive only when their `credit` invoice is paid (settleWalletPurchase). The purchase is parked in
 * the same update as the rest of its top-up; its invoice is created before its record is written,
 * and the record names the invoice by the id it will have (invoiceIdFor), so that the payment can
 * always find the purchase again.
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

/** `settled_at` defaults to the creation instant: only a purchase is made unsettled (null). */
function pendingEntry(
  transactionId: string,
  t: Pick<PendingWalletTransaction, 'transaction_type' | 'status' | 'source' | 'invoice_id' | 'created_at' | 'settled_at'>,
  amountCents: Decimal,
  credits: Decimal,
): PendingWalletTransaction {
  return {
    id: transactionId,
    ...t,
    settled_at: t.settled_at !== undefined ? t.settled_at : t.created_at,
    amount: toDecimal128(amountCents),
    credit_amount: toDecimal128(credits),
  };
}

/** A filter matching exactly this decimal (Decimal128 equality through a closed range). */
const exactly = (d: Decimal) => ({ $gte: toDecimal128(d), $lte: toDecimal128(d) });

/** What a parked entry says settled_at is (entries parked before the field existed: created_at). */
function pendingSettledAt(pending: PendingWalletTransaction): Date | null {
  if (pending.settled_at !== undefined) return pending.settled_at;
  return pending.status === 'purchased' ? null : pending.created_at;
}

/**
 * Writes the wallet_transactions record of a parked change and unparks it. Idempotent: the record's
 * id is the change's id, so a duplicate means it was written already. A purchase's settlement is
 * parked under the purchase's id with its settled_at: the record exists already and gets it.
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
          settled_at: pendingSettledAt(pending),
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
    const settledAt = pendingSettledAt(pending);
    if (record && settledAt && !record.settled_at) {
      record =
        (await WalletTransaction.findOneAndUpdate(
          { _id: pending.id, settled_at: null },
          { $set: { settled_at: settledAt, updated_at: settledAt } },
          { returnDocument: 'after', timestamps: false },
        ).lean()) ?? (await WalletTransaction.findById(pending.id).lean());
    }
  }
  // Only this entry: a purchase may have its creation and its settlement parked under one id.
  const which = pending.settled_at === undefined ? { id: pending.id } : { id: pending.id, settled_at: pending.settled_at };
  await Wallet.updateOne({ _id: wallet._id }, { $pull: { pending_transactions: which } });
  if (!record) throw new Error(`wallet transaction ${pending.id} vanished`);
  return record;
}

/**
 * Records the parked changes of a wallet (after a crash between a balance change and its record).
 * A purchase whose credit invoice is not finalized yet stays parked: the top-up that parked it may
 * be creating that invoice right now, and its record must not name an invoice nobody can read yet
 * (or a draft that is about to take its number). The top-up, or its retry with the same ids,
 * records it once the invoice is issued. Answers how many were recorded.
 */
export async function recordPendingTransactions(deps: WalletDeps, walletId: string): Promise<number> {
  const { Wallet, Invoice } = deps.models;
  const wallet = await Wallet.findById(walletId, { organization_id: 1, customer_id: 1, pending_transactions: 1 }).lean();
  if (!wallet) return 0;
  let recorded = 0;
  for (const pending of wallet.pending_transactions ?? []) {
    const awaitsInvoice = pending.status === 'purchased' && !!pending.invoice_id && !pendingSettledAt(pending);
    if (awaitsInvoice && !(await Invoice.exists({ _id: pending.invoice_id, status: { $ne: 'draft' } }))) continue;
    await recordPending(deps.models, wallet, pending);
    recorded++;
  }
  return recorded;
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
  /** Credits bought at creation (a purchased inbound transaction and its credit invoice); zero or absent: none. */
  paidCredits?: Decimal | null;
  /** Creates the purchase's credit invoice; required with paidCredits. */
  createCreditInvoice?: CreateCreditInvoice;
  /** Its recurring transaction rules (at most 5, validated by the API). */
  rules?: WalletRuleInput[];
  at: Date;
}

export type WalletCreateResult = { wallet: WalletDoc; transactions: WalletTransactionDoc[] };

/** The credit invoice a purchase asks for (created by createCreditInvoice in src/billing/invoices.ts). */
export interface CreditInvoiceRequest {
  organizationId: string;
  customerId: string;
  currency: string;
  walletId: string;
  transactionId: string;
  /** The invoice's idempotency key (walletPurchaseInvoiceKey) and the id it gives (invoiceIdFor). */
  idempotencyKey: string;
  invoiceId: string;
  credits: Decimal;
  rateAmount: Decimal;
  /** credits x rate_amount x 100. */
  amountCents: Decimal;
  at: Date;
}

export type CreateCreditInvoice = (request: CreditInvoiceRequest) => Promise<unknown>;

/** The idempotency key of a purchase's credit invoice; settleWalletPurchase reads the purchase back from it. */
export function walletPurchaseInvoiceKey(walletId: string, transactionId: string): string {
  return `wallet-purchase/${walletId}/${transactionId}`;
}

const PURCHASE_INVOICE_KEY = /^wallet-purchase\/([^/]+)\/([^/]+)$/;

function parseWalletPurchaseInvoiceKey(key: string | null | undefined): { walletId: string; transactionId: string } | null {
  const match = key ? PURCHASE_INVOICE_KEY.exec(key) : null;
  return match ? { walletId: match[1]!, transactionId: match[2]! } : null;
}

/** The marker of a purchase's settlement (its credits reaching the balance), beside the purchase's own id. */
export function walletPurchaseSettlementId(transactionId: string): string {
  return deterministicId(`wallet-transaction/${transactionId}/settled`);
}

const positiveOrNull = (d: Decimal | null | undefined): Decimal | null => (d?.greaterThan(0) ? d : null);

/** The parked entry of a purchase: no balance change, settled_at null, its credit invoice named. */
function purchaseEntry(
  organizationId: string,
  walletId: string,
  transactionId: string,
  credits: Decimal,
  rate: Decimal,
  source: WalletTransactionSource,
  at: Date,
) {
  const invoiceId = invoiceIdFor(organizationId, walletPurchaseInvoiceKey(walletId, transactionId));
  return pendingEntry(
    transactionId,
    { transaction_type: 'inbound', status: 'purchased', source, invoice_id: invoiceId, created_at: at, settled_at: null },
    creditsToCents(credits, rate),
    credits,
  );
}

/**
 * Writes the records of a top-up's parked changes, in the order given, after the credit invoice of
 * its purchase, if any, exists (so that no purchase record names an invoice that a crash left
 * uncreated; the repair path, recordPendingTransactions, leaves such a purchase to a retry).
 * Each change is found parked on the wallet or already recorded.
 */
async function recordTopUp(
  deps: WalletDeps,
  walletId: string,
  transactionIds: string[],
  createCreditInvoice: CreateCreditInvoice | undefined,
): Promise<{ wallet: WalletDoc; transactions: WalletTransactionDoc[] }> {
  const { Wallet, WalletTransaction } = deps.models;
  const wallet = (await Wallet.findById(walletId).lean())!;
  const found = async (id: string): Promise<PendingWalletTransaction | WalletTransactionDoc | null> =>
    wallet.pending_transactions.find((p) => p.id === id) ?? (await WalletTransaction.findById(id).lean());
  for (const id of transactionIds) {
    const change = await found(id);
    if (!change || change.status !== 'purchased' || !change.invoice_id) continue;
    if (!createCreditInvoice) throw new Error(`wallet purchase ${id} needs its credit invoice created`);
    const credits = fromDecimal128(change.credit_amount)!;
    const rateAmount = fromDecimal128(wallet.rate_amount)!;
    await createCreditInvoice({
      organizationId: wallet.organization_id,
      customerId: wallet.customer_id,
      currency: wallet.currency,
      walletId,
      transactionId: id,
      idempotencyKey: walletPurchaseInvoiceKey(walletId, id),
      invoiceId: change.invoice_id,
      credits,
      rateAmount,
      amountCents: fromDecimal128(change.amount)!,
      at: change.created_at,
    });
  }
  const transactions: WalletTransactionDoc[] = [];
  for (const id of transactionIds) {
    const parked = wallet.pending_transactions.find((p) => p.id === id);
    const record = parked ? await recordPending(deps.models, wallet, parked) : await WalletTransaction.findById(id).lean();
    if (!record) throw new Error(`wallet transaction ${id} vanished`);
    transactions.push(record);
  }
  return { wallet: (await Wallet.findById(walletId).lean())!, transactions };
}

/**
 * Inserts a wallet, its initial grant already applied and its initial purchase parked: both are
 * part of the inserted document (balance, markers, parked records), so there is nothing to race
 * with. The purchase's credit invoice is created next, then the records are written. A duplicate
 * key means the customer already has an active wallet with this code; the caller turns it into a
 * 409.
 */
export async function createWallet(deps: WalletDeps, input: CreateWalletInput): Promise<WalletCreateResult> {
  const id = newId();
  const credits = positiveOrNull(input.initialGrantedCredits);
  const paid = positiveOrNull(input.paidCredits);
  if (paid && !input.createCreditInvoice) throw new Error('paid credits need createCreditInvoice');
  const grantId = deterministicId(`wallet/${id}/initial-grant`);
  const purchaseId = deterministicId(`wallet/${id}/initial-purchase`);
  const cents = credits ? creditsToCents(credits, input.rateAmount) : new Dec(0);
  const entries: PendingWalletTransaction[] = [];
  if (credits) {
    entries.push(
      pendingEntry(
        grantId,
        { transaction_type: 'inbound', status: 'granted', source: 'manual', invoice_id: null, created_at: input.at },
        cents,
        credits,
      ),
    );
  }
  if (paid) entries.push(purchaseEntry(input.organizationId, id, purchaseId, paid, input.rateAmount, 'manual', input.at));
  await deps.models.Wallet.create({
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
    applied_transaction_ids: entries.map((e) => e.id),
    pending_transactions: entries,
    recurring_transaction_rules: walletRuleDocs(input.rules ?? [], input.at),
    threshold_crossings: [],
    opened_at: input.at,
  });
  return recordTopUp(
    deps,
    id,
    entries.map((e) => e.id),
    input.createCreditInvoice,
  );
}

/** What a top-up asks for, in credits; absent, null or zero: none of that kind. */
export interface TopUpChanges {
  /** Free credits, at once: a granted inbound transaction. */
  grantedCredits?: Decimal | null;
  /** Bought credits: a purchased inbound transaction and its credit invoice; they arrive when it is paid. */
  paidCredits?: Decimal | null;
  /** Credits taken off at once: a voided outbound transaction; never more than the balance. */
  voidedCredits?: Decimal | null;
}

export type ApplyTopUpResult =
  | { outcome: 'applied'; wallet: WalletDoc; transactions: WalletTransactionDoc[] }
  | { outcome: 'not_found' }
  | { outcome: 'terminated'; wallet: WalletDoc }
  /** The voided credits exceed the balance; nothing was changed. */
  | { outcome: 'insufficient_balance'; wallet: WalletDoc };

/** Bound on re-reads after concurrent changes of the wallet during one top-up. */
const MAX_TOP_UP_ROUNDS = 200;

/**
 * A top-up of an active wallet (api-contract.md, Wallets): its grant, void and purchase in ONE
 * guarded update (the wallet active, the voided credits within the balance, the top-up not applied
 * yet), which moves the balance by granted minus voided, pushes every change's id and parks every
 * record; then the purchase's credit invoice (createCreditInvoice), then the records. All or
 * nothing: a void beyond the balance changes nothing. A void of the whole balance empties both
 * balances exactly (guarded by both values), like a draining consumption.
 *
 * `ids` are the changes' ids and idempotency markers (default: new ones): applying the same ids
 * again changes nothing and answers the same records, creating the credit invoice and writing the
 * records an interrupted attempt did not get to. A terminated wallet accepts nothing.
 */
export async function applyTopUp(
  deps: WalletDeps,
  input: {
    organizationId: string;
    walletId: string;
    changes: TopUpChanges;
    source: WalletTransactionSource;
    at: Date;
    ids?: { granted?: string | undefined; paid?: string | undefined; voided?: string | undefined };
    createCreditInvoice?: CreateCreditInvoice;
  },
): Promise<ApplyTopUpResult> {
  const { Wallet } = deps.models;
  const granted = positiveOrNull(input.changes.grantedCredits);
  const paid = positiveOrNull(input.changes.paidCredits);
  const voided = positiveOrNull(input.changes.voidedCredits);
  if (!granted && !paid && !voided) throw new Error('a top-up needs granted, paid or voided credits');
  if (paid && !input.createCreditInvoice) throw new Error('paid credits need createCreditInvoice');
  const ids = {
    voided: voided ? (input.ids?.voided ?? newId()) : null,
    granted: granted ? (input.ids?.granted ?? newId()) : null,
    paid: paid ? (input.ids?.paid ?? newId()) : null,
  };
  const markers = [ids.voided, ids.granted, ids.paid].filter((id): id is string => id !== null);
  // All markers are pushed by the same update: the first one says whether the top-up is applied.
  const marker = markers[0]!;

  const current = await Wallet.findOne({ _id: input.walletId, organization_id: input.organizationId }, { rate_amount: 1 }).lean();
  if (!current) return { outcome: 'not_found' };
  // Records an earlier change that a crash left parked, so the list of transactions stays whole.
  await recordPendingTransactions(deps, input.walletId);
  // rate_amount never changes after creation, so the cents computed from it stay exact.
  const rate = fromDecimal128(current.rate_amount)!;
  const grantCents = granted ? creditsToCents(granted, rate) : new Dec(0);

  for (let round = 0; ; round++) {
    if (round >= MAX_TOP_UP_ROUNDS) throw new Error(`top-up of wallet ${input.walletId} kept colliding with concurrent changes`);
    const wallet = await Wallet.findById(input.walletId).lean();
    if (!wallet) return { outcome: 'not_found' };
    // Applied by an earlier (or a concurrent) attempt with the same ids.
    if (wallet.applied_transaction_ids.includes(marker)) break;
    if (wallet.status !== 'active') return { outcome: 'terminated', wallet };

    const balance = fromDecimal128(wallet.balance_cents)!;
    const creditsBalance = fromDecimal128(wallet.credits_balance)!;
    const drains = voided !== null && voided.equals(creditsBalance);
    const voidCents = voided ? (drains ? balance : creditsToCents(voided, rate)) : new Dec(0);
    if (voided && (voided.greaterThan(creditsBalance) || voidCents.greaterThan(balance))) {
      return { outcome: 'insufficient_balance', wallet };
    }

    const entries: PendingWalletTransaction[] = [];
    const base = { source: input.source, invoice_id: null, created_at: input.at };
    if (ids.voided) {
      entries.push(pendingEntry(ids.voided, { ...base, transaction_type: 'outbound', status: 'voided' }, voidCents, voided!));
    }
    if (ids.granted) {
      entries.push(pendingEntry(ids.granted, { ...base, transaction_type: 'inbound', status: 'granted' }, grantCents, granted!));
    }
    if (ids.paid) {
      entries.push(purchaseEntry(input.organizationId, input.walletId, ids.paid, paid!, rate, input.source, input.at));
    }

    const guard = !voided
      ? {}
      : drains
        ? { balance_cents: exactly(balance), credits_balance: exactly(creditsBalance) }
        : { balance_cents: { $gte: toDecimal128(voidCents) }, credits_balance: { $gte: toDecimal128(voided) } };
    const balanceChange = drains
      ? { $set: { balance_cents: toDecimal128(grantCents), credits_balance: toDecimal128(granted ?? 0) } }
      : granted || voided
        ? {
            $inc: {
              balance_cents: toDecimal128(grantCents.minus(voidCents)),
              credits_balance: toDecimal128((granted ?? new Dec(0)).minus(voided ?? 0)),
            },
          }
        : {};
    const updated = await Wallet.findOneAndUpdate(
      { ...notAppliedYet(input.walletId, marker), organization_id: input.organizationId, status: 'active', ...guard },
      {
        ...balanceChange,
        $push: { applied_transaction_ids: { $each: markers }, pending_transactions: { $each: entries } },
      },
      { returnDocument: 'after', projection: { _id: 1 } },
    ).lean();
    if (updated) break;
    // Refused: the wallet changed since it was read (a consumption, a termination, another
    // top-up, or this one applied by a concurrent attempt). Read it again.
  }
  const { wallet, transactions } = await recordTopUp(deps, input.walletId, markers, input.createCreditInvoice);
  return { outcome: 'applied', wallet, transactions };
}

export type TopUpResult =
  | { outcome: 'applied'; wallet: WalletDoc; transaction: WalletTransactionDoc }
  | { outcome: 'not_found' }
  | { outcome: 'terminated'; wallet: WalletDoc };

/**
 * Adds free credits to an active wallet (a grant): applyTopUp with granted credits only, which
 * raises both balances by credits and credits x rate x 100 and records a granted inbound
 * transaction. `transactionId` is the idempotency marker: applying the same id twice changes the
 * balance once. A terminated wallet accepts nothing (specification, Errors).
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
  const result = await applyTopUp(deps, {
    organizationId: input.organizationId,
    walletId: input.walletId,
    changes: { grantedCredits: input.credits },
    source: input.source,
    at: input.at,
    ids: { granted: input.transactionId },
  });
  if (result.outcome === 'insufficient_balance') throw new Error('a grant cannot exceed the balance');
  if (result.outcome !== 'applied') return result;
  return { outcome: 'applied', wallet: result.wallet, transaction: result.transactions[0]! };
}

/**
 * A purchase's settlement (api-contract.md, Wallets): once its `credit` invoice is paid, its
 * credits reach the balance (both balances, by its credits and cents), its record gets settled_at
 * (the invoice's paid_at) and wallet_transaction.settled is announced. Called with every paid
 * invoice (anything but a wallet purchase's credit invoice is ignored), and again by every retry:
 * the balance moves once (the settlement's own marker, walletPurchaseSettlementId) and the event is
 * emitted once (by key). Never before the invoice is paid. A wallet terminated meanwhile still
 * records the payment (its balance is forfeited and no longer consumed).
 */
export async function settleWalletPurchase(
  deps: EmitDeps,
  invoice: Pick<InvoiceDoc, '_id' | 'organization_id' | 'invoice_type' | 'status' | 'paid_at' | 'idempotency_key'>,
  at: Date,
): Promise<WalletTransactionDoc | null> {
  if (invoice.invoice_type !== 'credit' || invoice.status !== 'paid') return null;
  const purchase = parseWalletPurchaseInvoiceKey(invoice.idempotency_key);
  if (!purchase) return null;
  const { Wallet, WalletTransaction } = deps.models;
  const settlementId = walletPurchaseSettlementId(purchase.transactionId);
  const settledAt = invoice.paid_at ?? at;
  for (let round = 0; ; round++) {
    if (round >= MAX_TOP_UP_ROUNDS) throw new Error(`settlement of wallet purchase ${purchase.transactionId} kept colliding`);
    // The purchase's record (parked by a crash, if need be), or the settlement parked by an earlier attempt.
    await recordPendingTransactions(deps, purchase.walletId);
    const record = await WalletTransaction.findById(purchase.transactionId).lean();
    if (!record || record.status !== 'purchased' || record.invoice_id !== invoice._id) return null;
    if (record.organization_id !== invoice.organization_id) return null;
    if (record.settled_at) {
      await emitTransactionSettled(deps, record);
      return record;
    }
    const entry = pendingEntry(
      record._id,
      {
        transaction_type: record.transaction_type,
        status: record.status,
        source: record.source,
        invoice_id: record.invoice_id,
        created_at: record.created_at,
        settled_at: settledAt,
      },
      fromDecimal128(record.amount)!,
      fromDecimal128(record.credit_amount)!,
    );
    // Parked under the purchase's id, only once nothing else is parked under it (its creation is
    // recorded first).
    const updated = await Wallet.findOneAndUpdate(
      { ...notAppliedYet(purchase.walletId, settlementId), 'pending_transactions.id': { $ne: record._id } },
      {
        $inc: {
          balance_cents: toDecimal128(fromDecimal128(record.amount)!),
          credits_balance: toDecimal128(fromDecimal128(record.credit_amount)!),
        },
        $push: { applied_transaction_ids: settlementId, pending_transactions: entry },
      },
      { returnDocument: 'after' },
    ).lean();
    if (!updated) {
      if (!(await Wallet.exists({ _id: purchase.walletId }))) return null;
      // Applied by an earlier attempt (its parked entry is recorded next round), or an entry of the
      // purchase is parked still: record and look again.
      continue;
    }
    const settled = await recordPending(
      deps.models,
      updated,
      updated.pending_transactions.find((p) => p.id === record._id)!,
    );
    await emitTransactionSettled(deps, settled);
    return settled;
  }
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
  // A customer without any wallet (none ever, so no earlier consumption either) has nothing to
  // consume: one read instead of the lease's round trips.
  if (!(await db.models.Wallet.exists({ organization_id: input.organizationId, customer_id: input.customerId })))
    return { totalCents: new Dec(0), consumptions: [] };
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
    // Threshold top-ups this consumption (or an earlier attempt's) owes: their wallets' workflows make them.
    if (used.size > 0) await announceThresholdCrossings(db, emit.temporal, [...used]);
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
  // With threshold rules the balance before the debit must be the one read (guarded exactly), so
  // that the crossings computed from it are the real ones; they are parked by the same update.
  const thresholds = thresholdRulesOf(wallet);
  const crossings: ThresholdCrossing[] = crossedThresholds(
    thresholds,
    creditsBalance,
    drains ? new Dec(0) : creditsBalance.minus(credits),
  ).map((ruleId) => ({ rule_id: ruleId, transaction_id: transactionId, at: input.at }));
  const filter = {
    ...notAppliedYet(wallet._id, transactionId),
    ...usableAt(input.at),
    ...(drains || thresholds.length > 0
      ? { balance_cents: exactly(balance), credits_balance: exactly(creditsBalance) }
      : { balance_cents: { $gte: toDecimal128(amountCents) } }),
  };
  const change = drains
    ? { $set: { balance_cents: toDecimal128(0), credits_balance: toDecimal128(0) } }
    : { $inc: { balance_cents: toDecimal128(amountCents.negated()), credits_balance: toDecimal128(credits.negated()) } };
  const updated = await models.Wallet.findOneAndUpdate(
    filter,
    {
      ...change,
      $push: {
        applied_transaction_ids: transactionId,
        pending_transactions: entry,
        ...(crossings.length > 0 ? { threshold_crossings: { $each: crossings } } : {}),
      },
    },
    { returnDocument: 'after', projection: { pending_transactions: 1 } },
  ).lean();
  return updated?.pending_transactions.find((p) => p.id === transactionId) ?? null;
}

/** Announces a wallet transaction (wallet_transaction.created), or a purchase's settlement (.settled); idempotent by transaction. */
async function emitTransactionEvent(deps: EmitDeps, record: WalletTransactionDoc, what: 'created' | 'settled'): Promise<void> {
  await emitEvent(deps, {
    organizationId: record.organization_id,
    type: `wallet_transaction.${what}`,
    idempotencyKey: `wallet-transaction/${record._id}/${what}`,
    object: toWalletTransactionResource(record),
    occurredAt: what === 'created' ? record.created_at : (record.settled_at ?? record.updated_at),
    customerId: record.customer_id,
  });
}

export const emitTransactionCreated = (deps: EmitDeps, record: WalletTransactionDoc) => emitTransactionEvent(deps, record, 'created');
const emitTransactionSettled = (deps: EmitDeps, record: WalletTransactionDoc) => emitTransactionEvent(deps, record, 'settled');

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

// ---- recurring transaction rules ------------------------------------------------------------

/** A recurring transaction rule as the API gives it (api-contract.md, Wallets). */
export interface WalletRuleInput {
  trigger: WalletRuleTrigger;
  interval: RuleInterval | null;
  thresholdCredits: Decimal | null;
  paidCredits: Decimal;
  grantedCredits: Decimal;
  startedAt: Date | null;
}

/**
 * The stored rules made at `at`. A rule equal to one of `existing` (a PUT sending the rules back as
 * they are) is that rule, with its id and creation: its schedule, and a threshold top-up owed by it,
 * go on. Any other rule is new.
 */
export function walletRuleDocs(rules: readonly WalletRuleInput[], at: Date, existing: readonly WalletRuleDoc[] = []): WalletRuleDoc[] {
  const unused = [...existing];
  return rules.map((rule) => {
    const doc: WalletRuleDoc = {
      id: newId(),
      trigger: rule.trigger,
      interval: rule.trigger === 'interval' ? rule.interval : null,
      threshold_credits: rule.trigger === 'threshold' && rule.thresholdCredits ? toDecimal128(rule.thresholdCredits) : null,
      paid_credits: toDecimal128(rule.paidCredits),
      granted_credits: toDecimal128(rule.grantedCredits),
      started_at: rule.trigger === 'interval' ? rule.startedAt : null,
      created_at: at,
    };
    const same = unused.findIndex((old) => sameRule(old, doc));
    return same < 0 ? doc : unused.splice(same, 1)[0]!;
  });
}

function sameRule(a: WalletRuleDoc, b: WalletRuleDoc): boolean {
  const d = (v: WalletRuleDoc['paid_credits'] | null) => fromDecimal128(v)?.toString() ?? null;
  return (
    a.trigger === b.trigger &&
    (a.interval ?? null) === (b.interval ?? null) &&
    d(a.threshold_credits) === d(b.threshold_credits) &&
    d(a.paid_credits) === d(b.paid_credits) &&
    d(a.granted_credits) === d(b.granted_credits) &&
    (a.started_at?.getTime() ?? null) === (b.started_at?.getTime() ?? null)
  );
}

function thresholdRulesOf(wallet: Pick<WalletDoc, 'recurring_transaction_rules'>): ThresholdRule[] {
  return (wallet.recurring_transaction_rules ?? [])
    .filter((r) => r.trigger === 'threshold' && r.threshold_credits)
    .map((r) => ({ id: r.id, thresholdCredits: fromDecimal128(r.threshold_credits)! }));
}

/** The interval rules as the wallet's workflow schedules them: anchored at started_at (else the wallet's creation). */
export function intervalRulesOf(wallet: Pick<WalletDoc, 'recurring_transaction_rules' | 'created_at' | 'opened_at'>): WalletIntervalRule[] {
  return (wallet.recurring_transaction_rules ?? [])
    .filter((r) => r.trigger === 'interval' && r.interval)
    .map((r) => ({
      id: r.id,
      interval: r.interval!,
      startedAt: (r.started_at ?? wallet.opened_at ?? wallet.created_at).toISOString(),
      after: r.created_at.toISOString(),
    }));
}

/** What a wallet's workflow starts with: its expiry, its interval rules, the customer's clock, time zone and external id. */
export async function walletWorkflowOf(db: Db, wallet: WalletDoc): Promise<[WalletWorkflowInput, WalletOwner]> {
  const customer = await db.models.Customer.findById(wallet.customer_id, { timezone: 1, test_clock_id: 1, external_id: 1 }).lean();
  const clock = customer ? await clockOfCustomer(db, customer) : null;
  const organization = customer?.timezone ? null : await db.models.Organization.findById(wallet.organization_id, { timezone: 1 }).lean();
  const intervalRules = intervalRulesOf(wallet);
  return [
    {
      walletId: wallet._id,
      expirationAt: wallet.expiration_at ? wallet.expiration_at.toISOString() : null,
      clock,
      timezone: customer?.timezone ?? organization?.timezone ?? 'UTC',
      ...(intervalRules.length > 0 ? { intervalRules } : {}),
      labels: { name: wallet.name, code: wallet.code, currency: wallet.currency, customerExternalId: customer?.external_id ?? null },
    },
    { organizationId: wallet.organization_id, customerId: wallet.customer_id, status: wallet.status },
  ];
}

/**
 * Tells the workflows of these wallets that threshold top-ups are parked on them (starting a
 * workflow that never started). A terminated wallet gets none: its crossings are dropped. A
 * signal that fails leaves them parked; the next consumption of the wallet (or a retry of this
 * one) tells again.
 */
export async function announceThresholdCrossings(db: Db, temporal: TemporalClient, walletIds: string[]): Promise<void> {
  const { Wallet } = db.models;
  const owing = await Wallet.find({ _id: { $in: walletIds }, 'threshold_crossings.0': { $exists: true } }).lean();
  for (const wallet of owing) {
    try {
      if (wallet.status === 'active') {
        await signalWalletThresholdCrossed(temporal, ...(await walletWorkflowOf(db, wallet)));
        continue;
      }
    } catch (err) {
      // Its workflow ended: the wallet was terminated meanwhile.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    await Wallet.updateOne({ _id: wallet._id, status: { $ne: 'active' } }, { $set: { threshold_crossings: [] } });
  }
}

/**
 * A rule's top-up: its granted credits at once and its paid credits as a purchase (with its credit
 * invoice), through applyTopUp with ids derived from `key`, so that the same (rule, occasion) tops
 * up once whatever the retries; each new transaction is announced (wallet_transaction.created).
 */
async function ruleTopUp(
  deps: EmitDeps,
  wallet: WalletDoc,
  rule: WalletRuleDoc,
  occasion: { source: 'interval' | 'threshold'; at: Date; key: string },
  createCreditInvoice: CreateCreditInvoice,
): Promise<ApplyTopUpResult> {
  const result = await applyTopUp(deps, {
    organizationId: wallet.organization_id,
    walletId: wallet._id,
    changes: { grantedCredits: fromDecimal128(rule.granted_credits), paidCredits: fromDecimal128(rule.paid_credits) },
    source: occasion.source,
    at: occasion.at,
    ids: { granted: deterministicId(`${occasion.key}/granted`), paid: deterministicId(`${occasion.key}/paid`) },
    createCreditInvoice,
  });
  if (result.outcome === 'applied') {
    for (const transaction of result.transactions) await emitTransactionCreated(deps, transaction);
  }
  return result;
}

export type RuleTopUpResult = ApplyTopUpResult | { outcome: 'rule_gone' };

/**
 * An interval rule's top-up for its anniversary `at` (source interval): once per (rule,
 * anniversary). Nothing when the rule was removed or replaced meanwhile, or the wallet terminated.
 */
export async function applyIntervalTopUp(
  deps: EmitDeps,
  input: { walletId: string; ruleId: string; at: Date; createCreditInvoice: CreateCreditInvoice },
): Promise<RuleTopUpResult> {
  const wallet = await deps.models.Wallet.findById(input.walletId).lean();
  if (!wallet) return { outcome: 'not_found' };
  const rule = (wallet.recurring_transaction_rules ?? []).find((r) => r.id === input.ruleId && r.trigger === 'interval');
  if (!rule) return { outcome: 'rule_gone' };
  const key = `wallet/${wallet._id}/rule/${rule.id}/interval/${input.at.toISOString()}`;
  return ruleTopUp(deps, wallet, rule, { source: 'interval', at: input.at, key }, input.createCreditInvoice);
}

/**
 * The threshold top-ups parked on a wallet by the consumptions that crossed a rule's threshold:
 * one per (rule, consumption), for the consumption's instant (source threshold), then unparked. A
 * rule removed meanwhile, or a terminated wallet, tops up nothing. Answers how many were made.
 */
export async function applyThresholdTopUps(
  deps: EmitDeps,
  input: { walletId: string; createCreditInvoice: CreateCreditInvoice },
): Promise<number> {
  const { Wallet } = deps.models;
  const wallet = await Wallet.findById(input.walletId).lean();
  if (!wallet) return 0;
  let made = 0;
  for (const crossing of wallet.threshold_crossings ?? []) {
    const rule = (wallet.recurring_transaction_rules ?? []).find((r) => r.id === crossing.rule_id && r.trigger === 'threshold');
    if (rule) {
      const key = `wallet/${wallet._id}/rule/${rule.id}/threshold/${crossing.transaction_id}`;
      const result = await ruleTopUp(deps, wallet, rule, { source: 'threshold', at: crossing.at, key }, input.createCreditInvoice);
      if (result.outcome === 'applied') made++;
    }
    await Wallet.updateOne(
      { _id: wallet._id },
      { $pull: { threshold_crossings: { rule_id: crossing.rule_id, transaction_id: crossing.transaction_id } } },
    );
  }
  return made;
}
