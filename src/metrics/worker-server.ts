// The worker process's GET /metrics on WORKER_METRICS_PORT: this process's registry (billing
// counters of the activities it runs, Node.js process metrics) followed by the Temporal SDK's own
// worker metrics (temporal_*: task slots, polls, latencies, sticky cache...). The SDK's runtime
// exports those through its Prometheus exporter on an internal loopback port chosen at start-up;
// each scrape reads it there, so operators scrape one endpoint per worker.
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { TelemetryOptions } from '@temporalio/worker';
import { registry } from './registry';

/** A free port on the loopback interface, for the SDK's exporter (nobody scrapes it directly). */
export async function freeLoopbackAddress(): Promise<string> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(`127.0.0.1:${port}`));
    });
  });
}

/** The Runtime's metrics options: its Prometheus exporter on `bindAddress` (Runtime.install, before any NativeConnection). */
export function temporalPrometheusMetrics(bindAddress: string): NonNullable<TelemetryOptions['metrics']> {
  return { prometheus: { bindAddress } };
}

export interface WorkerMetricsServerOptions {
  host: string;
  port: number;
  /** host:port of the SDK runtime's Prometheus exporter; its text is appended to each answer. */
  sdkMetricsAddress?: string;
  log?: (message: string, err: unknown) => void;
}

export interface WorkerMetricsServer {
  /** The port it listens on (WORKER_METRICS_PORT, or the one chosen for port 0). */
  port: number;
  close(): Promise<void>;
}

export async function startWorkerMetricsServer(options: WorkerMetricsServerOptions): Promise<WorkerMetricsServer> {
  const log = options.log ?? ((message, err) => console.error(message, err));
  let sdkFailing = false;

  async function sdkMetrics(): Promise<string> {
    if (!options.sdkMetricsAddress) return '';
    try {
      const res = await fetch(`http://${options.sdkMetricsAddress}/metrics`, { signal: AbortSignal.timeout(5000) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      sdkFailing = false;
      return await res.text();
    } catch (err) {
      // The billing metrics are still worth answering; the temporal_* series go stale meanwhile.
      if (!sdkFailing) log('the Temporal SDK metrics exporter did not answer', err);
      sdkFailing = true;
      return '';
    }
  }

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || (path !== '/metrics' && path !== '/metrics/')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found\n');
      return;
    }
    Promise.all([registry.metrics(), sdkMetrics()]).then(
      ([own, sdk]) => {
        const text = sdk ? `${own.endsWith('\n') ? own : `${own}\n`}${sdk}` : own;
        res.writeHead(200, { 'content-type': registry.contentType }).end(text);
      },
      (err: unknown) => {
        log('metrics collection failed', err);
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics collection failed\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    const refused = (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(
              `WORKER_METRICS_PORT ${options.port} is in use: give each worker on this host its own port (0: any free one), or set METRICS_ENABLED=false`,
            )
          : err,
      );
    server.once('error', refused);
    server.listen(options.port, options.host, () => {
      server.off('error', refused);
      server.on('error', (err) => log('the worker metrics server failed', err));
      resolve();
    });
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
