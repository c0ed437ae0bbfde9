// invoiceWorkflow on the time-skipping test server with real activities (MongoDB stand-in):
// the grace period, the due date and overdue, with exact dates; every transition and refusal.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { DateTime } from 'luxon';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { createInvoice } from '../../src/billing/invoices';
import type { Db } from '../../src/db';
import { dec } from '../../src/domain/money';
import { wrapClient, type TemporalClient } from '../../src/temporal/client';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { deleteInvoiceUpdate, finalizeInvoiceUpdate, payInvoiceUpdate, voidInvoiceUpdate } from '../../workflows/invoice.messages';
import { eventually } from '../support/http';
import { createTestDb } from '../support/stack';
import { bundleWorkflows, createTimeSkippingEnv, waitForTimers } from '../support/temporal';

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;
let db: Db;
let temporal: TemporalClient;
let worker: Worker;
let running: Promise<void>;
const taskQueue = `invoices-${randomUUID()}`;

beforeAll(async () => {
  [env, bundle, db] = await Promise.all([createTimeSkippingEnv(), bundleWorkflows(), createTestDb()]);
  temporal = wrapClient(env.client, taskQueue);
  worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: createActivities({ db, temporal }),
  });
  running = worker.run();
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await db?.connection.dropDatabase().catch(() => undefined);
  await db?.close();
});

async function setup(org: { invoice_grace_period: number; net_payment_term: number; timezone: string }) {
  const organization = await db.models.Organization.create({
    name: 'Acme',
    default_currency: 'USD',
    document_number_prefix: `T${randomUUID().slice(0, 4).toUpperCase()}`,
    events_rate_limit_per_minute: 1000,
    ...org,
  });
  const customer = await db.models.Customer.create({
    organization_id: organization._id,
    external_id: `c-${randomUUID()}`,
    currency: 'USD',
  });
  return { organization, customer };
}

async function draft(org: { _id: string }, customer: { _id: string }, amount: string) {
  const at = new Date(await env.currentTimeMs());
  const invoice = await createInvoice(
    db,
    { models: db.models, temporal },
    {
      organizationId: org._id,
      customerId: customer._id,
      invoiceType: 'one_off',
      currency: 'USD',
      idempotencyKey: `test/${randomUUID()}`,
      fees: [
        { key: 'line/000', fee_type: 'add_on', amount_cents: dec(amount), units: dec(1), events_count: 0, unit_amount_cents: dec(amount) },
      ],
      at,
    },
  );
  return { invoice, at, handle: env.client.workflow.getHandle(workflowIds.invoice(invoice._id)) };
}

async function reload(id: string) {
  return (await db.models.Invoice.findById(id).lean())!;
}

describe('invoiceWorkflow', () => {
  it('keeps a draft for the grace period, finalizes it when it ends, and marks it overdue at the end of the due date', async () => {
    const { organization, customer } = await setup({ invoice_grace_period: 3, net_payment_term: 15, timezone: 'America/New_York' });
    const { invoice, at, handle } = await draft(organization, customer, '12000');
    expect(invoice.status).toBe('draft');
    expect(invoice.number).toBe(`${organization.document_number_prefix}-DRAFT-${invoice._id.replace(/-/g, '').slice(0, 8)}`);

    await waitForTimers(env, handle.workflowId, 1);
    await env.sleep(3 * 86_400_000 - 60_000);
    expect((await reload(invoice._id)).status).toBe('draft'); // one minute before the grace period ends
    await env.sleep(60_000);
    const finalized = await eventually(
      async () => {
        const i = await reload(invoice._id);
        return i.status === 'finalized' ? i : undefined;
      },
      20_000,
      'finalization',
    );
    const graceEnd = DateTime.fromJSDate(new Date(at.getTime() + 3 * 86_400_000), { zone: 'America/New_York' });
    expect(finalized.issuing_date).toBe(graceEnd.toISODate());
    expect(finalized.payment_due_date).toBe(graceEnd.plus({ days: 15 }).toISODate());
    expect(finalized.number).toBe(`${organization.document_number_prefix}-000001`);
    expect(finalized.finalized_at?.toISOString()).toBe(new Date(at.getTime() + 3 * 86_400_000).toISOString());

    // Overdue at the end of the due date, in the customer's zone: not a minute before.
    const overdueAt = DateTime.fromISO(finalized.payment_due_date!, { zone: 'America/New_York' }).plus({ days: 1 }).toMillis();
    await waitForTimers(env, handle.workflowId, 2);
    await env.sleep(overdueAt - (await env.currentTimeMs()) - 60_000);
    expect((await reload(invoice._id)).payment_overdue).toBe(false);
    await env.sleep(60_000);
    await eventually(async () => ((await reload(invoice._id)).payment_overdue ? true : undefined), 20_000, 'payment_overdue');
    const events = await eventually(
      async () => {
        const all = await db.models.LifecycleEvent.find({ organization_id: organization._id }).lean();
        return all.length === 3 ? all : undefined;
      },
      20_000,
      'three lifecycle events',
    );
    expect(events.map((e) => e.type).sort()).toEqual(['invoice.created', 'invoice.finalized', 'invoice.payment_overdue']);
    expect(events.find((e) => e.type === 'invoice.payment_overdue')?.occurred_at.getTime()).toBe(overdueAt);

    // Still payable once overdue; paid ends the workflow.
    const paid = await handle.executeUpdate(payInvoiceUpdate);
    expect(paid).toMatchObject({ status: 'paid', payment_status: 'succeeded', payment_overdue: false });
    expect(await handle.result()).toEqual({ status: 'paid' });
    const settlements = await db.models.InvoiceSettlement.find({ invoice_id: invoice._id }).lean();
    expect(settlements.map((s) => [s.settlement_type, String(s.amount_cents)])).toEqual([['payment', '12000']]);
  });

  it('finalizes at once with no grace period, and a total of zero is paid at finalization', async () => {
    const { organization, customer } = await setup({ invoice_grace_period: 0, net_payment_term: 30, timezone: 'UTC' });
    const { invoice, handle } = await draft(organization, customer, '0');
    expect(await handle.result()).toEqual({ status: 'paid' });
    const paid = await reload(invoice._id);
    expect(paid).toMatchObject({ status: 'paid', payment_status: 'succeeded', number: `${organization.document_number_prefix}-000001` });
    const types = (await db.models.LifecycleEvent.find({ organization_id: organization._id }).lean()).map((e) => e.type).sort();
    expect(types).toEqual(['invoice.created', 'invoice.finalized', 'invoice.paid']);
  });

  it('allows finalize, delete only on drafts and pay, void only on finalized invoices', async () => {
    const { organization, customer } = await setup({ invoice_grace_period: 30, net_payment_term: 30, timezone: 'UTC' });
    const refused = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
      expect((err as WorkflowUpdateFailedError).cause).toMatchObject({ type: 'InvalidTransition' });
    };
    const a = await draft(organization, customer, '500');
    await refused(a.handle.executeUpdate(payInvoiceUpdate));
    await refused(a.handle.executeUpdate(voidInvoiceUpdate));
    expect(await a.handle.executeUpdate(finalizeInvoiceUpdate)).toMatchObject({
      status: 'finalized',
      number: `${organization.document_number_prefix}-000001`,
    });
    await refused(a.handle.executeUpdate(finalizeInvoiceUpdate));
    await refused(a.handle.executeUpdate(deleteInvoiceUpdate));
    expect(await a.handle.executeUpdate(voidInvoiceUpdate)).toMatchObject({ status: 'voided' });
    expect(await a.handle.result()).toEqual({ status: 'voided' });

    const b = await draft(organization, customer, '700');
    expect((await b.handle.executeUpdate(deleteInvoiceUpdate)).status).toBe('draft');
    expect(await b.handle.result()).toEqual({ status: 'deleted' });
    expect((await reload(b.invoice._id)).deleted_at).not.toBeNull();

    // The deleted draft took no number: the next one is 000002, no gap.
    const c = await draft(organization, customer, '900');
    expect((await c.handle.executeUpdate(finalizeInvoiceUpdate)).number).toBe(`${organization.document_number_prefix}-000002`);
  });
});
