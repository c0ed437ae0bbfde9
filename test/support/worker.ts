// One worker on the run's Temporal dev server for a whole test file, polling the stack's task
// queue with the real activities.
import { NativeConnection, Worker } from '@temporalio/worker';
import { inject } from 'vitest';
import { createActivities, type Activities } from '../../activities';
import { TEST_SECRETS_KEY, type TestStack } from './stack';
import { bundleWorkflows } from './temporal';

export interface StackWorker {
  /** Throws when the worker has stopped on an error (so waits fail at once, not by timeout). */
  assertAlive(): void;
  stop(): Promise<void>;
}

export interface StackWorkerOptions {
  /** The address the stack's API listens on, where providers send customers back (default: http://127.0.0.1:3000). */
  publicUrl?: string;
  /** Replaces some of the real activities (a step that dies after its write, as a killed worker would). */
  wrap?: (real: Activities) => Partial<Activities>;
}

export async function startStackWorker(stack: TestStack, options: StackWorkerOptions = {}): Promise<StackWorker> {
  const [connection, bundle] = await Promise.all([NativeConnection.connect({ address: inject('temporalAddress') }), bundleWorkflows()]);
  const real = createActivities({
    db: stack.db,
    temporal: stack.temporal,
    secretsKey: TEST_SECRETS_KEY,
    ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}),
  });
  const worker = await Worker.create({
    connection,
    taskQueue: stack.taskQueue,
    workflowBundle: bundle,
    activities: { ...real, ...options.wrap?.(real) },
  });
  let release: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    release = resolve;
  });
  let failure: unknown;
  const run = worker.runUntil(stopped).catch((err: unknown) => {
    failure = err;
  });
  return {
    assertAlive() {
      if (failure !== undefined) throw new Error(`the worker stopped: ${String(failure)}`);
    },
    async stop() {
      release();
      await run;
      await connection.close();
    },
  };
}
