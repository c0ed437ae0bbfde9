import { z } from 'zod';
import { parseExpression } from '../expression';
import { AGGREGATION_TYPES, ROUNDING_FUNCTIONS, hasExpression, isRecurringAggregation } from './metric';

/**
 * rounding_precision range. Lago validates none; negative values round to tens, hundreds… (Ruby's
 * round(-2)), and 20 matches the 20 decimals weighted_sum is computed to, beyond which rounding
 * would do nothing.
 */
export const ROUNDING_PRECISION_RANGE = { min: -15, max: 20 } as const;

/** Long enough for any sensible formula, short enough that parsing a hostile one stays cheap. */
export const MAX_EXPRESSION_LENGTH = 1000;

/**
 * The aggregation fields of a billable metric, without the cross-field rules, so the API can spread
 * `.shape` into its own body schema and add `checkAggregationSettings` with `.superRefine` (zod 4
 * refuses to `.extend` an object that already has refinements).
 */
export const aggregationSettingsFields = z.object({
  aggregation_type: z.enum(AGGREGATION_TYPES),
  field_name: z.string().min(1).max(255).nullish(),
  expression: z.string().max(MAX_EXPRESSION_LENGTH).nullish(),
  recurring: z.boolean().default(false),
  rounding_function: z.enum(ROUNDING_FUNCTIONS).nullish(),
  rounding_precision: z.number().int().min(ROUNDING_PRECISION_RANGE.min).max(ROUNDING_PRECISION_RANGE.max).nullish(),
});

type AggregationSettingsInput = Pick<
  z.output<typeof aggregationSettingsFields>,
  'aggregation_type' | 'field_name' | 'expression' | 'recurring'
>;

/**
 * The rules that span fields (billing-rules.md, Usage; api-contract.md, Billable metrics), each a
 * 422 with the offending field as its path:
 * - `field_name` is required for every type but `count` ("required for every type but count",
 *   api-contract.md), `custom` included, with an expression or not (its expression, when set,
 *   gives the per-event value; without one, `field_name` does);
 * - `recurring` only for sum, unique_count and weighted_sum;
 * - `expression` must parse (syntax, unknown function, arity), and is refused on `count`, which has
 *   no per-event value for it to compute, rather than silently ignored.
 */
export function checkAggregationSettings(value: AggregationSettingsInput, ctx: z.RefinementCtx): void {
  const type = value.aggregation_type;
  const withExpression = hasExpression(value);
  if (type !== 'count' && (value.field_name === undefined || value.field_name === null)) {
    ctx.addIssue({ code: 'custom', path: ['field_name'], message: `field_name is required for ${type}` });
  }
  if (value.recurring && !isRecurringAggregation(type)) {
    ctx.addIssue({
      code: 'custom',
      path: ['recurring'],
      message: `${type} cannot be recurring (only sum, unique_count and weighted_sum can)`,
    });
  }
  if (withExpression) {
    if (type === 'count') {
      ctx.addIssue({ code: 'custom', path: ['expression'], message: 'count takes no expression' });
    } else {
      const parsed = parseExpression(value.expression ?? '');
      if (!parsed.ok) ctx.addIssue({ code: 'custom', path: ['expression'], message: parsed.message });
    }
  }
}

/** A billable metric's aggregation settings, ready for `safeParse` on create. */
export const aggregationSettingsSchema = aggregationSettingsFields.superRefine(checkAggregationSettings);

export type AggregationSettings = z.output<typeof aggregationSettingsSchema>;
