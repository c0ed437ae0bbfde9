import { z } from 'zod';
import { Dec, dec, sum, ZERO } from '../money';
import type { AggregationResult } from '../usage-types';
import { amountSchema, type ChargeModelResult, countSchema, modelResult, rateSchema } from './shared';

/**
 * `{ rate, fixed_amount?, free_units_per_events?, free_units_per_total_aggregation?,
 * per_transaction_min_amount?, per_transaction_max_amount? }`: `rate` percent of the aggregated
 * amount (usually a sum of transaction amounts) plus `fixed_amount` per transaction. Optional fields
 * may be null, as Lago clients send them.
 */
export const propertiesSchema = z
  .strictObject({
    rate: rateSchema,
    fixed_amount: amountSchema.nullish(),
    free_units_per_events: countSchema.nullish(),
    free_units_per_total_aggregation: amountSchema.nullish(),
    per_transaction_min_amount: amountSchema.nullish(),
    per_transaction_max_amount: amountSchema.nullish(),
  })
  .superRefine((p, ctx) => {
    const min = p.per_transaction_min_amount;
    const max = p.per_transaction_max_amount;
    if (min != null && max != null && dec(min).gt(dec(max))) {
      ctx.addIssue({
        code: 'custom',
        path: ['per_transaction_max_amount'],
        message: 'must not be lower than per_transaction_min_amount',
      });
    }
  });

export type PercentageProperties = z.output<typeof propertiesSchema>;

interface Terms {
  rate: Dec;
  fixedAmount: Dec;
  /** 0 when unset. */
  freeEvents: number;
  /** 0 when unset. */
  freeAmount: Dec;
  min: Dec | undefined;
  max: Dec | undefined;
}

function terms(p: PercentageProperties): Terms {
  return {
    rate: dec(p.rate),
    fixedAmount: dec(p.fixed_amount ?? 0),
    freeEvents: p.free_units_per_events ?? 0,
    freeAmount: dec(p.free_units_per_total_aggregation ?? 0),
    min: p.per_transaction_min_amount == null ? undefined : dec(p.per_transaction_min_amount),
    max: p.per_transaction_max_amount == null ? undefined : dec(p.per_transaction_max_amount),
  };
}

/**
 * Lago's free allowance over the whole period (lago-reference.md 2.5): the running totals of the
 * first `free_units_per_events` events, or else of the events up to the first one that takes the
 * total past `free_units_per_total_aggregation`. The free value is the last running total, capped by
 * the free amount; free events are the smaller non-zero of the free event count and the number of
 * running totals still strictly below the free amount.
 */
function aggregateAmount(t: Terms, aggregation: AggregationResult): Dec {
  const { units, eventsCount, perEventValues } = aggregation;
  const runningTotals: Dec[] = [];
  let running = ZERO;
  if (t.freeEvents > 0) {
    for (const value of perEventValues.slice(0, t.freeEvents)) {
      running = running.plus(value);
      runningTotals.push(running);
    }
  } else if (t.freeAmount.gt(0)) {
    for (const value of perEventValues) {
      running = running.plus(value);
      runningTotals.push(running);
      if (running.gt(t.freeAmount)) break;
    }
  }
  let freeValue = runningTotals.at(-1) ?? ZERO;
  if (t.freeAmount.gt(0)) freeValue = Dec.min(freeValue, t.freeAmount);
  const belowFreeAmount = t.freeAmount.gt(0) ? runningTotals.filter((r) => r.lt(t.freeAmount)).length : 0;
  const freeEventCounts = [t.freeEvents, belowFreeAmount].filter((n) => n > 0);
  const freeEvents = freeEventCounts.length > 0 ? Math.min(...freeEventCounts) : 0;

  const paidUnits = units.minus(freeValue);
  const percentagePart = paidUnits.gt(0) ? paidUnits.times(t.rate).div(100) : ZERO;
  const fixedPart = units.isZero() || freeEvents >= eventsCount ? ZERO : t.fixedAmount.times(eventsCount - freeEvents);
  return percentagePart.plus(fixedPart);
}

/**
 * With a per-transaction minimum or maximum each event is priced alone (rate on its value plus the
 * fixed amount, then clamped), after the same free allowance as above, consumed in timestamp order:
 * an event that stays entirely inside it costs nothing (no minimum either), and the event that uses
 * up the free amount pays on the part above it.
 */
function perTransactionAmount(t: Terms, aggregation: AggregationResult): Dec {
  const hasFreeAllowance = t.freeEvents > 0 || t.freeAmount.gt(0);
  let consumed = ZERO;
  let allowanceOver = !hasFreeAllowance;
  const fees = aggregation.perEventValues.map((value, index) => {
    let chargedValue = value;
    if (!allowanceOver && (t.freeEvents === 0 || index < t.freeEvents)) {
      if (t.freeAmount.isZero()) return ZERO;
      const after = consumed.plus(value);
      if (after.lt(t.freeAmount)) {
        consumed = after;
        return ZERO;
      }
      chargedValue = after.minus(t.freeAmount);
      allowanceOver = true;
    }
    let fee = chargedValue.times(t.rate).div(100).plus(t.fixedAmount);
    if (t.min !== undefined && fee.lt(t.min)) fee = t.min;
    if (t.max !== undefined && fee.gt(t.max)) fee = t.max;
    return fee;
  });
  return sum(fees);
}

export function compute(properties: PercentageProperties, aggregation: AggregationResult): ChargeModelResult {
  const t = terms(properties);
  const amount = t.min !== undefined || t.max !== undefined ? perTransactionAmount(t, aggregation) : aggregateAmount(t, aggregation);
  return modelResult(amount, aggregation.units, aggregation.eventsCount);
}
