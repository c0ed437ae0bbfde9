import { type ChargeModel, type ChargeModelResult, computeChargeModel } from './charge-models';
import { Dec, type DecimalInput, dec, nonNegative, roundFee, sum, ZERO } from './money';
import type { AggregationResult } from './usage-types';

/**
 * The parts of a stored charge that pricing reads, named as the API and storage name them so a
 * charge document can be passed as is.
 */
export interface PricedCharge {
  charge_model: ChargeModel;
  /** The charge's own properties: they price the default bucket. */
  properties: unknown;
  min_amount_cents?: DecimalInput | null | undefined;
  max_amount_cents?: DecimalInput | null | undefined;
}

/** One charge filter's bucket: its events' aggregation, priced with the filter's own properties. */
export interface FilterBucket {
  properties: unknown;
  aggregation: AggregationResult;
}

/** The charge's usage already split into buckets by event-to-filter matching. */
export interface ChargeBuckets {
  /** Events that matched no filter (all events when the charge has no filters). */
  default: AggregationResult;
  /** In the charge's filter order; the results keep that order. */
  filters: readonly FilterBucket[];
}

/** `usedDays / periodDays` of a partial period, counted like the base fee's proration. */
export interface ProrationRatio {
  usedDays: number;
  periodDays: number;
}

export const FULL_PERIOD: ProrationRatio = { usedDays: 1, periodDays: 1 };

export interface BucketFee {
  /** What the charge model priced. */
  model: ChargeModelResult;
  /** The model's amount less this bucket's share of the max cap: what the bucket's fee bills. */
  amount: Dec;
  /** amount / units, 4 fractional digits (0 without units). */
  unitAmount: Dec;
}

export interface ChargeFees {
  default: BucketFee;
  filters: BucketFee[];
  units: Dec;
  eventsCount: number;
  /** Sum of the buckets as priced, before min/max. */
  amountBeforeCaps: Dec;
  /** Prorated caps, null when the charge has none. */
  minAmount: Dec | null;
  maxAmount: Dec | null;
  /**
   * What the minimum adds on top of the buckets (0 when usage reaches it). Kept apart from the
   * buckets, like Lago's true-up fee, since it is not usage of any bucket.
   */
  minTrueUp: Dec;
  /** The charge total after min/max: Σ bucket amounts + minTrueUp. */
  amount: Dec;
}

/** A cap prorated like the base fee: `cap * usedDays / periodDays`, 4 fractional digits half up. */
export function prorateCap(cap: DecimalInput, ratio: ProrationRatio = FULL_PERIOD): Dec {
  const { usedDays, periodDays } = ratio;
  if (!Number.isInteger(usedDays) || !Number.isInteger(periodDays) || periodDays <= 0 || usedDays < 0) {
    throw new RangeError(`invalid proration ratio ${usedDays}/${periodDays}`);
  }
  if (usedDays > periodDays) throw new RangeError(`used days ${usedDays} exceed the period's ${periodDays}`);
  // Multiply before dividing so that a full period gives the cap back exactly.
  return roundFee(dec(cap).times(usedDays).div(periodDays));
}

function bucketFee(model: ChargeModelResult, amount: Dec): BucketFee {
  return { model, amount, unitAmount: model.units.isZero() ? ZERO : roundFee(amount.div(model.units)) };
}

/**
 * Splits a reduction over the buckets in proportion to their amounts. Each share is the difference
 * of rounded cumulative shares, so the shares add up to the reduction exactly and none exceeds its
 * bucket (a bucket never goes negative).
 */
function shareReduction(amounts: readonly Dec[], reduction: Dec): Dec[] {
  const total = sum(amounts);
  if (reduction.isZero() || total.isZero()) return amounts.map(() => ZERO);
  let cumulative = ZERO;
  let previousShare = ZERO;
  return amounts.map((amount) => {
    cumulative = cumulative.plus(amount);
    const cumulativeShare = roundFee(reduction.times(cumulative).div(total));
    const share = cumulativeShare.minus(previousShare);
    previousShare = cumulativeShare;
    return share;
  });
}

/**
 * Prices every bucket of a charge, then holds the charge's total between its (prorated) minimum and
 * maximum (billing-rules.md, Invoice pipeline 1). When both caps apply and the minimum exceeds the
 * maximum, the maximum wins: a customer is never billed above a stated ceiling.
 */
export function computeChargeFees(charge: PricedCharge, buckets: ChargeBuckets, proration: ProrationRatio = FULL_PERIOD): ChargeFees {
  const defaultResult = computeChargeModel(charge.charge_model, charge.properties, buckets.default);
  const filterResults = buckets.filters.map((f) => computeChargeModel(charge.charge_model, f.properties, f.aggregation));
  const results = [defaultResult, ...filterResults];

  const amountBeforeCaps = sum(results.map((r) => r.amount));
  const minAmount = charge.min_amount_cents == null ? null : prorateCap(charge.min_amount_cents, proration);
  const maxAmount = charge.max_amount_cents == null ? null : prorateCap(charge.max_amount_cents, proration);

  let target = amountBeforeCaps;
  if (minAmount !== null) target = Dec.max(target, minAmount);
  if (maxAmount !== null) target = Dec.min(target, maxAmount);

  const minTrueUp = nonNegative(target.minus(amountBeforeCaps));
  const reduction = nonNegative(amountBeforeCaps.minus(target));
  const shares = shareReduction(
    results.map((r) => r.amount),
    reduction,
  );
  const fees = results.map((r, i) => bucketFee(r, r.amount.minus(shares[i] ?? ZERO)));
  const [defaultFee, ...filterFees] = fees;
  if (defaultFee === undefined) throw new Error('unreachable: the default bucket is always priced');

  return {
    default: defaultFee,
    filters: filterFees,
    units: sum(results.map((r) => r.units)),
    eventsCount: results.reduce((n, r) => n + r.eventsCount, 0),
    amountBeforeCaps,
    minAmount,
    maxAmount,
    minTrueUp,
    amount: target,
  };
}

export interface InAdvanceEvent {
  charge_model: ChargeModel;
  /** The properties of the bucket the event fell in (a filter's, or the charge's own). */
  properties: unknown;
  /** The bucket's aggregation over the period before the event. */
  before: AggregationResult;
  /** The same aggregation with the event. */
  after: AggregationResult;
  /**
   * What in-advance fees already billed for this bucket in the period. When given, the event pays
   * only what the price exceeds it by, so usage that went down and back up (a sum with negative
   * values) is not billed twice (Lago tracks the period's maximum for the same reason).
   */
  alreadyBilled?: Dec | undefined;
}

/**
 * The price of one pay-in-advance event: price with it − price without it, never negative, so a
 * graduated tier crossing is billed at the right tiers. Before the period's first event the price
 * without it is 0, not the zero-usage price: the first tier's flat amount (or a custom fixed amount)
 * is billed with the first event rather than never. Caps do not apply per event (Lago refuses a
 * minimum on pay-in-advance charges).
 */
export function priceEventInAdvance(input: InAdvanceEvent): Dec {
  const after = computeChargeModel(input.charge_model, input.properties, input.after).amount;
  const before =
    input.alreadyBilled ??
    (input.before.eventsCount === 0 ? ZERO : computeChargeModel(input.charge_model, input.properties, input.before).amount);
  return nonNegative(roundFee(after.minus(before)));
}

/**
 * A prorated in-advance event of a recurring metric (lago-reference.md 2.10; standard only): the
 * units it adds beyond the most ever billed in the period (`billedUnits`: the carried units and the
 * units earlier events added) are priced for the part of the period left, `ratio` = the days from
 * the event's local day to the period end (inclusive) over the period's days. Units going down and
 * up again are not billed twice. Units are exact; the amount is rounded as a fee.
 */
export function priceProratedEventInAdvance(input: {
  charge_model: ChargeModel;
  properties: unknown;
  after: AggregationResult;
  billedUnits: Dec;
  ratio: Dec;
}): { units: Dec; amount: Dec } {
  const units = Dec.max(input.after.units.minus(input.billedUnits), ZERO);
  if (units.isZero()) return { units, amount: ZERO };
  const full = computeChargeModel(input.charge_model, input.properties, { ...input.after, units }).amount;
  return { units, amount: nonNegative(roundFee(full.times(input.ratio))) };
}
