// Credit notes over HTTP (specification: CreditNote, Credit note states, endpoints; api-contract.md
// "Invoices, fees, credit notes"): creation on finalized invoices, numbering, validation, state
// transitions, lists and filters, tenant isolation, events, OpenAPI.
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InvoiceDoc } from '../../src/db/models/invoice';
import type { FeeDoc } from '../../src/db/models/fee';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import { expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let clock = new Date('2026-11-21T10:00:00.000Z');
let org: TestOrganization;
let customer: { id: string; external_id: string };

beforeAll(async () => {
  stack = await createTestStack({ now: () => clock });
  org = await createOrganization(stack.app, { name: 'Credit Org', timezone: 'UTC' });
  customer = await createCustomer(org);
});
afterAll(async () => stack?.close());

type Headers = Record<string, string>;
const api = {
  create: (payload: unknown, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: '/v1/credit_notes', headers, payload: payload as Record<string, unknown> }),
  get: (id: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url: `/v1/credit_notes/${id}`, headers }),
  list: (query = '', headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url: `/v1/credit_notes${query}`, headers }),
  finalize: (id: string, headers: Headers = org.headers) =>
    stack.app.inject({ method: 'POST', url: `/v1/credit_notes/${id}/finalize`, headers }),
  void: (id: string, headers: Headers = org.headers) => stack.app.inject({ method: 'POST', url: `/v1/credit_notes/${id}/void`, headers }),
};

const D = (v: Decimal.Value) => Types.Decimal128.fromString(new Decimal(v).toFixed());

async function createCustomer(owner: TestOrganization): Promise<{ id: string; external_id: string }> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: owner.headers,
    payload: { external_id: `cus_${randomUUID()}`, currency: 'USD' },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function seedInvoice(owner: TestOrganization, customerId: string, status: InvoiceDoc['status'] = 'finalized'): Promise<InvoiceDoc> {
  const id = randomUUID();
  const invoice = await stack.db.models.Invoice.create({
    _id: id,
    organization_id: owner.id,
    customer_id: customerId,
    subscription_id: null,
    invoice_type: 'one_off',
    status,
    number: `TST-${id.slice(0, 8)}`,
    sequential_id: null,
    currency: 'USD',
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
async function seedFee(invoice: InvoiceDoc, total: Decimal.Value): Promise<FeeDoc> {
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
    credited_amount_cents: D(0),
  });
  return fee.toObject();
}

/** A finalized invoice of the main customer with one fee of `total`. */
async function invoiceWithFee(total: Decimal.Value = 1000) {
  const invoice = await seedInvoice(org, customer.id);
  const fee = await seedFee(invoice, total);
  return { invoice, fee };
}

async function createNote(payload: Record<string, unknown>, headers: Headers = org.headers): Promise<CreditNoteResource> {
  const res = await api.create(payload, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CreditNoteResource>();
}

describe('create and read', () => {
  it('creates a draft with its number, items and money as 4-digit strings', async () => {
    clock = new Date('2026-03-05T08:00:00.000Z');
    const { invoice, fee } = await invoiceWithFee(1000);
    const note = await createNote({
      invoice_id: invoice._id,
      reason: 'duplicated_charge',
      items: [{ fee_id: fee._id, amount_cents: 250 }],
    });
    expect(note).toMatchObject({
      organization_id: org.id,
      customer_id: customer.id,
      invoice_id: invoice._id,
      number: 'CN-20260305-0001',
      sequential_id: 1,
      issuing_date: '2026-03-05',
      currency: 'USD',
      status: 'draft',
      credit_note_type: 'credit',
      reason: 'duplicated_charge',
      description: null,
      credit_amount_cents: '250.0000',
      balance_amount_cents: '250.0000',
      applications: [],
      finalized_at: null,
      voided_at: null,
      created_at: '2026-03-05T08:00:00.000Z',
    });
    expect(note.id).toMatch(UUID);
    expect(note.items).toHaveLength(1);
    expect(note.items[0]).toMatchObject({ fee_id: fee._id, amount_cents: '250.0000' });
    expect(note.items[0]!.id).toMatch(UUID);
    expect(note.updated_at).toMatch(ISO_MS_UTC);

    const read = await api.get(note.id);
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(note);

    const second = await createNote({
      invoice_id: invoice._id,
      reason: 'other',
      description: 'goodwill',
      items: [{ fee_id: fee._id, amount_cents: 1 }],
    });
    expect(second).toMatchObject({ number: 'CN-20260305-0002', description: 'goodwill', credit_amount_cents: '1.0000' });
    const stored = await stack.db.models.Fee.findById(fee._id).lean();
    expect(new Decimal(String(stored!.credited_amount_cents)).toFixed(4)).toBe('251.0000');
  });

  it("numbers in the organization's time zone", async () => {
    clock = new Date('2026-11-21T12:00:00.000Z');
    const nz = await createOrganization(stack.app, { name: 'Kiwi Ltd', timezone: 'Pacific/Auckland' });
    const nzCustomer = await createCustomer(nz);
    const invoice = await seedInvoice(nz, nzCustomer.id);
    const fee = await seedFee(invoice, 100);
    const note = await createNote(
      { invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 100 }] },
      nz.headers,
    );
    expect(note.number).toBe('CN-20261122-0001');
  });

  it('accepts the customer by id or external_id, and refuses another customer', async () => {
    const { invoice, fee } = await invoiceWithFee(1000);
    await createNote({
      invoice_id: invoice._id,
      customer_id: customer.id,
      reason: 'order_change',
      items: [{ fee_id: fee._id, amount_cents: 1 }],
    });
    await createNote({
      invoice_id: invoice._id,
      customer_id: customer.external_id,
      reason: 'order_change',
      items: [{ fee_id: fee._id, amount_cents: 1 }],
    });
    const other = await createCustomer(org);
    expectValidationError(
      await api.create({
        invoice_id: invoice._id,
        customer_id: other.id,
        reason: 'order_change',
        items: [{ fee_id: fee._id, amount_cents: 1 }],
      }),
      'customer_id',
    );
    expectError(
      await api.create({
        invoice_id: invoice._id,
        customer_id: 'nobody',
        reason: 'order_change',
        items: [{ fee_id: fee._id, amount_cents: 1 }],
      }),
      404,
      'customer_not_found',
    );
  });

  it('refuses an amount above what remains creditable, naming items.<i>.amount_cents', async () => {
    const { invoice, fee } = await invoiceWithFee(1000);
    const small = await seedFee(invoice, 10);
    await createNote({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 600 }] });
    await createNote({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 400 }] });
    const res = await api.create({
      invoice_id: invoice._id,
      reason: 'order_change',
      items: [
        { fee_id: small._id, amount_cents: 10 },
        { fee_id: fee._id, amount_cents: 1 },
      ],
    });
    expectValidationError(res, 'items.1.amount_cents');
    const smallNow = await stack.db.models.Fee.findById(small._id).lean();
    expect(new Decimal(String(smallNow!.credited_amount_cents)).toNumber()).toBe(0);
  });

  it('refuses credits on a draft or voided invoice with 400 invalid_state_transition', async () => {
    for (const status of ['draft', 'voided'] as const) {
      const invoice = await seedInvoice(org, customer.id, status);
      const fee = await seedFee(invoice, 100);
      expectError(
        await api.create({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 1 }] }),
        400,
        'invalid_state_transition',
      );
    }
  });

  it('answers 404 for an unknown invoice, fee or credit note, 422 for a fee of another invoice', async () => {
    const { invoice } = await invoiceWithFee();
    const other = await invoiceWithFee();
    expectError(
      await api.create({ invoice_id: randomUUID(), reason: 'order_change', items: [{ fee_id: other.fee._id, amount_cents: 1 }] }),
      404,
      'invoice_not_found',
    );
    expectError(
      await api.create({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: randomUUID(), amount_cents: 1 }] }),
      404,
      'fee_not_found',
    );
    expectValidationError(
      await api.create({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: other.fee._id, amount_cents: 1 }] }),
      'items.0.fee_id',
    );
    for (const res of [await api.get(randomUUID()), await api.finalize(randomUUID()), await api.void(randomUUID())])
      expectError(res, 404, 'credit_note_not_found');
  });
});

describe('validation', () => {
  it('names missing and invalid fields', async () => {
    const { invoice, fee } = await invoiceWithFee();
    const item = { fee_id: fee._id, amount_cents: 1 };
    expectValidationError(await api.create({ invoice_id: invoice._id, items: [item] }), 'reason');
    expectValidationError(await api.create({ invoice_id: invoice._id, reason: 'because', items: [item] }), 'reason');
    expectValidationError(await api.create({ reason: 'other', items: [item] }), 'invoice_id');
    expectValidationError(await api.create({ invoice_id: invoice._id, reason: 'other' }), 'items');
    expectValidationError(await api.create({ invoice_id: invoice._id, reason: 'other', items: [] }), 'items');
    expectValidationError(
      await api.create({ invoice_id: invoice._id, reason: 'other', credit_note_type: 'refund', items: [item] }),
      'credit_note_type',
    );
    expectValidationError(
      await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id }] }),
      'items.0.amount_cents',
    );
    expectValidationError(
      await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: '1.00001' }] }),
      'items.0.amount_cents',
    );
    expectValidationError(
      await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: 'ten' }] }),
      'items.0.amount_cents',
    );
  });

  it('refuses a zero or negative amount (a credit note of zero is never created)', async () => {
    const { invoice, fee } = await invoiceWithFee();
    for (const amount of [0, '0', -1]) {
      expectValidationError(
        await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: amount }] }),
        'items.0.amount_cents',
      );
    }
    const list = await api.list(`?invoice_id=${invoice._id}`);
    expect(list.json()).toEqual([]);
  });

  it('refuses an amount_cents that is not an integer JSON number (the specification types it as an integer), creating nothing', async () => {
    const { invoice, fee } = await invoiceWithFee(1000);
    for (const amount of ['12.5', 12.5, '0.5', 0.0001, '100', '1e2', 'ten', '', true, null, [1], { cents: 1 }]) {
      const body = expectValidationError(
        await api.create({
          invoice_id: invoice._id,
          reason: 'other',
          items: [
            { fee_id: fee._id, amount_cents: 1 },
            { fee_id: (await seedFee(invoice, 1000))._id, amount_cents: amount },
          ],
        }),
        'items.1.amount_cents',
      );
      expect(body.errors.map((e) => e.path)).toEqual(['items.1.amount_cents']);
    }
    expect((await api.list(`?invoice_id=${invoice._id}`)).json()).toEqual([]);
    const stored = await stack.db.models.Fee.find({ invoice_id: invoice._id }).lean();
    expect(stored.map((f) => new Decimal(String(f.credited_amount_cents)).toFixed(4))).toEqual(stored.map(() => '0.0000'));
  });

  it('credits a fee with fractional cents in whole cents: up to its total rounded half up', async () => {
    const { invoice, fee } = await invoiceWithFee('10.5');
    expectValidationError(
      await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: 12 }] }),
      'items.0.amount_cents',
    );
    const note = await createNote({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: 11 }] });
    expect(note).toMatchObject({ credit_amount_cents: '11.0000', balance_amount_cents: '11.0000' });
  });

  it('rejects unknown fields, in the body and in items', async () => {
    const { invoice, fee } = await invoiceWithFee();
    expectUnknownFields(
      await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: 1 }], refund_amount_cents: 5 }),
      ['refund_amount_cents'],
    );
    const res = await api.create({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: 1, units: 2 }] });
    expectUnknownFields(res, ['units']);
  });
});

describe('state transitions', () => {
  it('finalize a draft, then void it; repeated or refused transitions are 400', async () => {
    clock = new Date('2026-11-21T10:00:00.000Z');
    const { invoice, fee } = await invoiceWithFee(1000);
    const note = await createNote({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 300 }] });
    clock = new Date('2026-11-21T11:00:00.000Z');
    const finalized = await api.finalize(note.id);
    expect(finalized.statusCode, finalized.body).toBe(200);
    expect(finalized.json()).toMatchObject({
      status: 'finalized',
      finalized_at: '2026-11-21T11:00:00.000Z',
      balance_amount_cents: '300.0000',
    });
    expectError(await api.finalize(note.id), 400, 'invalid_state_transition');

    clock = new Date('2026-11-21T12:00:00.000Z');
    const voided = await api.void(note.id);
    expect(voided.statusCode, voided.body).toBe(200);
    expect(voided.json()).toMatchObject({
      status: 'voided',
      voided_at: '2026-11-21T12:00:00.000Z',
      balance_amount_cents: '0.0000',
      credit_amount_cents: '300.0000',
    });
    expectError(await api.void(note.id), 400, 'invalid_state_transition');
    expectError(await api.finalize(note.id), 400, 'invalid_state_transition');
    // The voided credit went back to the fee: the whole fee can be credited again.
    await createNote({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 1000 }] });
  });

  it('voids a draft', async () => {
    const { invoice, fee } = await invoiceWithFee(100);
    const note = await createNote({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 100 }] });
    const res = await api.void(note.id);
    expect(res.statusCode).toBe(200);
    expect(res.json<CreditNoteResource>().status).toBe('voided');
    expect(res.json<CreditNoteResource>().finalized_at).toBeNull();
  });

  it('records credit_note.created and credit_note.finalized events with the resource', async () => {
    const { invoice, fee } = await invoiceWithFee(100);
    const note = await createNote({
      invoice_id: invoice._id,
      reason: 'product_unsatisfactory',
      items: [{ fee_id: fee._id, amount_cents: 40 }],
    });
    const finalized = (await api.finalize(note.id)).json<CreditNoteResource>();
    const events = await stack.db.models.LifecycleEvent.find({ organization_id: org.id, 'object.id': note.id }).lean();
    const byType = new Map(events.map((e) => [e.type, e.object]));
    expect([...byType.keys()].sort()).toEqual(['credit_note.created', 'credit_note.finalized']);
    expect(byType.get('credit_note.created')).toEqual(note);
    expect(byType.get('credit_note.finalized')).toEqual(finalized);
  });
});

describe('lists', () => {
  it('lists newest first with X-Total-Count, filtered by customer (id or external_id), invoice and status', async () => {
    const lister = await createOrganization(stack.app, { name: 'Lister' });
    const alice = await createCustomer(lister);
    const bob = await createCustomer(lister);
    const aliceInvoice = await seedInvoice(lister, alice.id);
    const bobInvoice = await seedInvoice(lister, bob.id);
    const aliceFee = await seedFee(aliceInvoice, 1000);
    const bobFee = await seedFee(bobInvoice, 1000);
    const notes: CreditNoteResource[] = [];
    for (const [minute, invoice, fee] of [
      [1, aliceInvoice, aliceFee],
      [2, bobInvoice, bobFee],
      [3, aliceInvoice, aliceFee],
    ] as const) {
      clock = new Date(Date.UTC(2026, 10, 21, 10, minute));
      notes.push(
        await createNote({ invoice_id: invoice._id, reason: 'other', items: [{ fee_id: fee._id, amount_cents: 10 }] }, lister.headers),
      );
    }
    await api.finalize(notes[2]!.id, lister.headers);

    const all = await api.list('', lister.headers);
    expect(all.statusCode).toBe(200);
    expect(all.headers['x-total-count']).toBe('3');
    expect(all.json<CreditNoteResource[]>().map((n) => n.id)).toEqual([notes[2]!.id, notes[1]!.id, notes[0]!.id]);

    const ids = async (query: string) => (await api.list(query, lister.headers)).json<CreditNoteResource[]>().map((n) => n.id);
    expect(await ids(`?customer_id=${alice.id}`)).toEqual([notes[2]!.id, notes[0]!.id]);
    expect(await ids(`?customer_id=${encodeURIComponent(alice.external_id)}`)).toEqual([notes[2]!.id, notes[0]!.id]);
    expect(await ids(`?invoice_id=${bobInvoice._id}`)).toEqual([notes[1]!.id]);
    expect(await ids('?status=finalized')).toEqual([notes[2]!.id]);
    expect(await ids('?status=draft&customer_id=' + alice.id)).toEqual([notes[0]!.id]);
    expect(await ids('?customer_id=nobody')).toEqual([]);
    const page = await api.list('?skip=1&limit=1', lister.headers);
    expect(page.headers['x-total-count']).toBe('3');
    expect(page.json<CreditNoteResource[]>().map((n) => n.id)).toEqual([notes[1]!.id]);
    expectValidationError(await api.list('?status=open', lister.headers), 'status');
    expectValidationError(await api.list('?limit=0', lister.headers), 'limit');
  });
});

describe('tenant isolation', () => {
  it("another organization's invoices, fees and credit notes are 404, and never listed", async () => {
    const { invoice, fee } = await invoiceWithFee(100);
    const note = await createNote({ invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 10 }] });
    const intruder = await createOrganization(stack.app, { name: 'Intruder' });
    const intruderCustomer = await createCustomer(intruder);
    const intruderInvoice = await seedInvoice(intruder, intruderCustomer.id);

    expectError(
      await api.create(
        { invoice_id: invoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 1 }] },
        intruder.headers,
      ),
      404,
      'invoice_not_found',
    );
    expectError(
      await api.create(
        { invoice_id: intruderInvoice._id, reason: 'order_change', items: [{ fee_id: fee._id, amount_cents: 1 }] },
        intruder.headers,
      ),
      404,
      'fee_not_found',
    );
    expectError(await api.get(note.id, intruder.headers), 404, 'credit_note_not_found');
    expectError(await api.finalize(note.id, intruder.headers), 404, 'credit_note_not_found');
    expectError(await api.void(note.id, intruder.headers), 404, 'credit_note_not_found');
    const list = await api.list(`?customer_id=${customer.id}`, intruder.headers);
    expect(list.json()).toEqual([]);
    expect((await api.list('', intruder.headers)).headers['x-total-count']).toBe('0');

    const untouched = (await api.get(note.id)).json<CreditNoteResource>();
    expect(untouched.status).toBe('draft');
    const stored = await stack.db.models.Fee.findById(fee._id).lean();
    expect(new Decimal(String(stored!.credited_amount_cents)).toFixed(4)).toBe('10.0000');
  });

  it('requires authentication', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/v1/credit_notes' });
    expectError(res, 401, 'unauthorized');
  });
});

describe('OpenAPI', () => {
  it('documents every credit note route', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    const doc = res.json<{ paths: Record<string, Record<string, unknown>> }>();
    expect(Object.keys(doc.paths['/v1/credit_notes'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/credit_notes/{id}'] ?? {})).toEqual(['get']);
    expect(Object.keys(doc.paths['/v1/credit_notes/{id}/finalize'] ?? {})).toEqual(['post']);
    expect(Object.keys(doc.paths['/v1/credit_notes/{id}/void'] ?? {})).toEqual(['post']);
  });
});
