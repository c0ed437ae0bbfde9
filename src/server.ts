// The API process: node dist/src/server.js (any number of instances).
import { buildApp } from './api/app';
import { ConfigError, loadConfig } from './config';
import { connectDb } from './db';
import { connectTemporal } from './temporal/client';

async function main(): Promise<void> {
  const config = loadConfig();
  const db = await connectDb(config.MONGODB_URI);
  await db.ensureIndexes();
  const temporal = await connectTemporal({
    address: config.TEMPORAL_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
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

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(err.message);
  } else {
    console.error('API failed to start:', err);
  }
  process.exit(1);
});
