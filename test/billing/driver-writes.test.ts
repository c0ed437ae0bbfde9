// Documents billing writes through the driver instead of through mongoose (a boundary's invoice,
// its fees and its lifecycle events: src/billing/invoices.ts, src/webhooks/emit-event.ts) must be
// what mongoose would have written: every field of the schema (its defaults included), each value
// already of its schema type, nothing outside the schema, valid. Read back raw, each document is
// its own mongoose cast (`new Model(raw).toObject()`), and the objects billing went on with
// (returned, sent in events) are the documents stored.
import { randomUUID } from 'node:crypto';
import type { Model } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInvoice, type InvoiceDeps, type NewInvoice } from '../../src/billing/invoices';
import { toInvoiceResource } from '../../src/resources/invoice';
import { toDecimal128 } from '../../src/db/decimal';
import { emitEvent, type EmitDeps } from '../../src/webhooks/emit-event';
import type { InvoiceDoc } from '../../src/db/models/invoice';
import { dec } from '../../src/domain/money';
import { createCustomer, createOrganization, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await createTestStack();
});
afterAll(async () => stack?.close());

const AT = new Date('2026-11-21T10:00:00.000Z');

/** The raw documents of these ids, each checked to be its own mongoose cast, and valid. */
async function expectAsMongooseWrites(model: Model<Record<string, unknown>>, ids: string[]): Promise<Record<string, unknown>[]> {
  const raws = await model.collection.find({ _id: { $in: ids } } as never).toArray();
  expect(raws).toHaveLength(ids.length);
  for (const raw of raws) {
    const cast = new model(raw);
    expect(cast.validateSync()).toBeUndefined();
    expect(cast.toObject()).toStrictEqual(raw);
  }
  return raws;
}

async function newCustomer(gracePeriodDays: number) {
  const prefix = `D${randomUUID().replaceAll('-', '').slice(0, 5).toUpperCase()}`;
  const org = await createOrganization(stack.app, {
    name: `Driver ${prefix}`,
    timezone: 'UTC',
    document_number_prefix: prefix,
    invoice_grace_period: gracePeriodDays,
  });
  return { organizationId: org.id, customerId: await createCustomer(stack.app, org) };
}

async function bill(gracePeriodDays: number): Promise<{ invoice: InvoiceDoc; organizationId: string; again: () => Promise<InvoiceDoc> }> {
  const { organizationId, customerId } = await newCustomer(gracePeriodDays);
  const deps: InvoiceDeps = { models: stack.db.models, temporal: stack.temporal };
  const input: NewInvoice = {
    organizationId,
    customerId,
    invoiceType: 'one_off',
    currency: 'USD',
    idempotencyKey: `test/${randomUUID()}`,
    fees: [
      { key: 'line/000', fee_type: 'add_on', amount_cents: dec('1234.5'), units: dec(3), events_count: 0, unit_amount_cents: dec('411.5') },
      { key: 'line/001', fee_type: 'add_on', amount_cents: dec(0), units: dec(0), events_count: 0, unit_amount_cents: dec(0) },
    ],
    finalizeAtCreation: true,
    at: AT,
  };
  const invoice = await createInvoice(stack.db, deps, input);
  return { invoice, organizationId, again: () => createInvoice(stack.db, deps, input) };
}

const models = () => stack.db.models as unknown as Record<'Invoice' | 'Fee' | 'LifecycleEvent', Model<Record<string, unknown>>>;

describe('documents billing writes through the driver', () => {
  it.each([
    ['finalized at its creation (no grace period)', 0, 'finalized'],
    ['a draft (a grace period)', 3, 'draft'],
  ])('%s: the invoice, its fees and its events are what mongoose would write', async (_name, grace, status) => {
    const { invoice, organizationId, again } = await bill(grace);
    expect(invoice.status).toBe(status);

    const [stored] = await expectAsMongooseWrites(models().Invoice, [invoice._id]);
    // What createInvoice returned (and started the workflow with) is the stored document.
    expect(stored).toEqual(invoice);
    expect(Object.keys(stored!).sort()).toEqual(Object.keys(stack.db.models.Invoice.schema.paths).sort());

    const fees = await stack.db.models.Fee.find({ invoice_id: invoice._id }).sort({ key: 1 }).lean();
    expect(fees).toHaveLength(2);
    await expectAsMongooseWrites(
      models().Fee,
      fees.map((f) => f._id),
    );

    const events = await stack.db.models.LifecycleEvent.find(
      { organization_id: organizationId, type: /^invoice\./ },
      { _id: 1, type: 1 },
    ).lean();
    expect(events.map((e) => e.type).sort()).toEqual(
      status === 'finalized' ? ['invoice.created', 'invoice.finalized'] : ['invoice.created'],
    );
    const raws = await expectAsMongooseWrites(
      models().LifecycleEvent,
      events.map((e) => e._id),
    );
    for (const raw of raws) {
      expect(raw.created_at).toBeInstanceOf(Date);
      expect(raw.updated_at).toEqual(raw.created_at);
      const object = raw.object as Record<string, unknown>;
      expect(object.id).toBe(invoice._id);
      expect(object.status).toBe(raw.type === 'invoice.created' ? 'draft' : 'finalized');
    }
    // The event of the invoice as stored carries its resource, as the API shows it.
    const ofStored = raws.find((raw) => raw.type === (status === 'finalized' ? 'invoice.finalized' : 'invoice.created'));
    expect(ofStored?.object).toStrictEqual(JSON.parse(JSON.stringify(toInvoiceResource(invoice, fees))));

    // A retry finds what the first attempt wrote: the same invoice, nothing written twice.
    expect(await again()).toEqual(stored);
    expect(await stack.db.models.Invoice.countDocuments({ organization_id: organizationId })).toBe(1);
    expect(await stack.db.models.Fee.countDocuments({ invoice_id: invoice._id })).toBe(2);
    expect(await stack.db.models.LifecycleEvent.countDocuments({ organization_id: organizationId, type: /^invoice\./ })).toBe(
      events.length,
    );
  });
});

describe('a lifecycle event written through the driver', () => {
  it("stores its resource as mongoose's insertMany did: an undefined property or array item as null, every key kept", async () => {
    const { organizationId } = await newCustomer(0);
    const deps: EmitDeps = { models: stack.db.models, temporal: stack.temporal };
    // Keys that are names of Object's own machinery, undefined values at every depth, a Date, a Decimal128.
    const resource = {
      constructor: 'c',
      prototype: 'p',
      a: 1,
      u: undefined,
      nested: { v: undefined, w: [1, undefined, { x: undefined, y: null }], empty: {} },
      at: AT,
      amount: toDecimal128('12.5'),
    };
    const { eventId } = await emitEvent(deps, {
      organizationId,
      type: 'customer.created',
      idempotencyKey: `test/${randomUUID()}`,
      object: resource as never,
      occurredAt: AT,
    });
    const byMongoose = `test-${randomUUID()}`;
    await stack.db.models.LifecycleEvent.insertMany([
      { _id: byMongoose, organization_id: organizationId, type: 'customer.created', object: resource, occurred_at: AT },
    ]);
    const [ours, theirs] = await Promise.all(
      [eventId, byMongoose].map(async (id) => (await stack.db.models.LifecycleEvent.collection.findOne({ _id: id } as never))!),
    );
    expect(ours!.object).toStrictEqual(theirs!.object);
    expect(ours!.object).toStrictEqual({
      constructor: 'c',
      prototype: 'p',
      a: 1,
      u: null,
      nested: { v: null, w: [1, null, { x: null, y: null }], empty: {} },
      at: AT,
      amount: toDecimal128('12.5'),
    });
  });

  it('refuses an occurredAt that is not a Date (nothing casts it any more)', async () => {
    const { organizationId } = await newCustomer(0);
    const deps: EmitDeps = { models: stack.db.models, temporal: stack.temporal };
    await expect(
      emitEvent(deps, {
        organizationId,
        type: 'customer.created',
        idempotencyKey: `test/${randomUUID()}`,
        object: {} as never,
        occurredAt: AT.toISOString() as never,
      }),
    ).rejects.toThrow(/is not a Date/);
  });
});
