// What billing may skip reading (src/db/read-flags.ts): a customer or organization created through
// the API says it has no applied coupon, credit note, wallet, tax or webhook endpoint until one is
// created, whatever creates it; billing then skips those reads, and an invoice finalized at its
// creation sends invoice.created and invoice.finalized in one write. A document older than the
// flags (none set) is read as before.
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db';
import { createInvoice, type InvoiceDeps } from '../../src/billing/invoices';
import { takeDocumentNumber } from '../../src/billing/document-numbers';
import { invoiceIdFor } from '../../src/ids';
import { dec } from '../../src/domain/money';
import { connectMonitored, createCustomer, createOrganization, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
/** The stack's database through a connection that reports its commands (connectMonitored). */
let monitored: Db;
let deps: InvoiceDeps;

beforeAll(async () => {
  stack = await createTestStack();
  monitored = await connectMonitored(stack);
  deps = { models: monitored.models, temporal: stack.temporal };
});
afterAll(async () => {
  await monitored?.close();
  await stack?.close();
});

const AT = new Date('2026-11-21T10:00:00.000Z');
const plain = (v: unknown) => new Decimal(String(v ?? 0)).toFixed();

async function newOrganization() {
  const prefix = `R${randomUUID().replaceAll('-', '').slice(0, 5).toUpperCase()}`;
  const org = await createOrganization(stack.app, { name: `Flags ${prefix}`, timezone: 'UTC', document_number_prefix: prefix });
  return { org, customerId: await createCustomer(stack.app, org) };
}

/** An add-on invoice of `amount`, finalized at creation (no grace period), with the commands it sent. */
async function bill(organizationId: string, customerId: string, amount: number, idempotencyKey = `test/${randomUUID()}`) {
  const commands: string[] = [];
  const client = monitored.connection.getClient();
  const onStart = (event: { commandName: string; command: Record<string, unknown> }) => {
    const collection = event.command[event.commandName];
    if (typeof collection === 'string') commands.push(`${event.commandName} ${collection}`);
  };
  client.on('commandStarted', onStart);
  try {
    const invoice = await createInvoice(monitored, deps, {
      organizationId,
      customerId,
      invoiceType: 'one_off',
      currency: 'USD',
      idempotencyKey,
      fees: [
        { key: 'line/000', fee_type: 'add_on', amount_cents: dec(amount), units: dec(1), events_count: 0, unit_amount_cents: dec(amount) },
      ],
      finalizeAtCreation: true,
      at: AT,
    });
    return { invoice, commands };
  } finally {
    client.off('commandStarted', onStart);
  }
}

const flagsOf = async (customerId: string) =>
  stack.db.models.Customer.findById(customerId, { has_applied_coupons: 1, has_credit_notes: 1, has_wallets: 1 }).lean();

describe('read flags', () => {
  it('a new customer and organization have none; billing then reads no tax, coupon, credit note, wallet or endpoint, and writes both invoice events at once', async () => {
    const { org, customerId } = await newOrganization();
    expect(await flagsOf(customerId)).toMatchObject({ has_applied_coupons: false, has_credit_notes: false, has_wallets: false });
    expect(await stack.db.models.Organization.findById(org.id, { has_taxes: 1, has_webhook_endpoints: 1 }).lean()).toMatchObject({
      has_taxes: false,
      has_webhook_endpoints: false,
    });

    const { invoice, commands } = await bill(org.id, customerId, 1000);
    expect(invoice.status).toBe('finalized');
    expect(plain(invoice.total)).toBe('1000');
    for (const skipped of ['applied_taxes', 'taxes', 'applied_coupons', 'credit_notes', 'wallets', 'webhook_endpoints']) {
      expect(commands.filter((c) => c.endsWith(` ${skipped}`))).toEqual([]);
    }
    expect(commands.filter((c) => c === 'insert lifecycle_events')).toHaveLength(1);
    // Written once, finalized: no draft then update.
    expect(commands.filter((c) => c.endsWith(' invoices'))).toEqual(['find invoices', 'insert invoices']);
    const events = await stack.db.models.LifecycleEvent.find({ organization_id: org.id, type: /^invoice\./ }).lean();
    const ofInvoice = events.filter((e) => (e.object as { id?: string }).id === invoice._id);
    expect(ofInvoice.map((e) => [e.type, (e.object as { status: string }).status]).sort()).toEqual([
      ['invoice.created', 'draft'],
      ['invoice.finalized', 'finalized'],
    ]);
  });

  it('whatever creates a wallet, a tax or an endpoint sets its flag first, and billing then reads and applies it', async () => {
    const { org, customerId } = await newOrganization();
    const auth = { authorization: `Bearer ${org.apiKey}` };
    // A 10 % organization tax through the API.
    const tax = await stack.app.inject({
      method: 'POST',
      url: '/v1/taxes',
      headers: auth,
      payload: { code: `VAT_${randomUUID().slice(0, 6)}`, name: 'VAT', rate: '0.1', applied_to_organization: true },
    });
    expect(tax.statusCode, tax.body).toBe(201);
    // An endpoint straight through the model (as a test or a script would).
    await stack.db.models.WebhookEndpoint.create({ organization_id: org.id, url: 'http://127.0.0.1:9/hook', secret: 'whsec_x' });
    expect(await stack.db.models.Organization.findById(org.id, { has_taxes: 1, has_webhook_endpoints: 1 }).lean()).toMatchObject({
      has_taxes: true,
      has_webhook_endpoints: true,
    });
    // A wallet with 300 cents of granted credits, through the API.
    const wallet = await stack.app.inject({
      method: 'POST',
      url: '/v1/wallets',
      headers: auth,
      payload: { customer_id: customerId, name: 'Prepaid', rate_amount: '1', initial_granted_credits: '3', currency: 'USD' },
    });
    expect(wallet.statusCode, wallet.body).toBe(201);
    expect(await flagsOf(customerId)).toMatchObject({ has_wallets: true, has_applied_coupons: false });

    const { invoice, commands } = await bill(org.id, customerId, 1000);
    // 1000 + 10 % tax, less the wallet's 300.
    expect(plain(invoice.tax_amount)).toBe('100');
    expect(plain(invoice.prepaid_credit_amount)).toBe('300');
    expect(plain(invoice.total)).toBe('800');
    expect(commands).toContain('find webhook_endpoints');
    expect(commands).toContain('find taxes');
    // A wallet is consumed for the amounts of a stored draft: written first, then finalized.
    expect(commands.filter((c) => c.endsWith(' invoices'))).toEqual(['find invoices', 'insert invoices', 'findAndModify invoices']);
  });

  it('written finalized, a retry after its number was taken (and before the invoice was written) takes that number, with the amounts it computes', async () => {
    const { org, customerId } = await newOrganization();
    const key = `test/${randomUUID()}`;
    const first = await takeDocumentNumber(monitored, { organizationId: org.id, kind: 'invoice', documentId: invoiceIdFor(org.id, key) });
    // The retry bills other usage than the attempt that crashed would have.
    const { invoice, commands } = await bill(org.id, customerId, 1234, key);
    expect(invoice.sequential_id).toBe(first);
    expect(invoice.status).toBe('finalized');
    expect(plain(invoice.total)).toBe('1234');
    expect(commands.filter((c) => c.endsWith(' invoices'))).toEqual(['find invoices', 'insert invoices']);
    // The next invoice takes the next number: no hole, no number twice.
    const { invoice: next } = await bill(org.id, customerId, 10);
    expect(next.sequential_id).toBe(first + 1);
    expect(await stack.db.models.DocumentNumber.countDocuments({ organization_id: org.id, kind: 'invoice' })).toBe(2);
  });

  it('a customer older than the flags (none set) still has its applied coupon read and used', async () => {
    const { org, customerId } = await newOrganization();
    const auth = { authorization: `Bearer ${org.apiKey}` };
    const code = `OFF_${randomUUID().slice(0, 6)}`;
    const coupon = await stack.app.inject({
      method: 'POST',
      url: '/v1/coupons',
      headers: auth,
      payload: { code, name: 'Off', coupon_type: 'fixed_amount', amount_cents: 200, amount_currency: 'USD', frequency: 'once' },
    });
    expect(coupon.statusCode, coupon.body).toBe(201);
    const applied = await stack.app.inject({
      method: 'POST',
      url: '/v1/coupons/apply',
      headers: auth,
      payload: { coupon_code: code, customer_id: customerId },
    });
    expect(applied.statusCode, applied.body).toBe(201);
    expect(await flagsOf(customerId)).toMatchObject({ has_applied_coupons: true });
    // As a customer stored before the flags existed.
    await stack.db.models.Customer.collection.updateOne({ _id: customerId } as never, {
      $unset: { has_applied_coupons: '', has_credit_notes: '', has_wallets: '' },
    });
    expect(await flagsOf(customerId)).not.toHaveProperty('has_applied_coupons');
    const { invoice } = await bill(org.id, customerId, 1000);
    expect(plain(invoice.coupons_amount_cents)).toBe('200');
    expect(plain(invoice.total)).toBe('800');
  });
});
