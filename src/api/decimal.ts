import Decimal from 'decimal.js';
import { z } from 'zod';
import { dec } from '../domain/money';

/**
 * Decimal(12,4) on the API (api-contract.md, Conventions): input as a JSON string or number, at
 * most 4 fractional digits and 12 digits in all (422 otherwise); output as a string with exactly 4
 * fractional digits. In MongoDB it is Decimal128; in code, decimal.js.
 */
export function decimalInput(options: { min?: number; max?: number; maxFractionDigits?: number; maxDigits?: number } = {}) {
  const fraction = options.maxFractionDigits ?? 4;
  const digits = options.maxDigits ?? 12;
  return z
    .union([z.string().trim(), z.number()], { error: 'must be a decimal number (a string such as "12.5000" or a number)' })
    .transform((raw, ctx): Decimal => {
      const text = typeof raw === 'number' ? String(raw) : raw;
      if (!/^-?\d+(\.\d+)?$/.test(text)) {
        ctx.addIssue({ code: 'custom', message: 'must be a plain decimal number such as "12.5"' });
        return z.NEVER;
      }
      const value = dec(text);
      if (value.decimalPlaces() > fraction) {
        ctx.addIssue({ code: 'custom', message: `at most ${fraction} fractional digits` });
        return z.NEVER;
      }
      const integerDigits = value.abs().trunc().toFixed(0).replace(/^0$/, '').length;
      if (integerDigits + Math.max(value.decimalPlaces(), 0) > digits) {
        ctx.addIssue({ code: 'custom', message: `at most ${digits} digits in all` });
        return z.NEVER;
      }
      if (options.min !== undefined && value.lessThan(options.min)) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${options.min}` });
        return z.NEVER;
      }
      if (options.max !== undefined && value.greaterThan(options.max)) {
        ctx.addIssue({ code: 'custom', message: `must be at most ${options.max}` });
        return z.NEVER;
      }
      return value;
    })
    .meta({ type: 'string', description: 'decimal, as a string ("12.5000") or a number' });
}
