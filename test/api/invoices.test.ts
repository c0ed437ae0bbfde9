// Invoices over HTTP (specification: Invoice states, invoice endpoints, "Invoice generation
// pipeline", "Credit consumption at invoice finalization", InvoiceSettlement; api-contract.md
// "Invoices, fees, credit notes"; billing-rules.md, Numbers and Invoice pipeline):
// exact totals of one-off invoices (taxes at every level, coupons in order of application, credit
// notes then wallets at finalization), add_ons/apply, every lifecycle transition and refusal,
// numbering, lists and filters, fees, settlements, tenant isolation and validation.
//
// A worker on the run's dev server runs the invoice workflows for the whole file. The dev server
// runs in real time, so organizations either finalize at once (invoice_grace_period 0; the test
// polls until the workflow did it) or keep their drafts for 30 days and finalize on request.
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { FeeResource, InvoiceResource } from '../../src/resources/invoice';
import type { SettlementResource } from '../../src/resources/settlement';
import type { WalletResource } from '../../src/resources/wallet';
import type { WalletTransactionResource } from '../../src/resources/wallet-transaction';
import {
  eventually,
  expectError,
  expectUnknownFields,
  expectValidationError,
  ISO_MS_UTC,
  sleep,
  UUID,
  injectAs,
  ok,
  type Method,
} from '../support/http';
import { waitForEventTypes } from '../support/lifecycle-events';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;

function assertWorkerAlive() {
  worker.assertAlive();
}

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

// ---------------------------------------------------------------------------------------------
// Numbers, computed here from billing-rules.md (Numbers) independently of the code under test.

/** Fee-level amounts keep 4 fractional digits, half up. */
const fee4 = (v: Decimal.Value) => new Decimal(v).toDecimalPlaces(4, Decimal.ROUND_HALF_UP);
/** Invoice-level amounts are whole cents, half up. */
const cents = (v: Decimal.Value) => new Decimal(v).toDecimalPlaces(0, Decimal.ROUND_HALF_UP);
/** Decimal(12,4) on the wire. */
const s4 = (v: Decimal.Value) => new Decimal(v).toFixed(4);
const dec = (v: Decimal.Value) => new Decimal(v);

// ---------------------------------------------------------------------------------------------
// HTTP helpers.

const call = (org: TestOrganization, method: Method, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
  injectAs(stack.app, org, method, url, payload, headers);

async function newOrg(overrides: Record<string, unknown> = {}): Promise<TestOrganization & { prefix: string }> {
  const prefix = `T${randomUUID().replaceAll('-', '').slice(0, 5).toUpperCase()}`;
  const org = await createOrganization(stack.app, {
    name: `Invoice Org ${prefix}`,
    timezone: 'UTC',
    document_number_prefix: prefix,
    ...overrides,
  });
  return { ...org, prefix };
}

async function newCustomer(org: TestOrganization, extra: Record<string, unknown> = {}): Promise<CustomerResource> {
  return ok<CustomerResource>(
    await call(org, 'POST', '/v1/customers', { external_id: `cus_${randomUUID()}`, currency: 'USD', ...extra }),
    201,
  );
}

type Line = { add_on_code?: string; description?: string; quantity?: string; unit_price?: string };

async function oneOff(org: TestOrganization, customerId: string, lineItems: Line[]): Promise<InvoiceResource> {
  return ok<InvoiceResource>(await call(org, 'POST', '/v1/invoices/one_off', { customer_id: customerId, line_items: lineItems }), 201);
}

const getInvoice = (org: TestOrganization, id: string) => call(org, 'GET', `/v1/invoices/${id}`);
const action = (org: TestOrganization, id: string, name: 'finalize' | 'pay' | 'void' | 'refresh') =>
  call(org, 'POST', `/v1/invoices/${id}/${name}`);
const remove = (org: TestOrganization, id: string) => call(org, 'DELETE', `/v1/invoices/${id}`);

/** The workflow finalizes asynchronously: poll until the invoice reaches one of `statuses`. */
async function waitForInvoice(org: TestOrganization, id: string, statuses: InvoiceResource['status'][]): Promise<InvoiceResource> {
  return eventually(
    async () => {
      assertWorkerAlive();
      const body = ok<InvoiceResource>(await getInvoice(org, id));
      return statuses.includes(body.status) ? body : undefined;
    },
    30_000,
    `invoice ${id} to be ${statuses.join(' or ')}`,
  );
}

async function createTax(
  org: TestOrganization,
  code: string,
  rate: string,
  appliedToOrganization = false,
): Promise<{ id: string; code: string }> {
  return ok(await call(org, 'POST', '/v1/taxes', { code, name: code, rate, applied_to_organization: appliedToOrganization }), 201);
}

async function applyTax(org: TestOrganization, taxCode: string, taxableType: 'customer' | 'add_on', taxableId: string): Promise<void> {
  ok(await call(org, 'POST', '/v1/taxes/apply', { tax_code: taxCode, taxable_type: taxableType, taxable_id: taxableId }), 201);
}

async function createAddOn(
  org: TestOrganization,
  code: string,
  amountCents: string,
  extra: Record<string, unknown> = {},
): Promise<{ id: string; code: string }> {
  return ok(
    await call(org, 'POST', '/v1/add_ons', { code, name: `Add-on ${code}`, amount_cents: amountCents, amount_currency: 'USD', ...extra }),
    201,
  );
}

async function createWallet(org: TestOrganization, customerId: string, credits: string, priority: number): Promise<WalletResource> {
  const wallet = ok<WalletResource>(
    await call(org, 'POST', '/v1/wallets', {
      customer_id: customerId,
      name: `w-${priority}-${credits}`,
      priority,
      initial_granted_credits: credits,
    }),
    201,
  );
  // Creation dates are the consumption order within a priority: keep them distinct.
  await sleep(15);
  return wallet;
}

const getWallet = async (org: TestOrganization, id: string) => ok<WalletResource>(await call(org, 'GET', `/v1/wallets/${id}`));
const outboundOf = async (org: TestOrganization, walletId: string) =>
  ok<WalletTransactionResource[]>(await call(org, 'GET', `/v1/wallets/${walletId}/transactions?transaction_type=outbound`));
const settlementsOf = async (org: TestOrganization, invoiceId: string) => {
  const res = await call(org, 'GET', `/v1/invoices/${invoiceId}/settlements`);
  const rows = ok<SettlementResource[]>(res);
  expect(res.headers['x-total-count']).toBe(String(rows.length));
  return rows;
};
const settlementTuples = (rows: SettlementResource[]) => rows.map((r) => [r.settlement_type, r.source_id, r.amount_cents]).sort();

/** A finalized credit note of `amount` on `fee` of a finalized invoice. */
async function finalizedCreditNote(org: TestOrganization, invoiceId: string, feeId: string, amount: string): Promise<CreditNoteResource> {
  const created = ok<CreditNoteResource>(
    await call(org, 'POST', '/v1/credit_notes', {
      invoice_id: invoiceId,
      reason: 'order_change',
      items: [{ fee_id: feeId, amount_cents: Number(amount) }],
    }),
    201,
  );
  const finalized = ok<CreditNoteResource>(await call(org, 'POST', `/v1/credit_notes/${created.id}/finalize`));
  expect(finalized).toMatchObject({ status: 'finalized', balance_amount_cents: s4(amount) });
  return finalized;
}

const expectInvalidTransition = (res: LightMyRequestResponse) => expectError(res, 400, 'invalid_state_transition');

// =============================================================================================

describe('one-off invoice totals: taxes', () => {
  let org: TestOrganization & { prefix: string };
  let plain: CustomerResource; // only the organization's default tax reaches it
  let taxedCustomer: CustomerResource; // one customer-level tax
  let twoTaxes: CustomerResource; // two customer-level taxes
  let addOn: { id: string; code: string };

  beforeAll(async () => {
    // Drafts stay drafts for 30 days: the amounts computed at generation are what is asserted.
    org = await newOrg({ invoice_grace_period: 30 });
    await createTax(org, 'VAT20', '0.2', true);
    await createTax(org, 'CUST10', '0.1');
    await createTax(org, 'STATE7', '0.07');
    await createTax(org, 'ADDON5', '0.05');
    plain = await newCustomer(org);
    taxedCustomer = await newCustomer(org);
    twoTaxes = await newCustomer(org);
    await applyTax(org, 'CUST10', 'customer', taxedCustomer.id);
    await applyTax(org, 'CUST10', 'customer', twoTaxes.id);
    await applyTax(org, 'STATE7', 'customer', twoTaxes.id);
    addOn = await createAddOn(org, 'premium', '5000', { invoice_display_name: 'Premium support' });
    await applyTax(org, 'ADDON5', 'add_on', addOn.id);
  });

  it("applies the organization's default tax per fee on its pre-tax amount, rounding fees to 4 digits and the invoice to whole cents", async () => {
    const invoice = await oneOff(org, plain.id, [
      { description: 'Setup', quantity: '2', unit_price: '1234.5' },
      { description: 'Support', quantity: '3', unit_price: '333.3333' },
    ]);
    // Lines: 2 x 1234.5 = 2469 and 3 x 333.3333 = 999.9999 (fee amounts keep 4 digits).
    const line1 = fee4(dec('1234.5').times(2));
    const line2 = fee4(dec('333.3333').times(3));
    // The organization's 20 % on each fee, 4 digits half up: 493.8 and 199.99998 -> 200.0000.
    const tax1 = fee4(line1.times('0.2'));
    const tax2 = fee4(line2.times('0.2'));
    const subtotal = cents(line1.plus(line2)); // 3468.9999 -> 3469
    const taxAmount = cents(tax1.plus(tax2)); // 693.8 -> 694
    const total = subtotal.plus(taxAmount); // 4163

    expect(invoice).toMatchObject({
      status: 'draft',
      invoice_type: 'one_off',
      customer_id: plain.id,
      currency: 'USD',
      fees_amount_cents: s4(line1.plus(line2)),
      subtotal: s4(subtotal),
      tax_amount: s4(taxAmount),
      coupons_amount_cents: s4(0),
      credit_notes_amount_cents: s4(0),
      prepaid_credit_amount: s4(0),
      total: s4(total),
    });
    expect(invoice.total).toBe('4163.0000');
    const fees = invoice.fees!;
    expect(fees).toHaveLength(2);
    expect(fees[0]).toMatchObject({
      fee_type: 'add_on',
      invoice_display_name: 'Setup',
      units: s4(2),
      unit_amount_cents: s4('1234.5'),
      amount_cents: s4(line1),
      taxes_amount_cents: s4(tax1),
      total_amount_cents: s4(line1.plus(tax1)),
    });
    expect(fees[1]).toMatchObject({
      units: s4(3),
      unit_amount_cents: s4('333.3333'),
      amount_cents: s4(line2),
      taxes_amount_cents: s4(tax2),
    });
    for (const fee of fees) {
      expect(fee.applied_taxes.map((t) => t.tax_code)).toEqual(['VAT20']);
      expect(dec(fee.applied_taxes[0]!.tax_rate).equals('0.2')).toBe(true);
    }
    expect(invoice.applied_taxes).toHaveLength(1);
    expect(invoice.applied_taxes[0]).toMatchObject({
      tax_code: 'VAT20',
      fees_amount_cents: s4(line1.plus(line2)),
      amount_cents: s4(taxAmount),
    });
  });

  it("a customer-level tax replaces the organization's (levels never add up)", async () => {
    const invoice = await oneOff(org, taxedCustomer.external_id, [{ description: 'Consulting', unit_price: '1000' }]);
    // 1000 x 10 % (the customer's) = 100; the organization's 20 % does not apply on top.
    const line = dec(1000);
    const tax = fee4(line.times('0.1'));
    expect(invoice).toMatchObject({ customer_id: taxedCustomer.id, subtotal: s4(line), tax_amount: s4(tax), total: s4(line.plus(tax)) });
    expect(invoice.total).toBe('1100.0000');
    expect(invoice.fees![0]!.applied_taxes.map((t) => [t.tax_code, t.amount_cents])).toEqual([['CUST10', s4(tax)]]);
  });

  it("an add-on-level tax replaces the customer's and the organization's for the add-on's line only", async () => {
    const invoice = await oneOff(org, taxedCustomer.id, [
      { add_on_code: 'premium', quantity: '2' },
      { description: 'Extra', unit_price: '1000' },
    ]);
    // Add-on line: 2 x 5000 (the add-on's price) = 10000, taxed 5 % (add-on level) = 500.
    const addOnLine = dec(5000).times(2);
    const addOnTax = fee4(addOnLine.times('0.05'));
    // Free line: 1000, taxed 10 % (the customer's level) = 100.
    const freeLine = dec(1000);
    const freeTax = fee4(freeLine.times('0.1'));
    const subtotal = cents(addOnLine.plus(freeLine)); // 11000
    const taxAmount = cents(addOnTax.plus(freeTax)); // 600
    expect(invoice).toMatchObject({ subtotal: s4(subtotal), tax_amount: s4(taxAmount), total: s4(subtotal.plus(taxAmount)) });
    expect(invoice.total).toBe('11600.0000');
    const [first, second] = invoice.fees!;
    expect(first).toMatchObject({
      add_on_id: addOn.id,
      invoice_display_name: 'Premium support',
      units: s4(2),
      unit_amount_cents: s4(5000),
      amount_cents: s4(addOnLine),
      taxes_amount_cents: s4(addOnTax),
    });
    expect(first!.applied_taxes.map((t) => t.tax_code)).toEqual(['ADDON5']);
    expect(second).toMatchObject({ add_on_id: null, amount_cents: s4(freeLine), taxes_amount_cents: s4(freeTax) });
    expect(second!.applied_taxes.map((t) => t.tax_code)).toEqual(['CUST10']);
    expect(invoice.applied_taxes.map((t) => [t.tax_code, t.fees_amount_cents, t.amount_cents]).sort()).toEqual(
      [
        ['ADDON5', s4(addOnLine), s4(cents(addOnTax))],
        ['CUST10', s4(freeLine), s4(cents(freeTax))],
      ].sort(),
    );

    // For a customer with only the organization's tax, the add-on's 5 % wins over the default 20 %.
    const other = await oneOff(org, plain.id, [{ add_on_code: addOn.id }]);
    // 1 x 5000 x 5 % = 250 (not 20 % = 1000).
    expect(other).toMatchObject({ subtotal: s4(5000), tax_amount: s4(fee4(dec(5000).times('0.05'))), total: s4(5250) });
  });

  it('two taxes at the same level add up, each with its own row', async () => {
    const invoice = await oneOff(org, twoTaxes.id, [{ description: 'Service', unit_price: '2500' }]);
    // 2500 x 10 % = 250 and 2500 x 7 % = 175: 425 of tax, 2925 in all.
    const line = dec(2500);
    const t10 = fee4(line.times('0.1'));
    const t7 = fee4(line.times('0.07'));
    expect(invoice).toMatchObject({ subtotal: s4(line), tax_amount: s4(cents(t10.plus(t7))), total: s4(line.plus(t10).plus(t7)) });
    expect(invoice.total).toBe('2925.0000');
    const fee = invoice.fees![0]!;
    expect(fee.taxes_amount_cents).toBe(s4(t10.plus(t7)));
    expect(fee.applied_taxes.map((t) => [t.tax_code, t.amount_cents]).sort()).toEqual(
      [
        ['CUST10', s4(t10)],
        ['STATE7', s4(t7)],
      ].sort(),
    );
  });

  it('POST /v1/add_ons/apply bills the add-on on an add_on invoice, with units and an amount override', async () => {
    const res = await call(org, 'POST', '/v1/add_ons/apply', {
      add_on_code: 'premium',
      customer_id: taxedCustomer.external_id,
      units: '3',
      amount_cents: '250.5',
    });
    const invoice = ok<InvoiceResource>(res, 201);
    // 3 x 250.5 (the override replaces the add-on's 5000) = 751.5; 5 % add-on tax = 37.575.
    const line = fee4(dec('250.5').times(3));
    const tax = fee4(line.times('0.05'));
    const subtotal = cents(line); // 751.5 -> 752 (half up)
    const taxAmount = cents(tax); // 37.575 -> 38
    expect(invoice).toMatchObject({
      invoice_type: 'add_on',
      status: 'draft',
      customer_id: taxedCustomer.id,
      fees_amount_cents: s4(line),
      subtotal: s4(subtotal),
      tax_amount: s4(taxAmount),
      total: s4(subtotal.plus(taxAmount)),
    });
    expect(invoice.total).toBe('790.0000');
    expect(invoice.fees).toHaveLength(1);
    expect(invoice.fees![0]).toMatchObject({
      fee_type: 'add_on',
      add_on_id: addOn.id,
      units: s4(3),
      unit_amount_cents: s4('250.5'),
      amount_cents: s4(line),
      taxes_amount_cents: s4(tax),
    });

    // Without overrides: one unit at the add-on's price, 5000 + 5 % = 5250.
    const plainApply = ok<InvoiceResource>(
      await call(org, 'POST', '/v1/add_ons/apply', { add_on_code: addOn.id, customer_id: plain.id }),
      201,
    );
    expect(plainApply).toMatchObject({ invoice_type: 'add_on', subtotal: s4(5000), tax_amount: s4(250), total: s4(5250) });
    expect(plainApply.fees![0]).toMatchObject({ units: s4(1), unit_amount_cents: s4(5000) });

    // The invoices are listed as add_on invoices.
    const list = ok<InvoiceResource[]>(await call(org, 'GET', '/v1/invoices?invoice_type=add_on'));
    expect(list.map((i) => i.id).sort()).toEqual([invoice.id, plainApply.id].sort());
  });
});

describe('one-off invoice totals: coupons (after taxes, on the pre-tax subtotal, in order of application)', () => {
  let org: TestOrganization & { prefix: string };

  beforeAll(async () => {
    // Finalized at once, so that the coupons' consumption can be seen too.
    org = await newOrg({ invoice_grace_period: 0 });
    await createTax(org, 'VAT20', '0.2', true);
    const coupon = (body: Record<string, unknown>) => call(org, 'POST', '/v1/coupons', { frequency: 'once', ...body });
    ok(await coupon({ code: 'FIX1500', name: 'Fixed 15', coupon_type: 'fixed_amount', amount_cents: '1500', amount_currency: 'USD' }), 201);
    ok(await coupon({ code: 'FIX5000', name: 'Fixed 50', coupon_type: 'fixed_amount', amount_cents: '5000', amount_currency: 'USD' }), 201);
    ok(await coupon({ code: 'PCT10', name: 'Ten percent', coupon_type: 'percentage', percentage_rate: '10' }), 201);
  });

  async function customerWithCoupons(codes: string[]): Promise<CustomerResource> {
    const customer = await newCustomer(org);
    for (const code of codes) {
      ok(await call(org, 'POST', '/v1/coupons/apply', { coupon_code: code, customer_id: customer.id }), 201);
      await sleep(15); // the order of application is the order of creation
    }
    return customer;
  }

  const appliedCoupons = async (customerId: string) =>
    ok<{ coupon_code: string; status: string }[]>(await call(org, 'GET', `/v1/customers/${customerId}/applied_coupons`))
      .map((c) => [c.coupon_code, c.status])
      .sort();

  it('a fixed amount then a percentage of what it left; taxes stay on the full fee amounts', async () => {
    const customer = await customerWithCoupons(['FIX1500', 'PCT10']);
    const draft = await oneOff(org, customer.id, [{ description: 'Licence', unit_price: '10000' }]);
    const line = dec(10000);
    // Taxes first, per fee, on the pre-tax amount: 20 % of 10000 = 2000 (not 20 % of the discounted 7650).
    const tax = fee4(line.times('0.2'));
    // Coupons on the pre-tax subtotal, in order: 1500 fixed, then 10 % of the 8500 left = 850.
    const fixed = Decimal.min(1500, line);
    const pct = cents(line.minus(fixed).times(10).div(100));
    const total = line.plus(tax).minus(fixed).minus(pct); // 10000 + 2000 - 2350 = 9650
    expect(draft).toMatchObject({ subtotal: s4(line), tax_amount: s4(tax), coupons_amount_cents: s4(fixed.plus(pct)), total: s4(total) });
    expect(draft.total).toBe('9650.0000');
    expect(draft.applied_coupons.map((c) => [c.coupon_code, c.amount_cents])).toEqual([
      ['FIX1500', s4(fixed)],
      ['PCT10', s4(pct)],
    ]);
    // Finalization keeps the amounts and consumes both `once` coupons.
    const finalized = await waitForInvoice(org, draft.id, ['finalized']);
    expect(finalized).toMatchObject({ total: s4(total), coupons_amount_cents: s4(fixed.plus(pct)), number: `${org.prefix}-000001` });
    await eventually(
      async () => ((await appliedCoupons(customer.id)).every(([, s]) => s === 'terminated') ? true : undefined),
      10_000,
      'coupons consumed',
    );
  });

  it('the same coupons applied in the other order give another discount: a percentage first, then the fixed amount', async () => {
    const customer = await customerWithCoupons(['PCT10', 'FIX1500']);
    const draft = await oneOff(org, customer.id, [{ description: 'Licence', unit_price: '10000' }]);
    const line = dec(10000);
    const tax = fee4(line.times('0.2')); // 2000
    const pct = cents(line.times(10).div(100)); // 10 % of 10000 = 1000
    const fixed = Decimal.min(1500, line.minus(pct)); // 1500 of the 9000 left
    const total = line.plus(tax).minus(pct).minus(fixed); // 9500
    expect(draft).toMatchObject({ tax_amount: s4(tax), coupons_amount_cents: s4(pct.plus(fixed)), total: s4(total) });
    expect(draft.total).toBe('9500.0000');
    expect(draft.applied_coupons.map((c) => [c.coupon_code, c.amount_cents])).toEqual([
      ['PCT10', s4(pct)],
      ['FIX1500', s4(fixed)],
    ]);
  });

  it('a fixed amount is capped at what remains of the subtotal; a percentage after it finds nothing and is not consumed', async () => {
    const customer = await customerWithCoupons(['FIX5000', 'PCT10']);
    const draft = await oneOff(org, customer.id, [{ description: 'Small', unit_price: '3000' }]);
    const line = dec(3000);
    const tax = fee4(line.times('0.2')); // 600, on the full pre-tax amount
    const fixed = Decimal.min(5000, line); // capped: 3000, not 5000
    const total = line.plus(tax).minus(fixed); // 3000 + 600 - 3000 = 600
    expect(draft).toMatchObject({ subtotal: s4(line), tax_amount: s4(tax), coupons_amount_cents: s4(fixed), total: s4(total) });
    expect(draft.total).toBe('600.0000');
    expect(draft.applied_coupons.map((c) => [c.coupon_code, c.amount_cents])).toEqual([['FIX5000', s4(fixed)]]);
    await waitForInvoice(org, draft.id, ['finalized']);
    await eventually(
      async () => {
        const coupons = await appliedCoupons(customer.id);
        return coupons.some(([code, status]) => code === 'FIX5000' && status === 'terminated') ? coupons : undefined;
      },
      10_000,
      'FIX5000 consumed',
    );
    expect(await appliedCoupons(customer.id)).toEqual([
      ['FIX5000', 'terminated'],
      ['PCT10', 'active'],
    ]);
  });
});

describe('credit notes then wallets at finalization', () => {
  let org: TestOrganization & { prefix: string };

  beforeAll(async () => {
    org = await newOrg({ invoice_grace_period: 0 });
    await createTax(org, 'CUST10', '0.1');
  });

  /** A customer with a finalized earlier invoice and a finalized credit note of `noteAmount` on it. */
  async function customerWithCreditNote(earlierAmount: string, noteAmount: string, taxed: boolean) {
    const customer = await newCustomer(org);
    if (taxed) await applyTax(org, 'CUST10', 'customer', customer.id);
    const earlier = await oneOff(org, customer.id, [{ description: 'Earlier', unit_price: earlierAmount }]);
    const finalizedEarlier = await waitForInvoice(org, earlier.id, ['finalized']);
    const note = await finalizedCreditNote(org, earlier.id, finalizedEarlier.fees![0]!.id, noteAmount);
    // Wallets: priority 2 first (the oldest), then two of priority 1, older then newer.
    const p2 = await createWallet(org, customer.id, '10', 2); // 10 credits x 1 x 100 = 1000 cents
    const p1Old = await createWallet(org, customer.id, '5', 1); // 500 cents
    const p1New = await createWallet(org, customer.id, '8', 1); // 800 cents
    expect([p2.balance_cents, p1Old.balance_cents, p1New.balance_cents]).toEqual([s4(1000), s4(500), s4(800)]);
    return { customer, earlier: finalizedEarlier, note, p2, p1Old, p1New };
  }

  it('a credit note then every wallet cover part of the total; the invoice stays finalized with the rest due, and pay settles the rest', async () => {
    const { customer, note, p2, p1Old, p1New } = await customerWithCreditNote('5000', '1200', true);
    const draft = await oneOff(org, customer.id, [{ description: 'Usage', unit_price: '4000' }]);
    // At generation: 4000 + 10 % customer tax = 4400 due.
    expect(draft).toMatchObject({ status: 'draft', subtotal: s4(4000), tax_amount: s4(400), total: s4(4400) });

    const invoice = await waitForInvoice(org, draft.id, ['finalized', 'paid']);
    // Finalization: the credit note first (1200), then the wallets by priority then age:
    // p1 old 500, p1 new 800, p2 1000 (all drained) = 2300.
    const subtotal = dec(4000);
    const tax = fee4(subtotal.times('0.1'));
    const creditNotes = dec(1200);
    const prepaid = dec(500).plus(800).plus(1000);
    const total = subtotal.plus(tax).minus(creditNotes).minus(prepaid); // 4400 - 1200 - 2300 = 900
    expect(invoice).toMatchObject({
      status: 'finalized',
      payment_status: 'pending',
      subtotal: s4(subtotal),
      tax_amount: s4(tax),
      credit_notes_amount_cents: s4(creditNotes),
      prepaid_credit_amount: s4(prepaid),
      total: s4(total),
      paid_at: null,
    });
    expect(invoice.total).toBe('900.0000');

    // One settlement per credit note and per wallet used.
    expect(settlementTuples(await settlementsOf(org, invoice.id))).toEqual(
      [
        ['credit_note', note.id, s4(1200)],
        ['wallet_credit', p1Old.id, s4(500)],
        ['wallet_credit', p1New.id, s4(800)],
        ['wallet_credit', p2.id, s4(1000)],
      ].sort(),
    );
    // Balances decreased; one outbound transaction per wallet, for this invoice.
    for (const [wallet, consumed] of [
      [p1Old, 500],
      [p1New, 800],
      [p2, 1000],
    ] as const) {
      expect((await getWallet(org, wallet.id)).balance_cents).toBe(s4(0));
      const outbound = await outboundOf(org, wallet.id);
      expect(outbound.map((t) => [t.invoice_id, t.amount, t.status])).toEqual([[invoice.id, s4(consumed), 'invoiced']]);
    }
    const noteNow = ok<CreditNoteResource>(await call(org, 'GET', `/v1/credit_notes/${note.id}`));
    expect(noteNow.balance_amount_cents).toBe(s4(0));
    expect(noteNow.applications.map((a) => [a.invoice_id, a.amount_cents])).toEqual([[invoice.id, s4(1200)]]);

    // Paying settles exactly what is left: 900.
    const paid = ok<InvoiceResource>(await action(org, invoice.id, 'pay'));
    expect(paid).toMatchObject({ status: 'paid', payment_status: 'succeeded', total: s4(total) });
    expect(paid.paid_at).toMatch(ISO_MS_UTC);
    const after = await settlementsOf(org, invoice.id);
    expect(after).toHaveLength(5);
    expect(after.filter((s) => s.settlement_type === 'payment').map((s) => s.amount_cents)).toEqual([s4(total)]);
    expect(await waitForEventTypes(stack.db, org.id, invoice.id, ['invoice.created', 'invoice.finalized', 'invoice.paid'])).toEqual([
      'invoice.created',
      'invoice.finalized',
      'invoice.paid',
    ]);
  });

  it('when the credit note and the wallets cover everything the invoice is paid at finalization (invoice.paid), by priority then age', async () => {
    const { customer, note, p2, p1Old, p1New } = await customerWithCreditNote('3000', '1200', false);
    const draft = await oneOff(org, customer.id, [{ description: 'Usage', unit_price: '2200' }]);
    expect(draft.total).toBe(s4(2200));

    const invoice = await waitForInvoice(org, draft.id, ['finalized', 'paid']);
    // 2200: the credit note 1200 first (all of it), then 1000 from the wallets: priority 1 before
    // priority 2 (although the priority-2 wallet is older), the older priority-1 wallet first:
    // p1 old pays its 500, p1 new pays the 500 left of its 800, p2 pays nothing.
    const due = dec(2200);
    const creditNotes = Decimal.min(1200, due);
    const fromP1Old = Decimal.min(500, due.minus(creditNotes));
    const fromP1New = Decimal.min(800, due.minus(creditNotes).minus(fromP1Old));
    const prepaid = fromP1Old.plus(fromP1New);
    expect(due.minus(creditNotes).minus(prepaid).toNumber()).toBe(0);
    expect(invoice).toMatchObject({
      status: 'paid',
      payment_status: 'succeeded',
      credit_notes_amount_cents: s4(creditNotes),
      prepaid_credit_amount: s4(prepaid),
      total: s4(0),
      number: expect.stringMatching(new RegExp(`^${org.prefix}-\\d{6}$`)) as unknown,
    });
    expect(invoice.paid_at).toBe(invoice.finalized_at);

    expect(settlementTuples(await settlementsOf(org, invoice.id))).toEqual(
      [
        ['credit_note', note.id, s4(creditNotes)],
        ['wallet_credit', p1Old.id, s4(fromP1Old)],
        ['wallet_credit', p1New.id, s4(fromP1New)],
      ].sort(),
    );
    expect((await getWallet(org, p1Old.id)).balance_cents).toBe(s4(0));
    expect((await getWallet(org, p1New.id)).balance_cents).toBe(s4(dec(800).minus(fromP1New))); // 300 left
    expect((await getWallet(org, p2.id)).balance_cents).toBe(s4(1000)); // untouched
    expect(await outboundOf(org, p2.id)).toEqual([]);
    expect((await outboundOf(org, p1New.id)).map((t) => [t.invoice_id, t.amount])).toEqual([[invoice.id, s4(fromP1New)]]);
    expect(ok<CreditNoteResource>(await call(org, 'GET', `/v1/credit_notes/${note.id}`)).balance_amount_cents).toBe(s4(0));

    // invoice.paid exactly once, beside invoice.created and invoice.finalized.
    expect(await waitForEventTypes(stack.db, org.id, invoice.id, ['invoice.created', 'invoice.finalized', 'invoice.paid'])).toEqual([
      'invoice.created',
      'invoice.finalized',
      'invoice.paid',
    ]);
    // A paid invoice cannot be paid again.
    expectInvalidTransition(await action(org, invoice.id, 'pay'));
  });
});

describe('lifecycle transitions through the API', () => {
  let org: TestOrganization & { prefix: string };
  let customer: CustomerResource;

  beforeAll(async () => {
    org = await newOrg({ invoice_grace_period: 30, net_payment_term: 30 });
    customer = await newCustomer(org);
  });

  const draft = () => oneOff(org, customer.id, [{ description: 'Work', unit_price: '1000' }]);

  it('draft: PUT and refresh allowed, pay and void refused; finalize; then finalize, PUT, refresh and DELETE refused; pay; then nothing more', async () => {
    const d = await draft();
    expect(d.status).toBe('draft');
    expectInvalidTransition(await action(org, d.id, 'pay'));
    expectInvalidTransition(await action(org, d.id, 'void'));

    const updated = ok<InvoiceResource>(await call(org, 'PUT', `/v1/invoices/${d.id}`, { metadata: { po: 'PO-7' }, net_payment_term: 10 }));
    expect(updated).toMatchObject({ status: 'draft', metadata: { po: 'PO-7' }, net_payment_term: 10 });
    const refreshed = ok<InvoiceResource>(await action(org, d.id, 'refresh'));
    expect(refreshed).toMatchObject({ id: d.id, status: 'draft', total: s4(1000) });

    const finalized = ok<InvoiceResource>(await action(org, d.id, 'finalize'));
    expect(finalized).toMatchObject({
      status: 'finalized',
      payment_status: 'pending',
      metadata: { po: 'PO-7' },
      net_payment_term: 10,
      total: s4(1000),
    });
    expect(finalized.number).toMatch(new RegExp(`^${org.prefix}-\\d{6}$`));
    expect(finalized.invoice_number).toBe(finalized.number);
    expect(finalized.finalized_at).toMatch(ISO_MS_UTC);
    expect(finalized.issuing_date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    // The updated net_payment_term sets the due date: issuing_date + 10 days.
    const due = new Date(`${finalized.issuing_date!}T00:00:00.000Z`);
    due.setUTCDate(due.getUTCDate() + 10);
    expect(finalized.payment_due_date).toBe(due.toISOString().slice(0, 10));
    expect(ok<InvoiceResource>(await getInvoice(org, d.id)).status).toBe('finalized');

    expectInvalidTransition(await action(org, d.id, 'finalize'));
    expectInvalidTransition(await call(org, 'PUT', `/v1/invoices/${d.id}`, { metadata: { po: 'late' } }));
    expectInvalidTransition(await action(org, d.id, 'refresh'));
    expectInvalidTransition(await remove(org, d.id));
    expect(ok<InvoiceResource>(await getInvoice(org, d.id)).metadata).toEqual({ po: 'PO-7' });

    const paid = ok<InvoiceResource>(await action(org, d.id, 'pay'));
    expect(paid).toMatchObject({ status: 'paid', payment_status: 'succeeded', number: finalized.number });
    expect(paid.paid_at).toMatch(ISO_MS_UTC);
    expect(settlementTuples(await settlementsOf(org, d.id)).map(([type, , amount]) => [type, amount])).toEqual([['payment', s4(1000)]]);

    // Paid is final.
    for (const name of ['finalize', 'pay', 'void', 'refresh'] as const) expectInvalidTransition(await action(org, d.id, name));
    expectInvalidTransition(await remove(org, d.id));
    expectInvalidTransition(await call(org, 'PUT', `/v1/invoices/${d.id}`, { net_payment_term: 5 }));
    expect(ok<InvoiceResource>(await getInvoice(org, d.id)).status).toBe('paid');
    expect(await waitForEventTypes(stack.db, org.id, d.id, ['invoice.created', 'invoice.finalized', 'invoice.paid'])).toEqual([
      'invoice.created',
      'invoice.finalized',
      'invoice.paid',
    ]);
  });

  it('finalized: void; then void, pay, finalize and DELETE refused', async () => {
    const d = await draft();
    ok(await action(org, d.id, 'finalize'));
    const voided = ok<InvoiceResource>(await action(org, d.id, 'void'));
    expect(voided).toMatchObject({ status: 'voided', paid_at: null });
    expect(voided.voided_at).toMatch(ISO_MS_UTC);
    for (const name of ['void', 'pay', 'finalize', 'refresh'] as const) expectInvalidTransition(await action(org, d.id, name));
    expectInvalidTransition(await remove(org, d.id));
    expect(ok<InvoiceResource>(await getInvoice(org, d.id)).status).toBe('voided');
    expect(await settlementsOf(org, d.id)).toEqual([]);
    expect(await waitForEventTypes(stack.db, org.id, d.id, ['invoice.created', 'invoice.finalized', 'invoice.voided'])).toEqual([
      'invoice.created',
      'invoice.finalized',
      'invoice.voided',
    ]);
  });

  it('DELETE removes a draft: GET is 404, the list omits it, and every action on it is 404', async () => {
    const d = await draft();
    const deleted = ok<InvoiceResource>(await remove(org, d.id));
    expect(deleted.id).toBe(d.id);
    expectError(await getInvoice(org, d.id), 404, 'invoice_not_found');
    const list = ok<InvoiceResource[]>(await call(org, 'GET', '/v1/invoices?limit=1000'));
    expect(list.map((i) => i.id)).not.toContain(d.id);
    expect(
      ok<InvoiceResource[]>(await call(org, 'GET', `/v1/invoices?status=draft&customer_id=${customer.id}`)).map((i) => i.id),
    ).not.toContain(d.id);
    expectError(await action(org, d.id, 'finalize'), 404, 'invoice_not_found');
    expectError(await remove(org, d.id), 404, 'invoice_not_found');
    expectError(await call(org, 'PUT', `/v1/invoices/${d.id}`, { metadata: {} }), 404, 'invoice_not_found');
    expectError(await call(org, 'GET', `/v1/invoices/${d.id}/settlements`), 404, 'invoice_not_found');
  });
});

describe('a command reaching an invoice before its workflow', () => {
  it('pays a finalized invoice whose workflow is not started yet (started by the command, as its creation would)', async () => {
    const org = await newOrg({ invoice_grace_period: 0 });
    const customer = await newCustomer(org);
    const issued = await waitForInvoice(org, (await oneOff(org, customer.id, [{ description: 'Work', unit_price: '700' }])).id, [
      'finalized',
    ]);
    // The same invoice record under another id, as createInvoice leaves it between writing the
    // finalized record and starting its workflow.
    const record = (await stack.db.models.Invoice.findById(issued.id).lean())!;
    const id = randomUUID();
    await stack.db.models.Invoice.create({ ...record, _id: id, idempotency_key: `copy/${id}`, number: `${record.number}-COPY` });
    await expect(stack.temporal.client.workflow.getHandle(`invoice/${id}`).describe()).rejects.toThrow();

    const paid = ok<InvoiceResource>(await action(org, id, 'pay'));
    expect(paid).toMatchObject({ id, status: 'paid', payment_status: 'succeeded', total: s4(700) });
  });
});

describe('numbering', () => {
  it('drafts carry <PREFIX>-DRAFT-<first 8 hex digits of the id, lowercase as in the id>; finalization numbers <PREFIX>-000001, -000002 ... in finalization order, with no gap for a deleted draft', async () => {
    const org = await newOrg({ invoice_grace_period: 30 });
    const customer = await newCustomer(org);
    const line = [{ description: 'Item', unit_price: '100' }];
    const a = await oneOff(org, customer.id, line);
    const b = await oneOff(org, customer.id, line);
    const c = await oneOff(org, customer.id, line);
    const d = await oneOff(org, customer.id, line);
    for (const draft of [a, b, c, d]) {
      expect(draft.id).toMatch(UUID);
      expect(draft.number).toBe(`${org.prefix}-DRAFT-${draft.id.replace(/-/g, '').slice(0, 8)}`);
      expect(draft.number).toMatch(new RegExp(`^${org.prefix}-DRAFT-[0-9a-f]{8}$`));
      expect(draft.invoice_number).toBe(draft.number);
    }

    expect(ok<InvoiceResource>(await action(org, b.id, 'finalize')).number).toBe(`${org.prefix}-000001`);
    ok(await remove(org, c.id));
    expect(ok<InvoiceResource>(await action(org, a.id, 'finalize')).number).toBe(`${org.prefix}-000002`);
    expect(ok<InvoiceResource>(await action(org, d.id, 'finalize')).number).toBe(`${org.prefix}-000003`);

    // Another organization has its own sequence.
    const other = await newOrg({ invoice_grace_period: 30 });
    const otherCustomer = await newCustomer(other);
    const otherDraft = await oneOff(other, otherCustomer.id, line);
    expect(ok<InvoiceResource>(await action(other, otherDraft.id, 'finalize')).number).toBe(`${other.prefix}-000001`);
  });
});

describe('lists, fees, settlements, tenant isolation', () => {
  let org: TestOrganization & { prefix: string };
  let other: TestOrganization & { prefix: string };
  let c1: CustomerResource;
  let c2: CustomerResource;
  let draftInv: InvoiceResource; // c1, one_off, draft
  let finalizedInv: InvoiceResource; // c1, one_off, finalized
  let paidInv: InvoiceResource; // c2, add_on, paid
  let voidedInv: InvoiceResource; // c2, one_off, voided

  beforeAll(async () => {
    [org, other] = await Promise.all([newOrg({ invoice_grace_period: 30 }), newOrg({ invoice_grace_period: 30 })]);
    c1 = await newCustomer(org);
    c2 = await newCustomer(org);
    await createAddOn(org, 'setup', '700');
    // Created in this order, a little apart: the list is newest first.
    draftInv = await oneOff(org, c1.id, [{ description: 'Draft line', unit_price: '100' }]);
    await sleep(15);
    const f = await oneOff(org, c1.id, [
      { description: 'First', unit_price: '200' },
      { description: 'Second', unit_price: '300' },
    ]);
    await sleep(15);
    const p = ok<InvoiceResource>(await call(org, 'POST', '/v1/add_ons/apply', { add_on_code: 'setup', customer_id: c2.id }), 201);
    await sleep(15);
    const v = await oneOff(org, c2.id, [{ description: 'Void me', unit_price: '400' }]);
    finalizedInv = ok<InvoiceResource>(await action(org, f.id, 'finalize'));
    ok(await action(org, p.id, 'finalize'));
    paidInv = ok<InvoiceResource>(await action(org, p.id, 'pay'));
    ok(await action(org, v.id, 'finalize'));
    voidedInv = ok<InvoiceResource>(await action(org, v.id, 'void'));
  });

  async function listIds(query: string, owner: TestOrganization = org): Promise<{ ids: string[]; total: string | undefined }> {
    const res = await call(owner, 'GET', `/v1/invoices${query}`);
    const body = ok<InvoiceResource[]>(res);
    return { ids: body.map((i) => i.id), total: res.headers['x-total-count'] as string | undefined };
  }

  it('GET /v1/invoices lists newest first with X-Total-Count, and filters by customer, status, type, payment status and issuing dates', async () => {
    expect(await listIds('')).toEqual({ ids: [voidedInv.id, paidInv.id, finalizedInv.id, draftInv.id], total: '4' });
    expect(await listIds('?limit=1&skip=1')).toEqual({ ids: [paidInv.id], total: '4' });
    expect(await listIds(`?customer_id=${c1.id}`)).toEqual({ ids: [finalizedInv.id, draftInv.id], total: '2' });
    expect(await listIds('?status=draft')).toEqual({ ids: [draftInv.id], total: '1' });
    expect(await listIds('?status=finalized')).toEqual({ ids: [finalizedInv.id], total: '1' });
    expect(await listIds('?status=paid')).toEqual({ ids: [paidInv.id], total: '1' });
    expect(await listIds('?status=voided')).toEqual({ ids: [voidedInv.id], total: '1' });
    expect(await listIds('?invoice_type=add_on')).toEqual({ ids: [paidInv.id], total: '1' });
    expect(await listIds('?invoice_type=one_off')).toEqual({ ids: [voidedInv.id, finalizedInv.id, draftInv.id], total: '3' });
    expect(await listIds('?payment_status=succeeded')).toEqual({ ids: [paidInv.id], total: '1' });
    expect(await listIds('?payment_status=pending')).toEqual({ ids: [voidedInv.id, finalizedInv.id, draftInv.id], total: '3' });
    expect(await listIds(`?customer_id=${c2.id}&status=paid`)).toEqual({ ids: [paidInv.id], total: '1' });

    // Issuing dates: drafts have none; the finalized ones have the day they were finalized.
    const issued = [voidedInv, paidInv, finalizedInv];
    for (const i of issued) expect(i.issuing_date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const day = finalizedInv.issuing_date!;
    const shift = (iso: string, days: number) => {
      const d = new Date(`${iso}T00:00:00.000Z`);
      d.setUTCDate(d.getUTCDate() + days);
      return d.toISOString().slice(0, 10);
    };
    const expected = (from: string | null, to: string | null) =>
      issued.filter((i) => (from === null || i.issuing_date! >= from) && (to === null || i.issuing_date! <= to)).map((i) => i.id);
    expect((await listIds(`?issuing_date_from=${day}`)).ids).toEqual(expected(day, null));
    expect((await listIds(`?issuing_date_from=${day}`)).ids).toContain(finalizedInv.id);
    expect((await listIds(`?issuing_date_to=${day}`)).ids).toEqual(expected(null, day));
    expect(await listIds(`?issuing_date_from=${day}&issuing_date_to=${day}`)).toEqual({
      ids: expected(day, day),
      total: String(expected(day, day).length),
    });
    expect(await listIds(`?issuing_date_to=${shift(day, -1)}`)).toEqual({
      ids: expected(null, shift(day, -1)),
      total: String(expected(null, shift(day, -1)).length),
    });
    expect((await listIds(`?issuing_date_from=${shift(day, 2)}`)).ids).toEqual([]);
    expectValidationError(await call(org, 'GET', '/v1/invoices?issuing_date_from=21-11-2026'), 'issuing_date_from');
    expectValidationError(await call(org, 'GET', '/v1/invoices?status=open'), 'status');
  });

  it('GET /v1/fees and /v1/fees/{id} with filters', async () => {
    const invoiceFees = finalizedInv.fees!;
    expect(invoiceFees).toHaveLength(2);
    const byInvoice = await call(org, 'GET', `/v1/fees?invoice_id=${finalizedInv.id}`);
    const rows = ok<FeeResource[]>(byInvoice);
    expect(byInvoice.headers['x-total-count']).toBe('2');
    expect(rows.map((f) => f.id).sort()).toEqual(invoiceFees.map((f) => f.id).sort());
    expect(rows.map((f) => f.amount_cents).sort()).toEqual([s4(200), s4(300)]);

    const byCustomer = await call(org, 'GET', `/v1/fees?customer_id=${c2.id}`);
    expect(
      ok<FeeResource[]>(byCustomer)
        .map((f) => f.invoice_id)
        .sort(),
    ).toEqual([paidInv.id, voidedInv.id].sort());
    expect(byCustomer.headers['x-total-count']).toBe('2');
    const all = await call(org, 'GET', '/v1/fees?fee_type=add_on');
    expect(all.headers['x-total-count']).toBe('5');
    const charges = await call(org, 'GET', '/v1/fees?fee_type=charge');
    expect(ok<FeeResource[]>(charges)).toEqual([]);
    expect(charges.headers['x-total-count']).toBe('0');
    expect(
      ok<FeeResource[]>(await call(org, 'GET', `/v1/fees?invoice_id=${paidInv.id}&fee_type=add_on`)).map((f) => f.add_on_id),
    ).toHaveLength(1);

    const fee = ok<FeeResource>(await call(org, 'GET', `/v1/fees/${invoiceFees[0]!.id}`));
    expect(fee).toEqual(invoiceFees[0]);
    expect(fee).toMatchObject({
      invoice_id: finalizedInv.id,
      customer_id: c1.id,
      fee_type: 'add_on',
      amount_cents: s4(200),
      total_amount_cents: s4(200),
    });
    expect(fee.id).toMatch(UUID);
    expectError(await call(org, 'GET', `/v1/fees/${randomUUID()}`), 404, 'fee_not_found');
  });

  it('GET /v1/invoices/{id}/settlements lists the payments', async () => {
    const res = await call(org, 'GET', `/v1/invoices/${paidInv.id}/settlements`);
    const rows = ok<SettlementResource[]>(res);
    expect(res.headers['x-total-count']).toBe('1');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ invoice_id: paidInv.id, settlement_type: 'payment', amount_cents: s4(700) });
    expect(rows[0]!.created_at).toMatch(ISO_MS_UTC);
    expect(await settlementsOf(org, finalizedInv.id)).toEqual([]);
  });

  it("another organization's invoices and fees are 404 and never listed", async () => {
    const feeId = finalizedInv.fees![0]!.id;
    expectError(await getInvoice(other, finalizedInv.id), 404, 'invoice_not_found');
    expectError(await call(other, 'GET', `/v1/fees/${feeId}`), 404, 'fee_not_found');
    expectError(await call(other, 'GET', `/v1/invoices/${paidInv.id}/settlements`), 404, 'invoice_not_found');
    expectError(await action(other, draftInv.id, 'finalize'), 404, 'invoice_not_found');
    expectError(await action(other, finalizedInv.id, 'pay'), 404, 'invoice_not_found');
    expectError(await action(other, finalizedInv.id, 'void'), 404, 'invoice_not_found');
    expectError(await remove(other, draftInv.id), 404, 'invoice_not_found');
    expectError(await call(other, 'PUT', `/v1/invoices/${draftInv.id}`, { metadata: { x: 1 } }), 404, 'invoice_not_found');
    expect(await listIds('', other)).toEqual({ ids: [], total: '0' });
    expect(ok<FeeResource[]>(await call(other, 'GET', `/v1/fees?invoice_id=${finalizedInv.id}`))).toEqual([]);
    // Nothing changed in the owner's organization.
    expect(ok<InvoiceResource>(await getInvoice(org, draftInv.id))).toMatchObject({ status: 'draft', metadata: {} });
    expect(ok<InvoiceResource>(await getInvoice(org, finalizedInv.id)).status).toBe('finalized');
    // Nor can the other organization bill this organization's customer or add-on.
    expectError(
      await call(other, 'POST', '/v1/invoices/one_off', { customer_id: c1.id, line_items: [{ description: 'x', unit_price: '1' }] }),
      404,
      'customer_not_found',
    );
    const otherCustomer = await newCustomer(other);
    expectError(
      await call(other, 'POST', '/v1/add_ons/apply', { add_on_code: 'setup', customer_id: otherCustomer.id }),
      404,
      'add_on_not_found',
    );
  });

  it('the Idempotency-Key header makes one-off creation idempotent', async () => {
    const key = randomUUID();
    const body = { customer_id: c1.id, line_items: [{ description: 'Once', unit_price: '50' }] };
    const first = ok<InvoiceResource>(await call(org, 'POST', '/v1/invoices/one_off', body, { 'idempotency-key': key }), 201);
    const second = ok<InvoiceResource>(await call(org, 'POST', '/v1/invoices/one_off', body, { 'idempotency-key': key }), 201);
    expect(second.id).toBe(first.id);
    expect((await listIds(`?customer_id=${c1.id}&status=draft`)).ids.filter((id) => id === first.id)).toHaveLength(1);
    ok(await remove(org, first.id));
  });
});

describe('validation of one-off invoices and add_ons/apply', () => {
  let org: TestOrganization & { prefix: string };
  let customer: CustomerResource;

  beforeAll(async () => {
    org = await newOrg({ invoice_grace_period: 30 });
    customer = await newCustomer(org);
    await createAddOn(org, 'known', '100');
  });

  const post = (body: unknown) => call(org, 'POST', '/v1/invoices/one_off', body);
  const count = async () => (await call(org, 'GET', '/v1/invoices')).headers['x-total-count'];

  it('422 on line items without an add-on or without both a description and a unit price, unknown fields, 5 fractional digits', async () => {
    const before = await count();
    expectValidationError(await post({ customer_id: customer.id, line_items: [{ quantity: '2' }] }), 'line_items.0');
    expectValidationError(await post({ customer_id: customer.id, line_items: [{ description: 'No price' }] }), 'line_items.0');
    expectValidationError(await post({ customer_id: customer.id, line_items: [{ unit_price: '100' }] }), 'line_items.0');
    expectValidationError(
      await post({ customer_id: customer.id, line_items: [{ description: 'ok', unit_price: '1' }, { quantity: '1' }] }),
      'line_items.1',
    );
    expectUnknownFields(await post({ customer_id: customer.id, line_items: [{ description: 'x', unit_price: '100', colour: 'red' }] }), [
      'colour',
    ]);
    expectUnknownFields(await post({ customer_id: customer.id, line_items: [{ description: 'x', unit_price: '100' }], discount: 5 }), [
      'discount',
    ]);
    expectValidationError(
      await post({ customer_id: customer.id, line_items: [{ description: 'x', unit_price: '1.12345' }] }),
      'line_items.0.unit_price',
    );
    expectValidationError(
      await post({ customer_id: customer.id, line_items: [{ description: 'x', unit_price: '1', quantity: '0.00001' }] }),
      'line_items.0.quantity',
    );
    expectValidationError(
      await post({ customer_id: customer.id, line_items: [{ description: 'x', unit_price: '-1' }] }),
      'line_items.0.unit_price',
    );
    expectValidationError(await post({ customer_id: customer.id, line_items: [] }), 'line_items');
    expectValidationError(await post({ line_items: [{ description: 'x', unit_price: '1' }] }), 'customer_id');
    expect(await count()).toBe(before);
  });

  it('404 on an unknown add-on or customer', async () => {
    const before = await count();
    expectError(await post({ customer_id: customer.id, line_items: [{ add_on_code: 'nope' }] }), 404, 'add_on_not_found');
    expectError(await post({ customer_id: randomUUID(), line_items: [{ description: 'x', unit_price: '1' }] }), 404, 'customer_not_found');
    expectError(await call(org, 'POST', '/v1/add_ons/apply', { add_on_code: 'nope', customer_id: customer.id }), 404, 'add_on_not_found');
    expectError(await call(org, 'POST', '/v1/add_ons/apply', { add_on_code: 'known', customer_id: 'nobody' }), 404, 'customer_not_found');
    expectValidationError(
      await call(org, 'POST', '/v1/add_ons/apply', { add_on_code: 'known', customer_id: customer.id, amount_cents: '1.00001' }),
      'amount_cents',
    );
    expectUnknownFields(await call(org, 'POST', '/v1/add_ons/apply', { add_on_code: 'known', customer_id: customer.id, quantity: 2 }), [
      'quantity',
    ]);
    expect(await count()).toBe(before);
  });
});
