import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { aggregationSettingsFields, aggregationSettingsSchema, checkAggregationSettings } from '../../../src/domain/aggregation';

function issues(input: unknown): { path: string; message: string }[] {
  const parsed = aggregationSettingsSchema.safeParse(input);
  return parsed.success ? [] : parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
}

describe('aggregation settings schema', () => {
  it.each([
    ['count without field_name', { aggregation_type: 'count' }],
    ['count with a field_name (ignored)', { aggregation_type: 'count', field_name: 'x' }],
    ['sum', { aggregation_type: 'sum', field_name: 'gb' }],
    ['recurring sum', { aggregation_type: 'sum', field_name: 'gb', recurring: true }],
    ['recurring unique_count', { aggregation_type: 'unique_count', field_name: 'user_id', recurring: true }],
    ['recurring weighted_sum', { aggregation_type: 'weighted_sum', field_name: 'gb', recurring: true }],
    [
      'max, latest with nulls',
      { aggregation_type: 'latest', field_name: 'gb', expression: null, rounding_function: null, rounding_precision: null },
    ],
    [
      'custom with a field_name and an expression',
      { aggregation_type: 'custom', field_name: 'cpu_seconds', expression: 'cpu_seconds * 2 + memory_mb / 1024' },
    ],
    ['custom with a field_name and no expression', { aggregation_type: 'custom', field_name: 'x' }],
    ['sum with an expression', { aggregation_type: 'sum', field_name: 'gb', expression: 'round(bytes / 1073741824, 3)' }],
    ['rounding at the range ends', { aggregation_type: 'sum', field_name: 'gb', rounding_function: 'floor', rounding_precision: -15 }],
    ['rounding precision 20', { aggregation_type: 'sum', field_name: 'gb', rounding_function: 'ceil', rounding_precision: 20 }],
    ['a blank expression counts as none', { aggregation_type: 'count', expression: '  ' }],
  ])('accepts %s', (_label, input) => {
    expect(issues(input)).toEqual([]);
  });

  it.each([
    ['sum without field_name', { aggregation_type: 'sum' }, 'field_name', 'field_name is required for sum'],
    [
      'weighted_sum with a null field_name',
      { aggregation_type: 'weighted_sum', field_name: null },
      'field_name',
      'field_name is required for weighted_sum',
    ],
    ['custom without expression nor field_name', { aggregation_type: 'custom' }, 'field_name', 'field_name is required for custom'],
    [
      'custom with an expression but no field_name',
      { aggregation_type: 'custom', expression: 'cpu_seconds * 2 + memory_mb / 1024' },
      'field_name',
      'field_name is required for custom',
    ],
    [
      'sum with an expression but no field_name',
      { aggregation_type: 'sum', expression: 'a * 2' },
      'field_name',
      'field_name is required for sum',
    ],
    ['an empty field_name', { aggregation_type: 'max', field_name: '' }, 'field_name', ''],
    ['recurring count', { aggregation_type: 'count', recurring: true }, 'recurring', 'count cannot be recurring'],
    ['recurring max', { aggregation_type: 'max', field_name: 'x', recurring: true }, 'recurring', 'max cannot be recurring'],
    ['recurring latest', { aggregation_type: 'latest', field_name: 'x', recurring: true }, 'recurring', 'latest cannot be recurring'],
    ['recurring custom', { aggregation_type: 'custom', expression: 'a', recurring: true }, 'recurring', 'custom cannot be recurring'],
    ['a syntax error', { aggregation_type: 'custom', expression: 'a +* b' }, 'expression', "unexpected '*' at position 3"],
    ['an unknown function', { aggregation_type: 'custom', expression: 'sqrt(a)' }, 'expression', "unknown function 'sqrt'"],
    ['an expression on count', { aggregation_type: 'count', expression: 'a' }, 'expression', 'count takes no expression'],
    ['an overlong expression', { aggregation_type: 'custom', expression: 'a+'.repeat(600) + 'a' }, 'expression', ''],
    ['a fractional precision', { aggregation_type: 'sum', field_name: 'x', rounding_precision: 1.5 }, 'rounding_precision', ''],
    ['a precision above the range', { aggregation_type: 'sum', field_name: 'x', rounding_precision: 21 }, 'rounding_precision', ''],
    ['a precision below the range', { aggregation_type: 'sum', field_name: 'x', rounding_precision: -16 }, 'rounding_precision', ''],
    ['an unknown rounding function', { aggregation_type: 'sum', field_name: 'x', rounding_function: 'truncate' }, 'rounding_function', ''],
    ['an unknown aggregation', { aggregation_type: 'sum_agg', field_name: 'x' }, 'aggregation_type', ''],
  ])('refuses %s', (_label, input, path, message) => {
    const found = issues(input);
    expect(found.map((i) => i.path)).toContain(path);
    expect(found.find((i) => i.path === path)?.message).toContain(message);
  });

  it('reports every broken rule at once', () => {
    expect(
      issues({ aggregation_type: 'max', recurring: true, expression: 'f(' })
        .map((i) => i.path)
        .sort(),
    ).toEqual(['expression', 'field_name', 'recurring']);
  });

  it('defaults recurring to false', () => {
    expect(aggregationSettingsSchema.parse({ aggregation_type: 'count' }).recurring).toBe(false);
  });

  it('composes into a larger body schema', () => {
    const body = z.object({ code: z.string(), ...aggregationSettingsFields.shape }).superRefine(checkAggregationSettings);
    expect(body.safeParse({ code: 'cpu', aggregation_type: 'sum', field_name: 'x' }).success).toBe(true);
    expect(body.safeParse({ code: 'cpu', aggregation_type: 'sum' }).success).toBe(false);
  });
});
