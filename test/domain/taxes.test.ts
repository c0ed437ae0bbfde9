import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dec, roundFee, sum } from '../../src/domain/money';
import {
  type FeeType,
  type OrganizationTax,
  type Tax,
  type TaxSets,
  computeFeeTaxes,
  resolveFeeTaxes,
  summarizeInvoiceTaxes,
} from '../../src/domain/taxes';

const tax = (code: string, rate: string): Tax => ({ id: `id-${code}`, code, rate: dec(rate) });
const orgTax = (code: string, rate: string, applied = true): OrganizationTax => ({
  ...tax(code, rate),
  applied_to_organization: applied,
});

const CHG = tax('CHG', '0.05');
const PLAN = tax('PLAN', '0.1');
const CUST = tax('CUST', '0.2');
const ORG = orgTax('ORG', '0.25');
const ADDON = tax('ADDON', '0.07');

function sets(levels: { charge?: boolean; plan?: boolean; customer?: boolean; org?: boolean; addOn?: boolean }): TaxSets {
  return {
    charges: levels.charge ? { c1: [CHG] } : {},
    add_ons: levels.addOn ? { a1: [ADDON] } : {},
    plan: levels.plan ? [PLAN] : [],
    customer: levels.customer ? [CUST] : [],
    organization: levels.org ? [ORG] : [],
  };
}

const ALL = { charge: true, plan: true, customer: true, org: true, addOn: true };

describe('resolveFeeTaxes: the most specific level with taxes wins', () => {
  const cases: { name: string; fee_type: FeeType; levels: Parameters<typeof sets>[0]; level: string | null; codes: string[] }[] = [
    { name: 'charge fee, every level set', fee_type: 'charge', levels: ALL, level: 'charge', codes: ['CHG'] },
    {
      name: 'charge fee, no charge taxes',
      fee_type: 'charge',
      levels: { plan: true, customer: true, org: true },
      level: 'plan',
      codes: ['PLAN'],
    },
    {
      name: 'charge fee, customer and org only',
      fee_type: 'charge',
      levels: { customer: true, org: true },
      level: 'customer',
      codes: ['CUST'],
    },
    { name: 'charge fee, org only', fee_type: 'charge', levels: { org: true }, level: 'organization', codes: ['ORG'] },
    { name: 'charge fee, nothing', fee_type: 'charge', levels: {}, level: null, codes: [] },
    { name: 'subscription fee ignores charge taxes', fee_type: 'subscription', levels: ALL, level: 'plan', codes: ['PLAN'] },
    {
      name: 'subscription fee, customer next',
      fee_type: 'subscription',
      levels: { charge: true, customer: true, org: true },
      level: 'customer',
      codes: ['CUST'],
    },
    { name: 'commitment fee uses plan taxes', fee_type: 'commitment', levels: ALL, level: 'plan', codes: ['PLAN'] },
    { name: 'add-on fee, add-on taxes first', fee_type: 'add_on', levels: ALL, level: 'add_on', codes: ['ADDON'] },
    {
      name: 'add-on fee skips plan taxes',
      fee_type: 'add_on',
      levels: { plan: true, customer: true, org: true },
      level: 'customer',
      codes: ['CUST'],
    },
    { name: 'add-on fee, plan only: untaxed', fee_type: 'add_on', levels: { plan: true }, level: null, codes: [] },
    { name: 'add-on fee, org only', fee_type: 'add_on', levels: { plan: true, org: true }, level: 'organization', codes: ['ORG'] },
    { name: 'credit fee is never taxed', fee_type: 'credit', levels: ALL, level: null, codes: [] },
  ];
  it.each(cases)('$name', ({ fee_type, levels, level, codes }) => {
    const resolved = resolveFeeTaxes({ fee_type, charge_id: 'c1', add_on_id: 'a1' }, sets(levels));
    expect(resolved.level).toBe(level);
    expect(resolved.taxes.map((t) => t.code)).toEqual(codes);
  });

  it('looks at the taxes of its own charge only', () => {
    const s: TaxSets = { ...sets({ customer: true }), charges: { other: [CHG] } };
    expect(resolveFeeTaxes({ fee_type: 'charge', charge_id: 'c1' }, s).level).toBe('customer');
    expect(resolveFeeTaxes({ fee_type: 'charge' }, s).level).toBe('customer');
  });

  it('uses only organization taxes flagged applied_to_organization', () => {
    const s: TaxSets = { ...sets({}), organization: [orgTax('NOT_DEFAULT', '0.3', false), orgTax('DEFAULT', '0.1')] };
    expect(resolveFeeTaxes({ fee_type: 'subscription' }, s).taxes.map((t) => t.code)).toEqual(['DEFAULT']);
    const none: TaxSets = { ...sets({}), organization: [orgTax('NOT_DEFAULT', '0.3', false)] };
    expect(resolveFeeTaxes({ fee_type: 'subscription' }, none).level).toBeNull();
  });
});

describe('computeFeeTaxes', () => {
  it('adds up several taxes of the winning level, one row each', () => {
    const s: TaxSets = { ...sets({ org: true }), customer: [tax('VAT', '0.2'), tax('CITY', '0.05')] };
    const result = computeFeeTaxes({ fee_type: 'charge', charge_id: 'c1', amount_cents: dec(1000) }, s);
    expect(result.tax_level).toBe('customer');
    expect(result.applied_taxes.map((r) => [r.tax_id, r.tax_code, r.tax_rate.toString(), r.amount_cents.toFixed(4)])).toEqual([
      ['id-VAT', 'VAT', '0.2', '200.0000'],
      ['id-CITY', 'CITY', '0.05', '50.0000'],
    ]);
    expect(result.taxes_amount_cents.toFixed(4)).toBe('250.0000');
  });

  it('charges a tax listed twice at one level once', () => {
    const s: TaxSets = { ...sets({}), plan: [PLAN, PLAN] };
    const result = computeFeeTaxes({ fee_type: 'subscription', amount_cents: dec(1000) }, s);
    expect(result.applied_taxes).toHaveLength(1);
    expect(result.taxes_amount_cents.toString()).toBe('100');
  });

  const rounding: { amount: string; rate: string; expected: string }[] = [
    { amount: '333.3333', rate: '0.2', expected: '66.6667' }, // 66.66666
    { amount: '12.3425', rate: '0.1', expected: '1.2343' }, // 1.23425: a half, rounded up
    { amount: '0.0015', rate: '0.5', expected: '0.0008' }, // 0.00075
    { amount: '0.0001', rate: '0.0001', expected: '0.0000' },
    { amount: '10000', rate: '0.0875', expected: '875.0000' },
    { amount: '0', rate: '0.2', expected: '0.0000' },
  ];
  it.each(rounding)('fee $amount at rate $rate -> $expected (4 digits, half up)', ({ amount, rate, expected }) => {
    const s: TaxSets = { ...sets({}), customer: [tax('T', rate)] };
    const result = computeFeeTaxes({ fee_type: 'charge', amount_cents: dec(amount) }, s);
    expect(result.applied_taxes[0]?.amount_cents.toFixed(4)).toBe(expected);
    expect(result.taxes_amount_cents.toFixed(4)).toBe(expected);
  });

  it('gives an untaxed fee no rows and zero tax', () => {
    const result = computeFeeTaxes({ fee_type: 'credit', amount_cents: dec(5000) }, sets(ALL));
    expect(result).toMatchObject({ tax_level: null, applied_taxes: [] });
    expect(result.taxes_amount_cents.toString()).toBe('0');
  });

  it('property: the rows are amount x rate rounded to 4 digits, and add up to the fee tax', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000_000 }),
        fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 4 }),
        (amountTenThousandths, rates) => {
          const amount = dec(amountTenThousandths).div(10_000);
          const customer = rates.map((r, i) => tax(`T${i}`, dec(r).div(10_000).toString()));
          const result = computeFeeTaxes({ fee_type: 'subscription', amount_cents: amount }, { ...sets({}), customer });
          expect(result.applied_taxes).toHaveLength(rates.length);
          for (const [i, row] of result.applied_taxes.entries()) {
            expect(row.amount_cents.eq(roundFee(amount.times(customer[i]!.rate)))).toBe(true);
            expect(row.amount_cents.decimalPlaces()).toBeLessThanOrEqual(4);
            expect(row.amount_cents.isNegative()).toBe(false);
          }
          expect(result.taxes_amount_cents.eq(sum(result.applied_taxes.map((r) => r.amount_cents)))).toBe(true);
        },
      ),
    );
  });
});

describe('summarizeInvoiceTaxes', () => {
  it('sums each tax over its fees, in first-appearance order, rounding each to whole cents', () => {
    const VAT = tax('VAT', '0.2');
    const CITY = tax('CITY', '0.05');
    const fees = [
      { amount_cents: dec('333.3333'), taxes: [VAT] },
      { amount_cents: dec('333.3333'), taxes: [VAT] },
      { amount_cents: dec('100.1'), taxes: [CITY, VAT] },
      { amount_cents: dec('50'), taxes: [] },
    ].map((f) => ({
      amount_cents: f.amount_cents,
      applied_taxes: computeFeeTaxes({ fee_type: 'subscription', amount_cents: f.amount_cents }, { ...sets({}), plan: f.taxes })
        .applied_taxes,
    }));
    const summary = summarizeInvoiceTaxes(fees);
    expect(
      summary.map((t) => [t.tax_code, t.fees_amount_cents.toFixed(4), t.precise_amount_cents.toFixed(4), t.amount_cents.toString()]),
    ).toEqual([
      // 66.6667 + 66.6667 + 20.02
      ['VAT', '766.7666', '153.3534', '153'],
      // 5.005
      ['CITY', '100.1000', '5.0050', '5'],
    ]);
  });

  it('is empty for untaxed fees', () => {
    expect(summarizeInvoiceTaxes([{ amount_cents: dec(100), applied_taxes: [] }])).toEqual([]);
  });
});
