import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

/**
 * One crossing of a usage alert's threshold in one period: the `crossing`-th multiple of the
 * threshold (always 1 for a one-shot alert). Unique per (alert, period, revision, crossing): of
 * several processes checking the same usage at once, only the one whose insert wins emits the
 * webhook event.
 */
export interface UsageAlertTriggerDoc extends BaseDoc {
  organization_id: string;
  usage_alert_id: string;
  subscription_id: string;
  period_from: Date;
  period_to: Date;
  revision: number;
  crossing: number;
  /** crossing × threshold: the value crossed. */
  threshold_value: Types.Decimal128;
  /** The usage the check measured (at or above threshold_value). */
  current_value: Types.Decimal128;
  /** When it was detected, at the customer's time (its test clock's, if any). */
  triggered_at: Date;
  /** Set once `usage_alert.triggered` is recorded; a trigger left without it is emitted by the next check. */
  emitted_at: Date | null;
}

export const usageAlertTriggerSchema = new Schema<UsageAlertTriggerDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    usage_alert_id: { type: String, required: true },
    subscription_id: { type: String, required: true },
    period_from: { type: Date, required: true },
    period_to: { type: Date, required: true },
    revision: { type: Number, required: true },
    crossing: { type: Number, required: true },
    threshold_value: { type: Decimal128, required: true },
    current_value: { type: Decimal128, required: true },
    triggered_at: { type: Date, required: true },
    emitted_at: { type: Date, default: null },
  },
  collectionOptions<UsageAlertTriggerDoc>('usage_alert_triggers'),
);

usageAlertTriggerSchema.index({ usage_alert_id: 1, period_from: 1, revision: 1, crossing: 1 }, { unique: true });
usageAlertTriggerSchema.index({ usage_alert_id: 1, created_at: -1, _id: -1 });
usageAlertTriggerSchema.index({ usage_alert_id: 1, emitted_at: 1 });
