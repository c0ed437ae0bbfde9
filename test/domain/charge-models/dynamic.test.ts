import { describe, expect, it } from 'vitest';
import { compute, propertiesSchema } from '../../../src/domain/charge-models/dynamic';
import { issuePaths, units, unknownKeys, withEvents } from './fixtures';

const defaults = propertiesSchema.parse({});

// The metric's own aggregation is irrelevant to dynamic pricing: units('999') must be ignored.
const priced = (events: Record<string, unknown>[], properties = defaults) => compute(properties, withEvents(units('999', 42), events));

describe('dynamic charge model', () => {
  it('defaults the field names to unit_price and quantity', () => {
    expect(defaults).toEqual({ price_field: 'unit_price', quantity_field: 'quantity' });
  });

  it.each([
    {
      name: 'sum of price x quantity',
      events: [
        { unit_price: '150.5', quantity: 1 },
        { unit_price: 49.5, quantity: '2' },
      ],
      amount: '249.5',
      units: '3',
      eventsCount: 2,
    },
    {
      name: 'events without a numeric price or quantity are skipped',
      events: [
        { unit_price: '100', quantity: 3 },
        { unit_price: '100' },
        { quantity: 5 },
        { unit_price: '1e3', quantity: 1 },
        { unit_price: '10', quantity: 'two' },
        { unit_price: '+5', quantity: 1 },
      ],
      amount: '300',
      units: '3',
      eventsCount: 1,
    },
    { name: 'no events', events: [], amount: '0', units: '0', eventsCount: 0 },
    {
      name: 'price with more than 4 digits is rounded half up',
      events: [{ unit_price: '0.00005', quantity: 1 }],
      amount: '0.0001',
      units: '1',
      eventsCount: 1,
    },
    { name: 'fractional quantity', events: [{ unit_price: '3', quantity: '0.5' }], amount: '1.5', units: '0.5', eventsCount: 1 },
    {
      name: 'a credit event lowers the amount',
      events: [
        { unit_price: '100', quantity: 2 },
        { unit_price: '-50', quantity: 1 },
      ],
      amount: '150',
      units: '3',
      eventsCount: 2,
    },
    {
      name: 'a negative total is 0, units too',
      events: [
        { unit_price: '100', quantity: 1 },
        { unit_price: '-300', quantity: 1 },
      ],
      amount: '0',
      units: '0',
      eventsCount: 2,
    },
  ])('$name', ({ events, amount, units: u, eventsCount }) => {
    const result = priced(events);
    expect(result.amount.toString()).toBe(amount);
    expect(result.units.toString()).toBe(u);
    expect(result.eventsCount).toBe(eventsCount);
  });

  it('reads the configured property names', () => {
    const properties = propertiesSchema.parse({ price_field: 'price_cents', quantity_field: 'seats' });
    const result = priced([{ price_cents: '250', seats: 4, unit_price: '1', quantity: 1 }], properties);
    expect(result.amount.toString()).toBe('1000');
    expect(result.unitAmount.toString()).toBe('250');
  });

  it('refuses to price without the events rather than bill nothing', () => {
    expect(() => compute(defaults, units('3', 3))).toThrow(/events/);
  });

  it.each([
    { value: { price_field: '' }, path: 'price_field' },
    { value: { quantity_field: 3 }, path: 'quantity_field' },
    { value: { price_field: null }, path: 'price_field' },
  ])('rejects $value at "$path"', ({ value, path }) => {
    expect(issuePaths(propertiesSchema, value)).toEqual([path]);
  });

  it("rejects Lago's precise_total_amount_cents style", () => {
    expect(unknownKeys(propertiesSchema, { precise_total_amount_cents: 'x' })).toEqual(['precise_total_amount_cents']);
  });
});
