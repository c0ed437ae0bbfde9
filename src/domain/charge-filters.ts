import { ownProperty } from './expression';

/** A charge filter's condition: property key -> accepted values (api-contract.md, Plans). */
export type FilterValues = Readonly<Record<string, readonly string[]>>;

export interface ChargeFilterLike {
  readonly values: FilterValues;
}

/** `filter_key` of the default bucket (events matching no filter); no `filterKey` result equals it. */
export const DEFAULT_FILTER_KEY = 'default';

type Properties = Readonly<Record<string, unknown>>;

/**
 * The text an event property is compared as. Lago compares JSON text (`->>`), so the number 2 matches
 * the filter value "2" and `true` matches "true". Objects, arrays and null match nothing.
 */
function propertyText(raw: unknown): string | null {
  if (typeof raw === 'string') return raw;
  if (typeof raw === 'number') return Number.isFinite(raw) ? String(raw) : null;
  if (typeof raw === 'boolean') return String(raw);
  return null;
}

/**
 * True when, for every key of the filter, the event has the property and its value is among the
 * filter's values (billing-rules.md, Usage). A key with an empty value list matches nothing; a
 * filter without keys matches every event, with the lowest specificity (the API should refuse both).
 */
export function eventMatchesFilter(properties: Properties, values: FilterValues): boolean {
  return Object.entries(values).every(([key, accepted]) => {
    const text = propertyText(ownProperty(properties, key));
    return text !== null && accepted.includes(text);
  });
}

/**
 * Prepared once per charge: filters tried from the most specific (most keys) down, and, among
 * equally specific ones, in the charge's order, so the first match is the winner. Ties go to the
 * filter listed first, as Lago lets the oldest of two identical filters take the events.
 */
function prepare(filters: readonly ChargeFilterLike[]) {
  return filters
    .map((filter, index) => ({
      index,
      entries: Object.entries(filter.values).map(([key, accepted]) => [key, new Set(accepted)] as const),
    }))
    .sort((a, b) => b.entries.length - a.entries.length || a.index - b.index);
}

function winner(prepared: ReturnType<typeof prepare>, properties: Properties): number | null {
  for (const filter of prepared) {
    const matches = filter.entries.every(([key, accepted]) => {
      const text = propertyText(ownProperty(properties, key));
      return text !== null && accepted.has(text);
    });
    if (matches) return filter.index;
  }
  return null;
}

/**
 * The index of the filter that prices this event: the most specific matching one, so an event is
 * never counted twice; null for the default bucket.
 */
export function matchingFilterIndex(filters: readonly ChargeFilterLike[], properties: Properties): number | null {
  return winner(prepare(filters), properties);
}

export interface FilterBuckets<E> {
  /** One bucket per filter, in the charge's filter order. */
  filters: E[][];
  /** Events matching no filter, priced with the charge's own properties. */
  default: E[];
}

/** Splits a charge's events into its filter buckets and its default bucket; order is kept in each. */
export function splitEventsByFilters<E extends { readonly properties: Properties }>(
  filters: readonly ChargeFilterLike[],
  events: readonly E[],
): FilterBuckets<E> {
  const prepared = prepare(filters);
  const buckets: FilterBuckets<E> = { filters: filters.map(() => []), default: [] };
  for (const event of events) {
    const index = winner(prepared, event.properties);
    const bucket = index === null ? buckets.default : buckets.filters[index];
    // `index` comes from `filters`, so its bucket exists.
    bucket?.push(event);
  }
  return buckets;
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A canonical text for a filter's values, for database keys (`daily_usage`, `fees`): keys sorted,
 * values de-duplicated and sorted, by UTF-16 code units so the result never depends on a locale.
 * `{ tier: ['gold'], region: ['us', 'eu'] }` -> `{"region":["eu","us"],"tier":["gold"]}`.
 */
export function filterKey(values: FilterValues): string {
  const parts = Object.keys(values)
    .sort(compareCodeUnits)
    .map((key) => {
      const sorted = [...new Set(values[key] ?? [])].sort(compareCodeUnits);
      return `${JSON.stringify(key)}:${JSON.stringify(sorted)}`;
    });
  return `{${parts.join(',')}}`;
}
