// How a resource writes decimals and instants (api-contract.md, Conventions).
import { z } from 'zod';
import { fromDecimal128 } from '../db/decimal';
import { dec, toDecimal4String } from '../domain/money';

/** The output form of a Decimal(12,4): "1250.0000". */
export const decimal4 = z.string().describe('decimal with 4 fractional digits, e.g. "1250.0000"');

/** Decimal128 from MongoDB to the API's 4-digit string. */
export function d4(value: unknown): string {
  return toDecimal4String(fromDecimal128(value) ?? dec(0));
}

export function d4OrNull(value: unknown): string | null {
  const d = fromDecimal128(value);
  return d ? toDecimal4String(d) : null;
}

/** Decimal128 from MongoDB to a plain decimal string, as precise as stored: "2.5" (rates, credits). */
export function plain(value: unknown): string {
  return (fromDecimal128(value) ?? dec(0)).toFixed();
}

export const timestamp = z.string().describe('ISO 8601, UTC, with milliseconds');
export const nullableTimestamp = timestamp.nullable();

export function iso(date: Date): string;
export function iso(date: Date | null | undefined): string | null;
export function iso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}
