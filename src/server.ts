// The API process: node dist/src/server.js (any number of instances; API_WORKERS > 1 forks that
// many processes sharing one listening socket).
// First: tracing (when OTEL_* ask for it) patches http and fastify as they load (src/tracing).
import { tracing } from './tracing/api-process';
import cluster from 'node:cluster';
import { buildApp } from './api/app';
import { ConfigError, loadConfig } from './config';
import { connectDb } from './db';
import { serveClusterMetrics } from './metrics/cluster';
import { connectTemporal } from './temporal/client';

async function main(): Promise<void> {
  const config = loadConfig();
  const db = await connectDb(config.MONGODB_URI, { tracer: tracing?.tracer });
  await db.ensureIndexes();
  const temporal = await connectTemporal({
    address: config.TEMPORAL_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    tracing,
  });
  const app = await buildApp({ config, db, temporal });
  await app.listen({ host: config.HOST, port: config.PORT });

  // Graceful shutdown: stop accepting, finish in-flight requests (bounded), then close clients.
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), config.SHUTDOWN_TIMEOUT_MS).unref();
    app
      .close()
      .then(() => Promise.all([db.close(), temporal.close()]))
      // The last spans (this shutdown's requests included) still go out.
      .then(() => tracing?.shutdown())
      .then(() => {
        clearTimeout(force);
        process.exit(0);
      })
      .catch((err: unknown) => {
        app.log.error({ err }, 'error during shutdown');
        process.exit(1);
      });
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}

/**
 * With API_WORKERS > 1 this process only supervises: it forks the workers, relays signals and
 * answers the workers' GET /metrics with the sum of theirs.
 */
function supervise(workers: number, metrics: boolean): void {
  if (metrics) serveClusterMetrics();
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  cluster.on('exit', (worker, code) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
      return;
    }
    console.error(`API worker ${worker.process.pid} exited (${code}); stopping`);
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    process.exitCode = 1;
  });
  const stop = (signal: NodeJS.Signals) => {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
  };
  process.once('SIGINT', () => stop('SIGTERM'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

function start(): Promise<void> {
  const config = loadConfig();
  if (cluster.isPrimary && config.API_WORKERS > 1) {
    supervise(config.API_WORKERS, config.METRICS_ENABLED);
    return Promise.resolve();
  }
  return main();
}

start().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(err.message);
  } else {
    console.error('API failed to start:', err);
  }
  process.exit(1);
});
