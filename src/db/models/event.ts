import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

/** A usage event, durable before the API answers. Never goes through Temporal one by one. */
export interface EventDoc extends BaseDoc {
  organization_id: string;
  /** The client's idempotency key: unique per organization. */
  transaction_id: string;
  external_customer_id: string;
  customer_id: string;
  external_subscription_id: string | null;
  /** The subscriptions the event was resolved to at ingestion (several when none was named). */
  subscription_ids: string[];
  code: string;
  billable_metric_id: string;
  timestamp: Date;
  properties: Record<string, unknown>;
  /**
   * The metric-filter dimensions of the event (values of the metric's filter keys that are among
   * the allowed values), as a stable key: the daily pre-aggregate groups by it, and any charge
   * filter can be matched against it later, whatever the plan.
   */
  dimensions_key: string;
}

export const eventSchema = new Schema<EventDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    transaction_id: { type: String, required: true },
    external_customer_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    external_subscription_id: { type: String, default: null },
    subscription_ids: { type: [String], default: [] },
    code: { type: String, required: true },
    billable_metric_id: { type: String, required: true },
    timestamp: { type: Date, required: true },
    properties: { type: Schema.Types.Mixed, default: () => ({}) },
    dimensions_key: { type: String, default: '' },
  },
  { ...collectionOptions<EventDoc>('events'), minimize: false },
);

// Idempotency: one event per transaction_id and organization (409 / `duplicates`).
eventSchema.index({ organization_id: 1, transaction_id: 1 }, { unique: true });
// "This subscription's events of this metric in this period" (multikey on subscription_ids).
eventSchema.index({ organization_id: 1, subscription_ids: 1, billable_metric_id: 1, timestamp: 1 });
eventSchema.index({ organization_id: 1, external_customer_id: 1, code: 1, timestamp: 1 });
eventSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
