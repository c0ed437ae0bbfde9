// The whole path client -> Temporal -> worker -> activity -> MongoDB, with the API's own client and
// the worker factory of src/temporal/worker.ts, on the run's Temporal dev server.
import { randomUUID } from 'node:crypto';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../activities';
import { BillingCustomerId, BillingEntityType, BillingOrganizationId, BillingStatus } from '../../src/temporal/search-attributes';
import { createWorker, NativeConnection, workflowsPath } from '../../src/temporal/worker';
import { workflowIds } from '../../src/temporal/workflow-ids';
import type { PingResult } from '../../workflows/diagnostics';
import { startPingWorkflow } from '../../workflows/diagnostics.messages';
import { eventually } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

let stack: TestStack;
let connection: NativeConnection;
let workflowBundle: WorkflowBundleWithSourceMap;
let org: TestOrganization;

beforeAll(async () => {
  [stack, connection, workflowBundle] = await Promise.all([
    createTestStack(),
    NativeConnection.connect({ address: inject('temporalAddress') }),
    // Bundled once for the file; each test gets its own worker on the stack's task queue.
    bundleWorkflowCode({ workflowsPath: workflowsPath() }),
  ]);
  org = await createOrganization(stack.app, { name: 'Plumbing Org' });
}, 120_000);

afterAll(async () => {
  await connection?.close();
  await stack?.close();
});

async function newWorker() {
  // Real MongoDB models, and the API's Temporal client for activities that start workflows.
  const deps = { db: stack.db, temporal: stack.temporal };
  return createWorker({
    connection,
    namespace: 'default',
    taskQueue: stack.taskQueue,
    activities: createActivities(deps),
    workflowBundle,
  });
}

async function createCustomers(headers: Record<string, string>, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/customers',
      headers,
      payload: { external_id: `plumb-${randomUUID()}` },
    });
    expect(res.statusCode, res.body).toBe(201);
    ids.push(res.json<{ id: string }>().id);
  }
  return ids;
}

describe('pingWorkflow', () => {
  it('runs on a worker and answers the organization name and its live customer count from MongoDB', async () => {
    const customers = await createCustomers(org.headers, 3);
    const del = await stack.app.inject({ method: 'DELETE', url: `/v1/customers/${customers[0]}`, headers: org.headers });
    expect(del.statusCode).toBe(200);
    // Another organization's customers are not counted.
    const other = await createOrganization(stack.app, { name: 'Noise Org' });
    await createCustomers(other.headers, 2);

    const worker = await newWorker();
    const diagnosticId = `${org.id}-${randomUUID()}`;
    const workflowId = workflowIds.diagnostic(diagnosticId);
    const { result, description } = await worker.runUntil(async () => {
      const handle = await startPingWorkflow(stack.temporal, org.id, { diagnosticId });
      const result: PingResult = await handle.result();
      return { result, description: await handle.describe() };
    });

    expect(workflowId).toMatch(/^diagnostic\//);
    expect(result).toEqual({ organizationId: org.id, organizationName: 'Plumbing Org', customers: 2, workflowId });
    expect(description.status.name).toBe('COMPLETED');
    expect(description.taskQueue).toBe(stack.taskQueue);
    expect(description.type).toBe('pingWorkflow');
    expect(description.typedSearchAttributes.get(BillingOrganizationId)).toBe(org.id);
    expect(description.typedSearchAttributes.get(BillingEntityType)).toBe('diagnostic');
    expect(description.typedSearchAttributes.get(BillingCustomerId)).toBeUndefined();
  }, 120_000);

  it('reports an unknown organization as no name and no customers', async () => {
    const worker = await newWorker();
    const missing = randomUUID();
    const result = await worker.runUntil(
      startPingWorkflow(stack.temporal, missing, { diagnosticId: missing }).then((handle) => handle.result()),
    );
    expect(result).toEqual({ organizationId: missing, organizationName: null, customers: 0, workflowId: `diagnostic/${missing}` });
  }, 120_000);

  it('carries the optional customer and status attributes, and is found by a visibility query', async () => {
    const [customerId] = await createCustomers(org.headers, 1);
    const worker = await newWorker();
    const diagnosticId = randomUUID();
    const workflowId = workflowIds.diagnostic(diagnosticId);
    const description = await worker.runUntil(async () => {
      const handle = await startPingWorkflow(stack.temporal, org.id, { diagnosticId, customerId: customerId!, status: 'probing' });
      await handle.result();
      return handle.describe();
    });
    expect(description.typedSearchAttributes.get(BillingCustomerId)).toBe(customerId);
    expect(description.typedSearchAttributes.get(BillingStatus)).toBe('probing');

    // An operator finds the organization's workflows by its search attribute (visibility is
    // eventually consistent, so poll).
    const found = await eventually(
      async () => {
        const ids: string[] = [];
        for await (const wf of stack.temporal.client.workflow.list({
          query: `BillingOrganizationId = '${org.id}' AND BillingCustomerId = '${customerId}'`,
        })) {
          ids.push(wf.workflowId);
        }
        return ids.includes(workflowId) ? ids : undefined;
      },
      15_000,
      'the workflow in visibility',
    );
    expect(found).toEqual([workflowId]);
  }, 120_000);
});

describe('the API client', () => {
  it('reaches the server (the readiness probe of the API)', async () => {
    await expect(stack.temporal.ping()).resolves.toBeUndefined();
    expect(stack.temporal.taskQueue).toBe(stack.taskQueue);
    expect(stack.temporal.namespace).toBe('default');
  });
});
