// The billable metric resource as the API returns it.
import { z } from 'zod';
import type { BillableMetricDoc } from '../db/models/billable-metric';
import { AGGREGATION_TYPES, ROUNDING_FUNCTIONS } from '../domain/aggregation/metric';
import { iso, nullableTimestamp, timestamp } from './format';

export const billableMetricResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    code: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    aggregation_type: z.enum(AGGREGATION_TYPES),
    field_name: z.string().nullable(),
    recurring: z.boolean(),
    expression: z.string().nullable(),
    rounding_function: z.enum(ROUNDING_FUNCTIONS).nullable(),
    rounding_precision: z.number().int().nullable(),
    filters: z.array(z.object({ key: z.string(), values: z.array(z.string()) })),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'BillableMetric' });

export type BillableMetricResource = z.output<typeof billableMetricResource>;

export function toBillableMetricResource(doc: BillableMetricDoc): BillableMetricResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    code: doc.code,
    name: doc.name,
    description: doc.description ?? null,
    aggregation_type: doc.aggregation_type,
    field_name: doc.field_name ?? null,
    recurring: doc.recurring,
    expression: doc.expression ?? null,
    rounding_function: doc.rounding_function ?? null,
    rounding_precision: doc.rounding_precision ?? null,
    filters: (doc.filters ?? []).map((f) => ({ key: f.key, values: [...f.values] })),
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
