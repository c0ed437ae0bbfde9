// Benchmark: authenticated GET /v1/customers/{id} against a running stack (npm start).
//   node bench/get-customer.mjs [--url http://127.0.0.1:3000] [--duration 15] [--connections 50]
// Prints requests/s and latency percentiles. Targets (2 cores): >= 5,000 req/s, p99 < 20 ms.
import autocannon from 'autocannon';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.BENCH_URL ?? 'http://127.0.0.1:3000' },
    duration: { type: 'string', default: '15' },
    connections: { type: 'string', default: '50' },
  },
});
const base = values.url;

async function call(method, path, body, key) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

const org = await call('POST', '/v1/organizations', { name: `Bench ${Date.now()}` });
const key = org.api_key.raw_key;
const customer = await call('POST', '/v1/customers', { external_id: `bench-${Date.now()}`, name: 'Bench' }, key);

const run = (duration) =>
  autocannon({
    url: `${base}/v1/customers/${customer.id}`,
    headers: { authorization: `Bearer ${key}` },
    connections: Number(values.connections),
    duration,
  });

await run(3); // warm-up (JIT, connection pools)
const result = await run(Number(values.duration));
const summary = {
  benchmark: 'GET /v1/customers/{id} (authenticated)',
  connections: Number(values.connections),
  duration_s: Number(values.duration),
  requests_per_s: Math.round(result.requests.average),
  latency_ms: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
  non_2xx: result.non2xx,
  errors: result.errors,
  timeouts: result.timeouts,
};
console.log(JSON.stringify(summary, null, 2));
