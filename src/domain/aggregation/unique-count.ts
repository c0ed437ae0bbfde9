import Decimal from 'decimal.js';
import { Dec } from '../money';
import { ownProperty } from '../expression';
import type { AggregationResult, UsageEvent } from '../usage-types';
import { eventValueReader, eventsInWindow, hasExpression, result, type AggregationContext, type AggregationMetric } from './metric';
import { proratedPresence, type Presence } from './prorated';

export const OPERATION_TYPE_PROPERTY = 'operation_type';

type Operation = 'add' | 'remove';
type Properties = Readonly<Record<string, unknown>>;

/**
 * `operation_type` absent means add. Any other value than add/remove skips the event: guessing
 * would either bill a user that a typo meant to remove or drop one that it meant to add.
 */
function operationOf(properties: Properties): Operation | null {
  const raw = ownProperty(properties, OPERATION_TYPE_PROPERTY);
  if (raw === undefined || raw === null || raw === 'add') return 'add';
  return raw === 'remove' ? 'remove' : null;
}

/**
 * The distinct value an event carries. Numbers and strings compare by their text, as Lago reads
 * them from JSON (`->>`): 7 and "7" are the same user. Objects, arrays and null have no value.
 */
function distinctKeyReader(metric: AggregationMetric): (properties: Properties) => string | null {
  if (hasExpression(metric)) {
    const read = eventValueReader(metric);
    return (properties) => read(properties)?.toFixed() ?? null;
  }
  const field = metric.field_name;
  if (field === undefined || field === null) return () => null;
  return (properties) => {
    const raw = ownProperty(properties, field);
    if (typeof raw === 'string' || typeof raw === 'boolean') return String(raw);
    if (typeof raw === 'number' && Number.isFinite(raw)) return String(raw);
    return null;
  };
}

/**
 * Distinct values present at the end of the window. Each value is present or absent; an add makes
 * it present (+1 unless already present), a remove makes it absent (−1 unless already absent), so a
 * removal of a value never added changes nothing (Lago's UniqueCountQuery). The per-event values are
 * those +1 / −1 / 0 steps, which sum to the units. Rounded up to 5 decimals as Lago does (a no-op for
 * these whole counts).
 *
 * With `context.prorate` (a prorated charge, Lago's ProratedAggregations::UniqueCountService) each
 * distinct value counts for the local dates of the billed part it was present on, over the period's
 * days (src/domain/aggregation/prorated.ts presenceDays). Those units are exact: Lago's rounding up
 * to 5 decimals is not applied, as api-contract.md rounds only the fee.
 */
export function aggregateUniqueCount(
  metric: AggregationMetric,
  events: readonly UsageEvent[],
  context: AggregationContext,
): AggregationResult {
  const keyOf = distinctKeyReader(metric);
  const present = new Set<string>();
  const stays = new Map<string, Presence[]>();
  const steps: Dec[] = [];
  for (const event of eventsInWindow(metric, events, context)) {
    const key = keyOf(event.properties);
    const operation = operationOf(event.properties);
    if (key === null || operation === null) continue;
    if (operation === 'add' && !present.has(key)) {
      present.add(key);
      const list = stays.get(key) ?? [];
      list.push({ from: event.timestamp, until: null });
      stays.set(key, list);
      steps.push(new Dec(1));
    } else if (operation === 'remove' && present.has(key)) {
      present.delete(key);
      const list = stays.get(key)!;
      list[list.length - 1] = { ...list[list.length - 1]!, until: event.timestamp };
      steps.push(new Dec(-1));
    } else {
      steps.push(new Dec(0));
    }
  }
  if (context.prorate) return result(proratedPresence(stays.values(), context.prorate), steps);
  return result(new Dec(present.size).toDecimalPlaces(5, Decimal.ROUND_CEIL), steps);
}
