import { Schema } from 'mongoose';
import type { AggregationType, RoundingFunction } from '../../domain/aggregation/metric';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

/** A filter the metric declares: charges may price events by these property values. */
export interface BillableMetricFilter {
  key: string;
  values: string[];
}

export interface BillableMetricDoc extends BaseDoc {
  organization_id: string;
  code: string;
  name: string;
  description: string | null;
  aggregation_type: AggregationType;
  field_name: string | null;
  recurring: boolean;
  expression: string | null;
  rounding_function: RoundingFunction | null;
  rounding_precision: number | null;
  /** Embedded (the specification's BillableMetricFilter); `key` is unique within the metric. */
  filters: BillableMetricFilter[];
  /** Soft delete: set once, never cleared. */
  deleted_at: Date | null;
}

const filterSchema = new Schema<BillableMetricFilter>(
  {
    key: { type: String, required: true },
    values: { type: [String], default: [] },
  },
  { _id: false },
);

export const billableMetricSchema = new Schema<BillableMetricDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    code: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    aggregation_type: { type: String, required: true },
    field_name: { type: String, default: null },
    recurring: { type: Boolean, default: false },
    expression: { type: String, default: null },
    rounding_function: { type: String, default: null },
    rounding_precision: { type: Number, default: null },
    filters: { type: [filterSchema], default: [] },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<BillableMetricDoc>('billable_metrics'),
);

// One live metric per code and organization; deleted_at is part of the key (no partial indexes on
// the MongoDB stand-in) so that a deleted metric's code can be used again.
billableMetricSchema.index({ organization_id: 1, code: 1, deleted_at: 1 }, { unique: true });
billableMetricSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
