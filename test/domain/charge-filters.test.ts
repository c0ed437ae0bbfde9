import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_FILTER_KEY,
  eventMatchesFilter,
  filterKey,
  matchingFilterIndex,
  splitEventsByFilters,
  type ChargeFilterLike,
  type FilterValues,
} from '../../src/domain/charge-filters';

const e = (id: string, properties: Record<string, unknown>) => ({ id, properties });

describe('eventMatchesFilter', () => {
  it.each<[string, Record<string, unknown>, FilterValues, boolean]>([
    ['value among the values', { region: 'us' }, { region: ['us', 'eu'] }, true],
    ['value not among the values', { region: 'asia' }, { region: ['us', 'eu'] }, false],
    ['missing key', { tier: 'gold' }, { region: ['us'] }, false],
    ['every key must match', { region: 'us', tier: 'silver' }, { region: ['us'], tier: ['gold'] }, false],
    ['all keys match, extra properties ignored', { region: 'us', tier: 'gold', x: 1 }, { region: ['us'], tier: ['gold'] }, true],
    ['numbers compare as their JSON text', { zone: 2 }, { zone: ['2'] }, true],
    ['booleans compare as their JSON text', { vip: true }, { vip: ['true'] }, true],
    ['null matches nothing, not even "null"', { region: null }, { region: ['null'] }, false],
    ['objects match nothing', { region: { a: 1 } }, { region: ['[object Object]'] }, false],
    ['case matters', { region: 'US' }, { region: ['us'] }, false],
    ['inherited keys are not properties', {}, { constructor: ['function Object() { [native code] }'] }, false],
    ['an empty value list matches nothing', { region: 'us' }, { region: [] }, false],
    ['a filter without keys matches everything', { region: 'us' }, {}, true],
  ])('%s -> %s', (_label, properties, values, expected) => {
    expect(eventMatchesFilter(properties, values)).toBe(expected);
  });
});

describe('splitEventsByFilters', () => {
  it('Lago example: the most specific filter wins and no event is counted twice', () => {
    const filters: ChargeFilterLike[] = [{ values: { region: ['us'] } }, { values: { region: ['us'], tier: ['gold'] } }];
    const events = [
      ...Array.from({ length: 2 }, (_, i) => e(`gold${i}`, { region: 'us', tier: 'gold' })),
      ...Array.from({ length: 3 }, (_, i) => e(`silver${i}`, { region: 'us', tier: 'silver' })),
      ...Array.from({ length: 4 }, (_, i) => e(`eu${i}`, { region: 'eu' })),
      e('none', {}),
    ];
    const buckets = splitEventsByFilters(filters, events);
    expect(buckets.filters.map((b) => b.map((x) => x.id))).toEqual([
      ['silver0', 'silver1', 'silver2'],
      ['gold0', 'gold1'],
    ]);
    expect(buckets.default.map((x) => x.id)).toEqual(['eu0', 'eu1', 'eu2', 'eu3', 'none']);
  });

  it('without filters every event is in the default bucket', () => {
    const buckets = splitEventsByFilters([], [e('a', { region: 'us' }), e('b', {})]);
    expect(buckets.filters).toEqual([]);
    expect(buckets.default.map((x) => x.id)).toEqual(['a', 'b']);
  });

  it('equally specific filters: the one listed first takes the event', () => {
    const filters: ChargeFilterLike[] = [{ values: { region: ['us'] } }, { values: { tier: ['gold'] } }, { values: { region: ['us'] } }];
    expect(matchingFilterIndex(filters, { region: 'us', tier: 'gold' })).toBe(0);
    expect(matchingFilterIndex(filters, { tier: 'gold' })).toBe(1);
    expect(matchingFilterIndex(filters, { tier: 'silver' })).toBeNull();
    const buckets = splitEventsByFilters(filters, [e('x', { region: 'us' })]);
    expect(buckets.filters.map((b) => b.length)).toEqual([1, 0, 0]);
  });

  it('a more specific filter listed later still wins', () => {
    const filters: ChargeFilterLike[] = [{ values: { region: ['us', 'eu'] } }, { values: { region: ['eu'], tier: ['gold', 'silver'] } }];
    expect(matchingFilterIndex(filters, { region: 'eu', tier: 'silver' })).toBe(1);
    expect(matchingFilterIndex(filters, { region: 'eu', tier: 'bronze' })).toBe(0);
  });
});

const filterValuesArb: fc.Arbitrary<Record<string, string[]>> = fc.dictionary(
  fc.constantFrom('region', 'tier', 'zone'),
  fc.array(fc.constantFrom('us', 'eu', 'gold', 'silver', '1', '2'), { minLength: 1, maxLength: 3 }),
  { minKeys: 1, maxKeys: 3 },
);
const propertiesArb = fc.dictionary(
  fc.constantFrom('region', 'tier', 'zone', 'other'),
  fc.oneof(fc.constantFrom('us', 'eu', 'gold', 'silver', 'asia'), fc.constantFrom(1, 2, 3)),
);

describe('splitting properties', () => {
  it('puts every event in exactly one bucket: the most specific matching filter, else the default', () => {
    fc.assert(
      fc.property(fc.array(filterValuesArb, { maxLength: 5 }), fc.array(propertiesArb, { maxLength: 30 }), (valuesList, props) => {
        const filters = valuesList.map((values) => ({ values }));
        const events = props.map((properties, i) => ({ id: i, properties }));
        const buckets = splitEventsByFilters(filters, events);
        const placed = [...buckets.filters.flat(), ...buckets.default].map((x) => x.id).sort((a, b) => a - b);
        expect(placed).toEqual(events.map((x) => x.id));
        buckets.filters.forEach((bucket, index) => {
          for (const event of bucket) {
            expect(eventMatchesFilter(event.properties, valuesList[index] ?? {})).toBe(true);
            const keys = Object.keys(valuesList[index] ?? {}).length;
            // No matching filter is strictly more specific than the one that won.
            for (const other of valuesList) {
              if (eventMatchesFilter(event.properties, other)) expect(Object.keys(other).length).toBeLessThanOrEqual(keys);
            }
          }
        });
        for (const event of buckets.default) {
          for (const values of valuesList) expect(eventMatchesFilter(event.properties, values)).toBe(false);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('filterKey', () => {
  it.each<[FilterValues, string]>([
    [{ region: ['us'] }, '{"region":["us"]}'],
    [{ tier: ['gold'], region: ['us', 'eu'] }, '{"region":["eu","us"],"tier":["gold"]}'],
    [{ region: ['us', 'us', 'eu'] }, '{"region":["eu","us"]}'],
    [{ 'a"b': ['x,y'] }, '{"a\\"b":["x,y"]}'],
    [{ Z: ['b'], a: ['B', 'a'] }, '{"Z":["b"],"a":["B","a"]}'],
    [{ '10': ['x'], '9': ['y'] }, '{"10":["x"],"9":["y"]}'],
    [{}, '{}'],
  ])('%j -> %s', (values, key) => {
    expect(filterKey(values)).toBe(key);
  });

  it('is the same for any key and value order, and different for different filters', () => {
    fc.assert(
      fc.property(filterValuesArb, filterValuesArb, fc.infiniteStream(fc.nat()), (a, b, seeds) => {
        const shuffled = Object.fromEntries(
          Object.entries(a)
            .reverse()
            .map(([k, v]) => [k, [...v].sort(() => (seeds.next().value % 3) - 1)]),
        );
        expect(filterKey(shuffled)).toBe(filterKey(a));
        const same = (x: Record<string, string[]>, y: Record<string, string[]>) =>
          Object.keys(x).length === Object.keys(y).length &&
          Object.entries(x).every(
            ([k, v]) => y[k] !== undefined && new Set(v).size === new Set(y[k]).size && v.every((s) => y[k]?.includes(s)),
          );
        expect(filterKey(a) === filterKey(b)).toBe(same(a, b));
        expect(filterKey(a)).not.toBe(DEFAULT_FILTER_KEY);
        expect(JSON.parse(filterKey(a))).toEqual(expect.any(Object));
      }),
      { numRuns: 500 },
    );
  });
});
