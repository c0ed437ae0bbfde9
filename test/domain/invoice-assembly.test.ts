import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AppliedCoupon, Coupon } from '../../src/domain/coupons';
import {
  type AssembledInvoice,
  type InvoiceAssemblyInput,
  InvalidInvoiceInput,
  type PricedFee,
  applyPrepaidCredits,
  assembleInvoice,
} from '../../src/domain/invoice-assembly';
import { type Dec, dec, roundCents, sum } from '../../src/domain/money';
import type { FeeType, Tax, TaxSets } from '../../src/domain/taxes';

function fee(key: string, fee_type: FeeType, amount: string, extra: Partial<PricedFee> = {}): PricedFee {
  return { key, fee_type, amount_cents: dec(amount), units: dec(1), events_count: 0, unit_amount_cents: dec(amount), ...extra };
}
const tax = (code: string, rate: string): Tax => ({ id: `id-${code}`, code, rate: dec(rate) });
const VAT = tax('VAT', '0.2');
const REDUCED = tax('REDUCED', '0.1');
const taxes = (t: Partial<TaxSets>): TaxSets => ({ organization: [], customer: [], plan: [], charges: {}, add_ons: {}, ...t });

let seq = 0;
function coupon(c: Partial<Coupon> & Pick<Coupon, 'coupon_type'>, day: number, extra: Partial<AppliedCoupon> = {}): AppliedCoupon {
  seq += 1;
  const full: Coupon = { id: `coupon-${seq}`, code: `C${seq}`, frequency: 'forever', reusable: true, ...c };
  return { id: `applied-${seq}`, coupon: full, status: 'active', applied_at: new Date(Date.UTC(2026, 0, day)), ...extra };
}
const fixedCoupon = (cents: number, day: number, extra: Partial<Coupon> = {}) =>
  coupon({ coupon_type: 'fixed_amount', amount_cents: dec(cents), amount_currency: 'USD', ...extra }, day);
const percentCoupon = (rate: string, day: number, extra: Partial<Coupon> = {}) =>
  coupon({ coupon_type: 'percentage', percentage_rate: dec(rate), ...extra }, day);

const assemble = (input: Partial<InvoiceAssemblyInput> & Pick<InvoiceAssemblyInput, 'fees'>) =>
  assembleInvoice({ currency: 'USD', ...input });

/** The invoice-level amounts as strings, for exact comparisons. */
function amounts(inv: AssembledInvoice) {
  return {
    subtotal: inv.subtotal.toString(),
    tax_amount: inv.tax_amount.toString(),
    coupons_amount_cents: inv.coupons_amount_cents.toString(),
    progressive_billing_credit_amount_cents: inv.progressive_billing_credit_amount_cents.toString(),
    credit_notes_amount_cents: inv.credit_notes_amount_cents.toString(),
    prepaid_credit_amount: inv.prepaid_credit_amount.toString(),
    total: inv.total.toString(),
  };
}
const ZEROES = {
  coupons_amount_cents: '0',
  progressive_billing_credit_amount_cents: '0',
  credit_notes_amount_cents: '0',
  prepaid_credit_amount: '0',
};

describe('assembleInvoice: a full invoice', () => {
  const invoice = assemble({
    fees: [
      fee('sub', 'subscription', '10000'),
      fee('api', 'charge', '333.3333', { charge_id: 'c1', units: dec(3), unit_amount_cents: dec('111.1111') }),
      fee('storage', 'charge', '1250.55', { charge_id: 'c2' }),
    ],
    taxes: taxes({ plan: [VAT], charges: { c1: [REDUCED] } }),
    applied_coupons: [percentCoupon('10', 2), fixedCoupon(1000, 1)],
  });

  it('taxes each fee at its most specific level', () => {
    expect(invoice.fees.map((f) => [f.key, f.tax_level, f.taxes_amount_cents.toFixed(4), f.total_amount_cents.toFixed(4)])).toEqual([
      ['sub', 'plan', '2000.0000', '12000.0000'],
      ['api', 'charge', '33.3333', '366.6666'], // 33.33333
      ['storage', 'plan', '250.1100', '1500.6600'],
    ]);
    expect(invoice.fees[1]?.applied_taxes.map((t) => [t.tax_code, t.amount_cents.toFixed(4)])).toEqual([['REDUCED', '33.3333']]);
    expect(invoice.fees[1]).toMatchObject({ units: dec(3), unit_amount_cents: dec('111.1111'), charge_id: 'c1' });
  });

  it('summarizes taxes per tax over the invoice', () => {
    expect(
      invoice.applied_taxes.map((t) => [
        t.tax_code,
        t.fees_amount_cents.toFixed(4),
        t.precise_amount_cents.toFixed(4),
        t.amount_cents.toString(),
      ]),
    ).toEqual([
      ['VAT', '11250.5500', '2250.1100', '2250'],
      ['REDUCED', '333.3333', '33.3333', '33'],
    ]);
  });

  it('applies coupons in order of application on the pre-tax subtotal', () => {
    // subtotal 11583.8833 -> 11584 ; fixed 1000 first (applied earlier), then 10 % of 10584 = 1058.4 -> 1058
    expect(invoice.coupons.map((c) => [c.coupon_type, c.base_amount_cents.toString(), c.amount_cents.toString()])).toEqual([
      ['fixed_amount', '11584', '1000'],
      ['percentage', '10584', '1058'],
    ]);
    expect(invoice.coupons.map((c) => c.consumption.status)).toEqual(['active', 'active']);
  });

  it('adds up: 11584 + 2283 - 2058 = 11809', () => {
    expect(invoice.fees_amount_cents.toFixed(4)).toBe('11583.8833');
    // taxes 2000 + 33.3333 + 250.11 = 2283.4433 -> 2283
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal: '11584', tax_amount: '2283', coupons_amount_cents: '2058', total: '11809' });
  });
});

describe('assembleInvoice: rounding', () => {
  const cases: { name: string; fees: string[]; rate: string; subtotal: string; tax: string; total: string }[] = [
    // 333.3333 x 20 % = 66.66666 -> 66.6667 ; 333.3333 -> 333 and 66.6667 -> 67
    { name: 'fee 333.3333 at 20 %', fees: ['333.3333'], rate: '0.2', subtotal: '333', tax: '67', total: '400' },
    // 999.9999 -> 1000 ; 3 x 66.6667 = 200.0001 -> 200: rounded once over the sums, not per fee
    {
      name: 'three fees of 333.3333 at 20 %',
      fees: ['333.3333', '333.3333', '333.3333'],
      rate: '0.2',
      subtotal: '1000',
      tax: '200',
      total: '1200',
    },
    // 2.5 -> 3 ; 0.5 -> 1: halves round up
    { name: 'halves round up', fees: ['2.5'], rate: '0.2', subtotal: '3', tax: '1', total: '4' },
    // 12.3425 x 10 % = 1.23425 -> 1.2343 ; 12.3425 -> 12 ; 1.2343 -> 1
    { name: 'below half rounds down', fees: ['12.3425'], rate: '0.1', subtotal: '12', tax: '1', total: '13' },
    // 0.4999 -> 0 ; 0.09998 -> 0.1 -> 0
    { name: 'fractions of a cent only', fees: ['0.4999'], rate: '0.2', subtotal: '0', tax: '0', total: '0' },
    // fee amounts are kept to 4 digits first: 100.00005 -> 100.0001
    { name: 'fee amounts rounded to 4 digits', fees: ['100.00005'], rate: '0', subtotal: '100', tax: '0', total: '100' },
  ];
  it.each(cases)('$name', ({ fees, rate, subtotal, tax: taxAmount, total }) => {
    const invoice = assemble({
      fees: fees.map((a, i) => fee(`f${i}`, 'charge', a)),
      taxes: taxes({ customer: [tax('T', rate)] }),
    });
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal, tax_amount: taxAmount, total });
  });

  it('keeps fee amounts to 4 fractional digits, half up', () => {
    const invoice = assemble({ fees: [fee('f', 'charge', '100.00005'), fee('g', 'charge', '0.00004')] });
    expect(invoice.fees.map((f) => f.amount_cents.toString())).toEqual(['100.0001', '0']);
    expect(invoice.fees_amount_cents.toString()).toBe('100.0001');
  });

  it('keeps a fee total of 400.0000 for 333.3333 + 66.6667', () => {
    const invoice = assemble({ fees: [fee('f', 'charge', '333.3333')], taxes: taxes({ customer: [VAT] }) });
    expect(invoice.fees[0]?.total_amount_cents.toFixed(4)).toBe('400.0000');
    expect(invoice.fees[0]?.amount_cents.toFixed(4)).toBe('333.3333');
  });
});

describe('assembleInvoice: taxes come before coupons', () => {
  it('computes taxes on the full fees; a percentage coupon reduces only the pre-tax subtotal', () => {
    const invoice = assemble({
      fees: [fee('f', 'charge', '10000')],
      taxes: taxes({ customer: [VAT] }),
      applied_coupons: [percentCoupon('30', 1)],
    });
    // 10000 + 2000 - 3000 (coupons-before-tax would give 7000 + 1400 = 8400)
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal: '10000', tax_amount: '2000', coupons_amount_cents: '3000', total: '9000' });
    expect(invoice.fees[0]?.taxes_amount_cents.toString()).toBe('2000');
  });

  it('caps a fixed coupon at the subtotal: the tax stays due', () => {
    const invoice = assemble({
      fees: [fee('f', 'charge', '1000')],
      taxes: taxes({ customer: [VAT] }),
      applied_coupons: [fixedCoupon(5000, 1, { frequency: 'once' })],
    });
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal: '1000', tax_amount: '200', coupons_amount_cents: '1000', total: '200' });
    expect(invoice.coupons[0]?.consumption).toMatchObject({ status: 'terminated', frequency_duration_remaining: null });
    expect(invoice.coupons[0]?.consumption.fixed_amount_left_cents?.toString()).toBe('4000');
  });

  it('skips a fixed coupon in another currency and reports it', () => {
    const eur = fixedCoupon(500, 1, { amount_currency: 'EUR' });
    const invoice = assemble({ fees: [fee('f', 'charge', '1000')], applied_coupons: [eur] });
    expect(invoice.coupons).toEqual([]);
    expect(invoice.skipped_coupons).toEqual([{ applied_coupon_id: eur.id, coupon_code: eur.coupon.code, reason: 'currency_mismatch' }]);
    expect(invoice.total.toString()).toBe('1000');
  });

  it('reports the consumption of once, recurring and forever coupons', () => {
    const invoice = assemble({
      fees: [fee('f', 'charge', '10000')],
      applied_coupons: [
        percentCoupon('10', 1, { frequency: 'once', reusable: false }),
        fixedCoupon(100, 2, { frequency: 'recurring', frequency_duration: 3 }),
        percentCoupon('50', 3, { frequency: 'forever' }),
      ],
    });
    // 10000: 1000 ; 9000: 100 ; 8900: 4450
    expect(invoice.coupons.map((c) => c.amount_cents.toString())).toEqual(['1000', '100', '4450']);
    expect(
      invoice.coupons.map((c) => [c.consumption.status, c.consumption.frequency_duration_remaining, c.consumption.terminate_coupon]),
    ).toEqual([
      ['terminated', null, true],
      ['active', 2, false],
      ['active', null, false],
    ]);
    expect(invoice.total.toString()).toBe('4450');
  });
});

describe('assembleInvoice: minimum commitment', () => {
  it('adds a prorated, taxed commitment fee when usage falls short', () => {
    const invoice = assemble({
      fees: [fee('sub', 'subscription', '1700'), fee('api', 'charge', '2000', { charge_id: 'c1' })],
      minimum_commitment: { amount_cents: dec(10_000) },
      commitment_proration: { usedDays: 17, periodDays: 31 },
      taxes: taxes({ plan: [VAT] }),
    });
    // 10000 x 17/31 = 5483.8710 ; the base fee of 1700 does not count: 5483.8710 - 2000
    expect(invoice.commitment?.commitment_amount_cents.toFixed(4)).toBe('5483.8710');
    expect(invoice.commitment?.true_up_amount_cents.toFixed(4)).toBe('3483.8710');
    const last = invoice.fees.at(-1);
    expect(last).toMatchObject({ key: 'commitment', fee_type: 'commitment', events_count: 0, tax_level: 'plan' });
    expect([last?.amount_cents, last?.units, last?.unit_amount_cents, last?.taxes_amount_cents].map((d) => d?.toFixed(4))).toEqual([
      '3483.8710',
      '1.0000',
      '3483.8710',
      '696.7742',
    ]);
    // fees 7183.8710 -> 7184 ; taxes 340 + 400 + 696.7742 = 1436.7742 -> 1437
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal: '7184', tax_amount: '1437', total: '8621' });
  });

  it('adds no fee when usage reaches the commitment, but reports the comparison', () => {
    const invoice = assemble({
      fees: [fee('api', 'charge', '6000'), fee('db', 'charge', '4000')],
      minimum_commitment: { amount_cents: dec(10_000) },
    });
    expect(invoice.fees.map((f) => f.key)).toEqual(['api', 'db']);
    expect(invoice.commitment?.true_up_amount_cents.toString()).toBe('0');
    expect(invoice.commitment?.charges_amount_cents.toString()).toBe('10000');
    expect(invoice.total.toString()).toBe('10000');
  });

  it('has no commitment without a minimum commitment', () => {
    const invoice = assemble({ fees: [fee('api', 'charge', '1')] });
    expect(invoice.commitment).toBeNull();
    expect(invoice.fees).toHaveLength(1);
  });

  it('bills the whole commitment of a period without usage', () => {
    const invoice = assemble({ fees: [fee('sub', 'subscription', '3000')], minimum_commitment: { amount_cents: dec(5000) } });
    expect(invoice.fees.map((f) => [f.key, f.amount_cents.toString()])).toEqual([
      ['sub', '3000'],
      ['commitment', '5000'],
    ]);
    expect(invoice.total.toString()).toBe('8000');
  });
});

describe('assembleInvoice: progressive billing and credit notes', () => {
  it('credits what the period progressive invoices billed (Lago example in cents)', () => {
    // Usage 250 units at 100 cents; progressive invoices billed 12000 then 9000 (21000 cumulated).
    const invoice = assemble({
      fees: [fee('api', 'charge', '25000')],
      progressive_billing_credits: [
        { invoice_id: 'pb1', amount_cents: dec(12_000) },
        { invoice_id: 'pb2', amount_cents: dec(9000) },
      ],
    });
    expect(amounts(invoice)).toEqual({
      ...ZEROES,
      subtotal: '25000',
      tax_amount: '0',
      progressive_billing_credit_amount_cents: '21000',
      total: '4000',
    });
    expect(invoice.progressive_billing_credits.map((c) => [c.invoice_id, c.amount_cents.toString()])).toEqual([
      ['pb1', '12000'],
      ['pb2', '9000'],
    ]);
  });

  it('never credits more than is left after coupons', () => {
    // 15000 - 10 % coupon (1500) = 13500 left: pb1 12000, pb2 only 1500 of its 9000
    const invoice = assemble({
      fees: [fee('api', 'charge', '15000')],
      applied_coupons: [percentCoupon('10', 1)],
      progressive_billing_credits: [
        { invoice_id: 'pb1', amount_cents: dec(12_000) },
        { invoice_id: 'pb2', amount_cents: dec(9000) },
      ],
    });
    expect(amounts(invoice)).toEqual({
      ...ZEROES,
      subtotal: '15000',
      tax_amount: '0',
      coupons_amount_cents: '1500',
      progressive_billing_credit_amount_cents: '13500',
      total: '0',
    });
    expect(invoice.progressive_billing_credits.map((c) => c.amount_cents.toString())).toEqual(['12000', '1500']);
  });

  it('takes credit notes oldest first after the progressive credits, up to what is due', () => {
    const invoice = assemble({
      fees: [fee('api', 'charge', '10000')],
      taxes: taxes({ customer: [VAT] }),
      progressive_billing_credits: [{ invoice_id: 'pb1', amount_cents: dec(2000) }],
      credit_notes: [
        { credit_note_id: 'cn1', balance_amount_cents: dec(5000) },
        { credit_note_id: 'cn2', balance_amount_cents: dec(7000) },
        { credit_note_id: 'cn3', balance_amount_cents: dec(100) },
      ],
    });
    // 10000 + 2000 - 2000 = 10000 due: cn1 5000, cn2 5000 of 7000, cn3 nothing
    expect(invoice.credit_notes.map((n) => [n.credit_note_id, n.amount_cents.toString()])).toEqual([
      ['cn1', '5000'],
      ['cn2', '5000'],
      ['cn3', '0'],
    ]);
    expect(amounts(invoice)).toEqual({
      ...ZEROES,
      subtotal: '10000',
      tax_amount: '2000',
      progressive_billing_credit_amount_cents: '2000',
      credit_notes_amount_cents: '10000',
      total: '0',
    });
  });

  it('uses part of a credit note when it covers more than is due', () => {
    const invoice = assemble({
      fees: [fee('a', 'add_on', '800')],
      credit_notes: [{ credit_note_id: 'cn', balance_amount_cents: dec(1500) }],
    });
    expect(invoice.credit_notes_amount_cents.toString()).toBe('800');
    expect(invoice.total.toString()).toBe('0');
  });
});

describe('assembleInvoice: zero totals', () => {
  it('gives an all-zero invoice for zero fees and does not use coupons', () => {
    const invoice = assemble({
      fees: [fee('api', 'charge', '0')],
      taxes: taxes({ customer: [VAT] }),
      applied_coupons: [fixedCoupon(1000, 1, { frequency: 'once' })],
    });
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal: '0', tax_amount: '0', total: '0' });
    expect(invoice.coupons).toEqual([]);
    expect(invoice.skipped_coupons.map((s) => s.reason)).toEqual(['nothing_to_discount']);
    expect(invoice.fees[0]?.applied_taxes.map((t) => t.amount_cents.toString())).toEqual(['0']);
  });

  it('gives an all-zero invoice for no fees', () => {
    const invoice = assemble({ fees: [] });
    expect(amounts(invoice)).toEqual({ ...ZEROES, subtotal: '0', tax_amount: '0', total: '0' });
    expect(invoice.applied_taxes).toEqual([]);
  });

  it('reaches zero when a 100 % coupon and a progressive credit cover everything', () => {
    const invoice = assemble({
      fees: [fee('api', 'charge', '5000')],
      taxes: taxes({ customer: [VAT] }),
      applied_coupons: [percentCoupon('100', 1)],
      progressive_billing_credits: [{ invoice_id: 'pb', amount_cents: dec(3000) }],
    });
    // 5000 + 1000 - 5000 = 1000 left: the progressive credit takes 1000 of its 3000
    expect(amounts(invoice)).toEqual({
      ...ZEROES,
      subtotal: '5000',
      tax_amount: '1000',
      coupons_amount_cents: '5000',
      progressive_billing_credit_amount_cents: '1000',
      total: '0',
    });
  });
});

describe('assembleInvoice: add-on and credit fees', () => {
  it('taxes add-ons at the add-on level and leaves credit purchases untaxed', () => {
    const invoice = assemble({
      fees: [
        fee('setup', 'add_on', '5000', { add_on_id: 'a1' }),
        fee('other', 'add_on', '1000', { add_on_id: 'a2' }),
        fee('credits', 'credit', '2000'),
      ],
      taxes: taxes({ add_ons: { a1: [REDUCED] }, plan: [tax('PLAN', '0.5')], customer: [VAT] }),
    });
    expect(invoice.fees.map((f) => [f.key, f.tax_level, f.taxes_amount_cents.toString()])).toEqual([
      ['setup', 'add_on', '500'],
      ['other', 'customer', '200'],
      ['credits', null, '0'],
    ]);
    expect(invoice.tax_amount.toString()).toBe('700');
  });
});

describe('assembleInvoice: rejected input', () => {
  const cases: { name: string; input: () => InvoiceAssemblyInput; message: RegExp }[] = [
    {
      name: 'duplicate fee keys',
      input: () => ({ currency: 'USD', fees: [fee('a', 'charge', '1'), fee('a', 'charge', '2')] }),
      message: /duplicate fee key "a"/,
    },
    { name: 'a negative fee', input: () => ({ currency: 'USD', fees: [fee('a', 'charge', '-0.0001')] }), message: /negative/ },
    {
      name: 'a commitment fee next to a minimum commitment',
      input: () => ({ currency: 'USD', fees: [fee('x', 'commitment', '100')], minimum_commitment: { amount_cents: dec(1000) } }),
      message: /billed twice/,
    },
    {
      name: 'the reserved commitment key',
      input: () => ({ currency: 'USD', fees: [fee('commitment', 'charge', '100')], minimum_commitment: { amount_cents: dec(1000) } }),
      message: /reserved/,
    },
  ];
  it.each(cases)('$name', ({ input, message }) => {
    expect(() => assembleInvoice(input())).toThrow(InvalidInvoiceInput);
    expect(() => assembleInvoice(input())).toThrow(message);
  });
});

describe('applyPrepaidCredits', () => {
  const base = assemble({
    fees: [fee('api', 'charge', '10000')],
    taxes: taxes({ customer: [VAT] }),
    applied_coupons: [fixedCoupon(1000, 1)],
    progressive_billing_credits: [{ invoice_id: 'pb', amount_cents: dec(500) }],
    credit_notes: [{ credit_note_id: 'cn', balance_amount_cents: dec(300) }],
  });
  // 10000 + 2000 - 1000 - 500 - 300 = 10200 due before wallets

  const cases: { wallet: string; prepaid: string; total: string }[] = [
    { wallet: '0', prepaid: '0', total: '10200' },
    { wallet: '500', prepaid: '500', total: '9700' },
    { wallet: '10200', prepaid: '10200', total: '0' },
    { wallet: '99999', prepaid: '10200', total: '0' },
    // never more than the wallets hold: a fraction of a cent is not rounded up
    { wallet: '10.9', prepaid: '10', total: '10190' },
    { wallet: '-5', prepaid: '0', total: '10200' },
  ];
  it.each(cases)('wallets holding $wallet pay $prepaid', ({ wallet, prepaid, total }) => {
    expect(base.total.toString()).toBe('10200');
    const after = applyPrepaidCredits(base, dec(wallet));
    expect(after.prepaid_credit_amount.toString()).toBe(prepaid);
    expect(after.total.toString()).toBe(total);
    expect(after.subtotal.toString()).toBe('10000');
    expect(after.fees).toBe(base.fees);
  });

  it('replaces an earlier prepaid amount rather than adding to it', () => {
    const once = applyPrepaidCredits(base, dec(500));
    const again = applyPrepaidCredits(once, dec(300));
    expect(again.prepaid_credit_amount.toString()).toBe('300');
    expect(again.total.toString()).toBe('9900');
  });
});

describe('assembleInvoice: properties', () => {
  const cents4 = (max: number) => fc.integer({ min: 0, max: max * 10_000 }).map((n) => dec(n).div(10_000));
  const arbFee = fc.record({
    type: fc.constantFrom<FeeType>('subscription', 'charge', 'charge', 'add_on', 'credit'),
    amount: cents4(100_000),
    charge: fc.constantFrom('c1', 'c2'),
  });
  const arbRate = fc.integer({ min: 0, max: 10_000 }).map((n) => dec(n).div(10_000));
  const arbCoupon = fc.record({
    fixed: fc.boolean(),
    amount: fc.integer({ min: 0, max: 200_000 }),
    rate: fc.integer({ min: 0, max: 100 }),
    frequency: fc.constantFrom('once' as const, 'recurring' as const, 'forever' as const),
    day: fc.integer({ min: 1, max: 28 }),
  });
  const arbInput = fc.record({
    fees: fc.array(arbFee, { maxLength: 8 }),
    planRate: arbRate,
    chargeRate: arbRate,
    customerRate: arbRate,
    coupons: fc.array(arbCoupon, { maxLength: 4 }),
    progressive: fc.array(fc.integer({ min: 0, max: 300_000 }), { maxLength: 3 }),
    notes: fc.array(fc.integer({ min: 0, max: 300_000 }), { maxLength: 3 }),
    commitment: fc.option(fc.integer({ min: 0, max: 500_000 })),
    wallet: fc.integer({ min: 0, max: 1_000_000 }),
  });

  type Scenario = typeof arbInput extends fc.Arbitrary<infer T> ? T : never;

  function build(s: Scenario): InvoiceAssemblyInput {
    return {
      currency: 'USD',
      fees: s.fees.map((f, i) => fee(`f${i}`, f.type, f.amount.toString(), { charge_id: f.type === 'charge' ? f.charge : undefined })),
      taxes: taxes({
        plan: [tax('PLAN', s.planRate.toString())],
        charges: { c1: [tax('CHG', s.chargeRate.toString())] },
        customer: [tax('CUST', s.customerRate.toString())],
      }),
      applied_coupons: s.coupons.map((c) =>
        c.fixed
          ? fixedCoupon(c.amount, c.day, { frequency: c.frequency, frequency_duration: 2 })
          : percentCoupon(String(c.rate), c.day, { frequency: c.frequency, frequency_duration: 2 }),
      ),
      progressive_billing_credits: s.progressive.map((p, i) => ({ invoice_id: `pb${i}`, amount_cents: dec(p) })),
      credit_notes: s.notes.map((n, i) => ({ credit_note_id: `cn${i}`, balance_amount_cents: dec(n) })),
      minimum_commitment: s.commitment === null ? null : { amount_cents: dec(s.commitment) },
      commitment_proration: { usedDays: 17, periodDays: 31 },
    };
  }

  const isWholeCents = (d: Dec) => d.isInteger() && !d.isNegative();

  it('total is never negative and equals the formula; coupons never exceed the subtotal', () => {
    fc.assert(
      fc.property(arbInput, (s) => {
        const inv = assembleInvoice(build(s));
        for (const d of [
          inv.subtotal,
          inv.tax_amount,
          inv.coupons_amount_cents,
          inv.progressive_billing_credit_amount_cents,
          inv.credit_notes_amount_cents,
          inv.total,
        ]) {
          expect(isWholeCents(d)).toBe(true);
        }
        expect(inv.coupons_amount_cents.lte(inv.subtotal)).toBe(true);
        expect(inv.subtotal.eq(roundCents(sum(inv.fees.map((f) => f.amount_cents))))).toBe(true);
        expect(inv.tax_amount.eq(roundCents(sum(inv.fees.map((f) => f.taxes_amount_cents))))).toBe(true);
        const formula = inv.subtotal
          .plus(inv.tax_amount)
          .minus(inv.coupons_amount_cents)
          .minus(inv.progressive_billing_credit_amount_cents)
          .minus(inv.prepaid_credit_amount)
          .minus(inv.credit_notes_amount_cents);
        // The credits are capped, so the formula itself never goes below zero.
        expect(formula.isNegative()).toBe(false);
        expect(inv.total.eq(formula)).toBe(true);
        expect(inv.progressive_billing_credit_amount_cents.eq(sum(inv.progressive_billing_credits.map((c) => c.amount_cents)))).toBe(true);
        expect(inv.credit_notes_amount_cents.eq(sum(inv.credit_notes.map((c) => c.amount_cents)))).toBe(true);
        for (const f of inv.fees) {
          expect(f.total_amount_cents.eq(f.amount_cents.plus(f.taxes_amount_cents))).toBe(true);
          expect(f.amount_cents.decimalPlaces()).toBeLessThanOrEqual(4);
        }
        if (inv.commitment !== null) {
          const charges = sum(inv.fees.filter((f) => f.fee_type === 'charge' || f.fee_type === 'commitment').map((f) => f.amount_cents));
          expect(charges.gte(inv.commitment.commitment_amount_cents)).toBe(true);
        }
      }),
    );
  });

  it('wallets never pay more than they hold nor more than is due, and the total stays non-negative', () => {
    fc.assert(
      fc.property(arbInput, (s) => {
        const inv = assembleInvoice(build(s));
        const after = applyPrepaidCredits(inv, dec(s.wallet));
        expect(after.prepaid_credit_amount.lte(s.wallet)).toBe(true);
        expect(after.prepaid_credit_amount.lte(inv.total)).toBe(true);
        expect(after.total.isNegative()).toBe(false);
        expect(after.total.plus(after.prepaid_credit_amount).eq(inv.total)).toBe(true);
      }),
    );
  });
});
