// Coupon consumption when an invoice that used a coupon is finalized (specification, Coupon
// consumption; billing-rules.md 4): once → terminated, recurring → counts down then terminated,
// forever → unchanged; a coupon that is not reusable ends with its application; a retried
// finalization does not count twice. Service level: no worker polls the stack's task queue, so the
// test finalizes the drafts itself.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInvoice, finalizeInvoice } from '../../src/billing/invoices';
import { dec } from '../../src/domain/money';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let org: TestOrganization;

beforeAll(async () => {
  stack = await createTestStack();
  // A grace period keeps drafts as drafts even if something started their workflows.
  org = await createOrganization(stack.app, { invoice_grace_period: 30 });
});
afterAll(async () => stack?.close());

const deps = () => ({ models: stack.db.models, temporal: stack.temporal });

async function customer() {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: org.headers,
    payload: { external_id: `c-${randomUUID()}` },
  });
  return res.json<{ id: string }>().id;
}

async function coupon(body: Record<string, unknown>) {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/coupons',
    headers: org.headers,
    payload: { code: `cp-${randomUUID().slice(0, 8)}`, name: 'Coupon', ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; code: string }>();
}

async function apply(couponCode: string, customerId: string) {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/coupons/apply',
    headers: org.headers,
    payload: { coupon_code: couponCode, customer_id: customerId },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string }>().id;
}

async function invoiceFor(customerId: string, amount: string) {
  const invoice = await createInvoice(stack.db, deps(), {
    organizationId: org.id,
    customerId,
    invoiceType: 'one_off',
    currency: 'USD',
    idempotencyKey: `t/${randomUUID()}`,
    fees: [
      { key: 'line/000', fee_type: 'add_on', amount_cents: dec(amount), units: dec(1), events_count: 0, unit_amount_cents: dec(amount) },
    ],
    at: new Date(),
  });
  return invoice;
}

const applied = async (id: string) => (await stack.db.models.AppliedCoupon.findById(id).lean())!;

describe('coupon consumption at finalization', () => {
  it('terminates a once coupon after its first invoice, even with part of a fixed amount left, and counts a retry once', async () => {
    const c = await customer();
    const cp = await coupon({ coupon_type: 'fixed_amount', amount_cents: '5000', amount_currency: 'USD', frequency: 'once' });
    const appliedId = await apply(cp.code, c);
    const invoice = await invoiceFor(c, '3000');
    expect(invoice.applied_coupons.map((a) => String(a.amount_cents))).toEqual(['3000']);
    expect(String(invoice.total)).toBe('0');
    await Promise.all([
      finalizeInvoice(stack.db, deps(), invoice._id, new Date()),
      finalizeInvoice(stack.db, deps(), invoice._id, new Date()),
    ]);
    expect((await applied(appliedId)).status).toBe('terminated');
    // The next invoice gets no discount.
    const next = await invoiceFor(c, '3000');
    expect(next.applied_coupons).toEqual([]);
    expect(String(next.total)).toBe('3000');
  });

  it('counts a recurring coupon down per finalized invoice and terminates it at zero; drafts do not count', async () => {
    const c = await customer();
    const cp = await coupon({ coupon_type: 'percentage', percentage_rate: '10', frequency: 'recurring', frequency_duration: 2 });
    const appliedId = await apply(cp.code, c);
    const first = await invoiceFor(c, '10000');
    expect(String(first.coupons_amount_cents)).toBe('1000');
    expect((await applied(appliedId)).frequency_duration_remaining).toBe(2); // a draft consumes nothing
    await finalizeInvoice(stack.db, deps(), first._id, new Date());
    await finalizeInvoice(stack.db, deps(), first._id, new Date()); // a retry
    expect(await applied(appliedId)).toMatchObject({ status: 'active', frequency_duration_remaining: 1 });
    const second = await invoiceFor(c, '10000');
    await finalizeInvoice(stack.db, deps(), second._id, new Date());
    expect(await applied(appliedId)).toMatchObject({ status: 'terminated', frequency_duration_remaining: 0 });
  });

  it('never consumes a forever coupon', async () => {
    const c = await customer();
    const cp = await coupon({ coupon_type: 'fixed_amount', amount_cents: '100', amount_currency: 'USD', frequency: 'forever' });
    const appliedId = await apply(cp.code, c);
    for (let i = 0; i < 3; i++) {
      const invoice = await invoiceFor(c, '1000');
      expect(String(invoice.coupons_amount_cents)).toBe('100');
      await finalizeInvoice(stack.db, deps(), invoice._id, new Date());
    }
    expect((await applied(appliedId)).status).toBe('active');
  });

  it('terminates a coupon that is not reusable together with its application', async () => {
    const c = await customer();
    const cp = await coupon({
      coupon_type: 'fixed_amount',
      amount_cents: '100',
      amount_currency: 'USD',
      frequency: 'once',
      reusable: false,
    });
    await apply(cp.code, c);
    const invoice = await invoiceFor(c, '1000');
    await finalizeInvoice(stack.db, deps(), invoice._id, new Date());
    const stored = await stack.db.models.Coupon.findById(cp.id).lean();
    expect(stored?.status).toBe('terminated');
  });
});
