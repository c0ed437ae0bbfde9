import type { z } from 'zod';
import { type DecimalInput, dec, sum } from '../../../src/domain/money';
import type { AggregationResult, UsageEvent } from '../../../src/domain/usage-types';

/** An aggregation whose units are given directly (count, max, latest, rounded values...). */
export function units(value: DecimalInput, eventsCount = 0, perEventValues: DecimalInput[] = []): AggregationResult {
  return { units: dec(value), eventsCount, perEventValues: perEventValues.map((v) => dec(v)) };
}

/** A `sum` aggregation of the given event values, in timestamp order. */
export function summed(values: DecimalInput[]): AggregationResult {
  const perEventValues = values.map((v) => dec(v));
  return { units: sum(perEventValues), eventsCount: values.length, perEventValues };
}

export function withEvents(aggregation: AggregationResult, properties: Record<string, unknown>[]): AggregationResult {
  const events: UsageEvent[] = properties.map((p, i) => ({
    transactionId: `tx-${i}`,
    timestamp: new Date(Date.UTC(2025, 0, 1, 0, i)),
    properties: p,
  }));
  return { ...aggregation, events };
}

/** The paths of a schema's issues for a value, as "a.0.b" strings (the root is ""). */
export function issuePaths(schema: z.ZodType, value: unknown): string[] {
  const result = schema.safeParse(value);
  if (result.success) return [];
  return result.error.issues.map((issue) => issue.path.map(String).join('.'));
}

/** Keys reported as unknown by a strict object, whatever their path. */
export function unknownKeys(schema: z.ZodType, value: unknown): string[] {
  const result = schema.safeParse(value);
  if (result.success) return [];
  return result.error.issues.flatMap((issue) => (issue.code === 'unrecognized_keys' ? issue.keys : []));
}
