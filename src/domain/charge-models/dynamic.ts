import { z } from 'zod';
import { ZERO } from '../money';
import type { AggregationResult } from '../usage-types';
import { type ChargeModelResult, modelResult, numericValue } from './shared';

const fieldName = z.string().min(1, { error: 'must be a non-empty property name' });

/**
 * `{ price_field = "unit_price", quantity_field = "quantity" }`: each event carries its own price (in
 * cents) and quantity (billing-rules.md, Usage, which replaces Lago's `precise_total_amount_cents`).
 */
export const propertiesSchema = z.strictObject({
  price_field: fieldName.default('unit_price'),
  quantity_field: fieldName.default('quantity'),
});

export type DynamicProperties = z.output<typeof propertiesSchema>;

/**
 * Prices from the events themselves, whatever the metric's aggregation, so it needs
 * `aggregation.events`. An event lacking a numeric price or quantity is skipped and not counted,
 * like an event without a numeric value in a numeric aggregation.
 */
export function compute(properties: DynamicProperties, aggregation: AggregationResult): ChargeModelResult {
  if (aggregation.events === undefined) {
    // Pricing without the events would silently bill nothing; this is a wiring bug, not usage.
    throw new Error('the dynamic charge model needs the bucket events (AggregationResult.events)');
  }
  let amount = ZERO;
  let units = ZERO;
  let eventsCount = 0;
  for (const event of aggregation.events) {
    const price = numericValue(event.properties[properties.price_field]);
    const quantity = numericValue(event.properties[properties.quantity_field]);
    if (price === undefined || quantity === undefined) continue;
    amount = amount.plus(price.times(quantity));
    units = units.plus(quantity);
    eventsCount += 1;
  }
  return modelResult(amount, units, eventsCount);
}
