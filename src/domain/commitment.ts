import { type Dec, nonNegative, roundFee, sum } from './money';
import { prorate } from './periods';
import type { FeeType } from './taxes';

/**
 * Minimum commitment true-up (specification section 4, step 2; billing-rules.md, Invoice pipeline 2).
 *
 * Only usage charge fees count against the commitment: the specification says "the charges total
 * less", and billing-rules.md confirms the base fee does not count (Lago counts it; we do not).
 */

export interface MinimumCommitment {
  /** Minor units for a whole billing period. */
  amount_cents: Dec;
}

/**
 * The part of the billing period the invoice covers, in local calendar days counted as for the
 * base fee (start and end dates both count). A full period has usedDays = periodDays. The same
 * shape as the charges' ProrationRatio, so one value prorates the caps and the commitment alike.
 */
export interface Proration {
  usedDays: number;
  periodDays: number;
}

export interface CommitmentTrueUp {
  /** The commitment for the days covered, 4 fractional digits. */
  commitment_amount_cents: Dec;
  /** The usage charge fees that count against it. */
  charges_amount_cents: Dec;
  /** The difference to bill as a `commitment` fee; zero when usage reached the commitment. */
  true_up_amount_cents: Dec;
}

/**
 * `amount * usedDays / periodDays` through the base fee's own `prorate` (billing-rules.md, Billing
 * periods), rounded once at the end to 4 fractional digits half up ("prorated caps and commitments
 * are computed with 4 fractional digits, like fees"). The ratio itself is never rounded first: a
 * ratio cut to 4 digits would make a 3100-cent commitment over 17 of 31 days 1700.04 instead of
 * the base fee's 1700.
 */
export function prorateCommitment(amount_cents: Dec, proration?: Proration): Dec {
  if (proration === undefined) return roundFee(amount_cents);
  const { usedDays, periodDays } = proration;
  // prorate() accepts any day count; more days than the period would bill more than the commitment.
  if (usedDays > periodDays) {
    throw new RangeError(`usedDays ${usedDays} exceed the period's ${periodDays}`);
  }
  return prorate(amount_cents, usedDays, periodDays);
}

export function computeCommitmentTrueUp(input: {
  commitment: MinimumCommitment;
  proration?: Proration | undefined;
  fees: readonly { fee_type: FeeType; amount_cents: Dec }[];
}): CommitmentTrueUp {
  const commitment_amount_cents = prorateCommitment(input.commitment.amount_cents, input.proration);
  const charges_amount_cents = sum(input.fees.filter((f) => f.fee_type === 'charge').map((f) => f.amount_cents));
  return {
    commitment_amount_cents,
    charges_amount_cents,
    true_up_amount_cents: roundFee(nonNegative(commitment_amount_cents.minus(charges_amount_cents))),
  };
}
