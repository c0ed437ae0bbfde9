import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Proration, computeCommitmentTrueUp, prorateCommitment } from '../../src/domain/commitment';
import { dec } from '../../src/domain/money';
import type { FeeType } from '../../src/domain/taxes';

const fee = (fee_type: FeeType, amount: string) => ({ fee_type, amount_cents: dec(amount) });

describe('prorateCommitment', () => {
  const cases: { amount: string; proration: Proration | undefined; expected: string }[] = [
    { amount: '10000', proration: undefined, expected: '10000.0000' },
    { amount: '10000', proration: { usedDays: 31, periodDays: 31 }, expected: '10000.0000' },
    // 3100 x 17 / 31 = 1700 exactly, the base fee's own example (billing-rules.md)
    { amount: '3100', proration: { usedDays: 17, periodDays: 31 }, expected: '1700.0000' },
    // 10000 x 17 / 31 = 5483.870967... -> 4 digits half up
    { amount: '10000', proration: { usedDays: 17, periodDays: 31 }, expected: '5483.8710' },
    // 5000 x 17 / 31 = 2741.935483...
    { amount: '5000', proration: { usedDays: 17, periodDays: 31 }, expected: '2741.9355' },
    // 0.0001 x 1 / 2 = 0.00005: a half at the 5th digit, rounded up
    { amount: '0.0001', proration: { usedDays: 1, periodDays: 2 }, expected: '0.0001' },
    { amount: '10000', proration: { usedDays: 0, periodDays: 30 }, expected: '0.0000' },
    { amount: '9999.99995', proration: undefined, expected: '10000.0000' },
  ];
  it.each(cases)('$amount over $proration -> $expected', ({ amount, proration, expected }) => {
    expect(prorateCommitment(dec(amount), proration).toFixed(4)).toBe(expected);
  });

  const invalid: Proration[] = [
    { usedDays: 1, periodDays: 0 },
    { usedDays: 32, periodDays: 31 },
    { usedDays: -1, periodDays: 31 },
    { usedDays: 1.5, periodDays: 31 },
    { usedDays: 1, periodDays: 30.5 },
  ];
  it.each(invalid)('rejects %o', (proration) => {
    expect(() => prorateCommitment(dec(100), proration)).toThrow(RangeError);
  });
});

describe('computeCommitmentTrueUp', () => {
  const cases: {
    name: string;
    commitment: string;
    proration?: Proration;
    fees: ReturnType<typeof fee>[];
    charges: string;
    trueUp: string;
  }[] = [
    {
      name: 'usage below the commitment',
      commitment: '10000',
      fees: [fee('charge', '5000'), fee('charge', '3000')],
      charges: '8000.0000',
      trueUp: '2000.0000',
    },
    // The base fee does not count (billing-rules.md), unlike Lago where 5000 + 3000 would reach 8000 of 8000.
    {
      name: 'the base fee does not count',
      commitment: '8000',
      fees: [fee('subscription', '5000'), fee('charge', '3000')],
      charges: '3000.0000',
      trueUp: '5000.0000',
    },
    {
      name: 'add-on and credit fees do not count',
      commitment: '1000',
      fees: [fee('add_on', '900'), fee('credit', '900'), fee('charge', '100')],
      charges: '100.0000',
      trueUp: '900.0000',
    },
    { name: 'usage equal to the commitment', commitment: '8000', fees: [fee('charge', '8000')], charges: '8000.0000', trueUp: '0.0000' },
    { name: 'usage above the commitment', commitment: '8000', fees: [fee('charge', '9000.5')], charges: '9000.5000', trueUp: '0.0000' },
    { name: 'no usage at all', commitment: '8000', fees: [], charges: '0.0000', trueUp: '8000.0000' },
    {
      name: 'fractional usage',
      commitment: '100',
      fees: [fee('charge', '33.3333'), fee('charge', '33.3333')],
      charges: '66.6666',
      trueUp: '33.3334',
    },
    // 10000 x 17/31 = 5483.8710 ; minus 2000 of usage
    {
      name: 'prorated partial period',
      commitment: '10000',
      proration: { usedDays: 17, periodDays: 31 },
      fees: [fee('charge', '2000')],
      charges: '2000.0000',
      trueUp: '3483.8710',
    },
    // 5000 x 17/31 = 2741.9355 ; minus 1200 + 800
    {
      name: 'prorated, Lago example in cents',
      commitment: '5000',
      proration: { usedDays: 17, periodDays: 31 },
      fees: [fee('charge', '1200'), fee('charge', '800')],
      charges: '2000.0000',
      trueUp: '741.9355',
    },
    {
      name: 'prorated, usage above the prorated commitment',
      commitment: '10000',
      proration: { usedDays: 10, periodDays: 30 },
      fees: [fee('charge', '4000')],
      charges: '4000.0000',
      trueUp: '0.0000',
    },
  ];
  it.each(cases)('$name', ({ commitment, proration, fees, charges, trueUp }) => {
    const result = computeCommitmentTrueUp({ commitment: { amount_cents: dec(commitment) }, proration, fees });
    expect(result.charges_amount_cents.toFixed(4)).toBe(charges);
    expect(result.true_up_amount_cents.toFixed(4)).toBe(trueUp);
    expect(result.commitment_amount_cents.toFixed(4)).toBe(prorateCommitment(dec(commitment), proration).toFixed(4));
  });

  it('property: the true-up is never negative and usage plus true-up reaches at least the commitment', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.array(fc.integer({ min: 0, max: 10_000_000 }), { maxLength: 5 }),
        fc.integer({ min: 1, max: 366 }).chain((period) => fc.tuple(fc.integer({ min: 0, max: period }), fc.constant(period))),
        (commitment, usage, [usedDays, periodDays]) => {
          const result = computeCommitmentTrueUp({
            commitment: { amount_cents: dec(commitment) },
            proration: { usedDays, periodDays },
            fees: usage.map((u) => fee('charge', dec(u).div(100).toString())),
          });
          expect(result.true_up_amount_cents.isNegative()).toBe(false);
          expect(result.commitment_amount_cents.lte(commitment)).toBe(true);
          expect(result.charges_amount_cents.plus(result.true_up_amount_cents).gte(result.commitment_amount_cents)).toBe(true);
          if (result.true_up_amount_cents.gt(0)) {
            expect(result.charges_amount_cents.plus(result.true_up_amount_cents).eq(result.commitment_amount_cents)).toBe(true);
          }
        },
      ),
    );
  });
});
