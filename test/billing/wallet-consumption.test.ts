// Wallet balances against the MongoDB stand-in (src/billing/wallets.ts): consumption at invoice
// finalization in the specification's order, idempotent per (wallet, invoice), never overdrawn
// under concurrent finalizations; top-ups with the same guarded update.
import { randomUUID } from 'node:crypto';
import type Decimal from 'decimal.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { toDecimal128 } from '../../src/db/decimal';
import {
  consumeWalletsForInvoice,
  createWallet,
  terminateWallet,
  topUpWallet,
  walletConsumptionId,
  type CreateWalletInput,
} from '../../src/billing/wallets';
import type { Db } from '../../src/db';
import { dec } from '../../src/domain/money';
import type { TemporalClient } from '../../src/temporal/client';
import { createTestDb } from '../support/stack';

let db: Db;
let organizationId: string;
let customerId: string;

beforeAll(async () => {
  db = await createTestDb();
});

afterAll(async () => {
  await db?.connection.dropDatabase().catch(() => undefined);
  await db?.close();
});

beforeEach(() => {
  organizationId = randomUUID();
  customerId = randomUUID();
});

const AT = new Date('2026-11-21T10:00:00.000Z');
let created = Date.parse('2026-01-01T00:00:00.000Z');

/** A wallet holding `credits` at `rate`, created one second after the previous one (age order). */
async function wallet(credits: Decimal.Value, extra: Partial<CreateWalletInput> = {}): Promise<string> {
  const { wallet: doc } = await createWallet(db, {
    organizationId,
    customerId,
    name: null,
    code: null,
    currency: 'USD',
    rateAmount: dec(1),
    priority: 1,
    expirationAt: null,
    initialGrantedCredits: dec(credits),
    at: AT,
    ...extra,
  });
  created += 1000;
  await db.models.Wallet.updateOne({ _id: doc._id }, { $set: { created_at: new Date(created) } }, { timestamps: false });
  return doc._id;
}

async function balances(id: string): Promise<{ cents: string; credits: string; status: string }> {
  const w = (await db.models.Wallet.findById(id).lean())!;
  return { cents: dec(String(w.balance_cents)).toFixed(), credits: dec(String(w.credits_balance)).toFixed(), status: w.status };
}

function consume(invoiceId: string, amountCents: Decimal.Value, currency = 'USD', at = AT) {
  return consumeWalletsForInvoice(db, { organizationId, customerId, currency, invoiceId, amountCents: dec(amountCents), at });
}

const outbound = (invoiceId: string) => db.models.WalletTransaction.find({ invoice_id: invoiceId, transaction_type: 'outbound' }).lean();
const settlements = (invoiceId: string) => db.models.InvoiceSettlement.find({ invoice_id: invoiceId }).lean();

describe('consumeWalletsForInvoice', () => {
  it('consumes by priority, then by age, each wallet paying the smaller of its balance and what remains', async () => {
    const oldLowPriority = await wallet(100, { priority: 2 });
    const olderFirst = await wallet(30, { priority: 1 });
    const newerFirst = await wallet(50, { priority: 1 });
    const invoiceId = randomUUID();

    // Balances are in cents: 100 credits at rate 1 = 10000 cents.
    const result = await consume(invoiceId, 10_000);

    expect(result.consumptions.map((c) => [c.walletId, c.amountCents.toFixed()])).toEqual([
      [olderFirst, '3000'],
      [newerFirst, '5000'],
      [oldLowPriority, '2000'],
    ]);
    expect(result.totalCents.toFixed()).toBe('10000');
    expect(await balances(olderFirst)).toEqual({ cents: '0', credits: '0', status: 'active' });
    expect(await balances(newerFirst)).toEqual({ cents: '0', credits: '0', status: 'active' });
    expect(await balances(oldLowPriority)).toEqual({ cents: '8000', credits: '80', status: 'active' });

    const txs = await outbound(invoiceId);
    expect(txs).toHaveLength(3);
    for (const t of txs) {
      expect(t).toMatchObject({ status: 'invoiced', transaction_type: 'outbound', invoice_id: invoiceId, organization_id: organizationId });
      expect(t._id).toBe(walletConsumptionId(t.wallet_id, invoiceId));
      expect(t.created_at.toISOString()).toBe(AT.toISOString());
    }
    const byWallet = Object.fromEntries(txs.map((t) => [t.wallet_id, [String(t.amount), String(t.credit_amount)]]));
    expect(byWallet[oldLowPriority]).toEqual(['2000', '20']);

    const rows = await settlements(invoiceId);
    expect(rows.map((r) => [r.settlement_type, r.source_id, dec(String(r.amount_cents)).toFixed()]).sort()).toEqual(
      [
        ['wallet_credit', olderFirst, '3000'],
        ['wallet_credit', newerFirst, '5000'],
        ['wallet_credit', oldLowPriority, '2000'],
      ].sort(),
    );
  });

  it('stops when the invoice is covered and leaves what remains due when the wallets cannot cover it', async () => {
    const a = await wallet(10);
    const b = await wallet(10);
    const covered = await consume(randomUUID(), 600);
    expect(covered.consumptions.map((c) => [c.walletId, c.amountCents.toFixed()])).toEqual([[a, '600']]);
    expect((await balances(b)).cents).toBe('1000');

    const short = await consume(randomUUID(), 5000);
    expect(short.totalCents.toFixed()).toBe('1400');
    expect(await balances(a)).toMatchObject({ cents: '0', credits: '0' });
    expect(await balances(b)).toMatchObject({ cents: '0', credits: '0' });
  });

  it("skips expired (also expiring exactly at finalization), terminated, other-currency and other customers' wallets", async () => {
    const expired = await wallet(10, { expirationAt: new Date(AT.getTime() - 1) });
    const expiringNow = await wallet(10, { expirationAt: AT });
    const terminated = await wallet(10);
    await db.models.Wallet.updateOne({ _id: terminated }, { $set: { status: 'terminated', terminated_at: AT } });
    const euros = await wallet(10, { currency: 'EUR' });
    const otherCustomer = await wallet(10, { customerId: randomUUID() });
    const valid = await wallet(10, { priority: 50, expirationAt: new Date(AT.getTime() + 1) });

    const result = await consume(randomUUID(), 5000);

    expect(result.consumptions.map((c) => c.walletId)).toEqual([valid]);
    expect(result.totalCents.toFixed()).toBe('1000');
    for (const id of [expired, expiringNow, terminated, euros, otherCustomer]) expect((await balances(id)).cents).toBe('1000');
  });

  it('pays nothing for a zero or negative amount due', async () => {
    const a = await wallet(10);
    expect((await consume(randomUUID(), 0)).consumptions).toEqual([]);
    expect((await consume(randomUUID(), -5)).consumptions).toEqual([]);
    expect((await balances(a)).cents).toBe('1000');
  });

  it('a retry for the same invoice is a no-op: one transaction and one settlement per wallet, balances decreased once, same answer', async () => {
    const a = await wallet(20, { priority: 1 });
    const b = await wallet(100, { priority: 2 });
    const invoiceId = randomUUID();

    const first = await consume(invoiceId, 7500);
    const second = await consume(invoiceId, 7500);
    const third = await consume(invoiceId, 7500);

    const summary = (r: typeof first) => r.consumptions.map((c) => [c.walletId, c.amountCents.toFixed(), c.transactionId]);
    expect(summary(first)).toEqual([
      [a, '2000', walletConsumptionId(a, invoiceId)],
      [b, '5500', walletConsumptionId(b, invoiceId)],
    ]);
    expect(summary(second)).toEqual(summary(first));
    expect(summary(third)).toEqual(summary(first));
    expect(second.totalCents.toFixed()).toBe('7500');
    expect(await outbound(invoiceId)).toHaveLength(2);
    expect(await settlements(invoiceId)).toHaveLength(2);
    expect(await balances(a)).toMatchObject({ cents: '0', credits: '0' });
    expect(await balances(b)).toMatchObject({ cents: '4500', credits: '45' });
  });

  it('concurrent attempts for the same invoice (an attempt still running beside its retry) consume each wallet once', async () => {
    const a = await wallet(20, { priority: 1 });
    const b = await wallet(100, { priority: 2 });
    const invoiceId = randomUUID();

    const results = await Promise.all(Array.from({ length: 6 }, () => consume(invoiceId, 7500)));

    for (const r of results)
      expect(r.consumptions.map((c) => [c.walletId === a ? 'a' : 'b', c.amountCents.toFixed()])).toEqual([
        ['a', '2000'],
        ['b', '5500'],
      ]);
    expect(await db.models.WalletConsumptionLease.countDocuments({ _id: invoiceId })).toBe(0);
    expect(await outbound(invoiceId)).toHaveLength(2);
    expect(await settlements(invoiceId)).toHaveLength(2);
    expect(await balances(a)).toMatchObject({ cents: '0', credits: '0' });
    expect(await balances(b)).toMatchObject({ cents: '4500', credits: '45' });
  });

  it('a retry after a crash between the balance change and its record writes the record and the settlement, and debits nothing again', async () => {
    const a = await wallet(50);
    const invoiceId = randomUUID();
    const txId = walletConsumptionId(a, invoiceId);
    // What the first attempt left: the balance changed and the record parked, nothing else.
    await db.models.Wallet.updateOne(
      { _id: a },
      {
        $inc: { balance_cents: toDecimal128(-1200), credits_balance: toDecimal128(-12) },
        $push: {
          applied_transaction_ids: txId,
          pending_transactions: {
            id: txId,
            transaction_type: 'outbound',
            status: 'invoiced',
            source: 'manual',
            amount: toDecimal128(1200),
            credit_amount: toDecimal128(12),
            invoice_id: invoiceId,
            created_at: AT,
          },
        },
      },
    );

    const retry = await consume(invoiceId, 1200);

    expect(retry.consumptions.map((c) => [c.walletId, c.amountCents.toFixed(), c.transactionId])).toEqual([[a, '1200', txId]]);
    expect(await balances(a)).toMatchObject({ cents: '3800', credits: '38' });
    expect(await outbound(invoiceId)).toHaveLength(1);
    expect((await settlements(invoiceId)).map((s) => dec(String(s.amount_cents)).toFixed())).toEqual(['1200']);
    expect((await db.models.Wallet.findById(a).lean())!.pending_transactions).toEqual([]);
  });

  it('concurrent finalizations of 10 invoices of 30.00 against one wallet of 100.00 never overdraw it', async () => {
    const a = await wallet(100);
    const invoices = Array.from({ length: 10 }, () => randomUUID());

    const results = await Promise.all(invoices.map((id) => consume(id, 3000)));

    const totals = results.map((r) => r.totalCents);
    const sum = totals.reduce((acc, t) => acc.plus(t), dec(0));
    expect(sum.toFixed()).toBe('10000');
    for (const t of totals) {
      expect(t.greaterThanOrEqualTo(0)).toBe(true);
      expect(t.lessThanOrEqualTo(3000)).toBe(true);
    }
    // Three invoices fully paid, one partly (10.00), the rest nothing.
    expect(totals.map((t) => t.toFixed()).sort()).toEqual(['0', '0', '0', '0', '0', '0', '1000', '3000', '3000', '3000']);
    expect(await balances(a)).toEqual({ cents: '0', credits: '0', status: 'active' });
    const txs = await db.models.WalletTransaction.find({ wallet_id: a, transaction_type: 'outbound' }).lean();
    expect(txs.reduce((acc, t) => acc.plus(String(t.amount)), dec(0)).toFixed()).toBe('10000');
    const settled = await db.models.InvoiceSettlement.find({ invoice_id: { $in: invoices } }).lean();
    expect(settled.reduce((acc, s) => acc.plus(String(s.amount_cents)), dec(0)).toFixed()).toBe('10000');
  });

  it('concurrent finalizations across several wallets: every wallet ends at or above zero and the consumptions add up to what the balances lost', async () => {
    const ids = [
      await wallet('12.34', { priority: 1 }),
      await wallet('7.77', { priority: 2 }),
      await wallet(40, { priority: 2, rateAmount: dec('2.5') }),
    ];
    const before = await Promise.all(ids.map(async (id) => dec((await balances(id)).cents)));
    const amounts = [1999, 2500, 333, 4000, 1234, 777, 5000, 120, 999, 2222, 3100, 650];
    const invoices = amounts.map(() => randomUUID());

    const results = await Promise.all(invoices.map((id, i) => consume(id, amounts[i]!)));

    const after = await Promise.all(ids.map(async (id) => dec((await balances(id)).cents)));
    for (const b of after) expect(b.greaterThanOrEqualTo(0)).toBe(true);
    const lost = before.reduce((acc, b, i) => acc.plus(b.minus(after[i]!)), dec(0));
    const consumed = results.reduce((acc, r) => acc.plus(r.totalCents), dec(0));
    expect(consumed.toFixed()).toBe(lost.toFixed());
    // The invoices asked for more than the wallets held, so every wallet is empty.
    expect(before.reduce((acc, b) => acc.plus(b), dec(0)).toFixed()).toBe(consumed.toFixed());
    results.forEach((r, i) => expect(r.totalCents.lessThanOrEqualTo(amounts[i]!)).toBe(true));
    for (const id of ids) expect(await balances(id)).toMatchObject({ cents: '0', credits: '0' });
  });

  it('keeps balance_cents = credits x rate_amount x 100 through consumptions at a rate that does not divide evenly', async () => {
    const a = await wallet(1, { rateAmount: dec(3) });
    expect(await balances(a)).toMatchObject({ cents: '300', credits: '1' });
    await consume(randomUUID(), 100);
    const third = await balances(a);
    expect(third.cents).toBe('200');
    expect(dec(third.credits).times(300).minus(third.cents).abs().lessThan('1e-9')).toBe(true);
    await consume(randomUUID(), 100);
    await consume(randomUUID(), 100);
    // Emptied: both exactly zero, no rounding residue.
    expect(await balances(a)).toMatchObject({ cents: '0', credits: '0' });
  });

  it('announces each consumption as wallet_transaction.created when given the emit dependencies', async () => {
    const a = await wallet(10);
    const invoiceId = randomUUID();
    const noTemporal = {} as TemporalClient; // no webhook endpoint: nothing is started
    await consumeWalletsForInvoice(
      db,
      { organizationId, customerId, currency: 'USD', invoiceId, amountCents: dec(250), at: AT },
      { temporal: noTemporal },
    );
    await consumeWalletsForInvoice(
      db,
      { organizationId, customerId, currency: 'USD', invoiceId, amountCents: dec(250), at: AT },
      { temporal: noTemporal },
    );
    const events = await db.models.LifecycleEvent.find({ organization_id: organizationId, type: 'wallet_transaction.created' }).lean();
    expect(events).toHaveLength(1);
    expect(events[0]!.object).toMatchObject({
      id: walletConsumptionId(a, invoiceId),
      amount: '250.0000',
      credit_amount: '2.5',
      transaction_type: 'outbound',
      status: 'invoiced',
    });
  });
});

describe('topUpWallet', () => {
  it('raises both balances by credits and credits x rate x 100 and records a granted inbound transaction', async () => {
    const a = await wallet(0, { rateAmount: dec('2.5') });
    const result = await topUpWallet(db, { organizationId, walletId: a, credits: dec(10), source: 'threshold', at: AT });
    expect(result.outcome).toBe('applied');
    expect(await balances(a)).toMatchObject({ cents: '2500', credits: '10' });
    if (result.outcome !== 'applied') return;
    expect(result.transaction).toMatchObject({ transaction_type: 'inbound', status: 'granted', source: 'threshold', invoice_id: null });
    expect(String(result.transaction.amount)).toBe('2500');
  });

  it('applies a transaction id once, however many times it is sent, also concurrently', async () => {
    const a = await wallet(0);
    const transactionId = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        topUpWallet(db, { organizationId, walletId: a, credits: dec(3), source: 'manual', at: AT, transactionId }),
      ),
    );
    expect(results.every((r) => r.outcome === 'applied')).toBe(true);
    expect(await balances(a)).toMatchObject({ cents: '300', credits: '3' });
    expect(await db.models.WalletTransaction.countDocuments({ wallet_id: a })).toBe(1);
  });

  it('concurrent top-ups and consumptions: the balance equals grants minus consumptions', async () => {
    const a = await wallet(10);
    const work = [
      ...Array.from({ length: 8 }, () => topUpWallet(db, { organizationId, walletId: a, credits: dec(5), source: 'manual', at: AT })),
      ...Array.from({ length: 8 }, () => consume(randomUUID(), 700)),
    ];
    const results = await Promise.all(work);
    const consumed = results.slice(8).reduce((acc, r) => acc.plus((r as { totalCents: Decimal }).totalCents), dec(0));
    const b = await balances(a);
    expect(dec(b.cents).toFixed()).toBe(
      dec(1000 + 8 * 500)
        .minus(consumed)
        .toFixed(),
    );
    expect(dec(b.cents).greaterThanOrEqualTo(0)).toBe(true);
    expect(dec(b.credits).times(100).toFixed()).toBe(dec(b.cents).toFixed());
  });

  it('refuses a terminated wallet and an unknown or foreign one', async () => {
    const a = await wallet(1);
    await terminateWallet({ models: db.models, temporal: {} as TemporalClient }, { walletId: a, at: AT, reason: 'manual' });
    const refused = await topUpWallet(db, { organizationId, walletId: a, credits: dec(1), source: 'manual', at: AT });
    expect(refused.outcome).toBe('terminated');
    expect((await balances(a)).cents).toBe('100');
    expect((await topUpWallet(db, { organizationId: randomUUID(), walletId: a, credits: dec(1), source: 'manual', at: AT })).outcome).toBe(
      'not_found',
    );
  });
});

describe('terminateWallet', () => {
  const deps = () => ({ models: db.models, temporal: {} as TemporalClient });

  it('an expiry terminates only a wallet whose expiration_at is at or before the instant', async () => {
    const a = await wallet(1, { expirationAt: new Date('2026-12-31T23:00:00.000Z') });
    const early = await terminateWallet(deps(), { walletId: a, at: new Date('2026-12-31T22:59:59.999Z'), reason: 'expired' });
    expect(early.outcome).toBe('still_active');
    const due = await terminateWallet(deps(), { walletId: a, at: new Date('2026-12-31T23:00:00.000Z'), reason: 'expired' });
    expect(due.outcome).toBe('terminated');
    const doc = (await db.models.Wallet.findById(a).lean())!;
    expect(doc.terminated_at?.toISOString()).toBe('2026-12-31T23:00:00.000Z');
    expect(doc.code_slot).toBe(a);
  });

  it('is idempotent: terminated_at stays the first instant and wallet.terminated is recorded once', async () => {
    const a = await wallet(1, { code: 'main' });
    await terminateWallet(deps(), { walletId: a, at: AT, reason: 'manual' });
    const again = await terminateWallet(deps(), { walletId: a, at: new Date(AT.getTime() + 60_000), reason: 'manual' });
    expect(again.outcome).toBe('terminated');
    if (again.outcome === 'terminated') expect(again.wallet.terminated_at?.toISOString()).toBe(AT.toISOString());
    expect(await db.models.LifecycleEvent.countDocuments({ organization_id: organizationId, type: 'wallet.terminated' })).toBe(1);
    // Its code is free again for a new active wallet of the customer.
    await expect(wallet(1, { code: 'main' })).resolves.toBeTypeOf('string');
    await expect(wallet(1, { code: 'main' })).rejects.toMatchObject({ code: 11000 });
  });
});
