// Benchmarks against a running stack (npm start), all in one run on the same server:
//   1. single-event POST /v1/events (group-committed), events/s, and the same load against a bare
//      node:http server in a process of its own (the HTTP ceiling of any single-event route here);
//   2. POST /v1/events/batch with 100 events per request, events/s;
//   3. the raw ceiling: the MongoDB driver's insertMany of 100 event documents shaped exactly like
//      the ones src/usage/ingest.ts stores (same fields, collection `events`, same organization,
//      customer and subscription, unique transaction_ids, ordered: false), with the batch run's
//      concurrency, for the same duration, directly against --mongodb-uri (the stack's server);
//   4. GET /v1/customers/{id}/current_usage for a customer with --events events in the current
//      period (batches seed them; --events 0 skips this part);
//   5. the peak resident memory of one API process over all of it (goal < 512 MiB), when the stack
//      is this checkout's `npm start`.
// It prints the ratios single / batch (goal >= 0.7) and batch / raw ceiling (goal >= 0.8) in its
// JSON output (stdout), one line per figure on stderr, and with --summary-json <file> writes the
// rows {figure, value, unit, ceiling, ratio, goal} to that file.
//   node bench/events.mjs [--url http://127.0.0.1:3000] [--mongodb-uri mongodb://127.0.0.1:27017/billing]
//                         [--duration 15] [--connections 32] [--events 1000000] [--summary-json file] [--keep]
// At the end it deletes its organization's events and daily usage, unless --keep.
// Targets (2 cores): single >= 3,000 events/s, batch >= 30,000 events/s, current_usage p99 < 50 ms.
import autocannon from 'autocannon';
import { MongoClient } from 'mongodb';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { v7 as uuidv7 } from 'uuid';
import { dropOrganizationUsage } from './lib/drop-usage.mjs';
import { rssMiB, stackProcesses } from './lib/stack-processes.mjs';

/** Every event this run sends is created after this instant (its cleanup deletes by created_at). */
const BENCH_STARTED = new Date();

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.BENCH_URL ?? 'http://127.0.0.1:3000' },
    duration: { type: 'string', default: '15' },
    connections: { type: 'string', default: '32' },
    events: { type: 'string', default: '1000000' },
    'mongodb-uri': { type: 'string', default: process.env.MONGODB_URI ?? 'mongodb://127.0.0.1:27017/billing' },
    'summary-json': { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const base = values.url;
const duration = Number(values.duration);
const connections = Number(values.connections);
// The batch run and the raw ceiling share this concurrency (requests, or insertMany calls, in flight).
const batchConnections = Math.max(4, Math.floor(connections / 4));
const WARM_UP_S = 2;
const SINGLE_OVER_BATCH_GOAL = 0.7;
const BATCH_OVER_RAW_GOAL = 0.8;
const MEMORY_GOAL_MIB = 512;
const log = (line) => process.stderr.write(`[events] ${line}\n`);

// The largest resident memory of one API process of this checkout's stack (`npm start`; its cluster's
// workers each count alone), sampled every second for the whole run. 0 when the stack is elsewhere.
let apiPeakMiB = 0;
const sampleApiMemory = () => {
  for (const { pid, role } of stackProcesses()) if (role === 'api') apiPeakMiB = Math.max(apiPeakMiB, Math.round(rssMiB(pid)));
};
const memorySampler = setInterval(sampleApiMemory, 1000).unref();

async function call(method, path, body, key) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// Setup: organization, customer, metric, plan, subscription started at the period start.
const org = await call('POST', '/v1/organizations', { name: `Bench ${Date.now()}`, events_rate_limit_per_minute: 1_000_000 });
const key = org.api_key.raw_key;
const customer = await call('POST', '/v1/customers', { external_id: `bench-${randomUUID()}` }, key);
const metric = await call(
  'POST',
  '/v1/billable_metrics',
  {
    code: 'api_calls',
    name: 'API calls',
    aggregation_type: 'sum',
    field_name: 'calls',
    filters: [{ key: 'region', values: ['eu', 'us'] }],
  },
  key,
);
const plan = await call(
  'POST',
  '/v1/plans',
  {
    code: 'bench',
    name: 'Bench',
    interval: 'monthly',
    amount_cents: 10000,
    currency: 'USD',
    charges: [
      {
        billable_metric_id: metric.id,
        charge_model: 'graduated',
        properties: {
          graduated_ranges: [
            { from_value: 0, to_value: 1000, per_unit_amount: '1', flat_amount: '0' },
            { from_value: 1000, to_value: null, per_unit_amount: '0.5', flat_amount: '0' },
          ],
        },
        filters: [
          {
            values: { region: ['eu'] },
            properties: { graduated_ranges: [{ from_value: 0, to_value: null, per_unit_amount: '2', flat_amount: '0' }] },
          },
        ],
      },
    ],
  },
  key,
);
const now = new Date();
const periodStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
const subscriptionExternalId = `bench-sub-${randomUUID()}`;
const viaApi = await fetch(`${base}/v1/subscriptions`, {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
  body: JSON.stringify({
    external_id: subscriptionExternalId,
    customer_id: customer.id,
    plan_id: plan.id,
    started_at: periodStart.toISOString(),
  }),
});
let subscriptionId;
if (viaApi.ok) {
  subscriptionId = (await viaApi.json()).id;
} else {
  // Before the subscriptions API exists: write the subscription projection directly.
  subscriptionId = randomUUID();
  const client = await MongoClient.connect(values['mongodb-uri']);
  await client.db().collection('subscriptions').insertOne({
    _id: subscriptionId,
    organization_id: org.id,
    customer_id: customer.id,
    external_customer_id: customer.external_id,
    external_id: subscriptionExternalId,
    name: null,
    plan_id: plan.id,
    status: 'active',
    billing_time: 'calendar',
    pay_in_advance: false,
    trial_period_days: 0,
    trial_ended_at: null,
    previous_plan_id: null,
    downgraded_at: null,
    started_at: periodStart,
    ending_at: null,
    canceled_at: null,
    terminated_at: null,
    current_period_started_at: null,
    current_period_ending_at: null,
    on_termination_action: 'generate_invoice',
    created_at: new Date(),
    updated_at: new Date(),
  });
  await client.close();
}

const span = now.getTime() - periodStart.getTime();
const regions = ['eu', 'us', 'apac'];
let seq = 0;
// Live traffic is stamped "now" (ingestion benches); the seed for current_usage spreads events
// over the whole period so that every day of it has usage.
const event = (spread = false) =>
  numberedEvent(`b-${process.pid}`, ++seq, spread ? periodStart.getTime() + Math.floor(Math.random() * span) : Date.now());
/** The n-th event of a series (its transaction_id is `<prefix>-<n>`), stamped `at` (ms). */
const numberedEvent = (prefix, n, at) => ({
  transaction_id: `${prefix}-${n}`,
  external_customer_id: customer.external_id,
  code: 'api_calls',
  timestamp: new Date(at).toISOString(),
  properties: { calls: 1 + (n % 5), region: regions[n % 3] },
});

/** Runs `measure` against a bare HTTP server in a child process of its own (stopped afterwards). */
async function withBareServer(measure) {
  const source = `
    const body = JSON.stringify({ lago_id: '00000000-0000-7000-8000-000000000000', transaction_id: 'tx', external_customer_id: 'c',
      code: 'api_calls', timestamp: new Date().toISOString(), properties: { calls: 1, region: 'eu' }, created_at: new Date().toISOString() });
    const server = require('node:http').createServer((req, res) => {
      const chunks = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => {
        JSON.parse(Buffer.concat(chunks).toString());
        res.writeHead(201, { 'content-type': 'application/json; charset=utf-8' });
        res.end(body);
      });
    });
    server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));`;
  const child = spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise((resolve, reject) => {
      child.stdout.once('data', (data) => resolve(Number(String(data).trim())));
      child.once('exit', (code) => reject(new Error(`bare HTTP server exited (${code})`)));
    });
    return await measure(`http://127.0.0.1:${port}/v1/events`);
  } finally {
    child.kill();
  }
}

/** The bare server's events: a series of their own, so that `seq` counts only what the API is sent. */
let bareSeq = 0;
const bareEvent = () => numberedEvent(`bare-${process.pid}`, ++bareSeq, Date.now());

async function run(name, opts, eventsPerRequest) {
  await autocannon({ ...opts, duration: WARM_UP_S }); // warm-up
  const r = await autocannon({ ...opts, duration });
  return {
    benchmark: name,
    requests_per_s: Math.round(r.requests.average),
    events_per_s: Math.round(r.requests.average * eventsPerRequest),
    latency_ms: { p50: r.latency.p50, p99: r.latency.p99, max: r.latency.max },
    non_2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
  };
}
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
log(
  `organization ${org.id}; ${duration} s per figure after ${WARM_UP_S} s of warm-up; ${connections} connections, batches ${batchConnections}`,
);
const single = await run(
  'POST /v1/events (one event per request)',
  {
    url: `${base}/v1/events`,
    connections,
    headers,
    requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, body: JSON.stringify(event()) }) }],
  },
  1,
);
log(`single: ${single.events_per_s} events/s`);
const batch = await run(
  'POST /v1/events/batch (100 events per request)',
  {
    url: `${base}/v1/events/batch`,
    connections: batchConnections,
    headers,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => ({ ...req, body: JSON.stringify({ events: Array.from({ length: 100 }, () => event()) }) }),
      },
    ],
  },
  100,
);
log(`batch: ${batch.events_per_s} events/s`);

// The HTTP ceiling of a single event: one bare Node process (node:http, no framework) that parses
// each POST's JSON body and answers 201 with a fixed event, loaded exactly like the single-event
// run (same connections, same bodies) on the same machine. What any single-event route can reach
// here: the single-event figure is shown against it.
const bare = await withBareServer((url) =>
  run(
    'bare node:http POST (parse the body, answer 201), one process',
    { url, connections, headers, requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, body: JSON.stringify(bareEvent()) }) }] },
    1,
  ),
);
log(`bare HTTP: ${bare.requests_per_s} requests/s`);

// The raw ceiling: what src/usage/ingest.ts writes for a batch of 100 (its insertMany only: no
// auth, rate limit, reads or daily_usage), straight to the stack's MongoDB server.
const client = await MongoClient.connect(values['mongodb-uri'], { maxPoolSize: batchConnections + 2 });
const eventsCollection = client.db().collection('events');
const rawIds = [];
// The stable key of the metric's filter dimensions, as dimensionsKey() of src/usage/ingest.ts gives it.
const dimensionsKeyOf = (properties) => JSON.stringify(['eu', 'us'].includes(properties.region) ? { region: properties.region } : {});
// Its own sequence: `seq` counts the events sent through the API (the current_usage seed tops them up).
let rawSeq = 0;
function storedEvent(at) {
  rawSeq++;
  const properties = { calls: 1 + (rawSeq % 5), region: regions[rawSeq % 3] };
  const doc = {
    _id: uuidv7(), // as newId() of src/db/base.ts makes them
    organization_id: org.id,
    transaction_id: `raw-${process.pid}-${rawSeq}`,
    external_customer_id: customer.external_id,
    customer_id: customer.id,
    external_subscription_id: null,
    subscription_ids: [subscriptionId],
    code: 'api_calls',
    billable_metric_id: metric.id,
    timestamp: at,
    properties,
    dimensions_key: dimensionsKeyOf(properties),
    created_at: at,
    updated_at: at,
  };
  rawIds.push(doc._id);
  return doc;
}
async function insertManyFor(seconds) {
  const latencies = [];
  let errors = 0;
  const started = Date.now();
  const stopAt = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: batchConnections }, async () => {
      while (Date.now() < stopAt) {
        const now = new Date();
        const docs = Array.from({ length: 100 }, () => storedEvent(now));
        const t0 = performance.now();
        try {
          await eventsCollection.insertMany(docs, { ordered: false });
          latencies.push(performance.now() - t0);
        } catch {
          errors++;
        }
      }
    }),
  );
  return { latencies, errors, seconds: (Date.now() - started) / 1000 };
}
await insertManyFor(WARM_UP_S); // warm-up
const rawRun = await insertManyFor(duration);
const sorted = rawRun.latencies.sort((a, b) => a - b);
const percentile = (p) => (sorted.length ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]) : null);
const raw = {
  benchmark: `raw ceiling: driver insertMany of 100 event documents, ${batchConnections} in flight`,
  requests_per_s: Math.round(sorted.length / rawRun.seconds),
  events_per_s: Math.round((sorted.length * 100) / rawRun.seconds),
  latency_ms: { p50: percentile(50), p99: percentile(99), max: sorted.length ? Math.round(sorted[sorted.length - 1]) : null },
  errors: rawRun.errors,
};
log(`raw ceiling: ${raw.events_per_s} events/s`);

const ratio = (a, b) => (b > 0 ? Math.round((a / b) * 100) / 100 : null);
const ratios = {
  single_over_batch: { value: ratio(single.events_per_s, batch.events_per_s), goal: `>= ${SINGLE_OVER_BATCH_GOAL}` },
  batch_over_raw_ceiling: { value: ratio(batch.events_per_s, raw.events_per_s), goal: `>= ${BATCH_OVER_RAW_GOAL}` },
};
const results = [single, bare, batch, raw];
const summary = [
  {
    figure: 'POST /v1/events (single, group-committed)',
    value: single.events_per_s,
    unit: 'events/s',
    ceiling: batch.events_per_s,
    ratio: ratios.single_over_batch.value,
    goal: ratios.single_over_batch.goal,
  },
  {
    figure: 'POST /v1/events (single) of a bare HTTP POST',
    value: single.requests_per_s,
    unit: 'requests/s',
    ceiling: bare.requests_per_s,
    ratio: ratio(single.requests_per_s, bare.requests_per_s),
    goal: null,
  },
  {
    figure: 'POST /v1/events/batch (100 per request)',
    value: batch.events_per_s,
    unit: 'events/s',
    ceiling: raw.events_per_s,
    ratio: ratios.batch_over_raw_ceiling.value,
    goal: ratios.batch_over_raw_ceiling.goal,
  },
  { figure: 'raw ceiling: driver insertMany of 100', value: raw.events_per_s, unit: 'events/s', ceiling: null, ratio: null, goal: null },
];

// Seed up to the target number of events in the period, then measure current_usage (--events 0: skipped).
const target = Number(values.events);
if (target > 0) {
  // The raw ceiling's documents are not in daily_usage: removed so that the period holds only ingested events.
  for (let i = 0; i < rawIds.length; i += 1000) await eventsCollection.deleteMany({ _id: { $in: rawIds.slice(i, i + 1000) } });
  const seedStart = Date.now();
  const inFlight = 8;
  while (seq < target) {
    await Promise.all(
      Array.from({ length: inFlight }, () =>
        seq < target ? call('POST', '/v1/events/batch', { events: Array.from({ length: 100 }, () => event(true)) }, key) : null,
      ),
    );
  }
  const seeded = { events_sent: seq, seed_seconds: Math.round((Date.now() - seedStart) / 1000) };
  const usage = await call('GET', `/v1/customers/${customer.id}/current_usage`, null, key);
  const currentUsage = {
    ...(await run(
      `GET /v1/customers/{id}/current_usage (${seq} events in the period)`,
      {
        url: `${base}/v1/customers/${customer.id}/current_usage`,
        connections: 8,
        headers: { authorization: `Bearer ${key}` },
      },
      0,
    )),
    events_per_s: undefined,
    seeded,
    // Stored events (autocannon prepares a few bodies it never sends, so events_sent is an upper bound).
    usage_total_events: usage.charges[0].events_count,
  };
  results.push(currentUsage);
  summary.push({
    figure: `GET current_usage p99 (${usage.charges[0].events_count} events in the period)`,
    value: currentUsage.latency_ms.p99,
    unit: 'ms',
    ceiling: null,
    ratio: null,
    goal: '< 50 ms',
  });
}
// The organization's events and daily usage go (unless --keep): `npm run bench` runs the
// test-clock year next on the same stand-in, whose 1 GiB heap is sized for a million events.
const cleanup = values.keep ? null : await dropOrganizationUsage(client.db(), org.id, BENCH_STARTED);
await client.close();
clearInterval(memorySampler);
sampleApiMemory();
const apiPeak = apiPeakMiB > 0 ? apiPeakMiB : null;
if (apiPeak !== null) {
  summary.push({
    figure: 'peak memory of an API process while it ingested',
    value: apiPeak,
    unit: 'MiB',
    ceiling: null,
    ratio: null,
    goal: `< ${MEMORY_GOAL_MIB} MiB`,
  });
}

console.log(JSON.stringify({ benchmarks: results, ratios, api_peak_rss_mib: apiPeak, cleanup }, null, 2));
for (const row of summary) {
  const against = row.ratio === null ? '' : `  ratio ${row.ratio}${row.goal ? ` (goal ${row.goal})` : ''} of ${row.ceiling} ${row.unit}`;
  log(
    `${row.figure.padEnd(60)} ${String(row.value).padStart(7)} ${row.unit}${against}${row.ratio === null && row.goal ? `  (goal ${row.goal})` : ''}`,
  );
}
if (values['summary-json']) writeFileSync(values['summary-json'], JSON.stringify(summary, null, 2) + '\n');
