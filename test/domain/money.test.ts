import { describe, expect, it } from 'vitest';
import { dec, roundCents, roundFee, toDecimal4String } from '../../src/domain/money';

describe('money rounding', () => {
  it('rounds fees half up to 4 digits and invoice amounts to whole cents', () => {
    expect(roundFee(dec('1.23455')).toString()).toBe('1.2346');
    expect(roundCents(dec('10.5')).toString()).toBe('11');
    expect(roundCents(dec('10.4999')).toString()).toBe('10');
    expect(toDecimal4String(dec('1250'))).toBe('1250.0000');
  });
});
