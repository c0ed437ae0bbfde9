import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128 } from '../base';

/**
 * The pre-aggregate of one subscription's usage of one metric on one local day (the customer's
 * time zone), per dimensions key. Maintained at ingestion with $inc (count, sum) or $max (max);
 * only for the aggregations whose daily roll-up is exact (src/domain/aggregation/daily.ts).
 */
export interface DailyUsageDoc {
  /** `<subscription>|<metric>|<YYYY-MM-DD>|<dimensions key>`: deterministic, so upserts converge. */
  _id: string;
  organization_id: string;
  subscription_id: string;
  billable_metric_id: string;
  usage_date: string;
  dimensions_key: string;
  usage_value: Types.Decimal128;
  events_count: number;
  created_at: Date;
  updated_at: Date;
}

export const dailyUsageSchema = new Schema<DailyUsageDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    subscription_id: { type: String, required: true },
    billable_metric_id: { type: String, required: true },
    usage_date: { type: String, required: true },
    dimensions_key: { type: String, required: true },
    usage_value: { type: Decimal128, required: true },
    events_count: { type: Number, required: true },
  },
  collectionOptions<DailyUsageDoc>('daily_usage'),
);

// A row's _id is (subscription, metric, date, dimensions) (dailyRowId): that is its uniqueness. This
// index answers "a subscription's rows of these metrics over these dates" (a range on usage_date).
dailyUsageSchema.index({ subscription_id: 1, billable_metric_id: 1, usage_date: 1 });
