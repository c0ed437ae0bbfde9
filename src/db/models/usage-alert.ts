import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

/** What a usage alert watches in the subscription's current period (the reference system's names). */
export const USAGE_ALERT_TYPES = [
  'billable_metric_current_usage_units',
  'billable_metric_current_usage_amount',
  'current_usage_amount',
] as const;
export type UsageAlertType = (typeof USAGE_ALERT_TYPES)[number];

/**
 * A usage alert of a subscription (docs/usage-alerts.md): checked when the subscription's events
 * are ingested, it fires `usage_alert.triggered` once per crossing of its threshold per period.
 */
export interface UsageAlertDoc extends BaseDoc {
  organization_id: string;
  subscription_id: string;
  external_subscription_id: string;
  customer_id: string;
  alert_type: UsageAlertType;
  /** The watched metric; null for current_usage_amount (every charge of the plan). */
  billable_metric_id: string | null;
  billable_metric_code: string | null;
  name: string | null;
  /** Units of the metric, or cents of the plan's currency (amount types): > 0. */
  threshold: Types.Decimal128;
  /** Recurring: fires at every multiple of the threshold; otherwise once per period. */
  recurring: boolean;
  /**
   * Bumped when the threshold or `recurring` changes: crossings are counted afresh under the new
   * rule (the trigger's unique key carries it).
   */
  revision: number;
  /**
   * The highest crossing recorded for (period, revision): a check that finds usage at or below it
   * has nothing to write. Only a shortcut; the triggers' unique index is what decides.
   */
  last_crossing: { period_from: Date; revision: number; crossing: number } | null;
  last_triggered_at: Date | null;
  deleted_at: Date | null;
}

export const usageAlertSchema = new Schema<UsageAlertDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    subscription_id: { type: String, required: true },
    external_subscription_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    alert_type: { type: String, enum: USAGE_ALERT_TYPES, required: true },
    billable_metric_id: { type: String, default: null },
    billable_metric_code: { type: String, default: null },
    name: { type: String, default: null },
    threshold: { type: Decimal128, required: true },
    recurring: { type: Boolean, default: false },
    revision: { type: Number, default: 0 },
    last_crossing: { type: Schema.Types.Mixed, default: null },
    last_triggered_at: { type: Date, default: null },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<UsageAlertDoc>('usage_alerts'),
);

// Ingestion's one query: the live alerts of the subscriptions that received events.
usageAlertSchema.index({ subscription_id: 1, deleted_at: 1 });
usageAlertSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
