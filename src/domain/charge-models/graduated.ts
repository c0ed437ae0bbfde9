import { z } from 'zod';
import { dec } from '../money';
import type { AggregationResult } from '../usage-types';
import { amountSchema, type ChargeModelResult, checkContiguousTiers, modelResult, sumGraduatedTiers, tierBoundsShape } from './shared';

/**
 * `{ graduated_ranges: [{ from_value, to_value, per_unit_amount, flat_amount }] }`: each tier prices
 * the units that fall inside it, plus its flat amount once reached.
 */
export const propertiesSchema = z.strictObject({
  graduated_ranges: z
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

export type GraduatedProperties = z.output<typeof propertiesSchema>;

export function compute(properties: GraduatedProperties, aggregation: AggregationResult): ChargeModelResult {
  const { units, eventsCount } = aggregation;
  const amount = sumGraduatedTiers(properties.graduated_ranges, units, (tier, unitsInTier) =>
    unitsInTier.times(dec(tier.per_unit_amount)).plus(dec(tier.flat_amount)),
  );
  return modelResult(amount, units, eventsCount);
}
