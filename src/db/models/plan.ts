import { Schema, type Types } from 'mongoose';
import type { ChargeModel } from '../../domain/charge-models';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export const PLAN_INTERVALS = ['weekly', 'monthly', 'quarterly', 'yearly'] as const;
export type PlanInterval = (typeof PLAN_INTERVALS)[number];

/** A charge filter (the specification's ChargeFilter and ChargeFilterValue, embedded). */
export interface ChargeFilterDoc {
  _id: string;
  /** Metric filter key -> accepted values; an event matches when every key matches. */
  values: Record<string, string[]>;
  /** The charge model's properties for the events this filter matches (they replace the charge's). */
  properties: Record<string, unknown>;
  invoice_display_name: string | null;
}

/** A charge, embedded in its plan and removed with it (specification: cascade). */
export interface ChargeDoc {
  _id: string;
  billable_metric_id: string;
  charge_model: ChargeModel;
  /** Validated by the charge model's schema at write time, stored with its defaults filled in. */
  properties: Record<string, unknown>;
  pay_in_advance: boolean;
  prorated: boolean;
  invoiceable: boolean;
  /** Caps of the charge's total over all its buckets, in cents: Decimal(12,4). */
  min_amount_cents: Types.Decimal128 | null;
  max_amount_cents: Types.Decimal128 | null;
  invoice_display_name: string | null;
  filters: ChargeFilterDoc[];
}

export interface PlanDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  description: string | null;
  interval: PlanInterval;
  /** The base fee per period, in minor units of currency (an integer). */
  amount_cents: number;
  currency: string;
  trial_period_days: number;
  charges: ChargeDoc[];
  /** Soft delete: set once, never cleared. */
  deleted_at: Date | null;
}

// Sub-documents carry their own UUID ids (uuidId) rather than ObjectIds; `minimize: false` keeps
// an empty object as stored rather than dropping it.
const chargeFilterSchema = new Schema<ChargeFilterDoc>(
  {
    _id: uuidId,
    values: { type: Schema.Types.Mixed, required: true },
    properties: { type: Schema.Types.Mixed, default: () => ({}) },
    invoice_display_name: { type: String, default: null },
  },
  { minimize: false },
);

const chargeSchema = new Schema<ChargeDoc>(
  {
    _id: uuidId,
    billable_metric_id: { type: String, required: true },
    charge_model: { type: String, required: true },
    properties: { type: Schema.Types.Mixed, default: () => ({}) },
    pay_in_advance: { type: Boolean, default: false },
    prorated: { type: Boolean, default: false },
    invoiceable: { type: Boolean, default: true },
    min_amount_cents: { type: Decimal128, default: null },
    max_amount_cents: { type: Decimal128, default: null },
    invoice_display_name: { type: String, default: null },
    filters: { type: [chargeFilterSchema], default: [] },
  },
  { minimize: false },
);

export const planSchema = new Schema<PlanDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    interval: { type: String, enum: PLAN_INTERVALS, required: true },
    amount_cents: { type: Number, default: 0 },
    currency: { type: String, default: 'USD' },
    trial_period_days: { type: Number, default: 0 },
    charges: { type: [chargeSchema], default: [] },
    deleted_at: { type: Date, default: null },
  },
  { ...collectionOptions<PlanDoc>('plans'), minimize: false },
);

// One live plan per code and organization; deleted_at is part of the key (no partial indexes on
// the MongoDB stand-in) so that a deleted plan's code can be used again.
planSchema.index({ organization_id: 1, code: 1, deleted_at: 1 }, { unique: true });
planSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
// "Is this metric used by a live plan?" (deleting a billable metric is refused while it is).
planSchema.index({ organization_id: 1, 'charges.billable_metric_id': 1, deleted_at: 1 });
