// Benchmark: one test-clock advance of a year for a customer with 5 subscriptions, against a
// running stack (npm start). Target (issue 8, 2 cores): the clock is `ready` again within 30 s.
//   node bench/test-clock-year.mjs [--url http://127.0.0.1:3000] [--subscriptions 5]
// Creates a fresh organization, a clock at 2030-01-01, one customer on it, 5 monthly plans with a
// usage charge (calendar and anniversary, in arrear and in advance), events in the first month,
// then advances the clock by one year and measures until it reports `ready`. Prints the time, the
// invoices issued and their total.
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.BENCH_URL ?? 'http://127.0.0.1:3000' },
    subscriptions: { type: 'string', default: '5' },
  },
  strict: false,
});
const base = values.url;
const count = Number(values.subscriptions);

async function call(method, path, body, key) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : res.json();
}

const stamp = Date.now();
const org = await call('POST', '/v1/organizations', { name: `Clock bench ${stamp}`, invoice_grace_period: 0, net_payment_term: 30 });
const key = org.api_key.raw_key;
const start = '2030-01-01T00:00:00.000Z';
const clock = await call('POST', '/v1/test_clocks', { name: 'bench', frozen_time: start }, key);
const customer = await call(
  'POST',
  '/v1/customers',
  { external_id: `clock-bench-${stamp}`, currency: 'USD', test_clock_id: clock.id },
  key,
);
const metric = await call('POST', '/v1/billable_metrics', { name: 'Calls', code: `calls_${stamp}`, aggregation_type: 'count' }, key);
const shapes = [
  { billing_time: 'calendar', pay_in_advance: false },
  { billing_time: 'anniversary', pay_in_advance: false },
  { billing_time: 'calendar', pay_in_advance: true },
  { billing_time: 'anniversary', pay_in_advance: true },
];
for (let i = 0; i < count; i++) {
  const plan = await call(
    'POST',
    '/v1/plans',
    {
      name: `Plan ${i}`,
      code: `plan_${stamp}_${i}`,
      interval: 'monthly',
      amount_cents: 1000 * (i + 1),
      currency: 'USD',
      charges: [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '2' } }],
    },
    key,
  );
  await call(
    'POST',
    '/v1/subscriptions',
    { external_id: `sub-${stamp}-${i}`, customer_id: customer.id, plan_id: plan.id, ...shapes[i % shapes.length] },
    key,
  );
}
await call(
  'POST',
  '/v1/events/batch',
  {
    events: Array.from({ length: 50 }, (_, n) => ({
      transaction_id: `tx-${stamp}-${n}`,
      external_customer_id: customer.external_id,
      code: metric.code,
      timestamp: start,
    })),
  },
  key,
);

const target = '2031-01-01T00:00:00.000Z';
const began = performance.now();
await call('POST', `/v1/test_clocks/${clock.id}/advance`, { frozen_time: target }, key);
let status = 'advancing';
while (status !== 'ready') {
  await new Promise((r) => setTimeout(r, 100));
  status = (await call('GET', `/v1/test_clocks/${clock.id}`, undefined, key)).status;
  if (performance.now() - began > 600_000) throw new Error('the clock did not become ready within 10 minutes');
}
const seconds = (performance.now() - began) / 1000;

const invoices = [];
for (let skip = 0; ; skip += 100) {
  const page = await call('GET', `/v1/invoices?customer_id=${customer.id}&limit=100&skip=${skip}`, undefined, key);
  invoices.push(...page);
  if (page.length < 100) break;
}
console.log(
  JSON.stringify(
    {
      benchmark: 'test clock: advance one year, one customer',
      subscriptions: count,
      seconds_until_ready: Number(seconds.toFixed(2)),
      target_seconds: 30,
      invoices: invoices.length,
      invoices_total_cents: invoices.reduce((sum, i) => sum + Number(i.total), 0),
      overdue: invoices.filter((i) => i.payment_overdue).length,
    },
    null,
    2,
  ),
);
