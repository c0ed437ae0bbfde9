import { z } from 'zod';
import { dec } from '../money';
import type { AggregationResult } from '../usage-types';
import { amountSchema, type ChargeModelResult, modelResult } from './shared';

/**
 * Exactly one of `{ custom_amount }` (a fixed amount for the period) or `{ unit_price }` (units times
 * it), per billing-rules.md. One object with a cross-field check rather than a union, so that a bad
 * value is reported at its own path instead of as "no union member matched".
 */
export const propertiesSchema = z
  .strictObject({
    custom_amount: amountSchema.optional(),
    unit_price: amountSchema.optional(),
  })
  .superRefine((p, ctx) => {
    if (p.custom_amount !== undefined && p.unit_price !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['unit_price'], message: 'give either custom_amount or unit_price, not both' });
    } else if (p.custom_amount === undefined && p.unit_price === undefined) {
      ctx.addIssue({ code: 'custom', path: ['custom_amount'], message: 'custom_amount or unit_price is required' });
    }
  });

export type CustomProperties = z.output<typeof propertiesSchema>;

export function compute(properties: CustomProperties, aggregation: AggregationResult): ChargeModelResult {
  const { units, eventsCount } = aggregation;
  // A fixed amount "for the period" is due whatever the usage, zero included.
  const amount = properties.custom_amount !== undefined ? dec(properties.custom_amount) : units.times(dec(properties.unit_price ?? 0));
  return modelResult(amount, units, eventsCount);
}
