// The API's metrics summed over its node:cluster workers (API_WORKERS > 1). The workers share one
// listening socket, so a scrape lands on any of them; that worker asks the primary, which collects
// the registry of every worker that has joined (each joins before it listens, so none has served
// a request before) and sums them with prom-client's AggregatorRegistry.aggregate. A scrape fails
// (rather than answering a partial sum) when a joined worker does not answer, so that a counter
// never goes down between two scrapes.
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { registry } from './registry';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

type Message =
  /** worker -> primary: its registry can be collected from now on. */
  | { type: 'billing:metrics-joined' }
  /** worker -> primary: a scrape wants the sum. */
  | { type: 'billing:metrics-request'; id: number }
  /** primary -> worker: the sum, or why there is none. */
  | { type: 'billing:metrics-answer'; id: number; text?: string; error?: string }
  /** primary -> worker: send your registry. */
  | { type: 'billing:metrics-collect'; id: number }
  /** worker -> primary: its registry. */
  | { type: 'billing:metrics-collected'; id: number; metrics?: MetricsJson; error?: string };

function isMessage<T extends Message['type']>(message: unknown, type: T): message is Extract<Message, { type: T }> {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;
}

const COLLECT_TIMEOUT_MS = 5000;

/** In the primary: answers each worker's request with the sum of every joined worker's registry. */
export function serveClusterMetrics(): void {
  const joined = new Map<number, Worker>();
  const collections = new Map<number, { pending: Set<number>; parts: MetricsJson[]; done(err: Error | null): void }>();
  let nextCollection = 0;

  function collect(): Promise<string> {
    const id = nextCollection++;
    const workers = [...joined.values()].filter((w) => w.isConnected());
    const pending = new Set(workers.map((w) => w.id));
    const parts: MetricsJson[] = [];
    const gathered = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`${pending.size} API worker(s) did not answer`)), COLLECT_TIMEOUT_MS);
      const done = (err: Error | null) => {
        clearTimeout(timer);
        collections.delete(id);
        if (err) reject(err);
        else resolve();
      };
      collections.set(id, { pending, parts, done });
      if (pending.size === 0) done(null);
    });
    for (const w of workers) w.send({ type: 'billing:metrics-collect', id } satisfies Message);
    return gathered.then(() => AggregatorRegistry.aggregate(parts).metrics());
  }

  cluster.on('message', (worker, message: unknown) => {
    if (isMessage(message, 'billing:metrics-joined')) {
      joined.set(worker.id, worker);
    } else if (isMessage(message, 'billing:metrics-collected')) {
      const collection = collections.get(message.id);
      if (!collection || !collection.pending.delete(worker.id)) return;
      if (message.error !== undefined || !message.metrics) return collection.done(new Error(message.error ?? 'no metrics'));
      collection.parts.push(message.metrics);
      if (collection.pending.size === 0) collection.done(null);
    } else if (isMessage(message, 'billing:metrics-request')) {
      const answer = (fields: { text?: string; error?: string }) => {
        if (worker.isConnected()) worker.send({ type: 'billing:metrics-answer', id: message.id, ...fields } satisfies Message);
      };
      collect().then(
        (text) => answer({ text }),
        (err: unknown) => answer({ error: err instanceof Error ? err.message : String(err) }),
      );
    }
  });
  cluster.on('exit', (worker) => {
    joined.delete(worker.id);
    // A worker that dies mid-collection fails that scrape (the API stops anyway: src/server.ts).
    for (const collection of collections.values()) {
      if (collection.pending.has(worker.id)) collection.done(new Error(`API worker ${worker.id} exited`));
    }
  });
}

let joinedCluster = false;

/** In a cluster worker, before it serves: lets the primary collect this worker's registry. Once per process. */
export function joinClusterMetrics(): void {
  if (joinedCluster || !process.send) return;
  joinedCluster = true;
  process.on('message', (message: unknown) => {
    if (!isMessage(message, 'billing:metrics-collect')) return;
    registry.getMetricsAsJSON().then(
      (metrics) => process.send?.({ type: 'billing:metrics-collected', id: message.id, metrics } satisfies Message),
      (err: unknown) =>
        process.send?.({
          type: 'billing:metrics-collected',
          id: message.id,
          error: err instanceof Error ? err.message : String(err),
        } satisfies Message),
    );
  });
  process.send({ type: 'billing:metrics-joined' } satisfies Message);
}

let nextRequest = 0;

/** In a cluster worker: the Prometheus text of the whole cluster, from the primary. */
export function clusterMetricsText(timeoutMs = 2 * COLLECT_TIMEOUT_MS): Promise<string> {
  const id = nextRequest++;
  return new Promise((resolve, reject) => {
    const onMessage = (message: unknown) => {
      if (!isMessage(message, 'billing:metrics-answer') || message.id !== id) return;
      done();
      if (message.text !== undefined) resolve(message.text);
      else reject(new Error(`cluster metrics: ${message.error ?? 'no answer'}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error('cluster metrics: the primary did not answer'));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      process.off('message', onMessage);
    };
    if (!process.send) {
      done();
      reject(new Error('cluster metrics: not a cluster worker'));
      return;
    }
    process.on('message', onMessage);
    process.send({ type: 'billing:metrics-request', id } satisfies Message);
  });
}
