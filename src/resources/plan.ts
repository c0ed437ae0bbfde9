// The plan resource as the API returns it, with its charges and their filters nested.
import { z } from 'zod';
import { type ChargeDoc, type ChargeFilterDoc, PLAN_INTERVALS, type PlanDoc } from '../db/models/plan';
import { CHARGE_MODELS } from '../domain/charge-models';
import { d4OrNull, decimal4, iso, nullableTimestamp, timestamp } from './format';

export const chargeFilterResource = z
  .object({
    id: z.string(),
    values: z.record(z.string(), z.array(z.string())),
    properties: z.record(z.string(), z.unknown()),
    invoice_display_name: z.string().nullable(),
  })
  .meta({ id: 'PlanChargeFilter' });

export type ChargeFilterResource = z.output<typeof chargeFilterResource>;

export const chargeResource = z
  .object({
    id: z.string(),
    billable_metric_id: z.string(),
    charge_model: z.enum(CHARGE_MODELS),
    properties: z.record(z.string(), z.unknown()),
    pay_in_advance: z.boolean(),
    prorated: z.boolean(),
    invoiceable: z.boolean(),
    min_amount_cents: decimal4.nullable(),
    max_amount_cents: decimal4.nullable(),
    invoice_display_name: z.string().nullable(),
    filters: z.array(chargeFilterResource),
  })
  .meta({ id: 'PlanCharge' });

export type ChargeResource = z.output<typeof chargeResource>;

export const planResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    interval: z.enum(PLAN_INTERVALS),
    amount_cents: z.number().int(),
    currency: z.string(),
    trial_period_days: z.number().int(),
    charges: z.array(chargeResource),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Plan' });

export type PlanResource = z.output<typeof planResource>;

export function toChargeFilterResource(doc: ChargeFilterDoc): ChargeFilterResource {
  return {
    id: doc._id,
    values: doc.values,
    properties: doc.properties ?? {},
    invoice_display_name: doc.invoice_display_name ?? null,
  };
}

export function toChargeResource(doc: ChargeDoc): ChargeResource {
  return {
    id: doc._id,
    billable_metric_id: doc.billable_metric_id,
    charge_model: doc.charge_model,
    properties: doc.properties ?? {},
    pay_in_advance: doc.pay_in_advance,
    prorated: doc.prorated,
    invoiceable: doc.invoiceable,
    min_amount_cents: d4OrNull(doc.min_amount_cents),
    max_amount_cents: d4OrNull(doc.max_amount_cents),
    invoice_display_name: doc.invoice_display_name ?? null,
    filters: (doc.filters ?? []).map(toChargeFilterResource),
  };
}

export function toPlanResource(doc: PlanDoc): PlanResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    description: doc.description ?? null,
    interval: doc.interval,
    amount_cents: doc.amount_cents,
    currency: doc.currency,
    trial_period_days: doc.trial_period_days,
    charges: (doc.charges ?? []).map(toChargeResource),
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
