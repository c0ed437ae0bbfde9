import { z } from 'zod';
import { dec } from '../money';
import type { AggregationResult } from '../usage-types';
import {
  amountSchema,
  type ChargeModelResult,
  checkContiguousTiers,
  modelResult,
  rateSchema,
  sumGraduatedTiers,
  tierBoundsShape,
} from './shared';

/**
 * `{ graduated_percentage_ranges: [{ from_value, to_value, rate, flat_amount }] }`: graduated tiers
 * over an aggregated amount, each tier taking `rate` percent of the part inside it.
 */
export const propertiesSchema = z.strictObject({
  graduated_percentage_ranges: z
    .array(
      z.strictObject({
        ...tierBoundsShape,
        rate: rateSchema,
        flat_amount: amountSchema,
      }),
    )
    .min(1)
    .superRefine(checkContiguousTiers),
});

export type GraduatedPercentageProperties = z.output<typeof propertiesSchema>;

export function compute(properties: GraduatedPercentageProperties, aggregation: AggregationResult): ChargeModelResult {
  const { units, eventsCount } = aggregation;
  // Like graduated, the first tier's flat amount is due at zero units (lago-reference.md 2.6).
  const amount = sumGraduatedTiers(properties.graduated_percentage_ranges, units, (tier, unitsInTier) =>
    unitsInTier.times(dec(tier.rate)).div(100).plus(dec(tier.flat_amount)),
  );
  return modelResult(amount, units, eventsCount);
}
