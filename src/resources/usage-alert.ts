// The usage alert resource, its status and its triggers, as the API returns them (docs/usage-alerts.md).
// The trigger is also the `data.object` of the `usage_alert.triggered` webhook event.
import { z } from 'zod';
import { USAGE_ALERT_TYPES, type UsageAlertDoc } from '../db/models/usage-alert';
import type { UsageAlertTriggerDoc } from '../db/models/usage-alert-trigger';
import { d4, decimal4, iso, nullableTimestamp, timestamp } from './format';

export const usageAlertResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    subscription_id: z.string(),
    external_subscription_id: z.string(),
    alert_type: z.enum(USAGE_ALERT_TYPES),
    billable_metric_id: z.string().nullable(),
    billable_metric_code: z.string().nullable(),
    name: z.string().nullable(),
    threshold: decimal4.describe("units of the metric, or cents of the plan's currency for the amount types"),
    recurring: z.boolean(),
    last_triggered_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'UsageAlert' });

export type UsageAlertResource = z.output<typeof usageAlertResource>;

export function toUsageAlertResource(doc: UsageAlertDoc): UsageAlertResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    subscription_id: doc.subscription_id,
    external_subscription_id: doc.external_subscription_id,
    alert_type: doc.alert_type,
    billable_metric_id: doc.billable_metric_id,
    billable_metric_code: doc.billable_metric_code,
    name: doc.name,
    threshold: d4(doc.threshold),
    recurring: doc.recurring,
    last_triggered_at: iso(doc.last_triggered_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

export const usageAlertTriggerResource = z
  .object({
    id: z.string(),
    usage_alert_id: z.string(),
    subscription_id: z.string(),
    alert_type: z.enum(USAGE_ALERT_TYPES),
    billable_metric_code: z.string().nullable(),
    period_from: timestamp,
    period_to: timestamp,
    crossing: z.number().int().describe('which multiple of the threshold was crossed (1 for a one-shot alert)'),
    threshold_value: decimal4.describe('crossing × threshold'),
    current_value: decimal4.describe('the usage measured when the crossing was detected'),
    triggered_at: timestamp,
    created_at: timestamp,
  })
  .meta({ id: 'UsageAlertTrigger' });

export type UsageAlertTriggerResource = z.output<typeof usageAlertTriggerResource>;

export function toUsageAlertTriggerResource(
  trigger: UsageAlertTriggerDoc,
  alert: Pick<UsageAlertDoc, 'alert_type' | 'billable_metric_code'>,
): UsageAlertTriggerResource {
  return {
    id: trigger._id,
    usage_alert_id: trigger.usage_alert_id,
    subscription_id: trigger.subscription_id,
    alert_type: alert.alert_type,
    billable_metric_code: alert.billable_metric_code,
    period_from: iso(trigger.period_from),
    period_to: iso(trigger.period_to),
    crossing: trigger.crossing,
    threshold_value: d4(trigger.threshold_value),
    current_value: d4(trigger.current_value),
    triggered_at: iso(trigger.triggered_at),
    created_at: iso(trigger.created_at),
  };
}

export const usageAlertStatusResource = z
  .object({
    usage_alert_id: z.string(),
    subscription_id: z.string(),
    alert_type: z.enum(USAGE_ALERT_TYPES),
    billable_metric_code: z.string().nullable(),
    period_from: timestamp,
    period_to: timestamp,
    current_value: decimal4.describe('units, or cents before taxes, of the current period so far'),
    threshold: decimal4,
    recurring: z.boolean(),
    crossings: z.number().int().describe('multiples of the threshold reached this period (at most 1 for a one-shot alert)'),
    next_threshold_value: decimal4.nullable().describe('the value of the next crossing; null once a one-shot alert fired'),
    last_triggered_at: nullableTimestamp,
  })
  .meta({ id: 'UsageAlertStatus' });

export type UsageAlertStatusResource = z.output<typeof usageAlertStatusResource>;
