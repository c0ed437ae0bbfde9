import { z } from 'zod';
import { dec, ZERO } from '../money';
import type { AggregationResult } from '../usage-types';
import { amountSchema, type ChargeModelResult, countSchema, modelResult } from './shared';

/** `{ amount, package_size, free_units }`: units are sold in whole packages after the free ones. */
export const propertiesSchema = z.strictObject({
  amount: amountSchema,
  package_size: z
    .number({ error: 'must be a positive integer' })
    .int({ error: 'must be a positive integer' })
    .positive({ error: 'must be a positive integer' }),
  free_units: countSchema.default(0),
});

export type PackageProperties = z.output<typeof propertiesSchema>;

export function compute(properties: PackageProperties, aggregation: AggregationResult): ChargeModelResult {
  const { units, eventsCount } = aggregation;
  const paidUnits = units.minus(properties.free_units);
  // A package is due from its first unit, so a started package counts as a whole one.
  const packages = paidUnits.gt(0) ? paidUnits.div(properties.package_size).ceil() : ZERO;
  return modelResult(packages.times(dec(properties.amount)), units, eventsCount);
}
