// The steps of one bucket's price, for explanations (GET /v1/invoices/{id}/explain). Nothing here
// prices on its own: every amount comes from computeChargeModel, the one implementation of the
// charge models, run again on the units that were billed. A tiered model's step is the price up to
// the tier's end less the price up to the previous tier's end, so the steps add up to the model's
// amount exactly, rounding included.
import { type ChargeModel, computeChargeModel } from './charge-models';
import { propertiesSchema as graduatedSchema } from './charge-models/graduated';
import { propertiesSchema as graduatedPercentageSchema } from './charge-models/graduated-percentage';
import { propertiesSchema as packageSchema } from './charge-models/package';
import { propertiesSchema as percentageSchema } from './charge-models/percentage';
import { propertiesSchema as customSchema } from './charge-models/custom';
import { propertiesSchema as standardSchema } from './charge-models/standard';
import { type TierBounds, sumGraduatedTiers } from './charge-models/shared';
import { propertiesSchema as volumeSchema, volumeTier } from './charge-models/volume';
import { type Dec, dec, ZERO } from './money';
import type { AggregationResult } from './usage-types';

export interface ChargeModelStep {
  /** What this step applies, in words ("units 10 to 20 at 5 each, plus 200 once reached"). */
  description: string;
  /** The tier's bounds (graduated, graduated_percentage, volume); null for models without tiers. */
  from_value: number | null;
  to_value: number | null;
  /** The units this step prices. */
  units: Dec;
  per_unit_amount: Dec | null;
  /** A percentage (1.5 = 1.5 %), for percentage models. */
  rate: Dec | null;
  flat_amount: Dec | null;
  amount: Dec;
}

export interface ChargeModelSteps {
  steps: ChargeModelStep[];
  /** The model's amount for these units: what the steps add up to. */
  amount: Dec;
}

interface Tier extends TierBounds {
  flat_amount: string | number;
}

const bounds = (tier: TierBounds) => `${tier.from_value} to ${tier.to_value === null ? '∞' : tier.to_value}`;

/**
 * A tiered model's steps: the walk over the tiers is the models' own (sumGraduatedTiers), each
 * step's amount the model's price up to the tier's end less its price up to the previous one.
 */
function tieredSteps<T extends Tier>(
  model: ChargeModel,
  properties: unknown,
  tiers: readonly T[],
  aggregation: AggregationResult,
  total: Dec,
  describe: (tier: T) => Pick<ChargeModelStep, 'per_unit_amount' | 'rate' | 'description'>,
): ChargeModelSteps {
  const { units } = aggregation;
  const reached: { tier: T; unitsInTier: Dec }[] = [];
  sumGraduatedTiers(tiers, units, (tier, unitsInTier) => {
    reached.push({ tier, unitsInTier });
    return ZERO;
  });
  let before = ZERO;
  const steps = reached.map(({ tier, unitsInTier }, i) => {
    const upTo = i === reached.length - 1 ? units : dec(tier.to_value!);
    const priced = i === reached.length - 1 ? total : computeChargeModel(model, properties, { ...aggregation, units: upTo }).amount;
    const amount = priced.minus(before);
    before = priced;
    return {
      ...describe(tier),
      from_value: tier.from_value,
      to_value: tier.to_value,
      units: unitsInTier,
      flat_amount: dec(tier.flat_amount),
      amount,
    };
  });
  return { steps, amount: total };
}

function singleStep(amount: Dec, step: Omit<ChargeModelStep, 'amount' | 'from_value' | 'to_value'> & Partial<ChargeModelStep>) {
  return { steps: [{ from_value: null, to_value: null, ...step, amount }], amount };
}

/**
 * The steps of `model` over one bucket's aggregation. Negative units price at zero (the "no
 * negative fee" rule) in one step. Throws what computeChargeModel throws (invalid properties; a
 * dynamic charge without its events).
 */
export function chargeModelSteps(model: ChargeModel, properties: unknown, aggregation: AggregationResult): ChargeModelSteps {
  const { units } = aggregation;
  const amount = computeChargeModel(model, properties, aggregation).amount;
  const plain = { per_unit_amount: null, rate: null, flat_amount: null, units };
  if (units.isNegative()) return singleStep(amount, { ...plain, description: 'negative units price at 0' });
  switch (model) {
    case 'standard': {
      const p = standardSchema.parse(properties);
      return singleStep(amount, { ...plain, per_unit_amount: dec(p.amount), description: `${units.toString()} units at ${p.amount} each` });
    }
    case 'graduated': {
      const p = graduatedSchema.parse(properties);
      return tieredSteps(model, properties, p.graduated_ranges, aggregation, amount, (tier) => ({
        per_unit_amount: dec(tier.per_unit_amount),
        rate: null,
        description: `units ${bounds(tier)} at ${tier.per_unit_amount} each, plus ${tier.flat_amount} once reached`,
      }));
    }
    case 'graduated_percentage': {
      const p = graduatedPercentageSchema.parse(properties);
      return tieredSteps(model, properties, p.graduated_percentage_ranges, aggregation, amount, (tier) => ({
        per_unit_amount: null,
        rate: dec(tier.rate),
        description: `amounts ${bounds(tier)} at ${tier.rate} %, plus ${tier.flat_amount} once reached`,
      }));
    }
    case 'volume': {
      const p = volumeSchema.parse(properties);
      const tier = volumeTier(p, units);
      if (!tier) return singleStep(amount, { ...plain, description: 'no tier: priced at 0' });
      return singleStep(amount, {
        ...plain,
        from_value: tier.from_value,
        to_value: tier.to_value,
        per_unit_amount: dec(tier.per_unit_amount),
        flat_amount: dec(tier.flat_amount),
        description: `all ${units.toString()} units in the tier ${bounds(tier)}: ${tier.per_unit_amount} each, plus ${tier.flat_amount}`,
      });
    }
    case 'package': {
      const p = packageSchema.parse(properties);
      return singleStep(amount, {
        ...plain,
        description: `${units.toString()} units in packages of ${p.package_size} at ${p.amount} each, the first ${p.free_units} free`,
      });
    }
    case 'percentage': {
      const p = percentageSchema.parse(properties);
      const extras = [
        p.fixed_amount != null ? `plus ${p.fixed_amount} per transaction` : null,
        p.free_units_per_events != null ? `the first ${p.free_units_per_events} events free` : null,
        p.free_units_per_total_aggregation != null ? `the first ${p.free_units_per_total_aggregation} free` : null,
        p.per_transaction_min_amount != null ? `at least ${p.per_transaction_min_amount} per transaction` : null,
        p.per_transaction_max_amount != null ? `at most ${p.per_transaction_max_amount} per transaction` : null,
      ].filter((e) => e !== null);
      return singleStep(amount, {
        ...plain,
        rate: dec(p.rate),
        description: [`${p.rate} % of ${units.toString()}`, ...extras].join(', '),
      });
    }
    case 'custom': {
      const p = customSchema.parse(properties);
      return p.custom_amount !== undefined
        ? singleStep(amount, { ...plain, flat_amount: dec(p.custom_amount), description: `a fixed ${p.custom_amount} for the period` })
        : singleStep(amount, {
            ...plain,
            per_unit_amount: dec(p.unit_price ?? 0),
            description: `${units.toString()} units at ${p.unit_price ?? 0} each`,
          });
    }
    case 'dynamic':
      return singleStep(amount, { ...plain, description: "each event's price times its quantity" });
    default: {
      const unknownModel: never = model;
      throw new Error(`unknown charge model: ${String(unknownModel)}`);
    }
  }
}
