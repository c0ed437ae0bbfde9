import { type Dec, roundCents, roundFee, sum } from './money';

/**
 * Fee taxes (specification section 4, step 3; billing-rules.md, Invoice pipeline 3).
 *
 * Taxes are computed on each fee's own pre-tax amount, BEFORE coupons: the specification orders
 * taxes before coupons and billing-rules.md keeps that order (today's Lago taxes the couponed
 * amount instead). So a coupon never changes a tax row.
 */

export type FeeType = 'subscription' | 'charge' | 'add_on' | 'credit' | 'commitment';

export type TaxLevel = 'charge' | 'add_on' | 'plan' | 'customer' | 'organization';

export interface Tax {
  id: string;
  code: string;
  /** A fraction: 0.2 is 20 % (billing-rules.md, Numbers). */
  rate: Dec;
}

export interface OrganizationTax extends Tax {
  /** Only the organization's default taxes reach fees that no more specific level taxes. */
  applied_to_organization: boolean;
}

/**
 * The taxes applied at each level, as the AppliedTax records of the specification hold them.
 * `charges` and `add_ons` are keyed by charge id and add-on id.
 */
export interface TaxSets {
  organization: readonly OrganizationTax[];
  customer: readonly Tax[];
  plan: readonly Tax[];
  charges: Readonly<Record<string, readonly Tax[]>>;
  add_ons: Readonly<Record<string, readonly Tax[]>>;
}

export const NO_TAXES: TaxSets = { organization: [], customer: [], plan: [], charges: {}, add_ons: {} };

export interface TaxableFee {
  fee_type: FeeType;
  charge_id?: string | undefined;
  add_on_id?: string | undefined;
  amount_cents: Dec;
}

/** One AppliedTax row of a fee. */
export interface AppliedFeeTax {
  tax_id: string;
  tax_code: string;
  tax_rate: Dec;
  /** amount_cents x rate, 4 fractional digits half up, like every fee-level amount. */
  amount_cents: Dec;
}

export interface FeeTaxes {
  /** The level whose taxes apply; null when no level has any (the fee is untaxed). */
  tax_level: TaxLevel | null;
  applied_taxes: AppliedFeeTax[];
  /** The sum of the rows, so that a fee's rows always add up to its tax amount exactly. */
  taxes_amount_cents: Dec;
}

/** Invoice-level summary of one tax over every fee it applied to. */
export interface InvoiceAppliedTax {
  tax_id: string;
  tax_code: string;
  tax_rate: Dec;
  /** Sum of the pre-tax amounts of the fees this tax applied to (4 fractional digits). */
  fees_amount_cents: Dec;
  /** Sum of this tax's fee rows, unrounded (4 fractional digits). */
  precise_amount_cents: Dec;
  /** Whole cents, half up. */
  amount_cents: Dec;
}

/**
 * The levels a fee of each type looks at, most specific first. Add-on fees skip the plan level:
 * an add-on is sold outside any plan (one-off invoices have none), so a plan's taxes say nothing
 * about it. Credit fees (the purchase of prepaid wallet credits) look at no level: the credits
 * later pay for fees that are taxed themselves, so taxing the purchase would tax the same sale twice.
 */
const LEVELS_BY_FEE_TYPE: Readonly<Record<FeeType, readonly TaxLevel[]>> = {
  charge: ['charge', 'plan', 'customer', 'organization'],
  subscription: ['plan', 'customer', 'organization'],
  commitment: ['plan', 'customer', 'organization'],
  add_on: ['add_on', 'customer', 'organization'],
  credit: [],
};

type FeeTaxKey = Pick<TaxableFee, 'fee_type' | 'charge_id' | 'add_on_id'>;

function taxesAtLevel(level: TaxLevel, fee: FeeTaxKey, sets: TaxSets): readonly Tax[] {
  switch (level) {
    case 'charge':
      return fee.charge_id === undefined ? [] : (sets.charges[fee.charge_id] ?? []);
    case 'add_on':
      return fee.add_on_id === undefined ? [] : (sets.add_ons[fee.add_on_id] ?? []);
    case 'plan':
      return sets.plan;
    case 'customer':
      return sets.customer;
    case 'organization':
      return sets.organization.filter((t) => t.applied_to_organization);
  }
}

/** The same tax applied twice at one level (e.g. two AppliedTax records) must not be charged twice. */
function distinctById(taxes: readonly Tax[]): Tax[] {
  const seen = new Set<string>();
  return taxes.filter((t) => (seen.has(t.id) ? false : (seen.add(t.id), true)));
}

/**
 * The most specific level that has at least one tax wins outright; levels are never merged, so a
 * charge taxed at 5 % is not also taxed by the customer's 20 %.
 */
export function resolveFeeTaxes(fee: FeeTaxKey, sets: TaxSets): { level: TaxLevel | null; taxes: Tax[] } {
  for (const level of LEVELS_BY_FEE_TYPE[fee.fee_type]) {
    const taxes = taxesAtLevel(level, fee, sets);
    if (taxes.length > 0) return { level, taxes: distinctById(taxes) };
  }
  return { level: null, taxes: [] };
}

/** Several taxes of the winning level each give a row; the fee's tax is their sum. */
export function computeFeeTaxes(fee: TaxableFee, sets: TaxSets): FeeTaxes {
  const { level, taxes } = resolveFeeTaxes(fee, sets);
  const applied_taxes = taxes.map((tax) => ({
    tax_id: tax.id,
    tax_code: tax.code,
    tax_rate: tax.rate,
    amount_cents: roundFee(fee.amount_cents.times(tax.rate)),
  }));
  return {
    tax_level: level,
    applied_taxes,
    taxes_amount_cents: sum(applied_taxes.map((t) => t.amount_cents)),
  };
}

/**
 * Per-tax totals for the invoice, in the order taxes first appear on the fees. Each is rounded to
 * whole cents on its own, so their sum may differ by a cent from the invoice `tax_amount`, which
 * rounds the sum of all fee taxes once (as Lago does); `tax_amount` is the authoritative figure.
 */
export function summarizeInvoiceTaxes(
  fees: readonly { amount_cents: Dec; applied_taxes: readonly AppliedFeeTax[] }[],
): InvoiceAppliedTax[] {
  const byTax = new Map<string, { tax: AppliedFeeTax; base: Dec; amount: Dec }>();
  for (const fee of fees) {
    for (const row of fee.applied_taxes) {
      const entry = byTax.get(row.tax_id);
      if (entry === undefined) {
        byTax.set(row.tax_id, { tax: row, base: fee.amount_cents, amount: row.amount_cents });
      } else {
        entry.base = entry.base.plus(fee.amount_cents);
        entry.amount = entry.amount.plus(row.amount_cents);
      }
    }
  }
  return [...byTax.values()].map(({ tax, base, amount }) => ({
    tax_id: tax.tax_id,
    tax_code: tax.tax_code,
    tax_rate: tax.tax_rate,
    fees_amount_cents: base,
    precise_amount_cents: amount,
    amount_cents: roundCents(amount),
  }));
}
