// Benchmarks against a running stack (npm start): event ingestion through HTTP, single-event POSTs
// and batches of 100, then GET /v1/customers/{id}/current_usage for a customer with 1,000,000
// events in the current period (the batches seed them).
//   node bench/events.mjs [--url http://127.0.0.1:3000] [--duration 15] [--events 1000000]
// Targets (2 cores): single >= 3,000 events/s, batch >= 30,000 events/s, current_usage p99 < 50 ms.
import autocannon from 'autocannon';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.BENCH_URL ?? 'http://127.0.0.1:3000' },
    duration: { type: 'string', default: '15' },
    connections: { type: 'string', default: '32' },
    events: { type: 'string', default: '1000000' },
    'mongodb-uri': { type: 'string', default: process.env.MONGODB_URI ?? 'mongodb://127.0.0.1:27017/billing' },
  },
});
const base = values.url;
const duration = Number(values.duration);
const connections = Number(values.connections);

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
let subscriptionExternalId = `bench-sub-${randomUUID()}`;
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
if (!viaApi.ok) {
  // Before the subscriptions API exists: write the subscription projection directly.
  const { MongoClient } = await import('mongodb');
  const client = await MongoClient.connect(values['mongodb-uri']);
  await client.db().collection('subscriptions').insertOne({
    _id: randomUUID(),
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
const event = (spread = false) => ({
  transaction_id: `b-${process.pid}-${seq++}`,
  external_customer_id: customer.external_id,
  code: 'api_calls',
  timestamp: new Date(spread ? periodStart.getTime() + Math.floor(Math.random() * span) : Date.now()).toISOString(),
  properties: { calls: 1 + (seq % 5), region: regions[seq % 3] },
});

async function run(name, opts, eventsPerRequest) {
  await autocannon({ ...opts, duration: 2 }); // warm-up
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
const results = [];
results.push(
  await run(
    'POST /v1/events (one event per request)',
    {
      url: `${base}/v1/events`,
      connections,
      headers,
      requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, body: JSON.stringify(event()) }) }],
    },
    1,
  ),
);
results.push(
  await run(
    'POST /v1/events/batch (100 events per request)',
    {
      url: `${base}/v1/events/batch`,
      connections: Math.max(4, connections / 4),
      headers,
      requests: [
        {
          method: 'POST',
          setupRequest: (req) => ({ ...req, body: JSON.stringify({ events: Array.from({ length: 100 }, () => event()) }) }),
        },
      ],
    },
    100,
  ),
);

// Seed up to the target number of events in the period, then measure current_usage.
const target = Number(values.events);
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
results.push({
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
});
console.log(JSON.stringify(results, null, 2));
