// The worker process: node dist/src/worker.js (any number of instances). Registers every workflow
// (workflows/index.ts) and every activity (activities/index.ts) on the billing task queue.
// First: tracing (when OTEL_* ask for it) patches http as it loads (src/tracing).
import { tracing } from './tracing/worker-process';
import { Runtime } from '@temporalio/worker';
import { createActivities } from '../activities';
import { ConfigError, loadConfig, publicUrlOf } from './config';
import { connectDb } from './db';
import { collectProcessMetrics } from './metrics/registry';
import {
  freeLoopbackAddress,
  startWorkerMetricsServer,
  temporalPrometheusMetrics,
  type WorkerMetricsServer,
} from './metrics/worker-server';
import { connectTemporal } from './temporal/client';
import { ensureIdempotencyKeySweepSchedule, ensureReconcilerSchedule } from './temporal/schedules';
import { createWorker, NativeConnection } from './temporal/worker';

async function main(): Promise<void> {
  const config = loadConfig();
  // Metrics (docs/operations.md "Metrics"): the SDK's Prometheus exporter on an internal loopback
  // port, read by our server on WORKER_METRICS_PORT with this process's registry. The Runtime is
  // installed once, before any NativeConnection.
  let metricsServer: WorkerMetricsServer | null = null;
  if (config.METRICS_ENABLED) {
    const sdkMetricsAddress = await freeLoopbackAddress();
    Runtime.install({ telemetryOptions: { metrics: temporalPrometheusMetrics(sdkMetricsAddress) } });
    collectProcessMetrics();
    metricsServer = await startWorkerMetricsServer({ host: config.HOST, port: config.WORKER_METRICS_PORT, sdkMetricsAddress });
    console.log(`worker metrics on http://${config.HOST}:${metricsServer.port}/metrics`);
  }
  const db = await connectDb(config.MONGODB_URI, { tracer: tracing?.tracer });
  await db.ensureIndexes();
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const temporal = await connectTemporal({
    address: config.TEMPORAL_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    tracing,
  });
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    activities: createActivities({ db, temporal, secretsKey: config.SECRETS_KEY, publicUrl: publicUrlOf(config) }),
    maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
    tracing,
  });
  // The reconciler's schedule (idempotent). Its absence only delays repairs: log and run anyway.
  await ensureReconcilerSchedule(temporal.client, config.TEMPORAL_TASK_QUEUE).catch((err: unknown) => {
    console.error('could not ensure the reconcile-subscriptions schedule:', err);
  });
  // Likewise the sweep of expired idempotency keys: the API ignores expired rows until it runs.
  await ensureIdempotencyKeySweepSchedule(temporal.client, config.TEMPORAL_TASK_QUEUE).catch((err: unknown) => {
    console.error('could not ensure the sweep-idempotency-keys schedule:', err);
  });
  console.log(`worker polling task queue "${config.TEMPORAL_TASK_QUEUE}" on ${config.TEMPORAL_ADDRESS} (${config.TEMPORAL_NAMESPACE})`);
  // The Temporal runtime turns SIGINT/SIGTERM into worker.shutdown(); run() resolves once drained.
  await worker.run();
  await metricsServer?.close();
  await connection.close();
  await temporal.close();
  await db.close();
  await tracing?.shutdown();
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(err.message);
  } else {
    console.error('worker failed:', err);
  }
  process.exit(1);
});
