import { z } from 'zod';
import { dec } from '../money';
import type { AggregationResult } from '../usage-types';
import { amountSchema, type ChargeModelResult, modelResult } from './shared';

/** `{ amount }`: every unit at the same price. */
export const propertiesSchema = z.strictObject({
  amount: amountSchema,
});

export type StandardProperties = z.output<typeof propertiesSchema>;

export function compute(properties: StandardProperties, aggregation: AggregationResult): ChargeModelResult {
  const { units, eventsCount } = aggregation;
  return modelResult(units.times(dec(properties.amount)), units, eventsCount);
}
