import { z } from 'zod';
import { type Dec, dec, roundFee, ZERO } from '../money';

/** What pricing one bucket of usage yields. Money in cents, amounts with 4 fractional digits. */
export interface ChargeModelResult {
  amount: Dec;
  units: Dec;
  eventsCount: number;
  /** amount / units before rounding, 4 fractional digits; 0 without units (a flat fee at zero usage). */
  unitAmount: Dec;
}

/**
 * The single exit of every model: rounds the amount like any fee and applies the "no negative fee"
 * rule, which zeroes units and amount together (billing-rules.md, Billing periods) so a refund-like
 * aggregation never produces a credit hidden inside a fee.
 */
export function modelResult(amount: Dec, units: Dec, eventsCount: number): ChargeModelResult {
  if (amount.isNegative() || units.isNegative()) {
    return { amount: ZERO, units: ZERO, eventsCount, unitAmount: ZERO };
  }
  return {
    amount: roundFee(amount),
    units,
    eventsCount,
    // From the unrounded amount, so that a tiny usage still shows its real unit price.
    unitAmount: units.isZero() ? ZERO : roundFee(amount.div(units)),
  };
}

function fractionDigits(value: number): number {
  return dec(value).decimalPlaces();
}

/**
 * A non-negative decimal given as a JSON string ("12.5") or number (12.5). Strings are the
 * canonical form because a JSON number cannot carry 0.1 exactly through every client; numbers are
 * accepted for convenience and rejected when their shortest form has too many digits.
 */
export function decimalSchema(maxFractionDigits: number) {
  const message = `must be a non-negative decimal with at most ${maxFractionDigits} fractional digits`;
  return z.union(
    [
      z.string().regex(new RegExp(`^\\d+(\\.\\d{1,${maxFractionDigits}})?$`), { error: message }),
      z
        .number({ error: message })
        .nonnegative({ error: message })
        .refine((n) => fractionDigits(n) <= maxFractionDigits, { error: message }),
    ],
    { error: message },
  );
}

/** Money inside properties: cents with at most 4 fractional digits, like fee amounts. */
export const amountSchema = decimalSchema(4);

/** A percentage ("1.5" = 1.5 %). Finer than money so that rates such as 0.125 % fit. */
export const rateSchema = decimalSchema(8);

export const countSchema = z
  .number({ error: 'must be a non-negative integer' })
  .int({ error: 'must be a non-negative integer' })
  .nonnegative({ error: 'must be a non-negative integer' });

/** A tier of graduated, volume or graduated_percentage pricing. Bounds are whole units. */
export interface TierBounds {
  from_value: number;
  to_value: number | null;
}

export const tierBoundsShape = {
  from_value: countSchema,
  // Omitted means open-ended, so the last tier may leave it out.
  to_value: countSchema.nullable().default(null),
};

/**
 * Tiers must tile [0, ∞) with no gap: the first starts at 0, each next one starts where the previous
 * ends ("adjacent": 0-10, 10-20) or one unit after ("classic", Lago's original style: 0-10, 11-20),
 * and only the last is open-ended. Mixing both styles is refused: Lago prices a mix with the classic
 * "+1" count, which bills the shared boundary unit twice.
 */
export function checkContiguousTiers(tiers: readonly TierBounds[], ctx: z.RefinementCtx): void {
  let style: 'adjacent' | 'classic' | undefined;
  tiers.forEach((tier, i) => {
    const last = i === tiers.length - 1;
    if (i === 0 && tier.from_value !== 0) {
      ctx.addIssue({ code: 'custom', path: [i, 'from_value'], message: 'the first tier must start at 0' });
    }
    if (last && tier.to_value !== null) {
      ctx.addIssue({ code: 'custom', path: [i, 'to_value'], message: 'the last tier must have to_value null' });
    }
    if (!last && tier.to_value === null) {
      ctx.addIssue({ code: 'custom', path: [i, 'to_value'], message: 'only the last tier may be open-ended' });
    }
    if (tier.to_value !== null && tier.to_value <= tier.from_value) {
      ctx.addIssue({ code: 'custom', path: [i, 'to_value'], message: 'to_value must be greater than from_value' });
    }
    const previous = i > 0 ? tiers[i - 1] : undefined;
    if (previous === undefined || previous.to_value === null) return;
    const pairStyle =
      tier.from_value === previous.to_value ? 'adjacent' : tier.from_value === previous.to_value + 1 ? 'classic' : undefined;
    if (pairStyle === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: [i, 'from_value'],
        message: `must equal the previous to_value (${previous.to_value}) or that plus 1`,
      });
    } else if (style !== undefined && style !== pairStyle) {
      ctx.addIssue({
        code: 'custom',
        path: [i, 'from_value'],
        message: 'tiers must all start at the previous to_value, or all one unit after it',
      });
    } else {
      style = pairStyle;
    }
  });
}

function isAdjacent(tiers: readonly TierBounds[]): boolean {
  return tiers.every((tier, i) => {
    const previous = i > 0 ? tiers[i - 1] : undefined;
    return previous === undefined || tier.from_value === previous.to_value;
  });
}

/**
 * Walks graduated tiers and sums `priceTier(tier, unitsInTier)` for every tier reached, stopping at
 * the tier that contains `units`. The first tier is always reached, so its flat amount is charged
 * even at zero units (billing-rules.md, Usage).
 */
export function sumGraduatedTiers<T extends TierBounds>(
  tiers: readonly T[],
  units: Dec,
  priceTier: (tier: T, unitsInTier: Dec) => Dec,
): Dec {
  const adjacent = isAdjacent(tiers);
  let total = ZERO;
  for (const tier of tiers) {
    const upTo = tier.to_value !== null && units.gte(tier.to_value) ? dec(tier.to_value) : units;
    // Classic tiers count both ends (11-20 holds 10 units); adjacent ones are half-open.
    const unitsInTier = tier.from_value === 0 ? upTo : adjacent ? upTo.minus(tier.from_value) : upTo.minus(tier.from_value).plus(1);
    total = total.plus(priceTier(tier, unitsInTier));
    if (tier.to_value === null || units.lte(tier.to_value)) break;
  }
  return total;
}

/** JSON number or a string matching `^-?\d+(\.\d+)?$` (billing-rules.md, Usage); else undefined. */
export function numericValue(value: unknown): Dec | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? dec(value) : undefined;
  if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value)) return dec(value);
  return undefined;
}
