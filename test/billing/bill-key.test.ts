// A subscription bill's idempotency key and its parser live side by side (src/billing/subscription/
// shared.ts): the plan simulation reads past bills by parsing the keys billing wrote. Every key
// billing writes for a bill parses back to its parts; the keys of credits do not parse.
import { describe, expect, it } from 'vitest';
import { billKey, parseBillKey } from '../../src/billing/subscription/shared';
import type { PlanSnapshot, SubscriptionState } from '../../src/subscriptions/state';

const state = { subscriptionId: 'sub_1', version: 3 } as SubscriptionState;
const plan = { id: 'plan_basic' } as PlanSnapshot;
const from = new Date('2026-03-01T00:00:00Z');

describe('parseBillKey', () => {
  for (const kind of ['advance', 'subscription', 'carried'] as const) {
    it(`reads back a ${kind} bill's key`, () => {
      expect(parseBillKey(billKey(state, plan, from, kind))).toEqual({
        from: '2026-03-01T00:00:00.000Z',
        kind,
        planId: 'plan_basic',
        suffix: null,
      });
    });
  }

  it('reads the suffix of the bills of a pause and a resume', () => {
    expect(parseBillKey(`${billKey(state, plan, from, 'subscription')}/paused`)).toMatchObject({ kind: 'subscription', suffix: 'paused' });
    expect(parseBillKey(`${billKey(state, plan, '2026-03-11T00:00:00.000Z', 'advance')}/resume`)).toEqual({
      from: '2026-03-11T00:00:00.000Z',
      kind: 'advance',
      planId: 'plan_basic',
      suffix: 'resume',
    });
  });

  it('does not read the keys of credits or other documents', () => {
    expect(parseBillKey(billKey(state, plan, from, 'upgrade_credit'))).toBeNull();
    expect(parseBillKey(`${billKey(state, plan, from, 'upgrade_credit')}/pause`)).toBeNull();
    expect(parseBillKey(billKey(state, plan, from, 'termination_credit'))).toBeNull();
    expect(parseBillKey('one-off/inv_1')).toBeNull();
  });
});
