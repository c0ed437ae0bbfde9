// The schedule of a wallet's interval rules and the crossings of its threshold rules
// (src/domain/wallet-rules.ts): anniversaries of started_at in the customer's time zone with month
// ends clamped, never one before it exists, and crossings only from above to at-or-below.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dec } from '../../src/domain/money';
import { crossedThresholds, intervalRun, nextIntervalRun, RULE_INTERVALS } from '../../src/domain/wallet-rules';

const at = (iso: string) => new Date(iso);
const runs = (startedAt: string, interval: (typeof RULE_INTERVALS)[number], timezone: string, count: number) => {
  const out: string[] = [];
  let after = at(startedAt);
  for (let i = 0; i < count; i++) {
    after = nextIntervalRun(at(startedAt), interval, timezone, after);
    out.push(after.toISOString());
  }
  return out;
};

describe('nextIntervalRun', () => {
  it('monthly from January 31: the end of shorter months, then back to the 31st', () => {
    expect(runs('2030-01-31T10:00:00Z', 'monthly', 'UTC', 4)).toEqual([
      '2030-02-28T10:00:00.000Z',
      '2030-03-31T10:00:00.000Z',
      '2030-04-30T10:00:00.000Z',
      '2030-05-31T10:00:00.000Z',
    ]);
  });

  it('keeps the local time of day across a DST change (Europe/Paris midnight)', () => {
    // 2030-03-01 00:00 in Paris is 23:00 UTC the day before (UTC+1); April 1 is UTC+2.
    expect(runs('2030-02-28T23:00:00Z', 'monthly', 'Europe/Paris', 2)).toEqual(['2030-03-31T22:00:00.000Z', '2030-04-30T22:00:00.000Z']);
  });

  it('weekly, quarterly and yearly (February 29 becomes February 28)', () => {
    expect(runs('2030-01-01T00:00:00Z', 'weekly', 'UTC', 2)).toEqual(['2030-01-08T00:00:00.000Z', '2030-01-15T00:00:00.000Z']);
    expect(runs('2030-11-30T00:00:00Z', 'quarterly', 'UTC', 2)).toEqual(['2031-02-28T00:00:00.000Z', '2031-05-30T00:00:00.000Z']);
    expect(runs('2028-02-29T00:00:00Z', 'yearly', 'UTC', 2)).toEqual(['2029-02-28T00:00:00.000Z', '2030-02-28T00:00:00.000Z']);
  });

  it('a rule made long after its started_at runs at the next anniversary only', () => {
    expect(nextIntervalRun(at('2020-01-31T00:00:00Z'), 'monthly', 'UTC', at('2030-06-15T12:00:00Z')).toISOString()).toBe(
      '2030-06-30T00:00:00.000Z',
    );
    // Exactly at an anniversary: the next one.
    expect(nextIntervalRun(at('2020-01-31T00:00:00Z'), 'monthly', 'UTC', at('2030-06-30T00:00:00Z')).toISOString()).toBe(
      '2030-07-31T00:00:00.000Z',
    );
    // A started_at in the future: one interval after it.
    expect(nextIntervalRun(at('2031-01-01T00:00:00Z'), 'yearly', 'UTC', at('2030-06-01T00:00:00Z')).toISOString()).toBe(
      '2032-01-01T00:00:00.000Z',
    );
  });

  it('is the first anniversary strictly after `after`, for any start, interval, zone and instant', () => {
    fc.assert(
      fc.property(
        fc.date({ min: at('2000-01-01T00:00:00Z'), max: at('2040-01-01T00:00:00Z'), noInvalidDate: true }),
        fc.integer({ min: 0, max: 20 * 366 * 86_400_000 }),
        fc.constantFrom(...RULE_INTERVALS),
        fc.constantFrom('UTC', 'Europe/Paris', 'America/New_York', 'Asia/Kolkata', 'Australia/Lord_Howe'),
        (start, offset, interval, zone) => {
          const after = new Date(start.getTime() + offset - 400 * 86_400_000);
          const next = nextIntervalRun(start, interval, zone, after);
          expect(next.getTime()).toBeGreaterThan(after.getTime());
          // Some k >= 1 gives it, and the one before it is not after `after` (or is the start itself).
          let k = 1;
          while (intervalRun(start, interval, zone, k).getTime() < next.getTime()) k++;
          expect(intervalRun(start, interval, zone, k).getTime()).toBe(next.getTime());
          if (k > 1) expect(intervalRun(start, interval, zone, k - 1).getTime()).toBeLessThanOrEqual(after.getTime());
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('crossedThresholds', () => {
  const rules = [
    { id: 'at-50', thresholdCredits: dec(50) },
    { id: 'at-10', thresholdCredits: dec(10) },
  ];
  it('names the rules crossed from above to at or below, and no others', () => {
    expect(crossedThresholds(rules, dec(60), dec(50))).toEqual(['at-50']);
    expect(crossedThresholds(rules, dec(60), dec(5))).toEqual(['at-50', 'at-10']);
    expect(crossedThresholds(rules, dec(50), dec(40))).toEqual([]);
    expect(crossedThresholds(rules, dec(50.0001), dec(50))).toEqual(['at-50']);
    expect(crossedThresholds(rules, dec(70), dec(60))).toEqual([]);
  });
});
