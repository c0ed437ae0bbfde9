// Tenant isolation across the API (issue 12): two organizations use the same Idempotency-Key and
// the same codes, external ids and transaction ids for everything that takes one: customers,
// billable metrics, plans (and their commitments and usage thresholds), add-ons, taxes, coupons,
// wallets, subscriptions, events, one-off invoices, credit notes, webhook endpoints on one URL,
// test clocks. Every key a tenant chooses is unique within its organization only, and every lookup
// by one is scoped to the organization asking: each organization gets its own resource (its own
// id, customer and amounts), finds its own by the shared code, and gets 404 for the other's ids.
//
// Organization A builds its world first, then B builds the same one with the same keys, so each
// of B's creations meets A's existing key. A worker on the run's dev server runs the workflows
// (subscriptions' first steps, invoice finalization, webhook deliveries to a local receiver);
// drafts wait 30 days for finalization, so amounts stay exactly what each step made them.
import Decimal from 'decimal.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddOnResource } from '../../src/resources/add-on';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CommitmentResource } from '../../src/resources/commitment';
import type { AppliedCouponResource, CouponResource } from '../../src/resources/coupon';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { EventResource } from '../../src/resources/event';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { AppliedTaxResource, TaxResource } from '../../src/resources/tax';
import type { TestClockResource } from '../../src/resources/test-clock';
import type { UsageThresholdResource } from '../../src/resources/usage-threshold';
import type { WalletResource } from '../../src/resources/wallet';
import type { WebhookResource } from '../../src/resources/webhook';
import type { WebhookEndpointResource, WebhookEndpointWithSecret } from '../../src/resources/webhook-endpoint';
import { verifyWebhookSignature } from '../../src/webhooks/signature';
import { eventually, expectError, injectAs, ok, type Method } from '../support/http';
import { startReceiver, type Receiver } from '../support/receiver';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let receiver: Receiver;

beforeAll(async () => {
  [stack, receiver] = await Promise.all([createTestStack(), startReceiver()]);
  worker = await startStackWorker(stack);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await stack?.close();
});

// ---------------------------------------------------------------------------------------------
// What both organizations choose alike, and what differs between them.

const SHARED = {
  idempotencyKey: 'order-42',
  customer: 'cust-shared',
  metric: 'api_calls',
  plan: 'pro',
  addOn: 'setup',
  tax: 'vat',
  customerTax: 'local',
  coupon: 'welcome',
  wallet: 'main',
  subscription: 'sub-shared',
  transaction: 'tx-shared',
  clockName: 'clock',
  webhookPath: '/hooks/shared',
} as const;

interface Terms {
  label: string;
  taxRate: string;
  addOnCents: number;
  planCents: number;
  commitmentCents: string;
  couponCents: string;
  walletCredits: string;
}

const TERMS_A: Terms = {
  label: 'A',
  taxRate: '0.2',
  addOnCents: 500,
  planCents: 1000,
  commitmentCents: '3000',
  couponCents: '100',
  walletCredits: '10',
};
const TERMS_B: Terms = {
  label: 'B',
  taxRate: '0.1',
  addOnCents: 700,
  planCents: 2000,
  commitmentCents: '5000',
  couponCents: '200',
  walletCredits: '25',
};

/** The one-off invoice both organizations order, under the shared Idempotency-Key. */
const ONE_OFF_ORDER = { customer_id: SHARED.customer, line_items: [{ add_on_code: SHARED.addOn }] };
const KEYED = { 'idempotency-key': SHARED.idempotencyKey };

/** Decimal(12,4) on the wire. */
const s4 = (v: Decimal.Value) => new Decimal(v).toFixed(4);

/** An invoice of `units` of the organization's add-on under its organization-wide tax. */
function expectedAmounts(terms: Terms, units: number) {
  const fees = new Decimal(terms.addOnCents).times(units);
  const tax = fees.times(terms.taxRate);
  return { fees_amount_cents: s4(fees), tax_amount: s4(tax), total: s4(fees.plus(tax)) };
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers.

const call = (org: TestOrganization, method: Method, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
  injectAs(stack.app, org, method, url, payload, headers);

// ---------------------------------------------------------------------------------------------
// One organization's world, built through the API with the shared keys.

interface World {
  terms: Terms;
  org: TestOrganization;
  endpoint: WebhookEndpointWithSecret;
  clock: TestClockResource;
  tax: TaxResource;
  customer: CustomerResource;
  metric: BillableMetricResource;
  plan: PlanResource;
  commitment: CommitmentResource;
  threshold: UsageThresholdResource;
  addOn: AddOnResource;
  oneOff: InvoiceResource;
  oneOffReplay: InvoiceResource;
  addOnInvoice: InvoiceResource;
  finalized: InvoiceResource;
  creditNote: CreditNoteResource;
  coupon: CouponResource;
  appliedCoupon: AppliedCouponResource;
  customerTax: TaxResource;
  appliedTax: AppliedTaxResource;
  wallet: WalletResource;
  subscription: SubscriptionResource;
  event: EventResource;
}

async function buildWorld(terms: Terms): Promise<World> {
  const org = await createOrganization(stack.app, {
    name: `Tenant ${terms.label}`,
    timezone: 'UTC',
    document_number_prefix: `TEN${terms.label}`,
    invoice_grace_period: 30,
  });
  const post = <T>(url: string, body: unknown, headers: Record<string, string> = {}) =>
    call(org, 'POST', url, body, headers).then((res) => ok<T>(res, 201));

  const endpoint = await post<WebhookEndpointWithSecret>('/v1/webhook_endpoints', { url: receiver.url(SHARED.webhookPath) });
  const clock = await post<TestClockResource>('/v1/test_clocks', { name: SHARED.clockName, frozen_time: '2031-01-01T00:00:00Z' });
  const tax = await post<TaxResource>('/v1/taxes', {
    code: SHARED.tax,
    name: `VAT ${terms.label}`,
    rate: terms.taxRate,
    applied_to_organization: true,
  });
  const customer = await post<CustomerResource>('/v1/customers', {
    external_id: SHARED.customer,
    name: `Customer of ${terms.label}`,
    currency: 'USD',
  });
  const metric = await post<BillableMetricResource>('/v1/billable_metrics', {
    code: SHARED.metric,
    name: `Calls ${terms.label}`,
    aggregation_type: 'count',
  });
  const plan = await post<PlanResource>('/v1/plans', {
    code: SHARED.plan,
    name: `Pro ${terms.label}`,
    interval: 'monthly',
    amount_cents: terms.planCents,
    currency: 'USD',
    charges: [{ billable_metric_id: SHARED.metric, charge_model: 'standard', properties: { amount: '1' } }],
  });
  const commitment = await post<CommitmentResource>(`/v1/plans/${SHARED.plan}/commitments`, { amount_cents: terms.commitmentCents });
  const threshold = await post<UsageThresholdResource>(`/v1/plans/${SHARED.plan}/usage_thresholds`, { amount_cents: '100000' });
  const addOn = await post<AddOnResource>('/v1/add_ons', {
    code: SHARED.addOn,
    name: `Setup ${terms.label}`,
    amount_cents: terms.addOnCents,
  });

  const oneOff = await post<InvoiceResource>('/v1/invoices/one_off', ONE_OFF_ORDER, KEYED);
  const oneOffReplay = await post<InvoiceResource>('/v1/invoices/one_off', ONE_OFF_ORDER, KEYED);
  const addOnInvoice = await post<InvoiceResource>('/v1/add_ons/apply', {
    add_on_code: SHARED.addOn,
    customer_id: SHARED.customer,
    units: '2',
  });
  const finalized = ok<InvoiceResource>(await call(org, 'POST', `/v1/invoices/${addOnInvoice.id}/finalize`));
  const creditNote = await post<CreditNoteResource>('/v1/credit_notes', {
    invoice_id: addOnInvoice.id,
    customer_id: SHARED.customer,
    reason: 'other',
    items: [{ fee_id: addOnInvoice.fees![0]!.id, amount_cents: 100 }],
  });

  const coupon = await post<CouponResource>('/v1/coupons', {
    code: SHARED.coupon,
    name: `Welcome ${terms.label}`,
    coupon_type: 'fixed_amount',
    amount_cents: terms.couponCents,
    amount_currency: 'USD',
    reusable: false,
  });
  const appliedCoupon = await post<AppliedCouponResource>('/v1/coupons/apply', {
    coupon_code: SHARED.coupon,
    customer_id: SHARED.customer,
  });
  const customerTax = await post<TaxResource>('/v1/taxes', { code: SHARED.customerTax, name: `Local ${terms.label}`, rate: '0.05' });
  const appliedTax = await post<AppliedTaxResource>('/v1/taxes/apply', {
    tax_code: SHARED.customerTax,
    taxable_type: 'customer',
    taxable_id: SHARED.customer,
  });
  const wallet = await post<WalletResource>('/v1/wallets', {
    customer_id: SHARED.customer,
    code: SHARED.wallet,
    initial_granted_credits: terms.walletCredits,
  });
  const subscription = await post<SubscriptionResource>('/v1/subscriptions', {
    external_id: SHARED.subscription,
    customer_id: SHARED.customer,
    plan_id: SHARED.plan,
  });
  const event = await post<EventResource>('/v1/events', {
    transaction_id: SHARED.transaction,
    external_customer_id: SHARED.customer,
    code: SHARED.metric,
  });

  return {
    terms,
    org,
    endpoint,
    clock,
    tax,
    customer,
    metric,
    plan,
    commitment,
    threshold,
    addOn,
    oneOff,
    oneOffReplay,
    addOnInvoice,
    finalized,
    creditNote,
    coupon,
    appliedCoupon,
    customerTax,
    appliedTax,
    wallet,
    subscription,
    event,
  };
}

let a: World;
let b: World;

beforeAll(async () => {
  a = await buildWorld(TERMS_A);
  b = await buildWorld(TERMS_B);
}, 120_000);

/** Both organizations, each with the other, for assertions that must hold both ways. */
const pairs = (): [World, World][] => [
  [a, b],
  [b, a],
];

// ---------------------------------------------------------------------------------------------

describe('one-off invoices with one Idempotency-Key', () => {
  it('each organization gets its own invoice: its own id, customer, tax and amounts', () => {
    expect(b.oneOff.id).not.toBe(a.oneOff.id);
    for (const [own] of pairs()) {
      expect(own.oneOff).toMatchObject({
        organization_id: own.org.id,
        customer_id: own.customer.id,
        invoice_type: 'one_off',
        status: 'draft',
        ...expectedAmounts(own.terms, 1),
      });
      expect(own.oneOff.applied_taxes.map((t) => t.tax_id)).toEqual([own.tax.id]);
      expect(own.oneOff.fees!.map((f) => ({ add_on_id: f.add_on_id, customer_id: f.customer_id }))).toEqual([
        { add_on_id: own.addOn.id, customer_id: own.customer.id },
      ]);
    }
  });

  it("a repeat with the key returns the organization's own invoice, never the other's", async () => {
    for (const [own] of pairs()) {
      expect(own.oneOffReplay.id).toBe(own.oneOff.id);
      const again = ok<InvoiceResource>(await call(own.org, 'POST', '/v1/invoices/one_off', ONE_OFF_ORDER, KEYED), 201);
      expect(again).toMatchObject({
        id: own.oneOff.id,
        organization_id: own.org.id,
        customer_id: own.customer.id,
        total: own.oneOff.total,
      });
    }
  });

  it("each organization lists and reads its own invoices only; the other's are 404", async () => {
    for (const [own, other] of pairs()) {
      const listed = ok<InvoiceResource[]>(await call(own.org, 'GET', '/v1/invoices'));
      expect(listed.map((i) => i.id).sort()).toEqual([own.oneOff.id, own.addOnInvoice.id].sort());
      expect(ok<InvoiceResource>(await call(own.org, 'GET', `/v1/invoices/${own.oneOff.id}`)).customer_id).toBe(own.customer.id);
      expectError(await call(own.org, 'GET', `/v1/invoices/${other.oneOff.id}`), 404, 'invoice_not_found');
      expectError(await call(own.org, 'GET', `/v1/fees/${other.oneOff.fees![0]!.id}`), 404, 'fee_not_found');
      expectError(await call(own.org, 'POST', `/v1/invoices/${other.oneOff.id}/finalize`), 404, 'invoice_not_found');
    }
    // The refusals changed nothing: the one-off invoices are still drafts.
    for (const [own] of pairs())
      expect(ok<InvoiceResource>(await call(own.org, 'GET', `/v1/invoices/${own.oneOff.id}`)).status).toBe('draft');
  });
});

describe('invoices of add-ons and credit notes', () => {
  it("add_ons/apply by the shared code bills the organization's own add-on to its own customer", () => {
    expect(b.addOnInvoice.id).not.toBe(a.addOnInvoice.id);
    for (const [own] of pairs()) {
      expect(own.addOnInvoice).toMatchObject({
        organization_id: own.org.id,
        customer_id: own.customer.id,
        invoice_type: 'add_on',
        ...expectedAmounts(own.terms, 2),
      });
      expect(own.addOnInvoice.fees!.map((f) => f.add_on_id)).toEqual([own.addOn.id]);
    }
  });

  it("finalization numbers from each organization's own sequence and takes none of the other's credits", () => {
    for (const [own] of pairs()) {
      expect(own.finalized).toMatchObject({
        id: own.addOnInvoice.id,
        status: 'finalized',
        number: `TEN${own.terms.label}-000001`,
        credit_notes_amount_cents: s4(0),
        prepaid_credit_amount: s4(0),
        total: expectedAmounts(own.terms, 2).total,
      });
    }
  });

  it('credit notes are numbered per organization: both first notes of the day are 0001', () => {
    expect(b.creditNote.id).not.toBe(a.creditNote.id);
    for (const [own] of pairs()) {
      expect(own.creditNote).toMatchObject({
        organization_id: own.org.id,
        customer_id: own.customer.id,
        invoice_id: own.addOnInvoice.id,
        sequential_id: 1,
        credit_amount_cents: s4(100),
        items: [expect.objectContaining({ fee_id: own.addOnInvoice.fees![0]!.id })],
      });
      expect(own.creditNote.number).toMatch(/^CN-\d{8}-0001$/);
    }
  });

  it("the other organization's invoices, fees and credit notes cannot be credited or read", async () => {
    for (const [own, other] of pairs()) {
      expectError(await call(own.org, 'GET', `/v1/credit_notes/${other.creditNote.id}`), 404, 'credit_note_not_found');
      const onOthersInvoice = {
        invoice_id: other.addOnInvoice.id,
        reason: 'other',
        items: [{ fee_id: other.addOnInvoice.fees![0]!.id, amount_cents: 1 }],
      };
      expectError(await call(own.org, 'POST', '/v1/credit_notes', onOthersInvoice), 404, 'invoice_not_found');
      const othersFee = {
        invoice_id: own.addOnInvoice.id,
        reason: 'other',
        items: [{ fee_id: other.addOnInvoice.fees![0]!.id, amount_cents: 1 }],
      };
      expectError(await call(own.org, 'POST', '/v1/credit_notes', othersFee), 404, 'fee_not_found');
      expect(ok<CreditNoteResource[]>(await call(own.org, 'GET', '/v1/credit_notes')).map((n) => n.id)).toEqual([own.creditNote.id]);
    }
    // Nothing was credited on A's fee beyond A's own note.
    const fee = ok<{ credited_amount_cents: string }>(await call(a.org, 'GET', `/v1/fees/${a.addOnInvoice.fees![0]!.id}`));
    expect(fee.credited_amount_cents).toBe(s4(100));
  });
});

describe('catalog codes and customer external ids', () => {
  it('the shared code finds each organization its own metric, plan, add-on, taxes, coupon and customer', async () => {
    const byCode = [
      ['/v1/billable_metrics', SHARED.metric, (w: World) => w.metric.id],
      ['/v1/plans', SHARED.plan, (w: World) => w.plan.id],
      ['/v1/add_ons', SHARED.addOn, (w: World) => w.addOn.id],
      ['/v1/taxes', SHARED.tax, (w: World) => w.tax.id],
      ['/v1/taxes', SHARED.customerTax, (w: World) => w.customerTax.id],
      ['/v1/coupons', SHARED.coupon, (w: World) => w.coupon.id],
      ['/v1/customers', SHARED.customer, (w: World) => w.customer.id],
    ] as const;
    for (const [path, code, idOf] of byCode) {
      expect(idOf(b)).not.toBe(idOf(a));
      for (const [own] of pairs()) {
        const found = ok<{ id: string; organization_id: string }>(await call(own.org, 'GET', `${path}/${code}`));
        expect({ path, id: found.id, organization_id: found.organization_id }).toEqual({
          path,
          id: idOf(own),
          organization_id: own.org.id,
        });
      }
    }
  });

  it("each organization's resources carry its own terms and point at its own catalog", () => {
    for (const [own] of pairs()) {
      expect(own.plan).toMatchObject({ organization_id: own.org.id, amount_cents: own.terms.planCents });
      expect(own.plan.charges.map((c) => c.billable_metric_id)).toEqual([own.metric.id]);
      expect(own.addOn).toMatchObject({ organization_id: own.org.id, amount_cents: s4(own.terms.addOnCents) });
      expect(own.coupon).toMatchObject({ organization_id: own.org.id, amount_cents: s4(own.terms.couponCents) });
      expect(own.customer).toMatchObject({ organization_id: own.org.id, name: `Customer of ${own.terms.label}` });
    }
  });

  it("the other organization's ids are 404 by id", async () => {
    for (const [own, other] of pairs()) {
      expectError(await call(own.org, 'GET', `/v1/billable_metrics/${other.metric.id}`), 404, 'billable_metric_not_found');
      expectError(await call(own.org, 'GET', `/v1/plans/${other.plan.id}`), 404, 'plan_not_found');
      expectError(await call(own.org, 'GET', `/v1/add_ons/${other.addOn.id}`), 404, 'add_on_not_found');
      expectError(await call(own.org, 'GET', `/v1/taxes/${other.tax.id}`), 404, 'tax_not_found');
      expectError(await call(own.org, 'GET', `/v1/coupons/${other.coupon.id}`), 404, 'coupon_not_found');
      expectError(await call(own.org, 'GET', `/v1/customers/${other.customer.id}`), 404, 'customer_not_found');
      // Nor used: the other's customer is not billed, its add-on not applied.
      expectError(
        await call(own.org, 'POST', '/v1/invoices/one_off', {
          customer_id: other.customer.id,
          line_items: [{ add_on_code: SHARED.addOn }],
        }),
        404,
        'customer_not_found',
      );
      expectError(
        await call(own.org, 'POST', '/v1/add_ons/apply', { add_on_code: other.addOn.id, customer_id: SHARED.customer }),
        404,
        'add_on_not_found',
      );
    }
  });
});

describe('commitments and usage thresholds of plans with one code', () => {
  it("each organization's plan code reaches its own plan's commitment and thresholds", async () => {
    expect(b.commitment.id).not.toBe(a.commitment.id);
    expect(b.threshold.id).not.toBe(a.threshold.id);
    for (const [own] of pairs()) {
      expect(own.commitment).toMatchObject({
        organization_id: own.org.id,
        plan_id: own.plan.id,
        amount_cents: s4(own.terms.commitmentCents),
      });
      expect(own.threshold).toMatchObject({ organization_id: own.org.id, plan_id: own.plan.id, amount_cents: s4(100000) });
      expect(ok<CommitmentResource[]>(await call(own.org, 'GET', `/v1/plans/${SHARED.plan}/commitments`)).map((c) => c.id)).toEqual([
        own.commitment.id,
      ]);
      expect(
        ok<UsageThresholdResource[]>(await call(own.org, 'GET', `/v1/plans/${SHARED.plan}/usage_thresholds`)).map((t) => t.id),
      ).toEqual([own.threshold.id]);
    }
  });

  it("the other organization's plan, commitment and threshold are 404", async () => {
    for (const [own, other] of pairs()) {
      expectError(await call(own.org, 'GET', `/v1/plans/${other.plan.id}/commitments`), 404, 'plan_not_found');
      expectError(await call(own.org, 'GET', `/v1/plans/${other.plan.id}/usage_thresholds`), 404, 'plan_not_found');
      expectError(await call(own.org, 'PUT', `/v1/commitments/${other.commitment.id}`, { amount_cents: '1' }), 404, 'commitment_not_found');
      expectError(await call(own.org, 'DELETE', `/v1/usage_thresholds/${other.threshold.id}`), 404, 'usage_threshold_not_found');
    }
    expect(ok<CommitmentResource[]>(await call(a.org, 'GET', `/v1/plans/${SHARED.plan}/commitments`))[0]!.amount_cents).toBe(
      s4(TERMS_A.commitmentCents),
    );
  });
});

describe('coupons and taxes applied by code to the customer with one external_id', () => {
  it("each organization's coupon goes to its own customer (a coupon that is not reusable, in both)", () => {
    expect(b.appliedCoupon.id).not.toBe(a.appliedCoupon.id);
    for (const [own] of pairs()) {
      expect(own.appliedCoupon).toMatchObject({
        organization_id: own.org.id,
        coupon_id: own.coupon.id,
        customer_id: own.customer.id,
        amount_cents: s4(own.terms.couponCents),
        status: 'active',
      });
    }
  });

  it("each organization's tax is applied to its own customer", async () => {
    for (const [own] of pairs()) {
      expect(own.appliedTax).toMatchObject({ tax_id: own.customerTax.id, taxable_type: 'customer', taxable_id: own.customer.id });
      const listed = ok<AppliedTaxResource[]>(
        await call(own.org, 'GET', `/v1/taxes/applied?taxable_type=customer&taxable_id=${SHARED.customer}`),
      );
      expect(listed.map((t) => t.id)).toEqual([own.appliedTax.id]);
    }
  });

  it("the other organization's applications are 404 and listed nowhere", async () => {
    for (const [own, other] of pairs()) {
      const listed = ok<AppliedCouponResource[]>(await call(own.org, 'GET', `/v1/customers/${SHARED.customer}/applied_coupons`));
      expect(listed.map((c) => c.id)).toEqual([own.appliedCoupon.id]);
      expectError(await call(own.org, 'GET', `/v1/customers/${other.customer.id}/applied_coupons`), 404, 'customer_not_found');
      expectError(await call(own.org, 'DELETE', `/v1/coupons/applied/${other.appliedCoupon.id}`), 404, 'applied_coupon_not_found');
      expectError(await call(own.org, 'DELETE', `/v1/taxes/applied/${other.appliedTax.id}`), 404, 'applied_tax_not_found');
      expectError(
        await call(own.org, 'POST', '/v1/coupons/apply', { coupon_code: other.coupon.id, customer_id: SHARED.customer }),
        404,
        'coupon_not_found',
      );
    }
    expect(
      ok<AppliedCouponResource[]>(await call(a.org, 'GET', `/v1/customers/${SHARED.customer}/applied_coupons?status=active`)).map(
        (c) => c.id,
      ),
    ).toEqual([a.appliedCoupon.id]);
  });
});

describe('wallets with one code', () => {
  it("each organization's wallet is its own customer's, with its own credits", async () => {
    expect(b.wallet.id).not.toBe(a.wallet.id);
    for (const [own] of pairs()) {
      expect(own.wallet).toMatchObject({
        organization_id: own.org.id,
        customer_id: own.customer.id,
        code: SHARED.wallet,
        credits_balance: s4(own.terms.walletCredits),
      });
      const listed = ok<WalletResource[]>(await call(own.org, 'GET', `/v1/wallets?customer_id=${SHARED.customer}`));
      expect(listed.map((w) => w.id)).toEqual([own.wallet.id]);
    }
  });

  it("the other organization's wallet is 404, and its balance cannot be touched", async () => {
    for (const [own, other] of pairs()) {
      expectError(await call(own.org, 'GET', `/v1/wallets/${other.wallet.id}`), 404, 'wallet_not_found');
      expectError(await call(own.org, 'GET', `/v1/wallets/${other.wallet.id}/transactions`), 404, 'wallet_not_found');
      expectError(await call(own.org, 'POST', `/v1/wallets/${other.wallet.id}/top_up`, { credits: '1000' }), 404, 'wallet_not_found');
      expectError(await call(own.org, 'PUT', `/v1/wallets/${other.wallet.id}`, { name: 'taken' }), 404, 'wallet_not_found');
    }
    for (const [own] of pairs()) {
      expect(ok<WalletResource>(await call(own.org, 'GET', `/v1/wallets/${own.wallet.id}`))).toMatchObject({
        name: null,
        credits_balance: s4(own.terms.walletCredits),
      });
    }
  });
});

describe('subscriptions with one external_id, events with one transaction_id', () => {
  it("each organization's subscription is its own customer's on its own plan", async () => {
    expect(b.subscription.id).not.toBe(a.subscription.id);
    for (const [own] of pairs()) {
      expect(own.subscription).toMatchObject({
        organization_id: own.org.id,
        external_id: SHARED.subscription,
        customer_id: own.customer.id,
        plan_id: own.plan.id,
        status: 'active',
      });
      expect(ok<SubscriptionResource>(await call(own.org, 'GET', `/v1/subscriptions/${SHARED.subscription}`)).id).toBe(own.subscription.id);
    }
  });

  it("each organization's event is its own, attributed to its own customer, metric and subscription", async () => {
    expect(b.event.id).not.toBe(a.event.id);
    for (const [own] of pairs()) {
      expect(own.event).toMatchObject({
        transaction_id: SHARED.transaction,
        customer_id: own.customer.id,
        billable_metric_id: own.metric.id,
        subscription_ids: [own.subscription.id],
      });
      expect(ok<EventResource>(await call(own.org, 'GET', `/v1/events/${SHARED.transaction}`)).id).toBe(own.event.id);
      // Within the organization the transaction_id is taken: a duplicate of its own event.
      const again = await call(own.org, 'POST', '/v1/events', {
        transaction_id: SHARED.transaction,
        external_customer_id: SHARED.customer,
        code: SHARED.metric,
      });
      expect(expectError(again, 409, 'already_exists', ['existing_event_id']).existing_event_id).toBe(own.event.id);
    }
  });

  it("the other organization's subscription is 404 and unchanged", async () => {
    for (const [own, other] of pairs()) {
      expectError(await call(own.org, 'GET', `/v1/subscriptions/${other.subscription.id}`), 404, 'subscription_not_found');
      expectError(
        await call(own.org, 'PUT', `/v1/subscriptions/${other.subscription.id}`, { name: 'taken' }),
        404,
        'subscription_not_found',
      );
      expectError(await call(own.org, 'DELETE', `/v1/subscriptions/${other.subscription.id}`), 404, 'subscription_not_found');
    }
    for (const [own] of pairs()) {
      expect(ok<SubscriptionResource>(await call(own.org, 'GET', `/v1/subscriptions/${own.subscription.id}`))).toMatchObject({
        name: null,
        status: 'active',
      });
    }
  });
});

describe('test clocks', () => {
  it("the other organization's clock is 404 and cannot carry a customer", async () => {
    for (const [own, other] of pairs()) {
      expect(ok<TestClockResource[]>(await call(own.org, 'GET', '/v1/test_clocks')).map((c) => c.id)).toEqual([own.clock.id]);
      expectError(await call(own.org, 'GET', `/v1/test_clocks/${other.clock.id}`), 404, 'test_clock_not_found');
      expectError(
        await call(own.org, 'POST', `/v1/test_clocks/${other.clock.id}/advance`, { frozen_time: '2031-02-01T00:00:00Z' }),
        404,
        'test_clock_not_found',
      );
      expectError(
        await call(own.org, 'POST', '/v1/customers', { external_id: 'on-a-clock', test_clock_id: other.clock.id }),
        404,
        'test_clock_not_found',
      );
    }
    expect(ok<TestClockResource>(await call(a.org, 'GET', `/v1/test_clocks/${a.clock.id}`)).frozen_time).toBe('2031-01-01T00:00:00.000Z');
  });
});

describe('webhook endpoints on one URL', () => {
  it("each organization's deliveries go to its own endpoint and carry only its own resources", async () => {
    const ownInvoices = (w: World) => [w.oneOff.id, w.addOnInvoice.id].sort();
    for (const [own, other] of pairs()) {
      const deliveries = ok<WebhookResource[]>(await call(own.org, 'GET', '/v1/webhooks?limit=1000'));
      expect(deliveries.length).toBeGreaterThan(0);
      for (const d of deliveries) {
        const object = (d.payload as { organization_id: string; data: { object: { organization_id?: string } } }).data.object;
        expect({
          endpoint: d.webhook_endpoint_id,
          organization: d.organization_id,
          payload: d.payload.organization_id,
          object: object.organization_id ?? own.org.id,
        }).toEqual({
          endpoint: own.endpoint.id,
          organization: own.org.id,
          payload: own.org.id,
          object: own.org.id,
        });
      }
      const created = deliveries.filter((d) => d.webhook_type === 'invoice.created');
      expect(created.map((d) => (d.payload as { data: { object: { id: string } } }).data.object.id).sort()).toEqual(ownInvoices(own));
      expectError(await call(own.org, 'GET', `/v1/webhook_endpoints/${other.endpoint.id}`), 404, 'webhook_endpoint_not_found');
      expect(ok<WebhookEndpointResource[]>(await call(own.org, 'GET', '/v1/webhook_endpoints')).map((e) => e.id)).toEqual([
        own.endpoint.id,
      ]);
      const othersDelivery = ok<WebhookResource[]>(await call(other.org, 'GET', '/v1/webhooks'))[0]!;
      expectError(await call(own.org, 'GET', `/v1/webhooks/${othersDelivery.id}`), 404, 'webhook_not_found');
    }
  });

  it("the receiver gets each organization's invoices signed with that organization's secret only", async () => {
    const invoiceCreated = () =>
      receiver
        .requests(SHARED.webhookPath)
        .map((r) => ({
          request: r,
          payload: JSON.parse(r.body) as { type: string; organization_id: string; data: { object: { id: string } } },
        }))
        .filter((r) => r.payload.type === 'invoice.created');
    const received = await eventually(
      async () => {
        worker.assertAlive();
        const found = invoiceCreated();
        return found.length >= 4 ? found : undefined;
      },
      30_000,
      'the four invoice.created deliveries',
    );
    const now = Math.floor(Date.now() / 1000);
    const verifies = (w: World, r: (typeof received)[number]) =>
      verifyWebhookSignature(w.endpoint.secret, r.request.body, String(r.request.headers['x-billing-signature']), now);
    for (const [own, other] of pairs()) {
      const mine = received.filter((r) => r.payload.organization_id === own.org.id);
      expect(mine.map((r) => r.payload.data.object.id).sort()).toEqual([own.oneOff.id, own.addOnInvoice.id].sort());
      for (const r of mine) expect({ own: verifies(own, r), other: verifies(other, r) }).toEqual({ own: true, other: false });
    }
    expect(received).toHaveLength(4);
  });
});
