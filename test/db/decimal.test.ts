import fc from 'fast-check';
import { Types } from 'mongoose';
import { describe, expect, it } from 'vitest';
import { decimal128Digits, fromDecimal128, toDecimal128 } from '../../src/db/decimal';
import { dec } from '../../src/domain/money';

/** What fromDecimal128 returned before its fast path: bson's own string, parsed. */
const throughBson = (value: Types.Decimal128) => dec(value.toString());

describe('fromDecimal128', () => {
  it('reads the same value as bson does, for any 16 bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (bytes) => {
        const value = new Types.Decimal128(Buffer.from(bytes));
        const expected = throughBson(value);
        const got = fromDecimal128(value)!;
        if (expected.isNaN()) return got.isNaN();
        return got.eq(expected) && got.isNegative() === expected.isNegative();
      }),
      { numRuns: 20_000 },
    );
  });

  it('reads amounts written by toDecimal128 back exactly', () => {
    const amounts = fc.oneof(
      fc.integer({ min: -1_000_000_000, max: 1_000_000_000 }).map(String),
      fc
        .tuple(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.integer({ min: 0, max: 12 }))
        .map(([digits, scale]) => dec(digits.toString()).div(dec(10).pow(scale)).toFixed()),
    );
    fc.assert(
      fc.property(amounts, (amount) => {
        const stored = toDecimal128(amount);
        return fromDecimal128(stored)!.eq(dec(amount)) && fromDecimal128(stored)!.eq(throughBson(stored));
      }),
      { numRuns: 5_000 },
    );
  });

  it('takes the shapes amounts come in', () => {
    const cases: [string, string | null][] = [
      ['0', '0e0'],
      ['-0', '-0e0'],
      ['123.4500', '1234500e-4'],
      ['-0.0001', '-1e-4'],
      ['9007199254740993', '9007199254740993e0'], // above 2^53: the BigInt path
      ['9999999999999999999999999999999999', '9999999999999999999999999999999999e0'],
      ['1E+6144', '1000000000000000000000000000000000e6111'], // clamped by bson's fromString
      ['NaN', null],
      ['Infinity', null],
      ['-Infinity', null],
    ];
    for (const [text, digits] of cases) {
      const value = Types.Decimal128.fromString(text);
      expect(decimal128Digits(value.bytes), text).toBe(digits);
      const read = fromDecimal128(value)!;
      expect(read.isNaN() ? 'NaN' : read.toString(), text).toBe(throughBson(value).isNaN() ? 'NaN' : throughBson(value).toString());
    }
    expect(fromDecimal128(null)).toBeNull();
    expect(fromDecimal128(undefined)).toBeNull();
    expect(fromDecimal128('12.5')!.toString()).toBe('12.5');
    expect(fromDecimal128(3)!.toString()).toBe('3');
  });
});
