// Invoice finalization as a service (src/billing/invoices.ts with document-numbers, credit-notes,
// wallets and settlements): gapless numbering under concurrent finalizations, a finalization that a
// worker restart interrupts after any step and that is retried in full, and the settlement-driven
// paid transition happening once.
//
// No worker polls the stack's task queue, so the workflows createInvoice starts never run: the
// test alone finalizes the drafts, by calling the functions the workflow's activities call.
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toDecimal128 } from '../../src/db/decimal';
import { createCreditNote, finalizeCreditNote, applyCreditNotesToInvoice } from '../../src/billing/credit-notes';
import { takeDocumentNumber } from '../../src/billing/document-numbers';
import { createInvoice, finalizeInvoice, markPaidIfSettled, payInvoice, voidInvoice, type InvoiceDeps } from '../../src/billing/invoices';
import { recordSettlement } from '../../src/billing/settlements';
import { consumeWalletsForInvoice, createWallet } from '../../src/billing/wallets';
import type { InvoiceDoc } from '../../src/db/models/invoice';
import { dec } from '../../src/domain/money';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
let deps: InvoiceDeps;

beforeAll(async () => {
  stack = await createTestStack();
  deps = { models: stack.db.models, temporal: stack.temporal };
});
afterAll(async () => stack?.close());

const AT = new Date('2026-11-21T10:00:00.000Z');
const LATER = new Date('2026-11-22T10:00:00.000Z');

/** Decimal128 (or anything numeric) as a plain decimal string, for exact comparisons. */
const plain = (v: unknown) => new Decimal(String(v ?? 0)).toFixed();

interface Ctx {
  organizationId: string;
  customerId: string;
  prefix: string;
}

async function newCtx(): Promise<Ctx> {
  const prefix = `F${randomUUID().replaceAll('-', '').slice(0, 5).toUpperCase()}`;
  // A grace period, so that even a worker polling the queue would leave the drafts alone.
  const org = await createOrganization(stack.app, {
    name: `Fin ${prefix}`,
    timezone: 'UTC',
    document_number_prefix: prefix,
    invoice_grace_period: 30,
  });
  const customer = await stack.db.models.Customer.create({ organization_id: org.id, external_id: `cus_${randomUUID()}`, currency: 'USD' });
  return { organizationId: org.id, customerId: customer._id, prefix };
}

async function draft(ctx: Ctx, amount: Decimal.Value): Promise<InvoiceDoc> {
  return createInvoice(stack.db, deps, {
    organizationId: ctx.organizationId,
    customerId: ctx.customerId,
    invoiceType: 'one_off',
    currency: 'USD',
    idempotencyKey: `test/${randomUUID()}`,
    fees: [
      { key: 'line/000', fee_type: 'add_on', amount_cents: dec(amount), units: dec(1), events_count: 0, unit_amount_cents: dec(amount) },
    ],
    at: AT,
  });
}

const reload = async (id: string) => (await stack.db.models.Invoice.findById(id).lean())!;
const numberOf = (ctx: Ctx, sequence: number) => `${ctx.prefix}-${String(sequence).padStart(6, '0')}`;
const takenNumbers = async (ctx: Ctx) =>
  (await stack.db.models.DocumentNumber.find({ organization_id: ctx.organizationId, kind: 'invoice' }).lean()).map((n) => ({
    sequence: n.sequence,
    document: n.document_id,
  }));

async function eventCount(ctx: Ctx, invoiceId: string, type: string): Promise<number> {
  const events = await stack.db.models.LifecycleEvent.find({ organization_id: ctx.organizationId, type }).lean();
  return events.filter((e) => (e.object as { id?: unknown }).id === invoiceId).length;
}

describe('gapless numbering under concurrency', () => {
  it('20 drafts finalized concurrently take 000001..000020, each exactly once; one invoice finalized 5 times at once takes one number, the next', async () => {
    const ctx = await newCtx();
    const drafts = await Promise.all(Array.from({ length: 20 }, (_, i) => draft(ctx, 100 + i)));
    for (const d of drafts) expect(d.number).toBe(`${ctx.prefix}-DRAFT-${d._id.replace(/-/g, '').slice(0, 8)}`);

    const finalized = await Promise.all(drafts.map((d) => finalizeInvoice(stack.db, deps, d._id, AT)));
    const expected = Array.from({ length: 20 }, (_, i) => numberOf(ctx, i + 1));
    expect(finalized.map((f) => f.number).sort()).toEqual(expected);
    const stored = await Promise.all(drafts.map((d) => reload(d._id)));
    expect(stored.every((s) => s.status === 'finalized')).toBe(true);
    expect(stored.map((s) => s.number).sort()).toEqual(expected);
    expect(stored.map((s) => s.sequential_id).sort((a, b) => a! - b!)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    for (const s of stored) expect(s.number).toBe(numberOf(ctx, s.sequential_id!));
    // One number row per invoice: nothing taken twice, nothing lost.
    const taken = await takenNumbers(ctx);
    expect(taken).toHaveLength(20);
    expect(new Set(taken.map((t) => t.document)).size).toBe(20);

    const one = await draft(ctx, 500);
    const attempts = await Promise.all(Array.from({ length: 5 }, () => finalizeInvoice(stack.db, deps, one._id, AT)));
    expect(new Set(attempts.map((a) => a.number))).toEqual(new Set([numberOf(ctx, 21)]));
    expect((await reload(one._id)).number).toBe(numberOf(ctx, 21));
    expect((await takenNumbers(ctx)).filter((t) => t.document === one._id)).toEqual([{ sequence: 21, document: one._id }]);
    expect(await eventCount(ctx, one._id, 'invoice.finalized')).toBe(1);

    // The sequence continues without a gap.
    const next = await draft(ctx, 600);
    expect((await finalizeInvoice(stack.db, deps, next._id, AT)).number).toBe(numberOf(ctx, 22));
  });
});

describe('a finalization retried after the worker restarted in the middle of it', () => {
  /**
   * The customer: an earlier finalized invoice (number 000001) with a finalized credit note of
   * 1000 on it, a priority-1 wallet of 500 cents and a priority-2 wallet of 2000 cents; then a
   * draft of 3200 to finalize.
   */
  async function scenario() {
    const ctx = await newCtx();
    const earlier = await draft(ctx, 5000);
    expect((await finalizeInvoice(stack.db, deps, earlier._id, AT)).number).toBe(numberOf(ctx, 1));
    const fee = (await stack.db.models.Fee.findOne({ invoice_id: earlier._id }).lean())!;
    const note = await createCreditNote(
      stack.db,
      { temporal: stack.temporal },
      {
        organizationId: ctx.organizationId,
        invoiceId: earlier._id,
        reason: 'order_change',
        items: [{ fee_id: fee._id, amount_cents: '1000' }],
        at: AT,
      },
    );
    await finalizeCreditNote(
      stack.db,
      { temporal: stack.temporal },
      { organizationId: ctx.organizationId, creditNoteId: note._id, at: AT },
    );
    const wallet = async (credits: number, priority: number) =>
      (
        await createWallet(stack.db, {
          organizationId: ctx.organizationId,
          customerId: ctx.customerId,
          name: null,
          code: null,
          currency: 'USD',
          rateAmount: dec(1),
          priority,
          expirationAt: null,
          initialGrantedCredits: dec(credits),
          at: AT,
        })
      ).wallet._id;
    const first = await wallet(5, 1); // 5 credits x 1 x 100 = 500 cents
    const second = await wallet(20, 2); // 2000 cents
    const invoice = await draft(ctx, 3200);
    return { ctx, noteId: note._id, first, second, invoice };
  }

  // What the first attempt did before the crash, step by step, exactly as finalizeInvoice does it.
  type Setup = Awaited<ReturnType<typeof scenario>>;
  const takeNumber = (s: Setup) =>
    takeDocumentNumber(stack.db, { organizationId: s.ctx.organizationId, kind: 'invoice', documentId: s.invoice._id });
  const applyNotes = (s: Setup) =>
    applyCreditNotesToInvoice(stack.db, {
      organizationId: s.ctx.organizationId,
      customerId: s.ctx.customerId,
      currency: 'USD',
      invoiceId: s.invoice._id,
      amountCents: dec(3200),
      at: AT,
    });
  const consume = (s: Setup, amount: Decimal.Value) =>
    consumeWalletsForInvoice(stack.db, {
      organizationId: s.ctx.organizationId,
      customerId: s.ctx.customerId,
      currency: 'USD',
      invoiceId: s.invoice._id,
      amountCents: dec(amount),
      at: AT,
    });

  const crashes: [string, (s: Setup) => Promise<unknown>][] = [
    ['after taking the number', async (s) => takeNumber(s)],
    [
      'after applying the credit notes',
      async (s) => {
        await takeNumber(s);
        return applyNotes(s);
      },
    ],
    [
      'after consuming the wallets',
      async (s) => {
        await takeNumber(s);
        const credited = await applyNotes(s);
        expect(credited.totalCents.toFixed()).toBe('1000');
        return consume(s, dec(3200).minus(credited.totalCents));
      },
    ],
    [
      'while consuming the wallets (the first attempt still runs beside its retry)',
      async (s) => {
        await takeNumber(s);
        await applyNotes(s);
        return Promise.all([consume(s, 2200), finalizeInvoice(stack.db, deps, s.invoice._id, AT)]);
      },
    ],
    ['never: finalizeInvoice twice in a row', (s) => finalizeInvoice(stack.db, deps, s.invoice._id, AT)],
    [
      'never: finalizeInvoice 4 times concurrently (plus the retry)',
      (s) => Promise.all(Array.from({ length: 4 }, () => finalizeInvoice(stack.db, deps, s.invoice._id, AT))),
    ],
  ];

  it.each(crashes)(
    'crash %s, then the retry in full: one number, one consumption per wallet and note, balances decreased once',
    async (_label, firstAttempt) => {
      const s = await scenario();
      await firstAttempt(s);
      const result = await finalizeInvoice(stack.db, deps, s.invoice._id, AT);

      // 3200 due: the credit note's 1000 first, then the priority-1 wallet's 500, then 1700 of the
      // priority-2 wallet's 2000; nothing left: paid at finalization.
      const due = dec(3200);
      const fromNote = Decimal.min(1000, due);
      const fromFirst = Decimal.min(500, due.minus(fromNote));
      const fromSecond = Decimal.min(2000, due.minus(fromNote).minus(fromFirst));
      expect(fromSecond.toFixed()).toBe('1700');
      const stored = await reload(s.invoice._id);
      for (const invoice of [result, stored]) {
        expect(invoice).toMatchObject({ status: 'paid', payment_status: 'succeeded', number: numberOf(s.ctx, 2), sequential_id: 2 });
        expect(plain(invoice.credit_notes_amount_cents)).toBe(fromNote.toFixed());
        expect(plain(invoice.prepaid_credit_amount)).toBe(fromFirst.plus(fromSecond).toFixed());
        expect(plain(invoice.total)).toBe('0');
        expect(plain(invoice.subtotal)).toBe('3200');
      }
      // Covered at finalization: every fee is paid with the invoice.
      const fees = await stack.db.models.Fee.find({ invoice_id: s.invoice._id }).lean();
      expect(fees.length).toBeGreaterThan(0);
      expect(fees.map((f) => f.payment_status)).toEqual(fees.map(() => 'succeeded'));

      // One number: 000002 for this invoice, and no other row taken.
      expect((await takenNumbers(s.ctx)).sort((a, b) => a.sequence - b.sequence)).toEqual([
        { sequence: 1, document: expect.any(String) as unknown },
        { sequence: 2, document: s.invoice._id },
      ]);

      // One outbound transaction per wallet; one settlement per wallet and per credit note.
      const outbound = await stack.db.models.WalletTransaction.find({ invoice_id: s.invoice._id, transaction_type: 'outbound' }).lean();
      expect(outbound.map((t) => [t.wallet_id, plain(t.amount)]).sort()).toEqual(
        [
          [s.first, fromFirst.toFixed()],
          [s.second, fromSecond.toFixed()],
        ].sort(),
      );
      const settlements = await stack.db.models.InvoiceSettlement.find({ invoice_id: s.invoice._id }).lean();
      expect(settlements.map((r) => [r.settlement_type, r.source_id, plain(r.amount_cents)]).sort()).toEqual(
        [
          ['credit_note', s.noteId, fromNote.toFixed()],
          ['wallet_credit', s.first, fromFirst.toFixed()],
          ['wallet_credit', s.second, fromSecond.toFixed()],
        ].sort(),
      );

      // Balances decreased once.
      const first = (await stack.db.models.Wallet.findById(s.first).lean())!;
      const second = (await stack.db.models.Wallet.findById(s.second).lean())!;
      expect([plain(first.balance_cents), plain(first.credits_balance)]).toEqual(['0', '0']);
      expect([plain(second.balance_cents), plain(second.credits_balance)]).toEqual(['300', '3']);
      const note = (await stack.db.models.CreditNote.findById(s.noteId).lean())!;
      expect(plain(note.balance_amount_cents)).toBe('0');
      expect(note.applications.map((a) => [a.invoice_id, plain(a.amount_cents)])).toEqual([[s.invoice._id, '1000']]);

      expect(await eventCount(s.ctx, s.invoice._id, 'invoice.finalized')).toBe(1);
      expect(await eventCount(s.ctx, s.invoice._id, 'invoice.paid')).toBe(1);

      // Once more, later: nothing changes.
      const again = await finalizeInvoice(stack.db, deps, s.invoice._id, LATER);
      expect(again.finalized_at?.toISOString()).toBe(AT.toISOString());
      expect(await stack.db.models.WalletTransaction.countDocuments({ invoice_id: s.invoice._id })).toBe(2);
      expect(await stack.db.models.InvoiceSettlement.countDocuments({ invoice_id: s.invoice._id })).toBe(3);

      // The next invoice of the organization takes the next number: the crash left no hole.
      const next = await draft(s.ctx, 100);
      expect((await finalizeInvoice(stack.db, deps, next._id, AT)).number).toBe(numberOf(s.ctx, 3));
    },
  );
});

describe('a retry after a crash between the status change and its consequences', () => {
  // finalizeInvoice, markPaidIfSettled and voidInvoice each write the new status with one guarded
  // update and then consume coupons / emit the lifecycle event. The header of invoices.ts promises
  // that every function "can be retried after a crash at any point and leaves the same result":
  // a crash right after the guarded update must not lose what comes after it.

  it('finalization: the retry still consumes the coupon and emits invoice.finalized', async () => {
    const ctx = await newCtx();
    const coupon = await stack.db.models.Coupon.create({
      organization_id: ctx.organizationId,
      code: `ONCE-${randomUUID().slice(0, 8)}`,
      name: 'Once 100',
      coupon_type: 'fixed_amount',
      amount_cents: toDecimal128(100),
      amount_currency: 'USD',
      frequency: 'once',
      reusable: true,
      status: 'active',
    });
    const applied = await stack.db.models.AppliedCoupon.create({
      organization_id: ctx.organizationId,
      coupon_id: coupon._id,
      coupon_code: coupon.code,
      coupon_type: 'fixed_amount',
      customer_id: ctx.customerId,
      amount_cents: toDecimal128(100),
      amount_currency: 'USD',
      percentage_rate: null,
      frequency: 'once',
      frequency_duration: null,
      frequency_duration_remaining: null,
      status: 'active',
      exclusive_key: randomUUID(),
    });
    const invoice = await draft(ctx, 1000);
    // 1000 - the 100 coupon = 900 due.
    expect(plain(invoice.total)).toBe('900');
    expect(invoice.applied_coupons.map((c) => c.applied_coupon_id)).toEqual([applied._id]);

    // The first attempt: every step, then the guarded status update, then the crash.
    const sequence = await takeDocumentNumber(stack.db, { organizationId: ctx.organizationId, kind: 'invoice', documentId: invoice._id });
    await stack.db.models.Invoice.updateOne(
      { _id: invoice._id, status: 'draft' },
      {
        $set: {
          status: 'finalized',
          number: numberOf(ctx, sequence),
          sequential_id: sequence,
          issuing_date: '2026-11-21',
          payment_due_date: '2026-12-21',
          finalized_at: AT,
        },
      },
    );

    const retried = await finalizeInvoice(stack.db, deps, invoice._id, AT);
    expect(retried).toMatchObject({ status: 'finalized', number: numberOf(ctx, 1) });
    // Soft, so that both consequences are reported.
    expect.soft(await eventCount(ctx, invoice._id, 'invoice.finalized')).toBe(1);
    expect.soft((await stack.db.models.AppliedCoupon.findById(applied._id).lean())!.status).toBe('terminated');
  });

  it('settlement-driven paid: the retry still emits invoice.paid (exactly once)', async () => {
    const ctx = await newCtx();
    const invoice = await finalizeInvoice(stack.db, deps, (await draft(ctx, 800))._id, AT);
    await recordSettlement(stack.db, {
      organizationId: ctx.organizationId,
      invoiceId: invoice._id,
      type: 'payment',
      sourceId: 'full',
      amountCents: dec(800),
    });
    // The first attempt's guarded update, then the crash before invoice.paid.
    await stack.db.models.Invoice.updateOne(
      { _id: invoice._id, status: 'finalized' },
      { $set: { status: 'paid', paid_at: AT, payment_status: 'succeeded', payment_overdue: false } },
    );

    const retried = await markPaidIfSettled(stack.db, deps, invoice._id, AT);
    expect(retried.status).toBe('paid');
    expect(await eventCount(ctx, invoice._id, 'invoice.paid')).toBe(1);
  });

  it('void: the retry still emits invoice.voided', async () => {
    const ctx = await newCtx();
    const invoice = await finalizeInvoice(stack.db, deps, (await draft(ctx, 800))._id, AT);
    await stack.db.models.Invoice.updateOne(
      { _id: invoice._id, status: 'finalized' },
      { $set: { status: 'voided', voided_at: AT, payment_overdue: false } },
    );

    const retried = await voidInvoice(stack.db, deps, invoice._id, AT);
    expect(retried.status).toBe('voided');
    expect(await eventCount(ctx, invoice._id, 'invoice.voided')).toBe(1);
  });
});

describe('settlement-driven paid happens once', () => {
  it('partial payments, duplicates and repeated or concurrent markPaidIfSettled: paid once, one invoice.paid, paid_at set once', async () => {
    const ctx = await newCtx();
    const invoice = await finalizeInvoice(stack.db, deps, (await draft(ctx, 10_000))._id, AT);
    expect(invoice.status).toBe('finalized');
    const settle = (sourceId: string, amount: Decimal.Value) =>
      recordSettlement(stack.db, {
        organizationId: ctx.organizationId,
        invoiceId: invoice._id,
        type: 'payment',
        sourceId,
        amountCents: dec(amount),
      });
    const mark = (at: Date) => markPaidIfSettled(stack.db, deps, invoice._id, at);

    expect(await settle('pay-1', 4000)).toEqual({ created: true });
    expect((await mark(AT)).status).toBe('finalized');
    // The same payment again (same invoice, type and source) is not counted twice, whatever its amount.
    expect(await settle('pay-1', 6000)).toEqual({ created: false });
    expect(await stack.db.models.InvoiceSettlement.countDocuments({ invoice_id: invoice._id })).toBe(1);
    const stillOpen = await Promise.all([mark(AT), mark(AT), mark(AT)]);
    expect(stillOpen.map((i) => i.status)).toEqual(['finalized', 'finalized', 'finalized']);
    expect((await reload(invoice._id)).paid_at).toBeNull();

    // 4000 + 5999 is a cent short.
    expect(await settle('pay-2', 5999)).toEqual({ created: true });
    expect((await mark(AT)).status).toBe('finalized');
    expect(await settle('pay-3', 1)).toEqual({ created: true });

    const paidAt = new Date('2026-11-21T11:00:00.000Z');
    const results = await Promise.all(Array.from({ length: 6 }, () => mark(paidAt)));
    expect(results.every((r) => r.status === 'paid')).toBe(true);
    for (const at of [LATER, new Date('2026-11-23T00:00:00.000Z')]) expect((await mark(at)).status).toBe('paid');

    const paid = await reload(invoice._id);
    expect(paid).toMatchObject({ status: 'paid', payment_status: 'succeeded', payment_overdue: false });
    expect(paid.paid_at?.toISOString()).toBe(paidAt.toISOString());
    expect(await eventCount(ctx, invoice._id, 'invoice.paid')).toBe(1);
    const event = (await stack.db.models.LifecycleEvent.find({ organization_id: ctx.organizationId, type: 'invoice.paid' }).lean()).find(
      (e) => (e.object as { id?: unknown }).id === invoice._id,
    )!;
    expect(event.occurred_at.toISOString()).toBe(paidAt.toISOString());
    expect((event.object as { status?: unknown }).status).toBe('paid');
  });

  it('counts the wallet and credit note settlements of the finalization: a payment of what is left makes it paid', async () => {
    const ctx = await newCtx();
    await createWallet(stack.db, {
      organizationId: ctx.organizationId,
      customerId: ctx.customerId,
      name: null,
      code: null,
      currency: 'USD',
      rateAmount: dec(1),
      priority: 1,
      expirationAt: null,
      initialGrantedCredits: dec(3), // 300 cents
      at: AT,
    });
    const invoice = await finalizeInvoice(stack.db, deps, (await draft(ctx, 1000))._id, AT);
    // 1000 due, 300 from the wallet: 700 left.
    expect(invoice.status).toBe('finalized');
    expect([plain(invoice.prepaid_credit_amount), plain(invoice.total)]).toEqual(['300', '700']);

    const pay = (sourceId: string, amount: number) =>
      recordSettlement(stack.db, {
        organizationId: ctx.organizationId,
        invoiceId: invoice._id,
        type: 'payment',
        sourceId,
        amountCents: dec(amount),
      });
    await pay('p-1', 699);
    expect((await markPaidIfSettled(stack.db, deps, invoice._id, AT)).status).toBe('finalized');
    await pay('p-2', 1);
    const [a, b] = await Promise.all([
      markPaidIfSettled(stack.db, deps, invoice._id, LATER),
      markPaidIfSettled(stack.db, deps, invoice._id, LATER),
    ]);
    expect([a.status, b.status]).toEqual(['paid', 'paid']);
    expect(plain((await reload(invoice._id)).total)).toBe('700');
    expect(await eventCount(ctx, invoice._id, 'invoice.paid')).toBe(1);
  });

  it('payInvoice called concurrently records one payment of what is left and pays once', async () => {
    const ctx = await newCtx();
    const invoice = await finalizeInvoice(stack.db, deps, (await draft(ctx, 2500))._id, AT);
    await recordSettlement(stack.db, {
      organizationId: ctx.organizationId,
      invoiceId: invoice._id,
      type: 'payment',
      sourceId: 'partial',
      amountCents: dec(1000),
    });
    const results = await Promise.all(Array.from({ length: 4 }, () => payInvoice(stack.db, deps, invoice._id, LATER)));
    expect(results.every((r) => r.status === 'paid')).toBe(true);
    const settlements = await stack.db.models.InvoiceSettlement.find({ invoice_id: invoice._id }).lean();
    // 2500 due, 1000 paid before: one payment of the 1500 left.
    expect(settlements.map((s) => plain(s.amount_cents)).sort()).toEqual(['1000', '1500']);
    expect(await eventCount(ctx, invoice._id, 'invoice.paid')).toBe(1);
    expect((await reload(invoice._id)).paid_at?.toISOString()).toBe(LATER.toISOString());
  });
});
