// One worker on the run's Temporal dev server for a whole test file, polling the stack's task
// queue with the real activities.
import { NativeConnection, Worker } from '@temporalio/worker';
import { inject } from 'vitest';
import { createActivities } from '../../activities';
import { TEST_SECRETS_KEY, type TestStack } from './stack';
import { bundleWorkflows } from './temporal';

export interface StackWorker {
  /** Throws when the worker has stopped on an error (so waits fail at once, not by timeout). */
  assertAlive(): void;
  stop(): Promise<void>;
}

/** `publicUrl`: the address the stack's API listens on, where providers send customers back (default: http://127.0.0.1:3000). */
export async function startStackWorker(stack: TestStack, options: { publicUrl?: string } = {}): Promise<StackWorker> {
  const [connection, bundle] = await Promise.all([NativeConnection.connect({ address: inject('temporalAddress') }), bundleWorkflows()]);
  const worker = await Worker.create({
    connection,
    taskQueue: stack.taskQueue,
    workflowBundle: bundle,
    activities: createActivities({
      db: stack.db,
      temporal: stack.temporal,
      secretsKey: TEST_SECRETS_KEY,
      ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}),
    }),
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
