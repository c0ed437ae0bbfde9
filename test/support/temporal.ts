// Temporal test environments built from the binaries in .tools/ (never downloaded).
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { workflowsPath } from '../../src/temporal/worker';
import { SEARCH_ATTRIBUTE_TYPES } from '../../src/temporal/search-attributes';
import { paths } from './servers';

/**
 * The time-skipping test server, with the project's search attributes registered (it has no
 * start-up flag for them). Time is global to the server: one environment per test file.
 */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: paths.temporalTestServer } },
  });
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      SEARCH_ATTRIBUTE_TYPES.map(({ name, type }) => [
        name,
        type === 'Int'
          ? temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT
          : temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
      ]),
    ),
  });
  return env;
}

/**
 * Resolves once the workflow has started `count` timers (or closed). Before moving the test
 * server's clock, wait for the timer you mean to skip to: the TypeScript worker does not hold the
 * clock while an activity runs, so advancing it while an activity completion is still in flight
 * could jump over that activity to its timeout.
 */
export async function waitForTimers(
  env: TestWorkflowEnvironment,
  workflowId: string,
  count: number,
  timeoutMs = 30_000,
): Promise<'timer' | 'closed'> {
  const handle = env.client.workflow.getHandle(workflowId);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const history = await handle.fetchHistory();
    const events = history.events ?? [];
    const timers = events.filter((e) => e.timerStartedEventAttributes).length;
    if (timers >= count) return 'timer';
    if (events.some((e) => e.workflowExecutionCompletedEventAttributes || e.workflowExecutionFailedEventAttributes)) return 'closed';
    if (Date.now() > deadline) throw new Error(`workflow ${workflowId} did not start timer ${count} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Bundle the workflows once per test file and reuse the bundle for every worker. */
export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: workflowsPath() });
}
