import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Activities } from '../../activities';

/**
 * The workflows module: TypeScript source under vitest/tsx, the compiled file under dist/.
 * Temporal bundles it (and only it) into the workflow sandbox.
 */
export function workflowsPath(): string {
  const base = join(__dirname, '..', '..', 'workflows', 'index');
  for (const ext of ['.ts', '.js']) if (existsSync(base + ext)) return base + ext;
  throw new Error(`workflows module not found next to ${base}`);
}

export interface WorkerSettings {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /** A prebuilt bundle (tests bundle once per file); default: bundle workflowsPath() now. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  maxConcurrentActivityTaskExecutions?: number;
  /**
   * Workflows kept in memory between their tasks (default 1000). An evicted one is replayed from
   * its history at its next task; unbounded, a billing day's 10,000 subscriptions held 2.4 GiB.
   */
  maxCachedWorkflows?: number;
}

export async function createWorker(settings: WorkerSettings): Promise<Worker> {
  return Worker.create({
    connection: settings.connection,
    namespace: settings.namespace,
    taskQueue: settings.taskQueue,
    activities: settings.activities,
    ...(settings.workflowBundle ? { workflowBundle: settings.workflowBundle } : { workflowsPath: workflowsPath() }),
    maxConcurrentActivityTaskExecutions: settings.maxConcurrentActivityTaskExecutions ?? 50,
    maxCachedWorkflows: settings.maxCachedWorkflows ?? 1000,
    shutdownGraceTime: '10s',
  });
}

export { NativeConnection };
