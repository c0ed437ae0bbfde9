// Billing day: N calendar-monthly subscriptions (3 usage charges, events on each) all reaching one
// period boundary at the same instant, against a running stack (npm start), and the Temporal cost
// of one subscription: actions per month and its history size after 12 periods.
//
//   node bench/billing-day.mjs [--n 1000] [--events-per-charge 2] [--lead <s>] [--spread <s>]
//        [--worker own|stack] [--slots <n>] [--stall 120] [--timeout 1800] [--periods 12] [--floor <n>]
//        [--only day|history|floor] (--only day still runs the floor when --floor is given)
//        [--keep] [--cleanup-org <organization id>] [--url http://127.0.0.1:3000]
//        [--mongodb-uri mongodb://127.0.0.1:27017/billing] [--temporal-address 127.0.0.1:7233]
//        [--task-queue billing] [--namespace default]
//   N also from BILLING_DAY_N. `npm run bench` runs it with the defaults. Uses the compiled service
//   (dist/, which npm start builds) for initialState, periodFrom, projectionOf and the activities.
//   Prints a JSON report on stdout; progress and Temporal's own logs go to stderr.
//
// A real month boundary cannot be waited for, so the bench builds the instant before one:
//   1. Through the API: a fresh organization, 3 metrics (count, sum, max), one monthly plan with a
//      standard charge on each, and N customers.
//   2. N subscriptions started on the 1st of the previous month (00:00 UTC, calendar, in arrear),
//      as their workflow leaves them after activation: status active, the previous month as current
//      period, that state in workflow_state. Each one's subscriptionWorkflow is started (as the API
//      and the reconciler start it, with `resumed`) with a start delay, so that all of them begin at
//      the same instant T0 = now + lead (default 30 s + 20 ms per subscription); then its document
//      is written straight to MongoDB (workflow first, so the reconciler never finds a document
//      without its workflow). --spread S delays each one further by its own jitter offset in
//      [0, S), the way BILLING_JITTER_WINDOW_SECONDS spreads a real boundary.
//   3. Through POST /v1/events/batch: events-per-charge events per charge and subscription, stamped
//      inside the previous month (all must be attributed to their subscription).
//   4. At T0 each workflow's first step is the boundary of the previous month (past, so it runs at
//      once): billSubscriptionPeriod prices the period, creates the invoice, starts its
//      invoiceWorkflow and finalizes it (no grace period). The bench polls MongoDB until the N
//      `subscription` invoices of the organization are finalized, then checks every total against
//      the events it sent and the invoice numbers for gaps. It gives up when nothing moved for
//      --stall seconds (and reports who polls the activity queue) or after --timeout.
//   5. It reads the history of one subscription workflow and of its invoice's workflow, then ends
//      what it created (its subscriptions marked terminated, the organization's running workflows
//      terminated, its events and daily usage deleted) unless --keep. --cleanup-org ends the
//      subscriptions and workflows of an earlier run (its events stay).
// --worker stack (the default) uses the stack's worker (task queue billing, 50 activity slots), the
//   representative setup. --worker own runs the workflows on a worker inside this process, on a
//   task queue of its own with --slots activity slots (default N + 100), against the stack's API,
//   Temporal and MongoDB.
// Where the day's CPU goes: from T0 to the last invoice finalized, the CPU (utime + stime in /proc)
//   of this checkout's stack processes (Temporal dev server, worker, stand-in, API) and of this
//   one, in ms per invoice (cpu_ms_per_invoice, and rows of the bench table). Linux only.
// --floor F (default 0: none; scripts/bench.sh gives BILLING_DAY_FLOOR_N, or 3,000): after the
//   day, the Temporal floor of F boundaries on the same dev server: the same workflows' shape (a
//   delayed start, a first task with one local activity that starts an invoice's workflow, two
//   timers) with no database and no billing, on a worker of this process
//   (bench/lib/floor-workflows.mjs). Its invoices a second are the ceiling of the day's on this
//   machine, and its CPU per boundary is what Temporal costs of a day's (see temporalFloor).
//   --only floor runs it alone.
// Then (unless --periods 0) one subscription runs through 12 monthly periods on Temporal's
// time-skipping test server (.tools/venv/bin/temporal-test-server) with the real activities, in a
// scratch database on the same MongoDB that is dropped afterwards, for its history after 12 periods
// and its actions per month.
//
// Actions are counted from history events the way Temporal Cloud bills them: workflow started,
// timer started, activity scheduled (+1 per retry: ActivityTaskStarted.attempt - 1), search
// attributes upserted, signal received, update accepted, marker recorded, child workflow started,
// external signal sent. Queries (GET of a subscription through the API) and activity heartbeats
// that reach the server (a step running longer than ~24 s) are actions too but leave no event: not
// counted.
import { randomUUID } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { v7 as uuidv7 } from 'uuid';
import { dropOrganizationUsage } from './lib/drop-usage.mjs';
import { cpuTicks, rssMiB, stackProcesses } from './lib/stack-processes.mjs';

/** Every event this run stores is created after this instant (its cleanup deletes by created_at). */
const BENCH_STARTED = new Date();

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  strict: false, // scripts/bench.sh passes its extra arguments to every HTTP bench
  options: {
    url: { type: 'string', default: process.env.BENCH_URL ?? 'http://127.0.0.1:3000' },
    n: { type: 'string', default: process.env.BILLING_DAY_N ?? '1000' },
    'events-per-charge': { type: 'string', default: '2' },
    lead: { type: 'string' },
    'mongodb-uri': { type: 'string', default: process.env.MONGODB_URI ?? 'mongodb://127.0.0.1:27017/billing' },
    'temporal-address': { type: 'string', default: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' },
    namespace: { type: 'string', default: process.env.TEMPORAL_NAMESPACE ?? 'default' },
    'task-queue': { type: 'string', default: process.env.TEMPORAL_TASK_QUEUE ?? 'billing' },
    periods: { type: 'string', default: '12' },
    only: { type: 'string' },
    timeout: { type: 'string', default: '1800' },
    spread: { type: 'string', default: '0' },
    keep: { type: 'boolean', default: false },
    stall: { type: 'string', default: '120' },
    worker: { type: 'string', default: process.env.BILLING_DAY_WORKER ?? 'stack' },
    slots: { type: 'string' },
    'cleanup-org': { type: 'string' },
    'stored-events': { type: 'string', default: process.env.BILLING_DAY_STORED_EVENTS ?? '0' },
    floor: { type: 'string', default: '0' },
    'summary-json': { type: 'string' },
    // `commands`: the table gets only the commands per boundary (a small run on a worker of its own).
    'summary-rows': { type: 'string', default: 'all' },
  },
});
const N = Number(values.n);
const PER_CHARGE = Number(values['events-per-charge']);
const PERIODS = Number(values.periods);
const STORED = Number(values['stored-events']);
const FLOOR = Number(values.floor);
// The worker's defaults (src/config.ts): the jitter only spreads future boundaries; a boundary
// already past when the workflow starts is billed at once.
const TIMING = {
  jitterWindowMs: Number(process.env.BILLING_JITTER_WINDOW_SECONDS ?? 120) * 1000,
  progressiveCheckMs: Number(process.env.PROGRESSIVE_BILLING_CHECK_MINUTES ?? 60) * 60_000,
};

const dist = (path) => {
  const file = join(root, 'dist', path);
  if (!existsSync(file)) throw new Error(`${file} is missing: build first (npm run build; npm start does it)`);
  return import(pathToFileURL(file).href);
};
const [
  { initialState, planSnapshot },
  { periodFrom, nextDue, isFinal, jitterFor },
  { projectionOf },
  { connectDb },
  { entitySearchAttributes, SEARCH_ATTRIBUTE_TYPES },
  { workflowIds },
  { subscriptionWorkflowType },
] = await Promise.all([
  dist('src/subscriptions/start.js'),
  dist('src/subscriptions/state.js'),
  dist('src/subscriptions/projection.js'),
  dist('src/db/index.js'),
  dist('src/temporal/search-attributes.js'),
  dist('src/temporal/workflow-ids.js'),
  dist('workflows/subscription.messages.js'),
]);
const { Runtime, DefaultLogger } = await import('@temporalio/worker');
// Temporal's own logs (the worker's, core's) go to stderr: stdout carries the report only.
Runtime.install({
  logger: new DefaultLogger('WARN', (entry) =>
    console.error(`[temporal ${entry.level}] ${entry.message}`, entry.meta ? JSON.stringify(entry.meta) : ''),
  ),
  telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
  shutdownSignals: [],
});
const { Client, Connection } = await import('@temporalio/client');
const proto = (await import('@temporalio/proto')).default.temporal;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...args) => console.error(`[billing-day ${new Date().toISOString().slice(11, 19)}]`, ...args);
const seconds = (ms) => Math.round(ms / 10) / 100;

async function call(method, path, body, key) {
  const res = await fetch(values.url + path, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Runs `task` over `items` with at most `limit` in flight. */
async function pool(items, limit, task) {
  let next = 0;
  const results = new Array(items.length);
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await task(items[i], i);
      }
    }),
  );
  return results;
}

// ---- history accounting -------------------------------------------------------------------

const EventType = proto.api.enums.v1.EventType;
const typeName = (e) => (EventType[e.eventType] ?? String(e.eventType)).replace(/^EVENT_TYPE_/, '');
const BILLED = new Set([
  'WORKFLOW_EXECUTION_STARTED',
  'TIMER_STARTED',
  'ACTIVITY_TASK_SCHEDULED',
  'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'WORKFLOW_EXECUTION_SIGNALED',
  'WORKFLOW_EXECUTION_UPDATE_ACCEPTED',
  'MARKER_RECORDED',
  'START_CHILD_WORKFLOW_EXECUTION_INITIATED',
  'SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED',
]);

/** Billable actions among `events` and what they are, by event type. */
function actionsOf(events) {
  const byType = {};
  let actions = 0;
  for (const e of events) {
    const type = typeName(e);
    if (BILLED.has(type)) {
      actions++;
      byType[type] = (byType[type] ?? 0) + 1;
    }
    const attempt = e.activityTaskStartedEventAttributes?.attempt ?? 1;
    if (attempt > 1) {
      actions += attempt - 1;
      byType.ACTIVITY_RETRIES = (byType.ACTIVITY_RETRIES ?? 0) + attempt - 1;
    }
  }
  return { actions, byType };
}

function describeHistory(history) {
  const events = history.events ?? [];
  const counts = {};
  for (const e of events) counts[typeName(e)] = (counts[typeName(e)] ?? 0) + 1;
  return {
    events: events.length,
    bytes: proto.api.history.v1.History.encode(history).finish().length,
    actions: actionsOf(events),
    event_types: counts,
  };
}

const eventTimeMs = (e) => Number(e.eventTime.seconds) * 1000 + Math.floor((e.eventTime.nanos ?? 0) / 1e6);

// ---- 1. billing day on the dev stack ------------------------------------------------------

async function billingDay() {
  const health = await fetch(`${values.url}/health`).catch(() => null);
  if (!health?.ok) throw new Error(`no API answers at ${values.url}/health: start the stack (npm start)`);
  const db = await connectDb(values['mongodb-uri'], { maxPoolSize: 20 });
  const connection = await Connection.connect({ address: values['temporal-address'] });
  const client = new Client({ connection, namespace: values.namespace });
  // --worker own: the workflows run on a worker of this process, on a task queue of their own,
  // with enough activity slots for every subscription at once (see the header).
  if (!['own', 'stack'].includes(values.worker)) throw new Error(`--worker must be own or stack, not ${values.worker}`);
  const own = values.worker === 'own' ? await startOwnWorker(client) : null;
  const taskQueue = own ? own.taskQueue : values['task-queue'];
  let orgId = null;
  try {
    const now = new Date();
    const periodStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
    const boundary = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const setupStarted = Date.now();

    // Catalog through the API.
    const org = await call('POST', '/v1/organizations', {
      name: `Billing day ${N} ${now.toISOString()}`,
      timezone: 'UTC',
      events_rate_limit_per_minute: 1_000_000,
    });
    orgId = org.id;
    const key = org.api_key.raw_key;
    const tag = randomUUID().slice(0, 6);
    const metricSpecs = [
      { code: `bd_calls_${tag}`, name: 'API calls', aggregation_type: 'count', amount: '1' },
      { code: `bd_storage_${tag}`, name: 'Storage GB', aggregation_type: 'sum', field_name: 'gb', amount: '2' },
      { code: `bd_seats_${tag}`, name: 'Seats', aggregation_type: 'max', field_name: 'seats', amount: '10' },
    ];
    const metrics = [];
    for (const spec of metricSpecs) {
      const body = {
        code: spec.code,
        name: spec.name,
        aggregation_type: spec.aggregation_type,
        ...(spec.field_name ? { field_name: spec.field_name } : {}),
      };
      metrics.push(await call('POST', '/v1/billable_metrics', body, key));
    }
    const plan = await call(
      'POST',
      '/v1/plans',
      {
        code: `bd_${tag}`,
        name: 'Billing day',
        interval: 'monthly',
        amount_cents: 5000,
        currency: 'USD',
        charges: metrics.map((m, i) => ({
          billable_metric_id: m.id,
          charge_model: 'standard',
          properties: { amount: metricSpecs[i].amount },
        })),
      },
      key,
    );
    const customers = await pool(
      Array.from({ length: N }, (_, i) => i),
      16,
      (i) => call('POST', '/v1/customers', { external_id: `bd-${tag}-${i}` }, key),
    );
    log(`organization ${org.id}, plan ${plan.id}, ${N} customers in ${seconds(Date.now() - setupStarted)} s`);
    // The subscriptions' ids are drawn now: the stored history below is theirs.
    const subscriptionIds = customers.map(() => uuidv7()); // ids as src/db/base.ts's newId() makes them
    const stored = STORED > 0 ? await storeHistory(db, org.id, customers, subscriptionIds, metrics, periodStart, tag) : null;
    const customersDone = Date.now();

    // Documents and delayed workflow starts, in batches, all due at T0.
    // The setup after the customers took 68 s for 10,000 (docs/performance.md): 230 s leaves three times that.
    const lead = values.lead ? Number(values.lead) * 1000 : 30_000 + N * 20;
    const T0 = Date.now() + lead;
    const snapshot = planSnapshot(await db.models.Plan.findById(plan.id).lean());
    // --spread: each workflow starts at T0 + its own deterministic offset in [0, spread), the way
    // BILLING_JITTER_WINDOW_SECONDS spreads a real boundary (a caught-up boundary has no jitter).
    const spreadMs = Number(values.spread) * 1000;
    const delayFor = (id) => T0 + (spreadMs > 0 ? jitterFor(id, spreadMs) : 0) - Date.now();
    const subscriptions = [];
    let inputChars = null; // the size of one workflow's input (the floor's inputs are as large)
    const BATCH = 500;
    for (let b = 0; b < N; b += BATCH) {
      const docs = customers.slice(b, b + BATCH).map((customer, j) => {
        const base = {
          _id: subscriptionIds[b + j],
          organization_id: org.id,
          customer_id: customer.id,
          external_customer_id: customer.external_id,
          external_id: `bd-sub-${customer.external_id}`,
          name: null,
          plan_id: plan.id,
          status: 'pending',
          billing_time: 'calendar',
          pay_in_advance: false,
          trial_period_days: 0,
          started_at: periodStart,
          on_termination_action: 'generate_invoice',
        };
        const pending = initialState(base, snapshot, 'UTC', TIMING);
        const period = periodFrom(pending, periodStart);
        // What activateSubscription leaves: active, the first period open, announced.
        const state = {
          ...pending,
          status: 'active',
          announced: true,
          currentPeriod: period,
          segmentFrom: period.from,
          trialEnded: true,
          version: 1,
        };
        return { ...base, ...projectionOf(state) };
      });
      // Workflows first, documents second: the reconciler never sees a document without its
      // workflow (it would start it at once), and no workflow runs before T0.
      await pool(docs, 32, (doc) => {
        const delay = delayFor(doc._id);
        inputChars ??= JSON.stringify(doc.workflow_state).length;
        return client.workflow.start(subscriptionWorkflowType, {
          workflowId: workflowIds.subscription(doc._id),
          taskQueue,
          // As startSubscriptionWorkflow starts one (localTimedSteps: no patch marker).
          args: [{ state: doc.workflow_state, resumed: true, localTimedSteps: true }],
          workflowIdConflictPolicy: 'USE_EXISTING',
          typedSearchAttributes: entitySearchAttributes({
            organizationId: org.id,
            customerId: doc.customer_id,
            entityType: 'subscription',
            status: 'active',
          }),
          ...(delay > 0 ? { startDelay: delay } : {}),
        });
      });
      await db.models.Subscription.insertMany(docs, { ordered: false });
      subscriptions.push(...docs.map((d) => ({ id: d._id, externalCustomerId: d.external_customer_id })));
    }
    const startsDone = Date.now();
    log(`${N} subscription documents and delayed workflow starts in ${seconds(startsDone - customersDone)} s`);

    // Events inside the previous month; the expected total of each invoice.
    const span = boundary.getTime() - periodStart.getTime() - 2 * 3_600_000;
    const expected = new Map();
    const events = [];
    let seq = 0;
    for (const s of subscriptions) {
      let gb = 0;
      let seats = 0;
      for (let k = 0; k < PER_CHARGE; k++) {
        const at = () => new Date(periodStart.getTime() + 3_600_000 + Math.floor(Math.random() * span)).toISOString();
        const g = 1 + (seq % 10);
        const st = 1 + (seq % 20);
        gb += g;
        seats = Math.max(seats, st);
        events.push(
          {
            transaction_id: `bd-${tag}-${seq++}`,
            external_customer_id: s.externalCustomerId,
            code: metricSpecs[0].code,
            timestamp: at(),
            properties: {},
          },
          {
            transaction_id: `bd-${tag}-${seq++}`,
            external_customer_id: s.externalCustomerId,
            code: metricSpecs[1].code,
            timestamp: at(),
            properties: { gb: g },
          },
          {
            transaction_id: `bd-${tag}-${seq++}`,
            external_customer_id: s.externalCustomerId,
            code: metricSpecs[2].code,
            timestamp: at(),
            properties: { seats: st },
          },
        );
      }
      expected.set(s.id, 5000 + PER_CHARGE * 1 + gb * 2 + seats * 10);
    }
    const batches = [];
    for (let i = 0; i < events.length; i += 100) batches.push(events.slice(i, i + 100));
    let unattributed = 0;
    await pool(batches, 8, async (batch) => {
      const res = await call('POST', '/v1/events/batch', { events: batch }, key);
      if (res.errors.length > 0) throw new Error(`events refused: ${JSON.stringify(res.errors[0])}`);
      unattributed += res.events.filter((e) => e.subscription_ids.length !== 1).length;
    });
    const eventsDone = Date.now();
    log(
      `${events.length} events in ${seconds(eventsDone - startsDone)} s (${Math.round(events.length / ((eventsDone - startsDone) / 1000))}/s)`,
    );
    if (unattributed > 0) throw new Error(`${unattributed} events were not attributed to exactly one subscription`);
    const setupOverrun = eventsDone - T0;
    if (setupOverrun > 0) log(`WARNING: the setup ended ${seconds(setupOverrun)} s after T0 (raise --lead): the measurement is not clean`);

    // Wait for T0, then poll until every invoice is finalized.
    const invoices = db.models.Invoice;
    const filter = { organization_id: org.id, invoice_type: 'subscription' };
    const earlyInvoices = await invoices.countDocuments(filter);
    log(`waiting ${seconds(Math.max(0, T0 - Date.now()))} s for T0 = ${new Date(T0).toISOString()}`);
    await sleep(Math.max(0, T0 - Date.now()));
    // From T0 on: the worker's database commands (own worker) and the processes' memory.
    const commandsAtT0 = own ? { total: own.commands.total, by_command: { ...own.commands.by_command } } : null;
    const processes = sampleProcesses();
    const deadline = T0 + Number(values.timeout) * 1000;
    const samples = [];
    let firstCreated = null;
    let allCreated = null;
    let allFinalized = null;
    let allStepsDone = null;
    let lastLog = 0;
    let stalled = null;
    let lastChange = { t: 0, key: '' };
    const stallMs = Number(values.stall) * 1000;
    // A boundary step is done when its projection is written (state_version 1 -> 2), after its
    // invoice's finalization: then nothing of it is left in flight.
    const stepsFilter = { organization_id: org.id, state_version: { $gte: 2 } };
    // The poll must stay light: the stand-in reads every document a count or a sorted find
    // matches (a profile of the stand-in at 10,000 had these polls at a sixth of its CPU). Every
    // 2 s it finds the organization's highest invoice number (numbers are taken at finalization,
    // gapless) by binary search between the last one seen and N, each probe one lookup on the
    // unique (organization, kind, sequence) index. The three counts (finalized, created, steps
    // done) run every 60 s, and at every poll once every invoice has its number.
    const numberTaken = async (sequence) =>
      (await db.models.DocumentNumber.collection.findOne(
        { organization_id: org.id, kind: 'invoice', sequence },
        { projection: { _id: 1 } },
      )) !== null;
    let lastNumbered = 0;
    const highestNumber = async () => {
      let low = lastNumbered; // taken (or 0)
      let high = N + 1; // not taken
      while (high - low > 1) {
        const mid = Math.floor((low + high) / 2);
        if (await numberTaken(mid)) low = mid;
        else high = mid;
      }
      lastNumbered = low;
      return low;
    };
    let created = 0;
    let steps = 0;
    let finalized = 0;
    let lastCount = 0;
    while (Date.now() < deadline) {
      let numbered;
      try {
        numbered = await highestNumber();
        if (numbered >= N || Date.now() - T0 - lastCount >= 60_000) {
          lastCount = Date.now() - T0;
          [finalized, created, steps] = await Promise.all([
            invoices.countDocuments({ ...filter, status: 'finalized' }),
            invoices.countDocuments(filter),
            db.models.Subscription.countDocuments(stepsFilter),
          ]);
        }
      } catch (err) {
        // A busy MongoDB may time a poll out: the next one tries again.
        log(`poll failed (${err.message}): retrying`);
        await sleep(1000);
        continue;
      }
      const t = Date.now() - T0;
      samples.push({ t, created, finalized, numbered });
      if (firstCreated === null && Math.max(created, finalized, numbered) > 0) firstCreated = t;
      if (allCreated === null && created >= N) allCreated = t;
      if (allFinalized === null && finalized >= N) {
        allFinalized = t;
        processes.markDone();
      }
      if (allStepsDone === null && steps >= N) allStepsDone = t;
      if (allFinalized !== null && allStepsDone !== null) break;
      const key = `${created}/${finalized}/${steps}/${numbered}`;
      if (key !== lastChange.key) lastChange = { t, key };
      else if (t - lastChange.t > stallMs && t > spreadMs) {
        stalled = {
          since_seconds_after_t0: seconds(lastChange.t),
          created,
          finalized,
          numbered,
          steps_done: steps,
          ...(await stallDiagnosis(client, taskQueue, org.id)),
        };
        log(`STALLED: nothing moved for ${values.stall} s`, JSON.stringify(stalled));
        if (!own) log(`the worker polling "${taskQueue}" may now hold every activity slot for good: restart it (stop and rerun npm start)`);
        break;
      }
      if (t - lastLog >= 15_000) {
        lastLog = t;
        log(
          `T0+${seconds(t)} s: ${numbered} invoices numbered (finalized); at the last count (every 60 s): ${created} created, ${finalized} finalized, ${steps} boundary steps done`,
        );
      }
      await sleep(finalized >= N ? 250 : 2000);
    }
    const peakMemoryMiB = processes.stop();
    const commands = own ? commandsPerBoundary(own.commands, commandsAtT0) : null;
    const all = await invoices.find(filter, { subscription_id: 1, total: 1, sequential_id: 1, status: 1 }).lean();
    const wrongTotals = all.filter((inv) => Number(inv.total.toString()) !== expected.get(inv.subscription_id)).length;
    const numbers = all
      .map((inv) => inv.sequential_id)
      .filter((n) => n !== null)
      .sort((a, b) => a - b);
    const gapless = numbers.length === all.length && numbers.every((n, i) => n === i + 1);
    // Peak rate: the most invoices numbered (finalized) in any 5-second window of the samples.
    let peak = 0;
    for (let i = 0, j = 0; i < samples.length; i++) {
      while (samples[i].t - samples[j].t > 5_000) j++;
      if (samples[i].t > samples[j].t)
        peak = Math.max(peak, ((samples[i].numbered - samples[j].numbered) * 1000) / (samples[i].t - samples[j].t));
    }

    // One subscription's and one invoice's history after this boundary.
    const sample = all.find((inv) => inv.status === 'finalized') ?? all[0];
    const histories = sample
      ? {
          subscription_workflow: describeHistory(
            await client.workflow.getHandle(workflowIds.subscription(sample.subscription_id)).fetchHistory(),
          ),
          invoice_workflow: describeHistory(await client.workflow.getHandle(workflowIds.invoice(sample._id)).fetchHistory()),
        }
      : null;

    return {
      n: N,
      organization_id: org.id,
      events_sent: events.length,
      workflow_input_chars: inputChars,
      setup_seconds: {
        customers_via_api: seconds(customersDone - setupStarted),
        documents_and_delayed_starts: seconds(startsDone - customersDone),
        events_via_api: seconds(eventsDone - startsDone),
        lead_before_t0: seconds(lead),
      },
      t0: new Date(T0).toISOString(),
      invoices_before_t0: earlyInvoices,
      seconds_after_t0: {
        first_invoice_created: firstCreated === null ? null : seconds(firstCreated),
        all_invoices_created: allCreated === null ? null : seconds(allCreated),
        all_invoices_finalized: allFinalized === null ? null : seconds(allFinalized),
        all_boundary_steps_done: allStepsDone === null ? null : seconds(allStepsDone),
      },
      invoices_finalized: all.filter((inv) => inv.status === 'finalized').length,
      invoices_per_second: allFinalized === null ? null : Math.round((N / (allFinalized / 1000)) * 10) / 10,
      peak_invoices_per_second_5s: Math.round(peak * 10) / 10,
      invoice_totals_wrong: wrongTotals,
      invoice_numbers_gapless: gapless,
      history_after_one_boundary: histories,
      stored_events: stored,
      database_commands_per_boundary: commands ?? 'counted with --worker own only',
      peak_rss_mib: peakMemoryMiB,
      // Where the day's CPU went (the stack's processes and this one), T0 to the last invoice.
      cpu_ms_per_invoice: processes.cpuPerInvoice(N),
      spread_seconds: Number(values.spread),
      worker: own ? { own: true, task_queue: taskQueue, activity_slots: own.slots } : { own: false, task_queue: taskQueue },
      stalled,
      completed: allFinalized !== null && allStepsDone !== null,
    };
  } finally {
    if (own) {
      const stopped = await Promise.race([own.stop().then(() => true), sleep(60_000).then(() => false)]);
      if (!stopped) log('the bench worker did not stop within 60 s: going on');
    }
    if (orgId && (!values.keep || own)) log('cleanup', JSON.stringify(await cleanup(db, client, orgId, { dropEvents: !values.keep })));
    await connection.close();
    await db.close();
  }
}

/**
 * --floor F: the Temporal floor of F boundaries, measured on the same dev server after the day.
 * The same shape as the day's boundaries, with no database and no billing
 * (bench/lib/floor-workflows.mjs), on a worker of this process with the stack's worker settings
 * (src/worker.ts: 100 cached workflows, 20 workflow tasks and 50 activities at once):
 *   - F floor subscriptions start with a delay until T0, as the day's do, with the same search
 *     attributes and an input of about the same size (the day's first workflow state, or 3,000
 *     characters);
 *   - at its first task each runs one local activity, which starts its floor invoice's workflow
 *     through the service's own startInvoiceWorkflow, as for a finalized invoice;
 *     then it starts its next period's timer;
 *   - each floor invoice's first task starts its overdue timer.
 * It ends when every boundary's local activity has started its floor invoice's workflow (the day
 * counts an invoice once numbered, in the same local activity just before that start; the floor
 * invoices' first tasks, which a sink reports to this process, are reported apart). The local
 * activity returns a result as large as its input, for a marker of the day's size. Unlike the
 * day's, the floor's workflows set no current details and give their timers no summaries. Its figures are the day's
 * ceiling on this machine: the invoices a second that Temporal alone allows, and the CPU per
 * boundary of the dev server and of the worker (this process). Its workflows are terminated
 * afterwards.
 */
async function temporalFloor(n, inputChars) {
  const [{ Worker, NativeConnection }, { wrapClient }, { startInvoiceWorkflow }] = await Promise.all([
    import('@temporalio/worker'),
    dist('src/temporal/client.js'),
    dist('workflows/invoice.messages.js'),
  ]);
  const connection = await Connection.connect({ address: values['temporal-address'] });
  const client = new Client({ connection, namespace: values.namespace });
  const nativeConnection = await NativeConnection.connect({ address: values['temporal-address'] });
  const tag = randomUUID().slice(0, 8);
  const taskQueue = `billing-day-floor-${tag}`;
  const organizationId = uuidv7(); // search attribute values only: nothing is stored
  const ids = Array.from({ length: n }, (_, i) => ({
    subscription: `floor-${tag}-subscription-${i}`,
    invoice: uuidv7(), // its workflow: workflowIds.invoice(invoice), as the service names it
    customerId: uuidv7(),
    number: i + 1,
  }));
  // Each counts distinct ids: a retried local activity or a replayed first task counts once.
  const counter = () => {
    const seen = new Set();
    let reached;
    const all = new Promise((resolve) => (reached = resolve));
    return {
      all,
      get count() {
        return seen.size;
      },
      add(id) {
        seen.add(id);
        if (seen.size === n) reached(Date.now());
      },
    };
  };
  const boundaries = counter();
  const invoiceTasks = counter();
  const closeConnections = () => Promise.allSettled([nativeConnection.close(), connection.close()]);
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace: values.namespace,
    taskQueue,
    workflowsPath: join(root, 'bench', 'lib', 'floor-workflows.mjs'),
    activities: {
      // The service's own start of a finalized invoice's workflow (its type, id, search attributes,
      // summary and details); the floor's worker runs bench/lib/floor-workflows.mjs's invoiceWorkflow.
      async startFloorInvoice({ invoice, customerId, number, state }) {
        await startInvoiceWorkflow(
          wrapClient(client, taskQueue),
          {
            invoiceId: invoice,
            createdAt: new Date().toISOString(),
            gracePeriodDays: 0,
            status: 'finalized',
            clock: null,
            labels: { number: `BD-${number}`, totalCents: 12345, currency: 'EUR', customerExternalId: `bd-floor-${number}` },
            overdueAt: new Date(Date.now() + 30 * 86_400_000).toISOString(),
            paymentOverdue: false,
          },
          { organizationId, customerId },
        );
        boundaries.add(invoice);
        // The marker records the result, as the day's records billSubscriptionPeriod's: as large as the state.
        return { state };
      },
    },
    sinks: {
      floor: {
        invoiceStarted: { fn: (info) => invoiceTasks.add(info.workflowId), callDuringReplay: false },
      },
    },
    maxConcurrentActivityTaskExecutions: 50,
    maxCachedWorkflows: 100,
    maxConcurrentWorkflowTaskExecutions: 20,
    shutdownGraceTime: '10s',
  }).catch(async (err) => {
    await closeConnections();
    throw err;
  });
  let workerFailed = null;
  const running = worker.run().catch((err) => {
    workerFailed = err;
    log(`floor: the worker failed: ${err.message}`);
  });
  try {
    const setupStarted = Date.now();
    const T0 = setupStarted + 20_000 + n * 15;
    const state = 'x'.repeat(inputChars);
    await pool(ids, 32, (id) =>
      client.workflow.start('floorSubscription', {
        workflowId: id.subscription,
        taskQueue,
        args: [{ ...id, state }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: entitySearchAttributes({
          organizationId,
          customerId: id.customerId,
          entityType: 'subscription',
          status: 'active',
        }),
        startDelay: Math.max(1, T0 - Date.now()),
      }),
    );
    const setupDone = Date.now();
    log(`floor: ${n} delayed starts in ${seconds(setupDone - setupStarted)} s on task queue ${taskQueue}`);
    if (setupDone > T0) log(`WARNING: the floor's setup ended ${seconds(setupDone - T0)} s after its T0: the measurement is not clean`);
    await sleep(Math.max(0, T0 - Date.now()));
    const processes = sampleProcesses();
    const deadline = T0 + Number(values.timeout) * 1000;
    let last = { t: T0, count: 0 };
    let doneAt = null;
    while (doneAt === null && workerFailed === null) {
      doneAt = await Promise.race([boundaries.all, sleep(15_000).then(() => null)]);
      const now = Date.now();
      if (doneAt !== null) break;
      log(
        `floor: T0+${seconds(now - T0)} s: ${boundaries.count} of ${n} boundaries done, ${invoiceTasks.count} floor invoices' first tasks`,
      );
      if (now > deadline) break;
      if (boundaries.count !== last.count) last = { t: now, count: boundaries.count };
      else if (now - last.t > Number(values.stall) * 1000) break;
    }
    if (doneAt !== null) processes.markDone();
    processes.stop();
    const invoiceTasksAt = doneAt === null ? null : await Promise.race([invoiceTasks.all, sleep(120_000).then(() => null)]);
    const result = {
      n,
      input_chars: inputChars,
      seconds_after_t0: doneAt === null ? null : seconds(doneAt - T0),
      invoices_per_second: doneAt === null ? null : Math.round((n / ((doneAt - T0) / 1000)) * 10) / 10,
      boundaries_done: boundaries.count,
      invoice_first_tasks_done_after_t0: invoiceTasksAt === null ? null : seconds(invoiceTasksAt - T0),
      cpu_ms_per_invoice: processes.cpuPerInvoice(n),
      completed: doneAt !== null,
    };
    log(`floor: ${JSON.stringify(result)}`);
    return result;
  } finally {
    // Whatever happened, the floor's workflows are terminated.
    try {
      worker.shutdown();
    } catch {
      // not running any more (it failed): nothing to stop
    }
    await Promise.race([running, sleep(60_000)]);
    await nativeConnection.close().catch(() => undefined);
    const cleanupStarted = Date.now();
    await terminateAll(
      client,
      ids.flatMap((id) => [id.subscription, workflowIds.invoice(id.invoice)]),
      'billing-day bench: floor cleanup',
    );
    log(`floor: ${2 * n} workflows terminated in ${seconds(Date.now() - cleanupStarted)} s`);
    await connection.close();
  }
}

/**
 * --stored-events M: the organization's history, written straight to MongoDB before the setup (as
 * the ingestion stores events, already rolled up): M events of the N customers, spread over the 11
 * months before the billed one and attributed to the customers' subscriptions, so that every
 * tenant-scoped query of the billing day runs against a collection that holds them.
 */
async function storeHistory(db, organizationId, customers, subscriptionIds, metrics, periodStart, tag) {
  const started = Date.now();
  const from = new Date(Date.UTC(periodStart.getUTCFullYear(), periodStart.getUTCMonth() - 11, 1)).getTime();
  const span = periodStart.getTime() - from;
  const BATCH = 10_000;
  const batches = Math.ceil(STORED / BATCH);
  let done = 0;
  await pool(
    Array.from({ length: batches }, (_, b) => b),
    2,
    async (b) => {
      const now = new Date();
      const docs = [];
      for (let k = b * BATCH; k < Math.min(STORED, (b + 1) * BATCH); k++) {
        const i = k % customers.length;
        const metric = metrics[k % metrics.length];
        docs.push({
          _id: uuidv7(),
          organization_id: organizationId,
          transaction_id: `bd-${tag}-history-${k}`,
          external_customer_id: customers[i].external_id,
          customer_id: customers[i].id,
          external_subscription_id: null,
          subscription_ids: [subscriptionIds[i]],
          code: metric.code,
          billable_metric_id: metric.id,
          timestamp: new Date(from + Math.floor((((k * 7919) % 1_000_003) / 1_000_003) * span)),
          properties: metric.field_name ? { [metric.field_name]: 1 + (k % 7) } : {},
          dimensions_key: '{}',
          created_at: now,
          updated_at: now,
        });
      }
      await db.models.Event.collection.insertMany(docs, { ordered: false });
      done += docs.length;
      if (b % 10 === 0) log(`history: ${done} of ${STORED} events stored`);
    },
  );
  const secondsTaken = seconds(Date.now() - started);
  log(`history: ${STORED} events stored in ${secondsTaken} s`);
  return { events: STORED, seconds: secondsTaken };
}

/** The worker's commands since T0 divided by the N boundaries, in all and by command and collection. */
function commandsPerBoundary(now, atT0) {
  const per = (n) => Math.round((n / N) * 100) / 100;
  const byCommand = Object.entries(now.by_command)
    .map(([name, n]) => [name, per(n - (atT0.by_command[name] ?? 0))])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
  return { total: per(now.total - atT0.total), by_command: Object.fromEntries(byCommand) };
}

/** The driver's commandStarted events of `db` (the worker's connection), by command and collection. */
function countCommands(db) {
  const counts = { total: 0, by_command: {} };
  db.connection.getClient().on('commandStarted', (e) => {
    counts.total++;
    const collection = typeof e.command[e.commandName] === 'string' ? e.command[e.commandName] : '';
    const name = `${e.commandName} ${collection}`.trim();
    counts.by_command[name] = (counts.by_command[name] ?? 0) + 1;
  });
  return counts;
}

/**
 * The stack's processes (found by their command lines, this checkout's only), sampled every second
 * from T0: the peak resident memory of the worker and API processes and of this one (`stop`), and
 * the CPU each role used from T0 to `markDone()` (the last invoice finalized), in ms per invoice
 * (`cpuPerInvoice`). The CPU is utime + stime of /proc/<pid>/stat, summed over a role's processes
 * (the API may run as a cluster); a process that appears after T0 counts from its start.
 */
function sampleProcesses() {
  const peaks = {};
  const ticksAtStart = new Map(); // pid -> ticks when first seen
  let cpuAtDone = null;
  const sample = () => {
    const seen = { worker: 0, api: 0 };
    for (const { pid, role } of stackProcesses()) {
      if (role in seen) seen[role] = Math.max(seen[role], rssMiB(pid));
      if (!ticksAtStart.has(pid)) ticksAtStart.set(pid, { role, ticks: cpuTicks(pid) ?? 0 });
    }
    seen.bench = process.memoryUsage().rss / 1024 / 1024;
    for (const [role, mib] of Object.entries(seen)) if (mib > 0) peaks[role] = Math.max(peaks[role] ?? 0, Math.round(mib));
  };
  const benchCpuAtStart = process.cpuUsage();
  sample();
  const timer = setInterval(sample, 1000);
  return {
    /** The last invoice is finalized: CPU of each role since T0. */
    markDone() {
      if (cpuAtDone) return;
      sample();
      const ticksPerSecond = 100; // USER_HZ, 100 on every Linux build that matters here
      cpuAtDone = {};
      for (const [pid, { role, ticks }] of ticksAtStart) {
        const now = cpuTicks(pid);
        if (now !== null) cpuAtDone[role] = (cpuAtDone[role] ?? 0) + ((now - ticks) * 1000) / ticksPerSecond;
      }
      const bench = process.cpuUsage(benchCpuAtStart);
      cpuAtDone.bench = (bench.user + bench.system) / 1000;
    },
    /** ms of CPU per invoice by role, from T0 to markDone (null when it was never called). */
    cpuPerInvoice(invoices) {
      if (!cpuAtDone) return null;
      const perInvoice = Object.fromEntries(Object.entries(cpuAtDone).map(([role, ms]) => [role, Math.round((ms / invoices) * 10) / 10]));
      perInvoice.total = Math.round((Object.values(cpuAtDone).reduce((a, b) => a + b, 0) / invoices) * 10) / 10;
      return perInvoice;
    },
    stop() {
      clearInterval(timer);
      sample();
      return peaks;
    },
  };
}

async function startOwnWorker(client) {
  const [{ createActivities }, { wrapClient }, { createWorker, NativeConnection }] = await Promise.all([
    dist('activities/index.js'),
    dist('src/temporal/client.js'),
    dist('src/temporal/worker.js'),
  ]);
  const taskQueue = `billing-day-${randomUUID().slice(0, 8)}`;
  const slots = values.slots ? Number(values.slots) : N + 100;
  const db = await connectDb(values['mongodb-uri'], { monitorCommands: true });
  const commands = countCommands(db);
  const connection = await NativeConnection.connect({ address: values['temporal-address'] });
  // The service's own worker settings (src/temporal/worker.ts), with this run's activity slots.
  const worker = await createWorker({
    connection,
    namespace: values.namespace,
    taskQueue,
    activities: createActivities({ db, temporal: wrapClient(client, taskQueue) }),
    maxConcurrentActivityTaskExecutions: slots,
  });
  const running = worker.run();
  log(`own worker on task queue ${taskQueue} with ${slots} activity slots`);
  return {
    taskQueue,
    slots,
    commands,
    async stop() {
      worker.shutdown();
      await running;
      await connection.close();
      await db.close();
    },
  };
}

/**
 * What a stall looks like from Temporal: the activity backlog, and the pending activities of a
 * sample of the organization's running workflows by type and state (SCHEDULED: waiting for a
 * worker slot; STARTED: running on a worker).
 */
async function stallDiagnosis(client, taskQueue, organizationId) {
  const queue = await client.workflowService.describeTaskQueue({
    namespace: values.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: proto.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportStats: true,
  });
  const pending = {};
  let sampled = 0;
  for await (const wf of client.workflow.list({
    query: `BillingOrganizationId = '${organizationId}' AND ExecutionStatus = 'Running'`,
    pageSize: 100,
  })) {
    const description = await client.workflow.getHandle(wf.workflowId).describe();
    for (const a of description.raw.pendingActivities ?? []) {
      const key = `${a.activityType?.name} ${proto.api.enums.v1.PendingActivityState[a.state]?.replace('PENDING_ACTIVITY_STATE_', '')}`;
      pending[key] = (pending[key] ?? 0) + 1;
    }
    if (++sampled >= 200) break;
  }
  return {
    activity_backlog: Number(queue.stats?.approximateBacklogCount ?? 0),
    activity_backlog_age_seconds: Number(queue.stats?.approximateBacklogAge?.seconds ?? 0),
    pending_activities_in_sample: { workflows_sampled: sampled, ...pending },
  };
}

/** Terminates these workflows, 32 at a time (one already closed is skipped). */
function terminateAll(client, workflowIdsToEnd, reason) {
  return pool(workflowIdsToEnd, 32, (id) =>
    client.workflow
      .getHandle(id)
      .terminate(reason)
      .catch(() => undefined),
  );
}

/**
 * Ends what the bench left in the stack for its own organization (nothing else is touched): its
 * subscriptions are marked terminated (so the reconciler leaves them; the version jump keeps a
 * late projection write from reviving them) and every running workflow of the organization
 * (subscriptions, invoices) is terminated. With `dropEvents` (not under --keep) its events and
 * daily usage go too: `npm run bench` runs the events bench and the test-clock year next, on the
 * same stand-in, whose 1 GiB heap holds a million events with room to work, not two.
 */
async function cleanup(db, client, organizationId, { dropEvents = false } = {}) {
  const at = new Date();
  const marked = await db.models.Subscription.updateMany(
    { organization_id: organizationId, status: { $in: ['pending', 'active'] } },
    {
      $set: { status: 'terminated', terminated_at: at, ending_at: at, 'workflow_state.status': 'terminated' },
      $inc: { state_version: 1_000_000 },
    },
  );
  const ids = [];
  for await (const wf of client.workflow.list({ query: `BillingOrganizationId = '${organizationId}' AND ExecutionStatus = 'Running'` }))
    ids.push(wf.workflowId);
  await terminateAll(client, ids, 'billing-day bench cleanup');
  const dropped = dropEvents ? await dropOrganizationUsage(db.connection.db, organizationId, BENCH_STARTED) : undefined;
  return {
    organization_id: organizationId,
    subscriptions_marked_terminated: marked.modifiedCount,
    workflows_terminated: ids.length,
    ...dropped,
  };
}

async function cleanupOnly(organizationId) {
  const db = await connectDb(values['mongodb-uri'], { maxPoolSize: 20 });
  const connection = await Connection.connect({ address: values['temporal-address'] });
  try {
    return await cleanup(db, new Client({ connection, namespace: values.namespace }), organizationId);
  } finally {
    await connection.close();
    await db.close();
  }
}

// ---- 2. twelve periods of one subscription on the time-skipping server --------------------

async function twelvePeriods() {
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const { Worker } = await import('@temporalio/worker');
  const [{ createActivities }, { wrapClient }, { Ingestor }, { CatalogView }, { startSubscriptionWorkflow }] = await Promise.all([
    dist('activities/index.js'),
    dist('src/temporal/client.js'),
    dist('src/usage/ingest.js'),
    dist('src/usage/catalog-view.js'),
    dist('workflows/subscription.messages.js'),
  ]);
  const testServer = process.env.TEMPORAL_TEST_SERVER_PATH ?? join(root, '.tools/venv/bin/temporal-test-server');
  if (!existsSync(testServer)) throw new Error(`${testServer} is missing: npm run bootstrap`);
  const scratch = new URL(values['mongodb-uri']);
  scratch.pathname = `/bench_history_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const db = await connectDb(scratch.toString(), { maxPoolSize: 10 });
  await db.ensureIndexes();
  const env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: testServer } } });
  // The project's search attributes (the test server has no start-up flag for them), as the tests register them.
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      SEARCH_ATTRIBUTE_TYPES.map(({ name, type }) => [
        name,
        proto.api.enums.v1.IndexedValueType[type === 'Int' ? 'INDEXED_VALUE_TYPE_INT' : 'INDEXED_VALUE_TYPE_KEYWORD'],
      ]),
    ),
  });
  const taskQueue = `bench-history-${randomUUID()}`;
  try {
    const temporal = wrapClient(env.client, taskQueue);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowsPath: join(root, 'dist/workflows/index.js'),
      activities: createActivities({ db, temporal }),
    });
    return await worker.runUntil(async () => {
      const { Organization, Customer, BillableMetric, Plan, Subscription, Invoice } = db.models;
      const org = await Organization.create({
        name: 'History',
        default_currency: 'USD',
        timezone: 'UTC',
        net_payment_term: 30,
        invoice_grace_period: 0,
        document_number_prefix: 'HIST',
        events_rate_limit_per_minute: 1000,
      });
      const customer = await Customer.create({ organization_id: org._id, external_id: 'history', currency: 'USD' });
      const metrics = await Promise.all([
        BillableMetric.create({ organization_id: org._id, code: 'calls', name: 'Calls', aggregation_type: 'count' }),
        BillableMetric.create({ organization_id: org._id, code: 'storage', name: 'Storage', aggregation_type: 'sum', field_name: 'gb' }),
        BillableMetric.create({ organization_id: org._id, code: 'seats', name: 'Seats', aggregation_type: 'max', field_name: 'seats' }),
      ]);
      const plan = await Plan.create({
        organization_id: org._id,
        code: 'monthly',
        name: 'Monthly',
        interval: 'monthly',
        amount_cents: 5000,
        currency: 'USD',
        charges: metrics.map((m) => ({ billable_metric_id: m._id, charge_model: 'standard', properties: { amount: '1' } })),
      });
      const nowMs = await env.currentTimeMs();
      const today = new Date(nowMs);
      const startedAt = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + 1, 1));
      const doc = await Subscription.create({
        organization_id: org._id,
        customer_id: customer._id,
        external_customer_id: customer.external_id,
        external_id: 'history',
        plan_id: plan._id,
        status: 'pending',
        billing_time: 'calendar',
        started_at: startedAt,
      });
      const state0 = initialState(doc.toObject(), planSnapshot(plan.toObject()), 'UTC', TIMING);
      await startSubscriptionWorkflow(temporal, { state: state0 });
      const handle = env.client.workflow.getHandle(workflowIds.subscription(doc._id));

      const query = () => handle.query('state');
      const waitFor = async (probe, what) => {
        const limit = Date.now() + 60_000;
        for (;;) {
          const v = await probe();
          if (v) return v;
          if (Date.now() > limit) throw new Error(`timed out waiting for ${what}`);
          await sleep(25);
        }
      };
      /** No activity in flight, the state past `version`, no draft left: the step is done. */
      const settled = (version) =>
        waitFor(async () => {
          const description = await handle.describe();
          if ((description.raw.pendingActivities ?? []).length > 0) return false;
          const s = await query();
          if (s.version <= version) return false;
          return (await Invoice.countDocuments({ subscription_id: doc._id, status: 'draft' })) === 0 ? s : false;
        }, `the step after version ${version}`);
      const advanceToNextStep = async () => {
        const s = await query();
        const due = !isFinal(s.status) ? nextDue(s) : null;
        if (!due) throw new Error('nothing due');
        const delta = due.at + 1000 - (await env.currentTimeMs());
        if (delta > 0) await env.sleep(delta);
        return settled(s.version);
      };

      await waitFor(async () => (await query()).announced, 'the announcement');
      await advanceToNextStep(); // activation at started_at
      // Events for every period: the same mix as the billing day, mid-month.
      const ingestor = new Ingestor(db, new CatalogView(db));
      const boundaries = Array.from(
        { length: PERIODS + 1 },
        (_, m) => new Date(Date.UTC(startedAt.getUTCFullYear(), startedAt.getUTCMonth() + m, 1)),
      );
      for (let p = 0; p < PERIODS; p++) {
        const at = new Date((boundaries[p].getTime() + boundaries[p + 1].getTime()) / 2);
        const inputs = Array.from({ length: PER_CHARGE }, (_, k) => [
          { transaction_id: `h-${p}-${k}-c`, external_customer_id: 'history', code: 'calls', timestamp: at, properties: {} },
          { transaction_id: `h-${p}-${k}-s`, external_customer_id: 'history', code: 'storage', timestamp: at, properties: { gb: 3 } },
          { transaction_id: `h-${p}-${k}-m`, external_customer_id: 'history', code: 'seats', timestamp: at, properties: { seats: 5 } },
        ]).flat();
        await ingestor.ingest({ _id: org._id, timezone: 'UTC' }, inputs, at);
      }
      for (let p = 0; p < PERIODS; p++) await advanceToNextStep();

      const history = await handle.fetchHistory();
      const invoices = await Invoice.find({ subscription_id: doc._id }).sort({ period_started_at: 1 }).lean();
      // Steady state: the actions of each whole month after the first boundary.
      const events = history.events ?? [];
      const perMonth = [];
      for (let p = 1; p < PERIODS; p++) {
        const from = boundaries[p].getTime();
        const to = boundaries[p + 1].getTime();
        perMonth.push(actionsOf(events.filter((e) => eventTimeMs(e) >= from && eventTimeMs(e) < to)).actions);
      }
      const invoiceHistory = invoices[1]
        ? describeHistory(await env.client.workflow.getHandle(workflowIds.invoice(invoices[1]._id)).fetchHistory())
        : null;
      return {
        periods: PERIODS,
        started_at: startedAt.toISOString(),
        invoices: invoices.length,
        invoice_statuses: [...new Set(invoices.map((i) => `${i.status}${i.payment_overdue ? '/overdue' : ''}`))],
        subscription_workflow: describeHistory(history),
        subscription_actions_per_month: perMonth,
        invoice_workflow_of_one_month: invoiceHistory,
      };
    });
  } finally {
    await env.teardown();
    await db.connection.dropDatabase().catch(() => undefined);
    await db.close();
  }
}

/** What the table calls each measured process: which one billed depends on --worker. */
function processLabels(own) {
  return own
    ? { bench: 'bench (with its own worker)', worker: "stack's worker (idle)" }
    : { bench: 'bench', worker: "stack's worker (billing)" };
}

/** What the CPU rows call each role. */
function cpuLabels(own) {
  return {
    ...processLabels(own),
    temporal_dev_server: 'Temporal dev server',
    stand_in: 'MongoDB stand-in',
    api: 'API processes',
    total: 'all of these processes',
  };
}

/**
 * The billing day's rows of the bench table (scripts/bench.sh): figure, value, ceiling, ratio, goal.
 * With a Temporal floor (--floor), its rate is the ceiling of the day's invoices a second.
 */
function summaryRows(day, floor) {
  const stored = day.stored_events?.events ?? 0;
  const finalized = day.seconds_after_t0.all_invoices_finalized;
  const counted = typeof day.database_commands_per_boundary === 'object';
  const commandsRow = {
    figure: `billing day: database commands per boundary (${day.n} on the bench's own worker)`,
    value: counted ? day.database_commands_per_boundary.total : null,
    unit: '',
    ceiling: null,
    ratio: null,
    goal: '<= 10',
  };
  if (values['summary-rows'] === 'commands') return [commandsRow];
  return [
    {
      figure: `billing day: ${day.n} invoices finalized after T0 (${stored} events stored${day.spread_seconds > 0 ? `, boundaries spread over ${day.spread_seconds} s` : ''})`,
      value: finalized,
      unit: 's',
      ceiling: null,
      ratio: null,
      goal: `<= ${(day.n / 50).toFixed(0)} s (50/s), totals right, numbers gapless: ${day.invoice_totals_wrong === 0 && day.invoice_numbers_gapless ? 'yes' : 'NO'}`,
    },
    {
      figure: 'billing day: invoices per second (ceiling: its Temporal floor)',
      value: day.invoices_per_second,
      unit: '/s',
      ceiling: floor?.invoices_per_second ?? null,
      ratio:
        day.invoices_per_second && floor?.invoices_per_second
          ? Math.round((day.invoices_per_second / floor.invoices_per_second) * 100) / 100
          : null,
      goal: '>= 50 (aim 100)',
    },
    ...(counted ? [commandsRow] : []),
    ...['temporal_dev_server', 'worker', 'stand_in', 'api', 'bench', 'total']
      .filter((process) => day.cpu_ms_per_invoice?.[process] !== undefined)
      .map((process) => ({
        figure: `billing day: CPU per invoice from T0 to the last, ${cpuLabels(day.worker?.own)[process]}`,
        value: day.cpu_ms_per_invoice[process],
        unit: 'ms',
        ceiling: null,
        ratio: null,
        goal: null,
      })),
    ...(floor
      ? [
          ['temporal_dev_server', 'Temporal dev server'],
          ['bench', "worker (the bench's, floor workflows)"],
          ['total', 'all processes (the idle stack worker, API and stand-in too)'],
        ]
          .filter(([process]) => floor.cpu_ms_per_invoice?.[process] !== undefined)
          .map(([process, label]) => ({
            figure: `Temporal floor (${floor.n} boundaries, no database, no billing): CPU per boundary, ${label}`,
            value: floor.cpu_ms_per_invoice[process],
            unit: 'ms',
            ceiling: null,
            ratio: null,
            goal: null,
          }))
      : []),
    ...Object.entries(day.peak_rss_mib ?? {}).map(([process, mib]) => ({
      figure: `billing day: peak memory of the ${processLabels(day.worker?.own)[process] ?? process}`,
      value: mib,
      unit: 'MiB',
      ceiling: null,
      ratio: null,
      goal: process === 'bench' ? null : '< 512 MiB',
    })),
  ];
}

const report = {};
if (values['cleanup-org']) {
  report.cleanup = await cleanupOnly(values['cleanup-org']);
} else {
  if (values.only !== 'history' && values.only !== 'floor') report.billing_day = await billingDay();
  if (FLOOR > 0 && values.only !== 'history')
    // A failure here must not lose the billing day's figures either.
    report.temporal_floor = await temporalFloor(FLOOR, report.billing_day?.workflow_input_chars ?? 3000).catch((err) => {
      process.exitCode = 1;
      console.error(err);
      return { error: String(err?.message ?? err) };
    });
  if (values.only !== 'day' && values.only !== 'floor' && PERIODS > 0) {
    // A failure here must not lose the billing day's figures: they are reported, and the exit code says it.
    report.twelve_periods = await twelvePeriods().catch((err) => {
      process.exitCode = 1;
      console.error(err);
      return { error: String(err?.message ?? err) };
    });
  }
}
if (values['summary-json'] && report.billing_day)
  writeFileSync(values['summary-json'], `${JSON.stringify(summaryRows(report.billing_day, report.temporal_floor), null, 2)}\n`);
// Exit explicitly once the report is written: the Temporal runtime's log forwarding (and a bench
// worker that could not drain) would keep the process alive.
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`, () => process.exit(process.exitCode ?? 0));
