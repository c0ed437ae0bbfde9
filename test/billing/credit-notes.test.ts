// Credit notes as a service (src/billing/credit-notes.ts): numbering, creditable amounts under
// concurrency, state transitions, void give-back, and application of balances to later invoices.
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  applyCreditNotesToInvoice,
  createCreditNote,
  finalizeCreditNote,
  releasePlan,
  voidCreditNote,
  type CreditNoteDeps,
  type NewCreditNote,
} from '../../src/billing/credit-notes';
import type { InvoiceDoc } from '../../src/db/models/invoice';
import type { FeeDoc } from '../../src/db/models/fee';
import { ApiError } from '../../src/errors';
import { deterministicId } from '../../src/ids';
import { createOrganization, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
let deps: CreditNoteDeps;

beforeAll(async () => {
  stack = await createTestStack();
  deps = { temporal: stack.temporal };
});
afterAll(async () => stack?.close());

const D = (v: Decimal.Value) => Types.Decimal128.fromString(new Decimal(v).toFixed());
const str = (v: unknown) => new Decimal(String(v)).toFixed(4);

interface Ctx {
  organizationId: string;
  customerId: string;
}

async function newOrg(timezone = 'UTC'): Promise<Ctx> {
  const org = await createOrganization(stack.app, { name: `Credit ${randomUUID().slice(0, 6)}`, timezone });
  return { organizationId: org.id, customerId: await newCustomer(org.id) };
}

async function newCustomer(organizationId: string, currency = 'USD'): Promise<string> {
  const customer = await stack.db.models.Customer.create({ organization_id: organizationId, external_id: `cus_${randomUUID()}`, currency });
  return customer._id;
}

async function seedInvoice(
  ctx: Ctx,
  options: { status?: InvoiceDoc['status']; currency?: string; customerId?: string } = {},
): Promise<InvoiceDoc> {
  const id = randomUUID();
  const invoice = await stack.db.models.Invoice.create({
    _id: id,
    organization_id: ctx.organizationId,
    customer_id: options.customerId ?? ctx.customerId,
    subscription_id: null,
    invoice_type: 'one_off',
    status: options.status ?? 'finalized',
    number: `TST-${id.slice(0, 8)}`,
    sequential_id: null,
    currency: options.currency ?? 'USD',
    net_payment_term: 30,
    grace_period_days: 0,
    fees_amount_cents: D(0),
    subtotal: D(0),
    tax_amount: D(0),
    coupons_amount_cents: D(0),
    progressive_billing_credit_amount_cents: D(0),
    credit_notes_amount_cents: D(0),
    prepaid_credit_amount: D(0),
    total: D(0),
    idempotency_key: `test/${id}`,
  });
  return invoice.toObject();
}

let feeSeq = 0;
async function seedFee(invoice: InvoiceDoc, total: Decimal.Value, credited: Decimal.Value = 0): Promise<FeeDoc> {
  const fee = await stack.db.models.Fee.create({
    organization_id: invoice.organization_id,
    invoice_id: invoice._id,
    customer_id: invoice.customer_id,
    key: `line/${(feeSeq += 1)}`,
    fee_type: 'add_on',
    currency: invoice.currency,
    units: D(1),
    unit_amount_cents: D(total),
    amount_cents: D(total),
    taxes_amount_cents: D(0),
    total_amount_cents: D(total),
    credited_amount_cents: D(credited),
  });
  return fee.toObject();
}

const AT = new Date('2026-11-21T10:00:00.000Z');

function create(ctx: Ctx, invoice: InvoiceDoc, items: NewCreditNote['items'], extra: Partial<NewCreditNote> = {}) {
  return createCreditNote(stack.db, deps, {
    organizationId: ctx.organizationId,
    invoiceId: invoice._id,
    reason: 'order_change',
    items,
    at: AT,
    ...extra,
  });
}

async function credited(feeId: string): Promise<string> {
  const fee = await stack.db.models.Fee.findById(feeId).lean();
  return str(fee!.credited_amount_cents);
}

async function refusal(promise: Promise<unknown>): Promise<ApiError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

/** A finalized credit note of `value` on a fresh invoice of the customer, created at `at`. */
async function finalizedNote(ctx: Ctx, value: Decimal.Value, at: Date, currency = 'USD') {
  const invoice = await seedInvoice(ctx, { currency });
  const fee = await seedFee(invoice, value);
  const note = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: value }], { at });
  return finalizeCreditNote(stack.db, deps, { organizationId: ctx.organizationId, creditNoteId: note._id, at });
}

describe('numbering', () => {
  it('CN-<YYYYMMDD>-0001, 0002 on the same day; a new day starts again at 0001', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 10000);
    const first = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 100 }]);
    const second = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 100 }], { at: new Date('2026-11-21T23:59:59.999Z') });
    const nextDay = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 100 }], { at: new Date('2026-11-22T00:00:00.000Z') });
    expect([first.number, second.number, nextDay.number]).toEqual(['CN-20261121-0001', 'CN-20261121-0002', 'CN-20261122-0001']);
    expect([first.sequential_id, second.sequential_id, nextDay.sequential_id]).toEqual([1, 2, 1]);
    expect(first.issuing_date).toBe('2026-11-21');
    expect(first.created_at.toISOString()).toBe(AT.toISOString());
  });

  it('is per organization', async () => {
    const a = await newOrg();
    const b = await newOrg();
    const invoiceA = await seedInvoice(a);
    const invoiceB = await seedInvoice(b);
    const feeA = await seedFee(invoiceA, 1000);
    const feeB = await seedFee(invoiceB, 1000);
    await create(a, invoiceA, [{ fee_id: feeA._id, amount_cents: 1 }]);
    await create(a, invoiceA, [{ fee_id: feeA._id, amount_cents: 1 }]);
    const noteB = await create(b, invoiceB, [{ fee_id: feeB._id, amount_cents: 1 }]);
    expect(noteB.number).toBe('CN-20261121-0001');
  });

  it("dates the number in the organization's time zone (Pacific/Auckland is already on the next day)", async () => {
    const ctx = await newOrg('Pacific/Auckland');
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const note = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 5 }], { at: new Date('2026-11-21T12:00:00.000Z') });
    expect(note.number).toBe('CN-20261122-0001');
    expect(note.issuing_date).toBe('2026-11-22');
    // And an organization west of UTC is still on the previous day.
    const west = await newOrg('America/Los_Angeles');
    const westInvoice = await seedInvoice(west);
    const westFee = await seedFee(westInvoice, 1000);
    const westNote = await create(west, westInvoice, [{ fee_id: westFee._id, amount_cents: 5 }], {
      at: new Date('2026-11-21T05:00:00.000Z'),
    });
    expect(westNote.number).toBe('CN-20261120-0001');
  });

  it('concurrent creations get distinct, gapless numbers', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fees = await Promise.all(Array.from({ length: 12 }, () => seedFee(invoice, 500)));
    const notes = await Promise.all(fees.map((fee) => create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 500 }])));
    const numbers = notes.map((n) => n.number).sort();
    expect(numbers).toEqual(Array.from({ length: 12 }, (_, i) => `CN-20261121-${String(i + 1).padStart(4, '0')}`));
  });
});

describe('creditable amounts', () => {
  it('two notes exhaust a fee; a third is refused naming items.<i>.amount_cents', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const other = await seedFee(invoice, 50);
    const fee = await seedFee(invoice, '1000.5');
    await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 600 }]);
    await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: '400.5' }]);
    expect(await credited(fee._id)).toBe('1000.5000');
    const err = await refusal(
      create(ctx, invoice, [
        { fee_id: other._id, amount_cents: 10 },
        { fee_id: fee._id, amount_cents: '0.0001' },
      ]),
    );
    expect(err.status).toBe(422);
    expect(err.errors.map((e) => e.path)).toEqual(['items.1.amount_cents']);
    // Nothing of the refused note stuck: the other fee is untouched, and no number was taken.
    expect(await credited(other._id)).toBe('0.0000');
    const next = await create(ctx, invoice, [{ fee_id: other._id, amount_cents: 50 }]);
    expect(next.number).toBe('CN-20261121-0003');
  });

  it('counts what the fee already had credited', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000, 700);
    const err = await refusal(create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 301 }]));
    expect(err.errors[0]).toMatchObject({ path: 'items.0.amount_cents' });
    expect(err.message).toContain('300.0000');
    const note = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 300 }]);
    expect(str(note.credit_amount_cents)).toBe('300.0000');
    expect(await credited(fee._id)).toBe('1000.0000');
  });

  it('concurrent notes on one fee never over-credit it, and refused ones take no number', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () => create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 300 }])),
    );
    const created = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(created).toHaveLength(3);
    for (const r of refused) expect((r.reason as ApiError).status).toBe(422);
    expect(await credited(fee._id)).toBe('900.0000');
    const numbers = (await stack.db.models.CreditNote.find({ organization_id: ctx.organizationId }).lean()).map((n) => n.number).sort();
    expect(numbers).toEqual(['CN-20261121-0001', 'CN-20261121-0002', 'CN-20261121-0003']);
  });

  it('concurrent multi-item notes: every fee credited exactly by the notes that exist', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const a = await seedFee(invoice, 1000);
    const b = await seedFee(invoice, 1000);
    // Opposite item orders, so that a note may take one fee and be refused on the other (and must
    // then give the first back).
    const attempts = Array.from({ length: 8 }, (_, i) =>
      create(
        ctx,
        invoice,
        i % 2 === 0
          ? [
              { fee_id: a._id, amount_cents: 400 },
              { fee_id: b._id, amount_cents: 400 },
            ]
          : [
              { fee_id: b._id, amount_cents: 400 },
              { fee_id: a._id, amount_cents: 400 },
            ],
      ),
    );
    const results = await Promise.allSettled(attempts);
    const made = results.filter((r) => r.status === 'fulfilled').length;
    // Fees are credited in one global order, so the room of both fees is used: two notes.
    expect(made).toBe(2);
    const notes = await stack.db.models.CreditNote.find({ organization_id: ctx.organizationId }).lean();
    expect(notes).toHaveLength(made);
    expect(await credited(a._id)).toBe(str(400 * made));
    expect(await credited(b._id)).toBe(str(400 * made));
  });

  it('refuses zero, negative and empty credits (a credit note of zero is never created)', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    for (const value of [0, '-5', '0.0000']) {
      const err = await refusal(create(ctx, invoice, [{ fee_id: fee._id, amount_cents: value }]));
      expect(err.status).toBe(422);
      expect(err.errors[0]!.path).toBe('items.0.amount_cents');
    }
    const empty = await refusal(create(ctx, invoice, []));
    expect(empty.errors[0]!.path).toBe('items');
    const fine = await refusal(create(ctx, invoice, [{ fee_id: fee._id, amount_cents: '1.00001' }]));
    expect(fine.errors[0]!.path).toBe('items.0.amount_cents');
    expect(await stack.db.models.CreditNote.countDocuments({ organization_id: ctx.organizationId })).toBe(0);
    expect(await credited(fee._id)).toBe('0.0000');
  });

  it('needs a finalized or paid invoice and fees of that invoice', async () => {
    const ctx = await newOrg();
    for (const status of ['draft', 'voided'] as const) {
      const invoice = await seedInvoice(ctx, { status });
      const fee = await seedFee(invoice, 100);
      const err = await refusal(create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 1 }]));
      expect([err.status, err.code]).toEqual([400, 'invalid_state_transition']);
    }
    const paid = await seedInvoice(ctx, { status: 'paid' });
    const paidFee = await seedFee(paid, 100);
    expect((await create(ctx, paid, [{ fee_id: paidFee._id, amount_cents: 100 }])).status).toBe('draft');

    const invoice = await seedInvoice(ctx);
    const otherInvoice = await seedInvoice(ctx);
    const foreign = await seedFee(otherInvoice, 100);
    const err = await refusal(create(ctx, invoice, [{ fee_id: foreign._id, amount_cents: 1 }]));
    expect([err.status, err.errors[0]!.path]).toEqual([422, 'items.0.fee_id']);
    const missing = await refusal(create(ctx, invoice, [{ fee_id: randomUUID(), amount_cents: 1 }]));
    expect([missing.status, missing.code]).toEqual([404, 'fee_not_found']);
    const duplicate = await refusal(
      create(ctx, paid, [
        { fee_id: paidFee._id, amount_cents: 1 },
        { fee_id: paidFee._id, amount_cents: 1 },
      ]),
    );
    expect(duplicate.errors.map((e) => e.path)).toContain('items.1.fee_id');
  });

  it("another organization's invoice or fee is not found", async () => {
    const a = await newOrg();
    const b = await newOrg();
    const invoiceA = await seedInvoice(a);
    const feeA = await seedFee(invoiceA, 100);
    const invoiceB = await seedInvoice(b);
    const err = await refusal(create(b, invoiceA, [{ fee_id: feeA._id, amount_cents: 1 }]));
    expect([err.status, err.code]).toEqual([404, 'invoice_not_found']);
    const feeErr = await refusal(create(b, invoiceB, [{ fee_id: feeA._id, amount_cents: 1 }]));
    expect([feeErr.status, feeErr.code]).toEqual([404, 'fee_not_found']);
    expect(await credited(feeA._id)).toBe('0.0000');
  });

  it('checks the customer when given (id or external_id)', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 100);
    const customer = await stack.db.models.Customer.findById(ctx.customerId).lean();
    expect((await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 1 }], { customerId: customer!.external_id })).customer_id).toBe(
      ctx.customerId,
    );
    const stranger = await newCustomer(ctx.organizationId);
    const err = await refusal(create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 1 }], { customerId: stranger }));
    expect([err.status, err.errors[0]!.path]).toEqual([422, 'customer_id']);
  });
});

describe('idempotent creation (workflows)', () => {
  it('a retry with the same key returns the same note and credits the fee once', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const first = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 250 }], { idempotencyKey: 'sub-1/upgrade/2026-11-21' });
    const again = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 250 }], { idempotencyKey: 'sub-1/upgrade/2026-11-21' });
    expect(again._id).toBe(first._id);
    expect(again.number).toBe(first.number);
    expect(await credited(fee._id)).toBe('250.0000');
    expect(await stack.db.models.LifecycleEvent.countDocuments({ organization_id: ctx.organizationId, type: 'credit_note.created' })).toBe(
      1,
    );
  });

  it('a retry after a crash between crediting the fee and inserting the note credits it once', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const key = 'sub-2/termination';
    const itemId = deterministicId(`credit_note_item/${deterministicId(`credit_note/${ctx.organizationId}/${key}`)}/0`);
    // What the first attempt left behind: the fee credited with this item's marker, no note.
    await stack.db.models.Fee.updateOne(
      { _id: fee._id },
      { $set: { credited_amount_cents: D(1000) }, $push: { credit_note_item_ids: itemId } } as never,
      { strict: false },
    );
    const note = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 1000 }], { idempotencyKey: key });
    expect(note.items[0]!._id).toBe(itemId);
    expect(await credited(fee._id)).toBe('1000.0000');
  });

  it('concurrent calls with one key make one note', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const notes = await Promise.all(
      Array.from({ length: 5 }, () => create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 400 }], { idempotencyKey: 'same' })),
    );
    expect(new Set(notes.map((n) => n._id)).size).toBe(1);
    expect(await stack.db.models.CreditNote.countDocuments({ organization_id: ctx.organizationId })).toBe(1);
    expect(await credited(fee._id)).toBe('400.0000');
  });
});

describe('state transitions', () => {
  it('draft -> finalized -> voided; refused transitions are 400 invalid_state_transition', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const note = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 600 }]);
    expect(note.status).toBe('draft');
    const ids = { organizationId: ctx.organizationId, creditNoteId: note._id };
    const finalizedAt = new Date('2026-11-21T11:00:00.000Z');
    const finalized = await finalizeCreditNote(stack.db, deps, { ...ids, at: finalizedAt });
    expect(finalized.status).toBe('finalized');
    expect(finalized.finalized_at?.toISOString()).toBe(finalizedAt.toISOString());
    const again = await refusal(finalizeCreditNote(stack.db, deps, { ...ids, at: finalizedAt }));
    expect([again.status, again.code]).toEqual([400, 'invalid_state_transition']);
    // A workflow's retry of the same step is answered with the note instead.
    expect((await finalizeCreditNote(stack.db, deps, { ...ids, at: finalizedAt, idempotent: true })).status).toBe('finalized');

    const voided = await voidCreditNote(stack.db, deps, { ...ids, at: finalizedAt });
    expect(voided.status).toBe('voided');
    expect(str(voided.balance_amount_cents)).toBe('0.0000');
    expect(str(voided.credit_amount_cents)).toBe('600.0000');
    expect(await credited(fee._id)).toBe('0.0000');
    for (const step of [voidCreditNote, finalizeCreditNote]) {
      const err = await refusal(step(stack.db, deps, { ...ids, at: finalizedAt }));
      expect(err.code).toBe('invalid_state_transition');
    }
    expect(await credited(fee._id)).toBe('0.0000');
  });

  it('voiding a draft gives the whole credit back to the fees', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const a = await seedFee(invoice, 100);
    const b = await seedFee(invoice, 200);
    const note = await create(ctx, invoice, [
      { fee_id: a._id, amount_cents: 100 },
      { fee_id: b._id, amount_cents: 150 },
    ]);
    await voidCreditNote(stack.db, deps, { organizationId: ctx.organizationId, creditNoteId: note._id, at: AT });
    expect([await credited(a._id), await credited(b._id)]).toEqual(['0.0000', '0.0000']);
    expect((await create(ctx, invoice, [{ fee_id: b._id, amount_cents: 200 }])).status).toBe('draft');
  });

  it('voiding a partly applied note gives back only the unapplied balance', async () => {
    const ctx = await newOrg();
    const invoice = await seedInvoice(ctx);
    const fee = await seedFee(invoice, 1000);
    const note = await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 1000 }]);
    await finalizeCreditNote(stack.db, deps, { organizationId: ctx.organizationId, creditNoteId: note._id, at: AT });
    const later = await seedInvoice(ctx);
    const applied = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'USD',
      invoiceId: later._id,
      amountCents: new Decimal(300),
      at: AT,
    });
    expect(applied.totalCents.toFixed(4)).toBe('300.0000');
    const voided = await voidCreditNote(stack.db, deps, { organizationId: ctx.organizationId, creditNoteId: note._id, at: AT });
    expect(str(voided.items[0]!.released_amount_cents)).toBe('700.0000');
    expect(await credited(fee._id)).toBe('300.0000');
    await refusal(create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 701 }]));
    expect((await create(ctx, invoice, [{ fee_id: fee._id, amount_cents: 700 }])).status).toBe('draft');
    // A voided note is never applied again.
    const next = await seedInvoice(ctx);
    expect(
      (
        await applyCreditNotesToInvoice(stack.db, { ...ctx, currency: 'USD', invoiceId: next._id, amountCents: new Decimal(1000), at: AT })
      ).totalCents.toNumber(),
    ).toBe(0);
  });

  it('release plan: the unapplied balance over the items in order, each at most its amount', () => {
    const plan = releasePlan([{ amount_cents: D(100) }, { amount_cents: D(200) }, { amount_cents: D(50) }], new Decimal(250));
    expect(plan.map((d) => d.toFixed(4))).toEqual(['100.0000', '150.0000', '0.0000']);
  });

  it('an unknown or foreign note is not found', async () => {
    const a = await newOrg();
    const b = await newOrg();
    const note = await finalizedNote(a, 10, AT);
    const err = await refusal(voidCreditNote(stack.db, deps, { organizationId: b.organizationId, creditNoteId: note._id, at: AT }));
    expect([err.status, err.code]).toEqual([404, 'credit_note_not_found']);
    const missing = await refusal(
      finalizeCreditNote(stack.db, deps, { organizationId: a.organizationId, creditNoteId: randomUUID(), at: AT }),
    );
    expect(missing.status).toBe(404);
  });
});

describe('application to later invoices', () => {
  const at = (minute: number) => new Date(Date.UTC(2026, 10, 21, 9, minute));

  it('oldest note first across several notes and invoices; drafts and voided notes are skipped', async () => {
    const ctx = await newOrg();
    const oldest = await finalizedNote(ctx, 300, at(1));
    const middle = await finalizedNote(ctx, 500, at(2));
    const newest = await finalizedNote(ctx, 400, at(3));
    const draftInvoice = await seedInvoice(ctx);
    const draftFee = await seedFee(draftInvoice, 900);
    await create(ctx, draftInvoice, [{ fee_id: draftFee._id, amount_cents: 900 }], { at: at(0) });
    const voidedNote = await finalizedNote(ctx, 900, at(0));
    await voidCreditNote(stack.db, deps, { organizationId: ctx.organizationId, creditNoteId: voidedNote._id, at: at(4) });

    const x = await seedInvoice(ctx);
    const onX = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'USD',
      invoiceId: x._id,
      amountCents: new Decimal(600),
      at: at(5),
    });
    expect(onX.totalCents.toFixed(4)).toBe('600.0000');
    expect(onX.applications.map((a) => [a.creditNoteId, a.amountCents.toFixed(4)])).toEqual([
      [oldest._id, '300.0000'],
      [middle._id, '300.0000'],
    ]);

    const y = await seedInvoice(ctx);
    const onY = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'USD',
      invoiceId: y._id,
      amountCents: new Decimal(10000),
      at: at(6),
    });
    expect(onY.applications.map((a) => [a.creditNoteId, a.amountCents.toFixed(4)])).toEqual([
      [middle._id, '200.0000'],
      [newest._id, '400.0000'],
    ]);
    expect(onY.totalCents.toFixed(4)).toBe('600.0000');

    const balances = await stack.db.models.CreditNote.find({ _id: { $in: [oldest._id, middle._id, newest._id] } }).lean();
    for (const n of balances) expect(str(n.balance_amount_cents)).toBe('0.0000');
    const middleNow = balances.find((n) => n._id === middle._id)!;
    expect(middleNow.applied_invoice_ids).toEqual([x._id, y._id]);

    const settlements = await stack.db.models.InvoiceSettlement.find({ invoice_id: { $in: [x._id, y._id] } }).lean();
    expect(settlements.map((s) => [s.invoice_id, s.settlement_type, s.source_id, str(s.amount_cents)]).sort()).toEqual(
      [
        [x._id, 'credit_note', oldest._id, '300.0000'],
        [x._id, 'credit_note', middle._id, '300.0000'],
        [y._id, 'credit_note', middle._id, '200.0000'],
        [y._id, 'credit_note', newest._id, '400.0000'],
      ].sort(),
    );
  });

  it('same currency and same customer only, never to its own invoice', async () => {
    const ctx = await newOrg();
    const euro = await finalizedNote(ctx, 100, at(1), 'EUR');
    const own = await finalizedNote(ctx, 200, at(2));
    const otherCustomer = { ...ctx, customerId: await newCustomer(ctx.organizationId) };
    await finalizedNote(otherCustomer, 300, at(3));

    const onOwn = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'USD',
      invoiceId: own.invoice_id,
      amountCents: new Decimal(1000),
      at: at(5),
    });
    expect(onOwn.totalCents.toNumber()).toBe(0);

    const later = await seedInvoice(ctx);
    const usd = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'USD',
      invoiceId: later._id,
      amountCents: new Decimal(1000),
      at: at(6),
    });
    expect(usd.applications.map((a) => a.creditNoteId)).toEqual([own._id]);
    expect(usd.totalCents.toFixed(4)).toBe('200.0000');

    const laterEur = await seedInvoice(ctx, { currency: 'EUR' });
    const eur = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'EUR',
      invoiceId: laterEur._id,
      amountCents: new Decimal(1000),
      at: at(7),
    });
    expect(eur.applications.map((a) => a.creditNoteId)).toEqual([euro._id]);
  });

  it('a retry contributes what the first attempt contributed, once', async () => {
    const ctx = await newOrg();
    const a = await finalizedNote(ctx, 300, at(1));
    const b = await finalizedNote(ctx, 300, at(2));
    const invoice = await seedInvoice(ctx);
    const input = { ...ctx, currency: 'USD', invoiceId: invoice._id, amountCents: new Decimal(400), at: at(5) };
    const first = await applyCreditNotesToInvoice(stack.db, input);
    const retry = await applyCreditNotesToInvoice(stack.db, input);
    expect(retry.totalCents.toFixed(4)).toBe('400.0000');
    expect(retry.applications.map((x) => [x.creditNoteId, x.amountCents.toFixed(4)])).toEqual(
      first.applications.map((x) => [x.creditNoteId, x.amountCents.toFixed(4)]),
    );
    const notes = await stack.db.models.CreditNote.find({ _id: { $in: [a._id, b._id] } })
      .sort({ created_at: 1 })
      .lean();
    expect(notes.map((n) => str(n.balance_amount_cents))).toEqual(['0.0000', '200.0000']);
    expect(await stack.db.models.InvoiceSettlement.countDocuments({ invoice_id: invoice._id })).toBe(2);
  });

  it('a retry after a crash between the balance update and the settlement records the settlement', async () => {
    const ctx = await newOrg();
    const note = await finalizedNote(ctx, 500, at(1));
    const invoice = await seedInvoice(ctx);
    // The first attempt's note update, without its settlement.
    await stack.db.models.CreditNote.updateOne(
      { _id: note._id },
      {
        $inc: { balance_amount_cents: D(-120) },
        $push: { applied_invoice_ids: invoice._id, applications: { invoice_id: invoice._id, amount_cents: D(120), applied_at: at(5) } },
      },
    );
    const retry = await applyCreditNotesToInvoice(stack.db, {
      ...ctx,
      currency: 'USD',
      invoiceId: invoice._id,
      amountCents: new Decimal(120),
      at: at(5),
    });
    expect(retry.totalCents.toFixed(4)).toBe('120.0000');
    const settlement = await stack.db.models.InvoiceSettlement.findOne({ invoice_id: invoice._id, source_id: note._id }).lean();
    expect(str(settlement!.amount_cents)).toBe('120.0000');
    expect(str((await stack.db.models.CreditNote.findById(note._id).lean())!.balance_amount_cents)).toBe('380.0000');
  });

  it('concurrent finalizations of different invoices never overdraw a balance', async () => {
    const ctx = await newOrg();
    const note = await finalizedNote(ctx, 1000, at(1));
    const invoices = await Promise.all(Array.from({ length: 10 }, () => seedInvoice(ctx)));
    const results = await Promise.all(
      invoices.map((inv) =>
        applyCreditNotesToInvoice(stack.db, { ...ctx, currency: 'USD', invoiceId: inv._id, amountCents: new Decimal(300), at: at(5) }),
      ),
    );
    const total = results.reduce((acc, r) => acc.plus(r.totalCents), new Decimal(0));
    expect(total.toFixed(4)).toBe('1000.0000');
    for (const r of results) expect(r.totalCents.lessThanOrEqualTo(300)).toBe(true);
    const after = await stack.db.models.CreditNote.findById(note._id).lean();
    expect(str(after!.balance_amount_cents)).toBe('0.0000');
    const settlements = await stack.db.models.InvoiceSettlement.find({ source_id: note._id }).lean();
    expect(settlements.reduce((acc, s) => acc.plus(String(s.amount_cents)), new Decimal(0)).toFixed(4)).toBe('1000.0000');
  });

  it('concurrent attempts on one invoice apply each note once', async () => {
    const ctx = await newOrg();
    await finalizedNote(ctx, 250, at(1));
    // Room for several applications: only the invoice marker stops a second one.
    await finalizedNote(ctx, 1000, at(2));
    const invoice = await seedInvoice(ctx);
    const input = { ...ctx, currency: 'USD', invoiceId: invoice._id, amountCents: new Decimal(400), at: at(5) };
    const results = await Promise.all(Array.from({ length: 12 }, () => applyCreditNotesToInvoice(stack.db, input)));
    for (const r of results) expect(r.totalCents.toFixed(4)).toBe('400.0000');
    expect(await stack.db.models.InvoiceSettlement.countDocuments({ invoice_id: invoice._id })).toBe(2);
    const notes = await stack.db.models.CreditNote.find({ organization_id: ctx.organizationId }).sort({ created_at: 1 }).lean();
    expect(notes.map((n) => str(n.balance_amount_cents))).toEqual(['0.0000', '850.0000']);
    for (const n of notes) expect(n.applied_invoice_ids).toEqual([invoice._id]);
  });
});

describe('events', () => {
  it('records credit_note.created and credit_note.finalized with the resource', async () => {
    const ctx = await newOrg();
    const note = await finalizedNote(ctx, 42, AT);
    const events = await stack.db.models.LifecycleEvent.find({ organization_id: ctx.organizationId })
      .sort({ occurred_at: 1, type: 1 })
      .lean();
    const mine = events.filter((e) => e.type.startsWith('credit_note.'));
    expect(mine.map((e) => e.type)).toEqual(['credit_note.created', 'credit_note.finalized']);
    expect(mine[0]!.object).toMatchObject({ id: note._id, number: note.number, status: 'draft', credit_amount_cents: '42.0000' });
    expect(mine[1]!.object).toMatchObject({ id: note._id, status: 'finalized', balance_amount_cents: '42.0000' });
  });
});
