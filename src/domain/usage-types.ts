import type { Dec } from './money';

/** One stored usage event as the domain sees it (already resolved to a subscription and metric). */
export interface UsageEvent {
  transactionId: string;
  timestamp: Date;
  properties: Readonly<Record<string, unknown>>;
}

/**
 * What an aggregation yields for one bucket of events (a charge filter, or the charge's default
 * bucket) over one period. Charge models price from this.
 */
export interface AggregationResult {
  /** Aggregated units, after the metric's rounding_function / rounding_precision. */
  units: Dec;
  /** Events that contributed a value (all events for `count`; see billing-rules.md, Usage). */
  eventsCount: number;
  /**
   * The per-event values that contributed, in timestamp order (the event's numeric property, or
   * its expression's value, or 1 for `count`). The percentage model's per-transaction rules and
   * pay-in-advance pricing read these.
   */
  perEventValues: Dec[];
  /**
   * Every event of the bucket in the period, whether or not it contributed a value. Only the
   * `dynamic` charge model reads it (it prices from each event's own price and quantity properties,
   * whatever the metric's aggregation), so aggregations may leave it out for the other models.
   */
  events?: readonly UsageEvent[];
}
