import Decimal from 'decimal.js';

/**
 * Money and quantities are decimal.js values in minor units (cents). A dedicated clone keeps the
 * project's precision and rounding independent of anything else that configures the global Decimal.
 */
export const Dec = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_UP });
export type Dec = Decimal;

export type DecimalInput = Decimal.Value;

export const ZERO = new Dec(0);

export function dec(value: DecimalInput): Decimal {
  return new Dec(value);
}

/** Fee-level amounts keep 4 fractional digits, rounded half up (billing-rules.md, Numbers). */
export function roundFee(value: Decimal): Decimal {
  return value.toDecimalPlaces(4, Decimal.ROUND_HALF_UP);
}

/** Invoice-level amounts are whole minor units, rounded half up: nobody pays a fraction of a cent. */
export function roundCents(value: Decimal): Decimal {
  return value.toDecimalPlaces(0, Decimal.ROUND_HALF_UP);
}

/** Never below zero (no fee, credit or total is ever negative). */
export function nonNegative(value: Decimal): Decimal {
  return value.isNegative() ? new Dec(0) : value;
}

export function sum(values: readonly Decimal[]): Decimal {
  return values.reduce((acc, v) => acc.plus(v), new Dec(0));
}

/** Decimal(12,4) on the wire: a string with exactly 4 fractional digits ("1250.0000"). */
export function toDecimal4String(value: Decimal): string {
  return value.toFixed(4, Decimal.ROUND_HALF_UP);
}
