// walletWorkflow on Temporal's time-skipping test server, with the real wallet activities against
// the MongoDB stand-in: expiry at exactly expiration_at (and not a minute before), re-armed
// expirations, and the terminate update with its validator.
import { randomUUID } from 'node:crypto';
import { WorkflowUpdateFailedError, WorkflowUpdateStage } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletActivities } from '../../activities/wallets';
import { createWallet } from '../../src/billing/wallets';
import type { Db } from '../../src/db';
import { dec } from '../../src/domain/money';
import { wrapClient, type TemporalClient } from '../../src/temporal/client';
import { BillingStatus, entitySearchAttributes } from '../../src/temporal/search-attributes';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { walletWorkflow, type WalletWorkflowResult } from '../../workflows/wallet';
import { expirationChangedSignal, terminateWalletUpdate, walletStateQuery, WALLET_TERMINATED } from '../../workflows/wallet.messages';
import { createTestDb } from '../support/stack';
import { bundleWorkflows, createTimeSkippingEnv, waitForTimers } from '../support/temporal';

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;
let db: Db;
let temporal: TemporalClient;
const taskQueue = `wallets-${randomUUID()}`;
const organizationId = randomUUID();

beforeAll(async () => {
  [env, bundle, db] = await Promise.all([createTimeSkippingEnv(), bundleWorkflows(), createTestDb()]);
  temporal = wrapClient(env.client, taskQueue);
});

afterAll(async () => {
  await env?.teardown();
  await db?.connection.dropDatabase().catch(() => undefined);
  await db?.close();
});

async function newWallet(expirationAt: string | null) {
  const customerId = randomUUID();
  const { wallet } = await createWallet(db, {
    organizationId,
    customerId,
    name: 'Prepaid',
    code: null,
    currency: 'USD',
    rateAmount: dec(1),
    priority: 1,
    expirationAt: expirationAt ? new Date(expirationAt) : null,
    initialGrantedCredits: dec(10),
    at: new Date(await env.currentTimeMs()),
  });
  const handle = await env.client.workflow.start(walletWorkflow, {
    taskQueue,
    workflowId: workflowIds.wallet(wallet._id),
    args: [{ walletId: wallet._id, expirationAt }],
    typedSearchAttributes: entitySearchAttributes({ organizationId, customerId, entityType: 'wallet', status: 'active' }),
  });
  return { walletId: wallet._id, handle };
}

const walletDoc = async (id: string) => (await db.models.Wallet.findById(id).lean())!;

/** Until the workflow has closed (polling never moves the test server's clock). */
async function waitClosed(workflowId: string, timeoutMs = 30_000): Promise<void> {
  const handle = env.client.workflow.getHandle(workflowId);
  const deadline = Date.now() + timeoutMs;
  while ((await handle.describe()).status.name === 'RUNNING') {
    if (Date.now() > deadline) throw new Error(`workflow ${workflowId} still running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const DAY_MS = 86_400_000;
const isoAt = (ms: number) => new Date(ms).toISOString();

/** Moves the test server's clock to `iso` (it must be ahead). */
async function sleepUntil(iso: string): Promise<void> {
  const delta = Date.parse(iso) - (await env.currentTimeMs());
  expect(delta).toBeGreaterThan(0);
  await env.sleep(delta);
}

function worker(activities = createWalletActivities(db, { models: db.models, temporal })) {
  return Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle, activities });
}

describe('walletWorkflow', () => {
  it('terminates the wallet exactly at expiration_at, and not a minute before', async () => {
    // A fixed, exact instant: 23:00 UTC on the last day of next year (always ahead of the test
    // server's clock, which starts at the real time).
    const year = new Date(await env.currentTimeMs()).getUTCFullYear() + 1;
    const expiration = `${year}-12-31T23:00:00.000Z`;
    const { walletId, handle } = await newWallet(expiration);

    const result = await (
      await worker()
    ).runUntil(async () => {
      await waitForTimers(env, handle.workflowId, 1);
      await sleepUntil(`${year}-12-31T22:59:00.000Z`);
      expect((await walletDoc(walletId)).status).toBe('active');
      expect(await handle.query(walletStateQuery)).toEqual({
        status: 'active',
        expirationAt: expiration,
        terminatedAt: null,
        nextRuns: [],
      });

      await env.sleep('61 seconds');
      await waitClosed(handle.workflowId);
      return (await handle.result()) as WalletWorkflowResult;
    });

    expect(result).toMatchObject({ status: 'terminated', reason: 'expired', terminatedAt: expiration });
    // Workflow time when the timer fired: at the expiration, not before.
    const decided = Date.parse(result.decidedAt);
    expect(decided).toBeGreaterThanOrEqual(Date.parse(expiration));
    expect(decided).toBeLessThan(Date.parse(expiration) + 5_000);
    const doc = await walletDoc(walletId);
    expect(doc.status).toBe('terminated');
    expect(doc.terminated_at?.toISOString()).toBe(expiration);
    const events = await db.models.LifecycleEvent.find({
      organization_id: organizationId,
      type: 'wallet.terminated',
      'object.id': walletId,
    }).lean();
    expect(events).toHaveLength(1);
    expect(events[0]!.object).toMatchObject({ id: walletId, status: 'terminated', terminated_at: expiration, balance_cents: '1000.0000' });
    expect((await handle.describe()).typedSearchAttributes.get(BillingStatus)).toBe('terminated');
  });

  it('expirationChanged re-arms the timer: the old expiration passes, the new one terminates', async () => {
    // The test server's clock is global and only moves forward: instants relative to it.
    const now = await env.currentTimeMs();
    const first = isoAt(now + 10 * DAY_MS);
    const later = isoAt(now + 41 * DAY_MS);
    const { walletId, handle } = await newWallet(first);

    const result = await (
      await worker()
    ).runUntil(async () => {
      await waitForTimers(env, handle.workflowId, 1);
      await db.models.Wallet.updateOne({ _id: walletId }, { $set: { expiration_at: new Date(later) } });
      await handle.signal(expirationChangedSignal, later);
      await waitForTimers(env, handle.workflowId, 2);
      await sleepUntil(isoAt(Date.parse(first) + 3_600_000));
      expect((await walletDoc(walletId)).status).toBe('active');
      expect((await handle.query(walletStateQuery)).expirationAt).toBe(later);
      await sleepUntil(isoAt(Date.parse(later) + 1000));
      await waitClosed(handle.workflowId);
      return (await handle.result()) as WalletWorkflowResult;
    });

    expect(result).toMatchObject({ reason: 'expired', terminatedAt: later });
    expect((await walletDoc(walletId)).terminated_at?.toISOString()).toBe(later);
  });

  it('an expiration moved without a signal is found by the activity, and the timer re-armed for it', async () => {
    const now = await env.currentTimeMs();
    const first = isoAt(now + 10 * DAY_MS);
    const later = isoAt(now + 55 * DAY_MS);
    const { walletId, handle } = await newWallet(first);

    const result = await (
      await worker()
    ).runUntil(async () => {
      await waitForTimers(env, handle.workflowId, 1);
      await db.models.Wallet.updateOne({ _id: walletId }, { $set: { expiration_at: new Date(later) } });
      await sleepUntil(isoAt(Date.parse(first) + 1000));
      await waitForTimers(env, handle.workflowId, 2);
      expect((await walletDoc(walletId)).status).toBe('active');
      await sleepUntil(isoAt(Date.parse(later) + 1000));
      await waitClosed(handle.workflowId);
      return (await handle.result()) as WalletWorkflowResult;
    });

    expect(result).toMatchObject({ reason: 'expired', terminatedAt: later });
  });

  it('an expiration removed by signal leaves the wallet active for good, until terminate', async () => {
    const { walletId, handle } = await newWallet(isoAt((await env.currentTimeMs()) + 10 * DAY_MS));

    const wallet = await (
      await worker()
    ).runUntil(async () => {
      await waitForTimers(env, handle.workflowId, 1);
      await db.models.Wallet.updateOne({ _id: walletId }, { $set: { expiration_at: null } });
      await handle.signal(expirationChangedSignal, null);
      await expect.poll(async () => (await handle.query(walletStateQuery)).expirationAt).toBeNull();
      await env.sleep('400 days');
      expect((await walletDoc(walletId)).status).toBe('active');
      return handle.executeUpdate(terminateWalletUpdate);
    });

    expect(wallet).toMatchObject({ id: walletId, status: 'terminated' });
    expect(wallet.terminated_at).not.toBeNull();
    expect((await walletDoc(walletId)).status).toBe('terminated');
  });

  it('terminate answers the terminated wallet; a second terminate is refused by the validator while the first runs, and after it', async () => {
    const { walletId, handle } = await newWallet(null);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const real = createWalletActivities(db, { models: db.models, temporal });
    let calls = 0;
    const activities = {
      ...real,
      async terminateWalletActivity(input: Parameters<typeof real.terminateWalletActivity>[0]) {
        calls += 1;
        await gate;
        return real.terminateWalletActivity(input);
      },
    };

    const { first, second, third, state } = await (
      await worker(activities)
    ).runUntil(async () => {
      const update = await handle.startUpdate(terminateWalletUpdate, { waitForStage: WorkflowUpdateStage.ACCEPTED });
      const second = await handle.executeUpdate(terminateWalletUpdate).then(
        () => null,
        (err: unknown) => err,
      );
      const state = await handle.query(walletStateQuery);
      release();
      const first = await update.result();
      await waitClosed(handle.workflowId);
      const third = await handle.executeUpdate(terminateWalletUpdate).then(
        () => null,
        (err: unknown) => err,
      );
      return { first, second, third, state };
    });

    expect(state.status).toBe('terminating');
    expect(second).toBeInstanceOf(WorkflowUpdateFailedError);
    const cause = (second as WorkflowUpdateFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe(WALLET_TERMINATED);
    expect(first).toMatchObject({ id: walletId, status: 'terminated' });
    // After the workflow ended, another terminate cannot succeed either.
    expect(third).toBeInstanceOf(Error);
    expect(calls).toBe(1);
    const doc = await walletDoc(walletId);
    expect(doc.status).toBe('terminated');
    expect(doc.terminated_at?.toISOString()).toBe(first.terminated_at);
    expect(await handle.result()).toMatchObject({ status: 'terminated', reason: 'manual', terminatedAt: first.terminated_at });
    expect(await db.models.LifecycleEvent.countDocuments({ type: 'wallet.terminated', 'object.id': walletId })).toBe(1);
  });
});
