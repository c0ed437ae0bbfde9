/**
 * A test clock's messages: how a testClockAdvanceWorkflow (`test-clock/<id>/advance/<target>`) is
 * started, and the advanceTestClock update that every workflow following a clock accepts (bound
 * by useClock in wait.ts). The workflows bind them; src/test-clocks uses them, so nothing is
 * reached by a string name.
 *
 * The names inside define*() and the workflow type are recorded in every history: running
 * executions and test/workflows/histories depend on them, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineUpdate } from '@temporalio/workflow';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const testClockAdvanceWorkflowType = 'testClockAdvanceWorkflow' satisfies keyof typeof workflows;
type TestClockAdvanceWorkflow = (typeof workflows)[typeof testClockAdvanceWorkflowType];

export interface TestClockAdvanceInput {
  clockId: string;
  target: string;
  /** The clock's time before the advance (where its workflows stand). */
  from?: string;
  /** The clock's name, for operators (absent in executions started before it). */
  clockName?: string | null;
}

/** `Test clock Trial run (<id>)`, or its id. */
export function testClockLabel(input: Pick<TestClockAdvanceInput, 'clockId' | 'clockName'>): string {
  return input.clockName ? `Test clock ${input.clockName} (${input.clockId})` : `Test clock ${input.clockId}`;
}

/**
 * The answer to a delivered time: `due` when something of this workflow fell due (it worked, so it
 * may have started or signalled other workflows); `nextWakeAt`, the instant it waits for next (null:
 * a command only, or finished), so that a clock's advance can deliver the instants in order.
 */
export interface ClockCaughtUp {
  clockId: string;
  caughtUpAt: string;
  due?: boolean;
  nextWakeAt?: string | null;
}

/** Delivers a clock's time to a workflow that follows it; answers once the workflow has caught up. */
export const advanceTestClockUpdate = defineUpdate<ClockCaughtUp, [frozenTime: string]>('advanceTestClock');

/** Starts one advance of a clock; USE_EXISTING: a retried start finds the advance running. */
export function startTestClockAdvanceWorkflow(temporal: TemporalClient, input: TestClockAdvanceInput, organizationId: string) {
  return temporal.client.workflow.start<TestClockAdvanceWorkflow>(testClockAdvanceWorkflowType, {
    workflowId: workflowIds.testClockAdvance(input.clockId, input.target),
    taskQueue: temporal.taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    // No customer's attributes: a clock drives many customers (found by BillingOrganizationId and BillingEntityType).
    typedSearchAttributes: entitySearchAttributes({ organizationId, entityType: 'test_clock', status: 'advancing' }),
    staticSummary: `${testClockLabel(input)} advance to ${input.target}`,
    staticDetails: [
      `From ${input.from ?? '?'} to ${input.target}: the time is delivered to the workflows of the clock's customers instant by instant, in order.`,
      `Ids: test clock ${input.clockId}, organization ${organizationId}.`,
    ].join('\n'),
  });
}
