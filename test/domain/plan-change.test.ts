import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dec, roundCents } from '../../src/domain/money';
import {
  classifyPlanChange,
  computeTerminationAmounts,
  computeUpgradeAmounts,
  NotAnUpgrade,
  PlanCurrencyMismatch,
  yearlyAmount,
  type PricedPlan,
  type SubscriptionTiming,
  type TerminationAction,
} from '../../src/domain/plan-change';
import { PeriodBeforeStart, type BillingInterval } from '../../src/domain/periods';

const d = (iso: string): Date => new Date(iso);
const str = (value: { toString(): string } | null): string | null => (value === null ? null : value.toString());

function plan(amount: number | string, interval: BillingInterval, currency = 'EUR'): PricedPlan {
  return { amount_cents: amount, interval, currency };
}

/** Calendar billing in UTC, started long before January 2025 so periods are whole months. */
function timing(overrides: Partial<SubscriptionTiming> = {}): SubscriptionTiming {
  return {
    billingTime: 'calendar',
    anchor: d('2024-06-01T00:00:00Z'),
    timezone: 'UTC',
    payInAdvance: false,
    ...overrides,
  };
}

describe('yearlyAmount', () => {
  it.each([
    { interval: 'weekly' as const, amount: 1000, yearly: '52000' },
    { interval: 'monthly' as const, amount: 1000, yearly: '12000' },
    { interval: 'quarterly' as const, amount: 3000, yearly: '12000' },
    { interval: 'yearly' as const, amount: 12000, yearly: '12000' },
    { interval: 'monthly' as const, amount: '0.5', yearly: '6' },
  ])('$amount $interval -> $yearly', ({ interval, amount, yearly }) => {
    expect(yearlyAmount({ amount_cents: amount, interval }).toString()).toBe(yearly);
  });
});

describe('classifyPlanChange', () => {
  it.each([
    { name: 'higher monthly', from: plan(1000, 'monthly'), to: plan(1001, 'monthly'), kind: 'upgrade' },
    { name: 'lower monthly', from: plan(1000, 'monthly'), to: plan(999, 'monthly'), kind: 'downgrade' },
    { name: 'equal yearly amount (monthly 1000 -> yearly 12000)', from: plan(1000, 'monthly'), to: plan(12000, 'yearly'), kind: 'upgrade' },
    { name: 'same plan', from: plan(1000, 'monthly'), to: plan(1000, 'monthly'), kind: 'upgrade' },
    { name: 'weekly 231 is 12012 a year', from: plan(1000, 'monthly'), to: plan(231, 'weekly'), kind: 'upgrade' },
    { name: 'weekly 230 is 11960 a year', from: plan(1000, 'monthly'), to: plan(230, 'weekly'), kind: 'downgrade' },
    { name: 'a cheaper-looking quarterly plan', from: plan(1000, 'monthly'), to: plan(2999, 'quarterly'), kind: 'downgrade' },
    { name: 'yearly to a pricier monthly', from: plan(12000, 'yearly'), to: plan(1000.01, 'monthly'), kind: 'upgrade' },
    {
      name: 'currency codes compare case-insensitively',
      from: plan(1000, 'monthly', 'eur'),
      to: plan(2000, 'monthly', 'EUR'),
      kind: 'upgrade',
    },
  ])('$name: $kind', ({ from, to, kind }) => {
    expect(classifyPlanChange(from, to)).toBe(kind);
  });

  it('refuses another currency with PlanCurrencyMismatch', () => {
    const attempt = () => classifyPlanChange(plan(1000, 'monthly', 'EUR'), plan(2000, 'monthly', 'USD'));
    expect(attempt).toThrow(PlanCurrencyMismatch);
    try {
      attempt();
    } catch (error) {
      expect((error as PlanCurrencyMismatch).name).toBe('PlanCurrencyMismatch');
      expect((error as PlanCurrencyMismatch).newCurrency).toBe('USD');
    }
  });

  it('a plan change and its reverse are never both downgrades', () => {
    const planArb = fc.record({
      amount_cents: fc.integer({ min: 0, max: 1_000_000 }),
      interval: fc.constantFrom<BillingInterval>('weekly', 'monthly', 'quarterly', 'yearly'),
      currency: fc.constant('EUR'),
    });
    fc.assert(
      fc.property(planArb, planArb, (a, b) => {
        const there = classifyPlanChange(a, b);
        const back = classifyPlanChange(b, a);
        expect(there === 'downgrade' && back === 'downgrade').toBe(false);
        // both are upgrades exactly when the yearly amounts are equal
        expect(there === 'upgrade' && back === 'upgrade').toBe(yearlyAmount(a).equals(yearlyAmount(b)));
      }),
    );
  });
});

describe('computeUpgradeAmounts', () => {
  it('pay in arrear, Jan 15 on 10000 monthly: 10000 * 14 / 31 = 4516', () => {
    const result = computeUpgradeAmounts({
      ...timing(),
      oldPlan: plan(10000, 'monthly'),
      newPlan: plan(20000, 'monthly'),
      changedAt: d('2025-01-15T10:00:00Z'),
    });
    expect(result.periodDays).toBe(31);
    expect(result.oldPlanDays).toBe(14);
    expect(result.newPlanDays).toBe(17);
    expect(str(result.oldPlanFee)).toBe('4516.129');
    expect(roundCents(result.oldPlanFee!).toString()).toBe('4516');
    // 20000 * 17 / 31 = 10967.741935...
    expect(str(result.newPlanFee)).toBe('10967.7419');
    expect(result.creditNoteAmount).toBeNull();
    // the old plan's period closes at the end of the day before the change
    expect(result.oldPlanPeriod.to.toISOString()).toBe('2025-01-15T00:00:00.000Z');
    expect(result.newPlanPeriod.from.toISOString()).toBe('2025-01-15T00:00:00.000Z');
    expect(result.period.to.toISOString()).toBe('2025-02-01T00:00:00.000Z');
  });

  it('pay in advance, Jan 10 from 3100 to 6200: 22 days credited (2200), 22 days charged (4400)', () => {
    const result = computeUpgradeAmounts({
      ...timing({ payInAdvance: true }),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-10T08:00:00Z'),
    });
    expect(str(result.creditNoteAmount)).toBe('2200');
    expect(str(result.newPlanFee)).toBe('4400');
    expect(result.oldPlanFee).toBeNull();
    expect(result.oldPlanDays).toBe(9);
    expect(result.newPlanDays).toBe(22);
  });

  it('a change on the first day of a period bills no base fee for the old plan', () => {
    const result = computeUpgradeAmounts({
      ...timing(),
      oldPlan: plan(2800, 'monthly'),
      newPlan: plan(5600, 'monthly'),
      changedAt: d('2025-02-01T10:00:00Z'),
    });
    expect(result.oldPlanDays).toBe(0);
    expect(result.oldPlanFee).toBeNull();
    expect(result.newPlanDays).toBe(28);
    expect(str(result.newPlanFee)).toBe('5600');
  });

  it('in advance, a change on the first day credits the whole old fee', () => {
    const result = computeUpgradeAmounts({
      ...timing({ payInAdvance: true }),
      oldPlan: plan(2800, 'monthly'),
      newPlan: plan(5600, 'monthly'),
      changedAt: d('2025-02-01T00:00:00Z'),
    });
    expect(str(result.creditNoteAmount)).toBe('2800');
    expect(str(result.newPlanFee)).toBe('5600');
  });

  it('a change on the first day of the first calendar period, after started_at', () => {
    const result = computeUpgradeAmounts({
      ...timing({ anchor: d('2025-01-20T09:00:00Z') }),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-20T17:00:00Z'),
    });
    expect(result.oldPlanFee).toBeNull();
    expect(result.oldPlanPeriod.to.toISOString()).toBe('2025-01-20T09:00:00.000Z');
    expect(result.newPlanDays).toBe(12);
    expect(str(result.newPlanFee)).toBe('2400');
  });

  it('a change on the last day leaves the new plan one day', () => {
    const result = computeUpgradeAmounts({
      ...timing(),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-31T23:59:59Z'),
    });
    expect(str(result.oldPlanFee)).toBe('3000');
    expect(str(result.newPlanFee)).toBe('200');
  });

  it('the change day is the local date: 00:30 in Paris is already Jan 15', () => {
    const input = {
      ...timing({ timezone: 'Europe/Paris', anchor: d('2024-06-01T00:00:00+02:00') }),
      oldPlan: plan(10000, 'monthly'),
      newPlan: plan(20000, 'monthly'),
      changedAt: d('2025-01-14T23:30:00Z'),
    };
    expect(computeUpgradeAmounts(input).oldPlanDays).toBe(14);
    expect(computeUpgradeAmounts({ ...input, timezone: 'UTC' }).oldPlanDays).toBe(13);
  });

  it('caps the credit at the base fee invoiced for the period', () => {
    // started Jan 20: 12 of 31 days invoiced in advance (1200); upgrade Jan 22 credits 10 days
    const base = {
      ...timing({ payInAdvance: true, anchor: d('2025-01-20T09:00:00Z') }),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-22T12:00:00Z'),
    };
    expect(str(computeUpgradeAmounts({ ...base, invoicedBaseFee: '1200' }).creditNoteAmount)).toBe('1000');
    expect(str(computeUpgradeAmounts({ ...base, invoicedBaseFee: '500' }).creditNoteAmount)).toBe('500');
    expect(computeUpgradeAmounts({ ...base, invoicedBaseFee: 0 }).creditNoteAmount).toBeNull();
  });

  it('during a trial nothing was invoiced, so nothing is credited and the old plan bills nothing', () => {
    const trial = { anchor: d('2025-01-10T14:00:00Z'), trialEndsAt: d('2025-01-20T14:00:00Z') };
    const arrear = computeUpgradeAmounts({
      ...timing(trial),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-15T00:00:00Z'),
    });
    expect(arrear.oldPlanFee).toBeNull();
    // the trial end date (Jan 20) is billed: Jan 20..31 = 12 days
    expect(arrear.newPlanDays).toBe(12);
    expect(str(arrear.newPlanFee)).toBe('2400');
    const advance = computeUpgradeAmounts({
      ...timing({ ...trial, payInAdvance: true }),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-15T00:00:00Z'),
    });
    expect(advance.creditNoteAmount).toBeNull();
  });

  it('after the trial ended, the old plan is billed from the trial end date', () => {
    const result = computeUpgradeAmounts({
      ...timing({ anchor: d('2025-01-10T14:00:00Z'), trialEndsAt: d('2025-01-20T14:00:00Z') }),
      oldPlan: plan(3100, 'monthly'),
      newPlan: plan(6200, 'monthly'),
      changedAt: d('2025-01-25T09:00:00Z'),
    });
    // Jan 20..24
    expect(result.oldPlanDays).toBe(5);
    expect(str(result.oldPlanFee)).toBe('500');
  });

  it("a new plan with another interval is prorated on its own period's length", () => {
    const result = computeUpgradeAmounts({
      ...timing(),
      oldPlan: plan(1000, 'monthly'),
      newPlan: plan(20000, 'yearly'),
      changedAt: d('2025-01-15T00:00:00Z'),
    });
    // 20000 * 17 / 365 = 931.5068493...
    expect(str(result.newPlanFee)).toBe('931.5068');
    expect(result.period.to.toISOString()).toBe('2025-02-01T00:00:00.000Z');
  });

  it('refuses a downgrade and another currency', () => {
    const base = { ...timing(), changedAt: d('2025-01-15T00:00:00Z') };
    expect(() => computeUpgradeAmounts({ ...base, oldPlan: plan(2000, 'monthly'), newPlan: plan(1000, 'monthly') })).toThrow(NotAnUpgrade);
    expect(() => computeUpgradeAmounts({ ...base, oldPlan: plan(1000, 'monthly'), newPlan: plan(2000, 'monthly', 'USD') })).toThrow(
      PlanCurrencyMismatch,
    );
  });

  it('in advance, the old plan used plus credited equals the full fee (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 400 * 86_400_000 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.constantFrom('UTC', 'Europe/Paris', 'Pacific/Auckland', 'Asia/Kolkata'),
        fc.constantFrom<BillingInterval>('weekly', 'monthly', 'quarterly', 'yearly'),
        (offset, amount, timezone, interval) => {
          const anchor = d('2024-01-01T00:00:00Z');
          const result = computeUpgradeAmounts({
            billingTime: 'anniversary',
            anchor,
            timezone,
            payInAdvance: true,
            oldPlan: plan(amount, interval),
            newPlan: plan(amount, interval),
            changedAt: new Date(anchor.getTime() + offset),
          });
          expect(result.oldPlanDays + result.newPlanDays).toBe(result.periodDays);
          const credited = result.creditNoteAmount ?? dec(0);
          expect(credited.greaterThan(0)).toBe(true);
          expect(credited.lessThanOrEqualTo(amount)).toBe(true);
          // same plan both sides: the new fee equals the refund
          expect(str(result.newPlanFee)).toBe(credited.toString());
        },
      ),
    );
  });
});

describe('computeTerminationAmounts', () => {
  const base = (action: TerminationAction, payInAdvance: boolean, terminatedAt: string) => ({
    ...timing({ payInAdvance }),
    plan: plan(3100, 'monthly'),
    action,
    terminatedAt: d(terminatedAt),
  });

  it.each([
    // arrear: the termination day is billed; Jan 10 12:00 -> 10 days
    {
      name: 'arrear, generate_invoice',
      input: base('generate_invoice', false, '2025-01-10T12:00:00Z'),
      used: 10,
      unused: 21,
      fee: '1000',
      credit: null,
    },
    {
      name: 'arrear, generate_credit_note bills the same',
      input: base('generate_credit_note', false, '2025-01-10T12:00:00Z'),
      used: 10,
      unused: 21,
      fee: '1000',
      credit: null,
    },
    { name: 'arrear, skip', input: base('skip', false, '2025-01-10T12:00:00Z'), used: 10, unused: 21, fee: null, credit: null },
    {
      name: 'arrear, at midnight the termination day still counts',
      input: base('generate_invoice', false, '2025-01-10T00:00:00Z'),
      used: 10,
      unused: 21,
      fee: '1000',
      credit: null,
    },
    {
      name: 'advance, generate_credit_note: 21 of 31 days',
      input: base('generate_credit_note', true, '2025-01-10T12:00:00Z'),
      used: 10,
      unused: 21,
      fee: null,
      credit: '2100',
    },
    {
      name: 'advance, generate_invoice: no credit',
      input: base('generate_invoice', true, '2025-01-10T12:00:00Z'),
      used: 10,
      unused: 21,
      fee: null,
      credit: null,
    },
    { name: 'advance, skip', input: base('skip', true, '2025-01-10T12:00:00Z'), used: 10, unused: 21, fee: null, credit: null },
    {
      name: 'advance, on the last day credits nothing',
      input: base('generate_credit_note', true, '2025-01-31T15:00:00Z'),
      used: 31,
      unused: 0,
      fee: null,
      credit: null,
    },
    {
      name: 'advance, on the first day credits all but one day',
      input: base('generate_credit_note', true, '2025-01-01T08:00:00Z'),
      used: 1,
      unused: 30,
      fee: null,
      credit: '3000',
    },
    // a cancellation reaching ending_at = the period end closes January, not one day of February
    {
      name: 'arrear, exactly on the period boundary bills the whole ending period',
      input: base('generate_invoice', false, '2025-02-01T00:00:00Z'),
      used: 31,
      unused: 0,
      fee: '3100',
      credit: null,
    },
    {
      name: 'advance, exactly on the period boundary credits nothing',
      input: base('generate_credit_note', true, '2025-02-01T00:00:00Z'),
      used: 31,
      unused: 0,
      fee: null,
      credit: null,
    },
  ])('$name', ({ input, used, unused, fee, credit }) => {
    const result = computeTerminationAmounts(input);
    expect(result.usedDays).toBe(used);
    expect(result.unusedDays).toBe(unused);
    expect(result.periodDays).toBe(31);
    expect(str(result.baseFee)).toBe(fee);
    expect(str(result.creditNoteAmount)).toBe(credit);
  });

  it('on a boundary, the period is the one that ends there', () => {
    const result = computeTerminationAmounts(base('generate_invoice', false, '2025-02-01T00:00:00Z'));
    expect(result.period.from.toISOString()).toBe('2025-01-01T00:00:00.000Z');
    expect(result.billedUntil.toISOString()).toBe('2025-02-01T00:00:00.000Z');
  });

  it('in the first calendar period, days count from started_at', () => {
    const result = computeTerminationAmounts({
      ...timing({ anchor: d('2025-01-15T18:00:00Z') }),
      plan: plan(3100, 'monthly'),
      action: 'generate_invoice',
      terminatedAt: d('2025-01-20T06:00:00Z'),
    });
    expect(result.usedDays).toBe(6);
    expect(str(result.baseFee)).toBe('600');
  });

  it('a termination at the very start bills its one day', () => {
    const anchor = d('2025-01-15T18:00:00Z');
    const result = computeTerminationAmounts({
      ...timing({ anchor }),
      plan: plan(3100, 'monthly'),
      action: 'generate_invoice',
      terminatedAt: anchor,
    });
    expect(result.period.from.toISOString()).toBe(anchor.toISOString());
    expect(str(result.baseFee)).toBe('100');
  });

  it('anniversary on Jan 31 of a leap year: 11 of 29 days used, 18 credited', () => {
    const input = {
      billingTime: 'anniversary' as const,
      anchor: d('2024-01-31T09:00:00Z'),
      timezone: 'UTC',
      plan: plan(2900, 'monthly'),
      terminatedAt: d('2024-02-10T12:00:00Z'),
    };
    const arrear = computeTerminationAmounts({ ...input, payInAdvance: false, action: 'generate_invoice' });
    expect(arrear.periodDays).toBe(29);
    expect(str(arrear.baseFee)).toBe('1100');
    const advance = computeTerminationAmounts({ ...input, payInAdvance: true, action: 'generate_credit_note' });
    expect(str(advance.creditNoteAmount)).toBe('1800');
  });

  it('the termination day is the local date (America/Los_Angeles, late evening)', () => {
    const result = computeTerminationAmounts({
      ...timing({ timezone: 'America/Los_Angeles', anchor: d('2024-06-01T00:00:00-07:00'), payInAdvance: true }),
      plan: plan(3100, 'monthly'),
      action: 'generate_credit_note',
      // Jan 10 23:00 in Los Angeles, already Jan 11 in UTC
      terminatedAt: d('2025-01-11T07:00:00Z'),
    });
    expect(result.usedDays).toBe(10);
    expect(str(result.creditNoteAmount)).toBe('2100');
  });

  it('during a trial: nothing billed in arrear before the trial ends, nothing credited in advance', () => {
    const trial = { anchor: d('2025-01-10T14:00:00Z'), trialEndsAt: d('2025-01-20T14:00:00Z') };
    const during = { plan: plan(3100, 'monthly'), terminatedAt: d('2025-01-15T00:00:00Z') };
    const arrear = computeTerminationAmounts({ ...timing(trial), ...during, action: 'generate_invoice' });
    expect(arrear.usedDays).toBe(0);
    expect(arrear.baseFee).toBeNull();
    const advance = computeTerminationAmounts({
      ...timing({ ...trial, payInAdvance: true }),
      ...during,
      action: 'generate_credit_note',
    });
    expect(advance.creditNoteAmount).toBeNull();
  });

  it('after a trial: billed from the trial end date through the termination day', () => {
    const result = computeTerminationAmounts({
      ...timing({ anchor: d('2025-01-10T14:00:00Z'), trialEndsAt: d('2025-01-20T14:00:00Z') }),
      plan: plan(3100, 'monthly'),
      action: 'generate_invoice',
      terminatedAt: d('2025-01-25T09:00:00Z'),
    });
    expect(result.usedDays).toBe(6);
    expect(str(result.baseFee)).toBe('600');
  });

  it('never creates a zero credit note: a free plan and a capped-to-zero credit give null', () => {
    const input = {
      ...timing({ payInAdvance: true }),
      action: 'generate_credit_note' as const,
      terminatedAt: d('2025-01-10T12:00:00Z'),
    };
    expect(computeTerminationAmounts({ ...input, plan: plan(0, 'monthly') }).creditNoteAmount).toBeNull();
    expect(computeTerminationAmounts({ ...input, plan: plan(3100, 'monthly'), invoicedBaseFee: '0' }).creditNoteAmount).toBeNull();
  });

  it('refuses a termination before the subscription started', () => {
    expect(() =>
      computeTerminationAmounts({
        ...timing({ anchor: d('2025-01-15T00:00:00Z') }),
        plan: plan(3100, 'monthly'),
        action: 'generate_invoice',
        terminatedAt: d('2025-01-14T00:00:00Z'),
      }),
    ).toThrow(PeriodBeforeStart);
  });

  it('used and unused days split the period; fee plus credit never exceed the plan amount (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 400 * 86_400_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.constantFrom('UTC', 'Europe/Paris', 'America/New_York', 'Pacific/Auckland', 'Asia/Kolkata'),
        fc.constantFrom<BillingInterval>('weekly', 'monthly', 'quarterly', 'yearly'),
        (offset, amount, timezone, interval) => {
          const anchor = d('2024-01-01T00:00:00Z');
          const input = {
            billingTime: 'anniversary' as const,
            anchor,
            timezone,
            plan: plan(amount, interval),
            action: 'generate_credit_note' as const,
            terminatedAt: new Date(anchor.getTime() + offset),
          };
          const arrear = computeTerminationAmounts({ ...input, payInAdvance: false });
          const advance = computeTerminationAmounts({ ...input, payInAdvance: true });
          expect(arrear.usedDays + arrear.unusedDays).toBe(arrear.periodDays);
          expect(arrear.usedDays).toBeGreaterThanOrEqual(1);
          const fee = arrear.baseFee ?? dec(0);
          const credit = advance.creditNoteAmount ?? dec(0);
          expect(fee.plus(credit).lessThanOrEqualTo(dec(amount).plus('0.0001'))).toBe(true);
          if (advance.creditNoteAmount !== null) expect(advance.creditNoteAmount.greaterThan(0)).toBe(true);
        },
      ),
    );
  });
});
