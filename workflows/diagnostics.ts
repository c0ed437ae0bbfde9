/**
 * pingWorkflow: a diagnostic that proves the whole path works (client -> Temporal -> worker ->
 * activity -> MongoDB). Timers: none. Signals/updates: none. Ends after one activity. Its start
 * options are in diagnostics.messages.ts.
 */
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { describeOrganization } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 5 },
});

export interface PingResult {
  organizationId: string;
  organizationName: string | null;
  customers: number;
  workflowId: string;
}

export async function pingWorkflow(organizationId: string): Promise<PingResult> {
  const organization = await describeOrganization(organizationId);
  return { organizationId, ...organization, workflowId: workflowInfo().workflowId };
}
