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
  if (value instanceof Types.Decimal128) return dec(decimal128Digits(value.bytes) ?? value.toString());
  return dec(String(value));
}

const MAX_COEFFICIENT = 10n ** 34n - 1n;

/**
 * A finite Decimal128's value as `<sign><coefficient>e<exponent>` straight from its 16 bytes
 * (IEEE 754-2008 BID, as BSON stores it), or null for what is left to bson's toString: NaN, the
 * infinities and the non-canonical encodings no writer makes (a coefficient above 10^34 - 1).
 * bson's toString divides the 113-bit coefficient with 32-bit arithmetic, allocating at each step:
 * about three times the cost of this, paid by every amount read from MongoDB (a current_usage
 * reads one per daily row).
 */
export function decimal128Digits(bytes: Uint8Array): string | null {
  const word = (at: number) => (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
  const high = word(12);
  // Combination field 11xxx: NaN, an infinity, or a non-canonical coefficient (above 10^34 - 1).
  if ((high >>> 29) % 4 === 3) return null;
  const exponent = ((high >>> 17) & 0x3fff) - 6176;
  const top = high & 0x1ffff;
  const midHigh = word(8);
  const midLow = word(4);
  const low = word(0);
  // Below 2^53 the coefficient is an exact double; above, BigInt.
  let coefficient: string;
  if (top === 0 && midHigh === 0 && midLow < 0x200000) {
    coefficient = String(midLow * 0x100000000 + low);
  } else {
    const wide = (BigInt(top) << 96n) | (BigInt(midHigh) << 64n) | (BigInt(midLow) << 32n) | BigInt(low);
    if (wide > MAX_COEFFICIENT) return null;
    coefficient = wide.toString();
  }
  return `${high >>> 31 ? '-' : ''}${coefficient}e${exponent}`;
}
