import { z } from 'zod';
import { type Dec, dec, ZERO } from '../money';
import type { AggregationResult } from '../usage-types';
import { amountSchema, type ChargeModelResult, checkContiguousTiers, modelResult, tierBoundsShape } from './shared';

/**
 * `{ volume_ranges: [{ from_value, to_value, per_unit_amount, flat_amount }] }`: the total volume
 * picks one tier, and every unit is priced at that tier.
 */
export const propertiesSchema = z.strictObject({
  volume_ranges: z
    .array(
      z.strictObject({
        ...tierBoundsShape,
        per_unit_amount: amountSchema,
        flat_amount: amountSchema,
      }),
    )
    .min(1)
    .superRefine(checkContiguousTiers),
});

export type VolumeProperties = z.output<typeof propertiesSchema>;

/** The tier the total volume picks; undefined only for negative units (which price at 0). */
export function volumeTier(properties: VolumeProperties, units: Dec): VolumeProperties['volume_ranges'][number] | undefined {
  // from_value is compared with ceil(units) so that 100.5 units land in a classic 101-200 tier
  // instead of falling in the gap between 100 and 101 (lago-reference.md 2.3).
  const roundedUp = units.ceil();
  return properties.volume_ranges.find((t) => roundedUp.gte(t.from_value) && (t.to_value === null || units.lte(t.to_value)));
}

export function compute(properties: VolumeProperties, aggregation: AggregationResult): ChargeModelResult {
  const { units, eventsCount } = aggregation;
  const tier = volumeTier(properties, units);
  // Only negative units match no tier, and those price at 0 anyway.
  if (tier === undefined) return modelResult(ZERO, units, eventsCount);
  return modelResult(units.times(dec(tier.per_unit_amount)).plus(dec(tier.flat_amount)), units, eventsCount);
}
