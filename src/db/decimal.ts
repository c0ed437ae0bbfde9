import Decimal from 'decimal.js';
import { Types } from 'mongoose';
import { Dec, dec } from '../domain/money';

/** Amounts are Decimal128 in MongoDB and decimal.js in code; these two functions are the only crossing. */
export function toDecimal128(value: Decimal.Value): Types.Decimal128 {
  return Types.Decimal128.fromString(new Dec(value).toFixed());
}

/** Decimal128 (or anything numeric mongoose hands back) to decimal.js; null stays null. */
export function fromDecimal128(value: unknown): Decimal | null {
  if (value === null || value === undefined) return null;
  return dec(String(value));
}
