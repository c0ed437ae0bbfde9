import { describe, expect, it } from 'vitest';
import { type ChargeBuckets, computeChargeFees, priceEventInAdvance, type PricedCharge, prorateCap } from '../../src/domain/charges';
import { dec } from '../../src/domain/money';
import type { AggregationResult } from '../../src/domain/usage-types';
import { summed, units, withEvents } from './charge-models/fixtures';

const count = (n: number): AggregationResult =>
  units(
    n,
    n,
    Array.from({ length: n }, () => 1),
  );
const noUsage = (): AggregationResult => units(0);

const standard = (amount: string, extra: Partial<PricedCharge> = {}): PricedCharge => ({
  charge_model: 'standard',
  properties: { amount },
  ...extra,
});

const strings = (fees: ReturnType<typeof computeChargeFees>) => ({
  default: fees.default.amount.toString(),
  filters: fees.filters.map((f) => f.amount.toString()),
  amountBeforeCaps: fees.amountBeforeCaps.toString(),
  minTrueUp: fees.minTrueUp.toString(),
  amount: fees.amount.toString(),
});

describe('charge fees over filter buckets', () => {
  it('prices each filter with its own properties and the default bucket with the charge properties', () => {
    // lago-reference.md 1.4 in cents: default 1.00, {region: us} 2.00, {region: us, tier: gold} 3.00.
    const buckets: ChargeBuckets = {
      default: count(5), // eu x4 + no region x1
      filters: [
        { properties: { amount: '200' }, aggregation: count(3) }, // us/silver
        { properties: { amount: '300' }, aggregation: count(2) }, // us/gold
      ],
    };
    const fees = computeChargeFees(standard('100'), buckets);
    expect(strings(fees)).toEqual({
      default: '500',
      filters: ['600', '600'],
      amountBeforeCaps: '1700',
      minTrueUp: '0',
      amount: '1700',
    });
    expect(fees.units.toString()).toBe('10');
    expect(fees.eventsCount).toBe(10);
    expect(fees.filters.map((f) => f.unitAmount.toString())).toEqual(['200', '300']);
    expect(fees.minAmount).toBeNull();
    expect(fees.maxAmount).toBeNull();
  });

  it('prices a charge without filters from its default bucket alone', () => {
    const fees = computeChargeFees(standard('2.5'), { default: count(4), filters: [] });
    expect(strings(fees)).toEqual({ default: '10', filters: [], amountBeforeCaps: '10', minTrueUp: '0', amount: '10' });
  });

  it("charges each graduated bucket's first flat amount even with no usage", () => {
    const tiers = (flat: string) => ({
      graduated_ranges: [
        { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: flat },
        { from_value: 10, to_value: null, per_unit_amount: '5', flat_amount: '0' },
      ],
    });
    const fees = computeChargeFees(
      { charge_model: 'graduated', properties: tiers('100') },
      { default: noUsage(), filters: [{ properties: tiers('40'), aggregation: count(12) }] },
    );
    // filter: 10 x 10 + 40 + 2 x 5
    expect(strings(fees)).toEqual({ default: '100', filters: ['150'], amountBeforeCaps: '250', minTrueUp: '0', amount: '250' });
  });

  it('throws on properties of the wrong shape in a filter', () => {
    const buckets: ChargeBuckets = { default: count(1), filters: [{ properties: { rate: '1' }, aggregation: count(1) }] };
    expect(() => computeChargeFees(standard('1'), buckets)).toThrow();
  });
});

describe('charge minimum and maximum', () => {
  const twoBuckets = (defaultUnits: number, filterUnits: number): ChargeBuckets => ({
    default: count(defaultUnits),
    filters: [{ properties: { amount: '100' }, aggregation: count(filterUnits) }],
  });

  it.each([
    {
      name: 'minimum above usage: a true-up tops the total up (lago-reference.md 2.9)',
      charge: standard('100', { min_amount_cents: 5000 }),
      buckets: twoBuckets(12, 8),
      expected: { default: '1200', filters: ['800'], amountBeforeCaps: '2000', minTrueUp: '3000', amount: '5000' },
    },
    {
      name: 'minimum reached: nothing added',
      charge: standard('100', { min_amount_cents: '1500' }),
      buckets: twoBuckets(12, 8),
      expected: { default: '1200', filters: ['800'], amountBeforeCaps: '2000', minTrueUp: '0', amount: '2000' },
    },
    {
      name: 'minimum with no usage at all',
      charge: standard('100', { min_amount_cents: 5000 }),
      buckets: { default: noUsage(), filters: [] },
      expected: { default: '0', filters: [], amountBeforeCaps: '0', minTrueUp: '5000', amount: '5000' },
    },
    {
      name: 'maximum below usage: each bucket gives up its share',
      charge: standard('100', { max_amount_cents: 1000 }),
      buckets: twoBuckets(5, 15),
      expected: { default: '250', filters: ['750'], amountBeforeCaps: '2000', minTrueUp: '0', amount: '1000' },
    },
    {
      name: 'maximum not reached',
      charge: standard('100', { max_amount_cents: 1000 }),
      buckets: twoBuckets(5, 4),
      expected: { default: '500', filters: ['400'], amountBeforeCaps: '900', minTrueUp: '0', amount: '900' },
    },
    {
      name: 'maximum of zero',
      charge: standard('100', { max_amount_cents: 0 }),
      buckets: twoBuckets(5, 15),
      expected: { default: '0', filters: ['0'], amountBeforeCaps: '2000', minTrueUp: '0', amount: '0' },
    },
    {
      name: 'both, usage between them',
      charge: standard('100', { min_amount_cents: 500, max_amount_cents: 5000 }),
      buckets: twoBuckets(5, 15),
      expected: { default: '500', filters: ['1500'], amountBeforeCaps: '2000', minTrueUp: '0', amount: '2000' },
    },
    {
      name: 'minimum above maximum: the maximum wins',
      charge: standard('100', { min_amount_cents: 5000, max_amount_cents: 3000 }),
      buckets: twoBuckets(5, 5),
      expected: { default: '500', filters: ['500'], amountBeforeCaps: '1000', minTrueUp: '2000', amount: '3000' },
    },
    {
      name: 'null caps are no caps',
      charge: standard('100', { min_amount_cents: null, max_amount_cents: null }),
      buckets: twoBuckets(5, 5),
      expected: { default: '500', filters: ['500'], amountBeforeCaps: '1000', minTrueUp: '0', amount: '1000' },
    },
  ])('$name', ({ charge, buckets, expected }) => {
    expect(strings(computeChargeFees(charge, buckets))).toEqual(expected);
  });

  it('splits a cap reduction to 4 digits so that the buckets add up to the cap exactly', () => {
    const fees = computeChargeFees(standard('1', { max_amount_cents: 2 }), {
      default: count(1),
      filters: [
        { properties: { amount: '1' }, aggregation: count(1) },
        { properties: { amount: '1' }, aggregation: count(1) },
      ],
    });
    // Cumulative shares of the 1-cent reduction: 0.3333, 0.6667, 1.
    expect(strings(fees)).toEqual({
      default: '0.6667',
      filters: ['0.6666', '0.6667'],
      amountBeforeCaps: '3',
      minTrueUp: '0',
      amount: '2',
    });
  });

  it('recomputes the unit amount of a capped bucket and keeps what the model priced', () => {
    const fees = computeChargeFees(standard('100', { max_amount_cents: 300 }), { default: count(4), filters: [] });
    expect(fees.default.model.amount.toString()).toBe('400');
    expect(fees.default.amount.toString()).toBe('300');
    expect(fees.default.unitAmount.toString()).toBe('75');
  });

  describe('prorated for a partial period', () => {
    it.each([
      // Started May 15 on a 31-day month: 17 days used (billing-rules.md, proration example).
      { cap: 3100, ratio: { usedDays: 17, periodDays: 31 }, expected: '1700' },
      // lago-reference.md 2.9: 5000 x 17 / 31 = 2741.93548... → 4 digits half up.
      { cap: 5000, ratio: { usedDays: 17, periodDays: 31 }, expected: '2741.9355' },
      { cap: 1, ratio: { usedDays: 1, periodDays: 32 }, expected: '0.0313' }, // 0.03125 half up
      { cap: 1, ratio: { usedDays: 1, periodDays: 3 }, expected: '0.3333' },
      { cap: 1000, ratio: { usedDays: 30, periodDays: 30 }, expected: '1000' },
      { cap: 1000, ratio: { usedDays: 0, periodDays: 30 }, expected: '0' },
    ])('$cap for $ratio.usedDays/$ratio.periodDays days → $expected', ({ cap, ratio, expected }) => {
      expect(prorateCap(cap, ratio).toString()).toBe(expected);
    });

    it('tops up to the prorated minimum', () => {
      const fees = computeChargeFees(standard('100', { min_amount_cents: 5000 }), twoBuckets(12, 8), {
        usedDays: 17,
        periodDays: 31,
      });
      expect(fees.minAmount?.toString()).toBe('2741.9355');
      expect(fees.minTrueUp.toString()).toBe('741.9355');
      expect(fees.amount.toString()).toBe('2741.9355');
    });

    it('caps at the prorated maximum', () => {
      const fees = computeChargeFees(standard('100', { max_amount_cents: 3100 }), twoBuckets(10, 10), {
        usedDays: 17,
        periodDays: 31,
      });
      expect(fees.maxAmount?.toString()).toBe('1700');
      expect(strings(fees)).toEqual({ default: '850', filters: ['850'], amountBeforeCaps: '2000', minTrueUp: '0', amount: '1700' });
    });

    it.each([
      { usedDays: 1, periodDays: 0 },
      { usedDays: -1, periodDays: 30 },
      { usedDays: 31, periodDays: 30 },
      { usedDays: 1.5, periodDays: 30 },
    ])('refuses the ratio $usedDays/$periodDays', (ratio) => {
      expect(() => prorateCap(100, ratio)).toThrow(RangeError);
    });
  });
});

describe('pay-in-advance event price', () => {
  // Tiers of lago-reference.md 2.2 in cents: [0-10 @1000 +200], [11-20 @500 +300], [21-∞ @500 +300].
  const graduated = {
    charge_model: 'graduated' as const,
    properties: {
      graduated_ranges: [
        { from_value: 0, to_value: 10, per_unit_amount: '1000', flat_amount: '200' },
        { from_value: 11, to_value: 20, per_unit_amount: '500', flat_amount: '300' },
        { from_value: 21, to_value: null, per_unit_amount: '500', flat_amount: '300' },
      ],
    },
  };

  it.each([
    // The first event of the period pays the first tier's flat amount with its unit.
    { name: 'first event', before: summed([]), after: summed(['1']), expected: '1200' },
    { name: 'inside the first tier', before: summed(['4']), after: summed(['4', '3']), expected: '3000' },
    // 8 → 13 crosses 10: 2 units at 1000, 3 at 500 and the second flat amount 300.
    { name: 'across a tier boundary', before: summed(['8']), after: summed(['8', '5']), expected: '3800' },
    { name: 'landing on the boundary', before: summed(['8']), after: summed(['8', '2']), expected: '2000' },
    { name: 'across two boundaries', before: summed(['8']), after: summed(['8', '14']), expected: '8600' },
    { name: 'a zero-valued first event still pays the flat amount', before: summed([]), after: summed(['0']), expected: '200' },
    { name: 'a negative value is never refunded', before: summed(['8']), after: summed(['8', '-3']), expected: '0' },
  ])('graduated: $name → $expected', ({ before, after, expected }) => {
    expect(priceEventInAdvance({ ...graduated, before, after }).toString()).toBe(expected);
  });

  it('bills the events of a period to the same total as pricing the period at once', () => {
    const values = ['3', '6', '5', '9'];
    let billed = dec(0);
    for (let i = 0; i < values.length; i += 1) {
      billed = billed.plus(
        priceEventInAdvance({ ...graduated, before: summed(values.slice(0, i)), after: summed(values.slice(0, i + 1)) }),
      );
    }
    // 23 units: 10200 + 10 x 500 + 300 + 3 x 500 + 300
    expect(billed.toString()).toBe('17300');
  });

  it('with what was already billed, usage that went down and back up is billed once', () => {
    const charge = standard('100');
    const first = priceEventInAdvance({ ...charge, before: summed([]), after: summed(['10']) });
    const second = priceEventInAdvance({ ...charge, before: summed(['10']), after: summed(['10', '-5']), alreadyBilled: first });
    const third = priceEventInAdvance({
      ...charge,
      before: summed(['10', '-5']),
      after: summed(['10', '-5', '8']),
      alreadyBilled: first.plus(second),
    });
    expect([first, second, third].map(String)).toEqual(['1000', '0', '300']);
    // Without it, the third event is priced from the lowered level.
    expect(priceEventInAdvance({ ...charge, before: summed(['10', '-5']), after: summed(['10', '-5', '8']) }).toString()).toBe('800');
  });

  it.each([
    {
      name: 'package: only the event opening a package pays',
      charge: { charge_model: 'package' as const, properties: { amount: '500', package_size: 10 } },
      steps: [
        [[], ['1']],
        [['1'], ['1', '9']],
        [
          ['1', '9'],
          ['1', '9', '1'],
        ],
      ],
      expected: ['500', '0', '500'],
    },
    {
      name: 'percentage: rate and fixed amount per transaction, after the free events',
      charge: { charge_model: 'percentage' as const, properties: { rate: '1', fixed_amount: '50', free_units_per_events: 1 } },
      steps: [
        [[], ['10000']],
        [['10000'], ['10000', '20000']],
      ],
      expected: ['0', '250'],
    },
    {
      name: 'custom fixed amount: billed with the first event only',
      charge: { charge_model: 'custom' as const, properties: { custom_amount: '999' } },
      steps: [
        [[], ['1']],
        [['1'], ['1', '1']],
      ],
      expected: ['999', '0'],
    },
  ])('$name', ({ charge, steps, expected }) => {
    const prices = steps.map(([before = [], after = []]) =>
      priceEventInAdvance({ ...charge, before: summed(before), after: summed(after) }).toString(),
    );
    expect(prices).toEqual(expected);
  });

  it('dynamic: the new event pays its own price times quantity', () => {
    const first = { unit_price: '250', quantity: 2 };
    const second = { unit_price: '0.125', quantity: 3 };
    const price = priceEventInAdvance({
      charge_model: 'dynamic',
      properties: {},
      before: withEvents(summed(['2']), [first]),
      after: withEvents(summed(['2', '3']), [first, second]),
    });
    expect(price.toString()).toBe('0.375');
  });
});
