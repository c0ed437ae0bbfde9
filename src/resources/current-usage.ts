// A customer's current usage of a subscription's period, priced, as the API returns it
// (GET /v1/customers/{id}/current_usage). Nothing stores it: it is mapped from the usage the
// engine computes at the moment of the request.
import type Decimal from 'decimal.js';
import { z } from 'zod';
import { sum, toDecimal4String } from '../domain/money';
import type { ChargeUsage } from '../usage/period-usage';
import { decimal4, iso, timestamp } from './format';

const usageAmounts = { units: decimal4, events_count: z.number().int(), amount_cents: decimal4 };

export const currentUsageResource = z
  .object({
    customer_id: z.string(),
    subscription_id: z.string(),
    currency: z.string(),
    from_datetime: timestamp,
    to_datetime: timestamp,
    amount_cents: decimal4,
    taxes_amount_cents: decimal4,
    total_amount_cents: decimal4,
    charges: z.array(
      z.object({
        charge_id: z.string(),
        billable_metric_code: z.string(),
        charge_model: z.string(),
        ...usageAmounts,
        filters: z.array(z.object({ values: z.record(z.string(), z.array(z.string())), ...usageAmounts })),
      }),
    ),
  })
  .meta({ id: 'CurrentUsage' });

export type CurrentUsageResource = z.output<typeof currentUsageResource>;

export interface CurrentUsage {
  customerId: string;
  subscriptionId: string;
  currency: string;
  /** The range the usage covers: [from, to). */
  from: Date;
  to: Date;
  /** Each charge of the plan with its aggregations and fees over the range. */
  usage: ChargeUsage[];
  /** The taxes on the charges' amounts. */
  taxesAmountCents: Decimal;
}

export function toCurrentUsageResource(current: CurrentUsage): CurrentUsageResource {
  const charges = current.usage.map(({ charge, metric, aggregations, fees }) => ({
    charge_id: charge._id,
    billable_metric_code: metric.code,
    charge_model: charge.charge_model,
    units: toDecimal4String(fees.units),
    events_count: fees.eventsCount,
    amount_cents: toDecimal4String(fees.amount),
    filters: charge.filters.map((filter, i) => ({
      values: filter.values,
      units: toDecimal4String(aggregations.filters[i]!.units),
      events_count: aggregations.filters[i]!.eventsCount,
      amount_cents: toDecimal4String(fees.filters[i]!.amount),
    })),
  }));
  const amount = sum(current.usage.map((u) => u.fees.amount));
  return {
    customer_id: current.customerId,
    subscription_id: current.subscriptionId,
    currency: current.currency,
    from_datetime: iso(current.from),
    to_datetime: iso(current.to),
    amount_cents: toDecimal4String(amount),
    taxes_amount_cents: toDecimal4String(current.taxesAmountCents),
    total_amount_cents: toDecimal4String(amount.plus(current.taxesAmountCents)),
    charges,
  };
}
