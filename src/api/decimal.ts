import Decimal from 'decimal.js';
import { Types } from 'mongoose';
import { z } from 'zod';
import { Dec, dec, toDecimal4String } from '../domain/money';

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

/** The output form: "1250.0000". */
export const decimal4 = z.string().describe('decimal with 4 fractional digits, e.g. "1250.0000"');

export function toDecimal128(value: Decimal.Value): Types.Decimal128 {
  return Types.Decimal128.fromString(new Dec(value).toFixed());
}

/** Decimal128 (or anything numeric mongoose hands back) to decimal.js; null stays null. */
export function fromDecimal128(value: unknown): Decimal | null {
  if (value === null || value === undefined) return null;
  return dec(String(value));
}

/** Decimal128 from MongoDB to the API's 4-digit string. */
export function d4(value: unknown): string {
  return toDecimal4String(fromDecimal128(value) ?? dec(0));
}

export function d4OrNull(value: unknown): string | null {
  const d = fromDecimal128(value);
  return d ? toDecimal4String(d) : null;
}
