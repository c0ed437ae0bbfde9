import { log } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Db } from '../src/db';
import type { SubscriptionDoc } from '../src/db/models/subscription';
import { initialState, planSnapshot, ensureSubscriptionWorkflow, subscriptionLabels, type BillingTiming } from '../src/subscriptions/start';
import { clockOfCustomerId } from '../src/test-clocks/time';
import { isFinal, type SubscriptionState } from '../src/subscriptions/state';
import type { TemporalClient } from '../src/temporal/client';
import { workflowIds } from '../src/temporal/workflow-ids';

export interface ReconcileInput {
  /** Resume after this subscription id (the previous page's `nextAfterId`). */
  afterId?: string;
  /** Subscriptions per page (default 200). */
  pageSize?: number;
  /** Subscriptions younger than this are left to the API that is creating them (default 60 s). */
  minAgeMs?: number;
}

export interface ReconcileResult {
  checked: number;
  restarted: number;
  /** Subscription ids that could not be restarted (their plan or organization is gone): logged, left alone. */
  skipped: string[];
  /** The last id of this page, or null when it was the last page. */
  nextAfterId: string | null;
}

/** Timing of a subscription that never had a workflow state (its first start was lost). */
const RESTART_TIMING: BillingTiming = { jitterWindowMs: 0, progressiveCheckMs: 3_600_000 };
const DEFAULT_PAGE_SIZE = 200;
/** Describes in flight at once within a page (for the subscriptions visibility does not show running). */
const PARALLELISM = 16;
/** What a page reads of each subscription: all but its workflow state (read again for the few restarted). */
const PAGE_FIELDS = { workflow_state: 0 } as const;

/**
 * The reconciler's one activity (run by reconcileSubscriptionsWorkflow, on the
 * `reconcile-subscriptions` schedule): every pending, active or paused subscription must have a running
 * `subscription/<id>` workflow. One whose workflow is missing or closed (terminated by an
 * operator, failed, lost with a Temporal namespace) is started again from the state its last step
 * recorded on the document, else from the document itself. Idempotent: starting uses the
 * conflict policy USE_EXISTING, so a workflow started meanwhile (by the API) is kept.
 */
export function createReconcilerActivities(deps: { db: Db; temporal: TemporalClient }) {
  const { Subscription, Plan, Customer, Organization } = deps.db.models;

  async function isRunning(subscriptionId: string): Promise<boolean> {
    try {
      const description = await deps.temporal.client.workflow.getHandle(workflowIds.subscription(subscriptionId)).describe();
      return description.status.name === 'RUNNING';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    }
  }

  /**
   * The page's subscriptions whose workflow Temporal's visibility shows running: one list query for
   * the page instead of a describe each (10,000 describes took about 110 s of CPU on 2 cores,
   * docs/performance.md). Visibility follows the workflows a moment behind: one started just now
   * may be missing (it is then described), one closed just now may still show running (the next
   * pass restarts it).
   */
  async function runningAmong(ids: string[]): Promise<Set<string>> {
    // Ids are UUIDs; one with anything else in it is left to describe rather than quoted.
    const plain = ids.filter((id) => /^[\w-]+$/.test(id));
    if (plain.length === 0) return new Set();
    const workflowIdList = plain.map((id) => `'${workflowIds.subscription(id)}'`).join(', ');
    const query = `WorkflowId IN (${workflowIdList}) AND ExecutionStatus = 'Running'`;
    const running = new Set<string>();
    for await (const execution of deps.temporal.client.workflow.list({ query, pageSize: plain.length })) running.add(execution.workflowId);
    return running;
  }

  /** The state to restart from, or null when the subscription cannot be restarted. */
  async function stateOf(listed: SubscriptionDoc): Promise<SubscriptionState | null> {
    const doc = (await Subscription.findById(listed._id).lean<SubscriptionDoc>()) ?? listed;
    if (doc.workflow_state) return doc.workflow_state as unknown as SubscriptionState;
    const [plan, customer, organization] = await Promise.all([
      Plan.findById(doc.plan_id).lean(),
      Customer.findById(doc.customer_id, { timezone: 1 }).lean(),
      Organization.findById(doc.organization_id, { timezone: 1 }).lean(),
    ]);
    if (!plan || !organization) return null;
    const timezone = customer?.timezone ?? organization.timezone ?? 'UTC';
    return initialState(doc, planSnapshot(plan), timezone, RESTART_TIMING);
  }

  return {
    async reconcileSubscriptions(input: ReconcileInput): Promise<ReconcileResult> {
      const pageSize = Math.max(1, Math.min(input.pageSize ?? DEFAULT_PAGE_SIZE, 1000));
      const page = await Subscription.find({
        status: { $in: ['pending', 'active', 'paused'] },
        // A subscription the API is creating right now gets its workflow from the API, with its own timing.
        created_at: { $lt: new Date(Date.now() - (input.minAgeMs ?? 60_000)) },
        ...(input.afterId ? { _id: { $gt: input.afterId } } : {}),
      })
        .sort({ _id: 1 })
        .limit(pageSize)
        .select(PAGE_FIELDS)
        .lean<SubscriptionDoc[]>();
      const listedRunning = page.length > 0 ? await runningAmong(page.map((doc) => doc._id)) : new Set<string>();

      let restarted = 0;
      const skipped: string[] = [];
      const check = async (doc: SubscriptionDoc) => {
        if (listedRunning.has(workflowIds.subscription(doc._id)) || (await isRunning(doc._id))) return;
        const state = await stateOf(doc);
        if (!state || isFinal(state.status)) {
          log.warn('subscription without a running workflow cannot be restarted', {
            subscriptionId: doc._id,
            reason: state ? `its recorded state is ${state.status}` : 'plan or organization not found',
          });
          skipped.push(doc._id);
          return;
        }
        // A test-clock customer's workflow follows its clock again.
        if (
          await ensureSubscriptionWorkflow(deps.temporal, state, await clockOfCustomerId(deps.db, doc.customer_id), subscriptionLabels(doc))
        ) {
          restarted++;
          log.info('subscription workflow restarted', {
            subscriptionId: doc._id,
            from: doc.workflow_state ? 'workflow_state' : 'document',
          });
        }
      };
      for (let i = 0; i < page.length; i += PARALLELISM) {
        await Promise.all(page.slice(i, i + PARALLELISM).map(check));
      }

      return {
        checked: page.length,
        restarted,
        skipped,
        nextAfterId: page.length === pageSize ? page[page.length - 1]!._id : null,
      };
    },
  };
}
