// subscriptionWorkflow through whole years on the time-skipping server, with real activities:
// calendar and anniversary periods, in arrear and in advance, monthly and yearly, a zone far from
// UTC. Every expected amount is computed in the test from billing-rules.md.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  advanceTo,
  cents,
  createPlan,
  createTenant,
  feesOf,
  invoicesOf,
  sendEvents,
  startHarness,
  subscribe,
  type Harness,
} from './subscription-harness';

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
    const boundaries = [
      '2027-01-15T10:00:00',
      ...Array.from({ length: 12 }, (_, m) => `${m === 11 ? 2028 : 2027}-${String(((m + 1) % 12) + 1).padStart(2, '0')}-01T00:00:00`),
    ];
    for (let i = 0; i < 12; i++) {
      await sendEvents(
        h,
        tenant,
        metricCode,
        new Date((utc(boundaries[i]!).getTime() + utc(boundaries[i + 1]!).getTime()) / 2),
        10 * (i + 1),
      );
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

  it('bills a calendar monthly plan in advance through a leap year: the base fee of each starting period with the usage of the ended one', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2028-01-15T10:00:00'), payInAdvance: true });

    await advanceTo(h, id, utc('2028-01-15T10:00:01'));
    const boundaries = [
      '2028-01-15T10:00:00',
      ...Array.from({ length: 12 }, (_, m) => `${m === 11 ? 2029 : 2028}-${String(((m + 1) % 12) + 1).padStart(2, '0')}-01T00:00:00`),
    ];
    for (let i = 0; i < 12; i++) {
      await sendEvents(h, tenant, metricCode, new Date(utc(boundaries[i + 1]!).getTime() - 3_600_000), 10 * (i + 1));
    }
    await advanceTo(h, id, utc('2029-01-01T00:01:00'));

    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(13);
    // At activation: Jan 15..31 in advance, 10000 * 17 / 31 = 5483.8710, no usage yet.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '5483.8710' });
    expect(cents(invoices[0]!.total)).toBe('5484');
    expect(invoices[0]!.issuing_date).toBe('2028-01-15');
    // At each boundary k: the next month in full (February of a leap year too) + the ended period's usage 20 * k.
    for (let k = 1; k <= 12; k++) {
      expect(await feesOf(h, invoices[k]!._id)).toEqual({ subscription: '10000.0000', charge: `${20 * k}.0000` });
      expect(cents(invoices[k]!.total)).toBe(String(10000 + 20 * k));
      expect(invoices[k]!.issuing_date).toBe(boundaries[k]!.slice(0, 10));
    }
  });

  it("keeps an anniversary on the 31st: the month's last day when shorter, back to the 31st after, each period billed in full", async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 3000, perCall: '2' });
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2029-01-31T08:00:00'), billingTime: 'anniversary' });
    await advanceTo(h, id, utc('2029-01-31T08:00:01'));
    const starts = [
      '2029-01-31T08:00:00',
      '2029-02-28',
      '2029-03-31',
      '2029-04-30',
      '2029-05-31',
      '2029-06-30',
      '2029-07-31',
      '2029-08-31',
      '2029-09-30',
      '2029-10-31',
      '2029-11-30',
      '2029-12-31',
      '2030-01-31',
    ].map((d) => (d.includes('T') ? utc(d) : utc(`${d}T00:00:00`)));
    for (let i = 0; i < 12; i++) await sendEvents(h, tenant, metricCode, new Date(starts[i + 1]!.getTime() - 60_000), 5);
    await advanceTo(h, id, utc('2030-01-31T00:01:00'));

    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(12);
    for (let i = 0; i < 12; i++) {
      // Anniversary periods are whole periods, the first one too: 3000 + 5 events * 2.
      expect(cents(invoices[i]!.total)).toBe('3010');
      expect(invoices[i]!.period_started_at?.toISOString()).toBe(starts[i]!.toISOString());
      expect(invoices[i]!.period_ended_at?.toISOString()).toBe(starts[i + 1]!.toISOString());
    }
  });

  it('bills a calendar yearly plan over several years: the first year prorated by days, then whole years, leap or not', async () => {
    const tenant = await createTenant(h);
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 120000, interval: 'yearly', perCall: '2' });
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2030-03-01T00:00:00') });
    await advanceTo(h, id, utc('2030-03-01T00:00:01'));
    for (const year of [2030, 2031, 2032, 2033]) await sendEvents(h, tenant, metricCode, utc(`${year}-07-01T00:00:00`), 7);
    await advanceTo(h, id, utc('2034-01-01T00:01:00'));

    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(4);
    // Mar 1..Dec 31 2030: 306 of 365 days: 120000 * 306 / 365 = 100602.7397; usage 7 * 2 = 14.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '100602.7397', charge: '14.0000' });
    expect(cents(invoices[0]!.total)).toBe('100617');
    // 2031, 2032 (366 days) and 2033 are whole years.
    expect(invoices.slice(1).map((i) => cents(i.total))).toEqual(['120014', '120014', '120014']);
    expect(invoices.map((i) => i.issuing_date)).toEqual(['2031-01-01', '2032-01-01', '2033-01-01', '2034-01-01']);
  });

  it("follows the customer's zone far east of UTC (Pacific/Kiritimati, UTC+14): local midnights, local dates, events by local time", async () => {
    const tenant = await createTenant(h, { timezone: 'Pacific/Kiritimati' });
    const { planId, metricCode } = await createPlan(h, tenant, { amountCents: 10000, perCall: '2' });
    // Feb 10 2034 00:00 local is Feb 9 10:00 UTC; the local month ends on Feb 28 10:00 UTC.
    const { id } = await subscribe(h, tenant, { planId, startedAt: utc('2034-02-09T10:00:00') });
    await advanceTo(h, id, utc('2034-02-09T10:00:01'));
    await sendEvents(h, tenant, metricCode, utc('2034-02-28T09:59:00'), 1); // Feb 28 23:59 local: February
    await sendEvents(h, tenant, metricCode, utc('2034-02-28T10:00:00'), 1); // Mar 1 00:00 local: March
    await advanceTo(h, id, utc('2034-03-31T10:01:00'));

    const invoices = await invoicesOf(h, id);
    expect(invoices).toHaveLength(2);
    // Feb 10..28 local: 19 of 28 days: 10000 * 19 / 28 = 6785.7143, + 1 event * 2.
    expect(await feesOf(h, invoices[0]!._id)).toEqual({ subscription: '6785.7143', charge: '2.0000' });
    expect(cents(invoices[0]!.total)).toBe('6788');
    expect(invoices[0]!.period_ended_at?.toISOString()).toBe('2034-02-28T10:00:00.000Z');
    expect(cents(invoices[1]!.total)).toBe('10002');
    // Issued on the local dates of the boundaries.
    expect(invoices.map((i) => i.issuing_date)).toEqual(['2034-03-01', '2034-04-01']);
  });
});
