// The MongoDB stand-in's query curve (issue 17): every query shape the service sends to the events
// collection, and its lookup of a customer by id or external_id, timed on one organization's events
// and customers at 10k, 100k and 1M documents each, in an H2 file (the embedded default of npm
// start) with the indexes the service declares. Its own stand-in: no stack.
//
//   node bench/stand-in/queries.mjs [--sizes 10000,100000,1000000] [--repeat 30] [--indexes on|off] [--heap]
//   (npm run bench runs it first, with the defaults; it needs no running stack)
//
// Per shape: the median time at each size and the ratio of the largest size to the smallest (goal:
// at most 3). The ceiling, measured in the same run: findOne by _id alone, the stand-in's fastest
// read (its primary-key index), at each size.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { MongoClient } from 'mongodb';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,100000,1000000' },
    repeat: { type: 'string', default: '30' },
    indexes: { type: 'string', default: 'on' },
    'summary-json': { type: 'string' },
    // Prints the stand-in's live heap at the end (jcmd: a full GC, then the classes that fill it).
    heap: { type: 'boolean', default: false },
  },
});
const SIZES = values.sizes.split(',').map(Number);
const REPEAT = Number(values.repeat);
const ROOT = resolve(import.meta.dirname, '..', '..');
const TOOLS = join(ROOT, '.tools', 'mongo-stand-in');

const ORG = 'org-bench';
/** Events per customer (50 per metric over the month): every answer has the same size at every size of the collection. */
const PER_CUSTOMER = 150;
const METRICS = ['m-calls', 'm-storage', 'm-seats'];
const RARE = 'm-rare';
const DAY = 86_400_000;
const START = Date.UTC(2030, 0, 1);

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.on('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

async function startStandIn(file) {
  const port = await freePort();
  const classes = process.env.MONGO_STAND_IN_CLASSES ?? join(TOOLS, 'classes');
  const classpath = `${readFileSync(join(TOOLS, 'classpath.txt'), 'utf8').trim()}:${classes}`;
  const env = { ...process.env, ...(values.indexes === 'off' ? { STAND_IN_INDEXES: 'off' } : {}) };
  const child = spawn(
    'java',
    ['-Xss4m', `-Xmx${process.env.MONGO_STAND_IN_HEAP ?? '1g'}`, '-cp', classpath, 'Launcher', '127.0.0.1', String(port), file],
    {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  await new Promise((done, fail) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('mongo-stand-in ready')) done();
    });
    child.stderr.on('data', (chunk) => (out += chunk));
    child.once('exit', (code) => fail(new Error(`stand-in exited with ${code}: ${out}`)));
  });
  return { url: `mongodb://127.0.0.1:${port}`, pid: child.pid, stop: () => child.kill('SIGTERM') };
}

/** Event i: its customer (PER_CUSTOMER consecutive events each), metric, subscription and day (a month, spread evenly). */
function event(i) {
  const customer = Math.floor(i / PER_CUSTOMER);
  // One event in 10,000 has a code of its own (a page of a rare code: GET /v1/events?code=).
  const metric = i % 10_000 === 5 ? RARE : METRICS[i % METRICS.length];
  return {
    _id: `evt-${String(i).padStart(8, '0')}`,
    organization_id: ORG,
    transaction_id: `tx-${i}`,
    external_customer_id: `cus-${customer}`,
    customer_id: `cid-${customer}`,
    external_subscription_id: `sub-${customer}`,
    subscription_ids: [`sid-${customer}`],
    code: metric,
    billable_metric_id: `bm-${metric}`,
    timestamp: new Date(START + (i % 30) * DAY + (i % 86_400) * 1000),
    properties: { value: i % 10, region: i % 2 ? 'eu' : 'us' },
    created_at: new Date(START + i),
    updated_at: new Date(START + i),
  };
}

/** Customer i of the organization (src/db/models/customer.ts: the fields its indexes name, and a few more). */
function customer(i) {
  return {
    _id: `cid-${String(i).padStart(8, '0')}`,
    organization_id: ORG,
    external_id: `ext-${String(i).padStart(8, '0')}`,
    name: `Customer ${i}`,
    currency: 'USD',
    timezone: null,
    deleted_at: null,
    created_at: new Date(START + i),
    updated_at: new Date(START + i),
  };
}

/**
 * A list's total grows with the list (one index entry per event, no document read), and so do a
 * filtered list's (each entry of the organization's tested) and a page of a rare code (the events
 * with that code grow with the list): no curve goal.
 */
const LIST_TOTAL = "a list's total: countDocuments {org} (X-Total-Count)";
const CODE_TOTAL = "a code's total: countDocuments {org, code} (GET /v1/events?code=)";
const RANGE_TOTAL = "a day's total: countDocuments {org, timestamp range} (?from=&to=)";
const RARE_PAGE = 'a page of a rare code: {org, code} newest first, limit 20';
const GROWING = [LIST_TOTAL, CODE_TOTAL, RANGE_TOTAL, RARE_PAGE];
const goalOf = (name) => (GROWING.includes(name) ? 'grows with the list' : '<= 3');

/** The shapes the service sends (src/usage, src/billing/subscription, src/api/routes/events.ts, customerLookup). */
function shapes(size) {
  const k = Math.floor(size / 2);
  const c = `cus-${Math.floor(k / PER_CUSTOMER)}`;
  const s = `sid-${Math.floor(k / PER_CUSTOMER)}`;
  const day = new Date(START + 10 * DAY);
  const nextDay = new Date(START + 11 * DAY);
  const month = [new Date(START), new Date(START + 31 * DAY)];
  const lookup = (ref) => ({ organization_id: ORG, deleted_at: null, $or: [{ _id: ref }, { external_id: ref }] });
  return {
    'findOne {_id, organization_id}': (e) => e.findOne({ _id: `evt-${String(k).padStart(8, '0')}`, organization_id: ORG }),
    'findOne {organization_id, transaction_id} (dedupe)': (e) => e.findOne({ organization_id: ORG, transaction_id: `tx-${k}` }),
    'a customer-day: {org, external_customer_id, code, timestamp range}': (e) =>
      e.find({ organization_id: ORG, external_customer_id: c, code: 'm-calls', timestamp: { $gte: day, $lt: nextDay } }).toArray(),
    'a subscription period: {org, subscription_ids, billable_metric_id, timestamp range}': (e) =>
      e
        .find({ organization_id: ORG, subscription_ids: s, billable_metric_id: 'bm-m-calls', timestamp: { $gte: month[0], $lt: month[1] } })
        .toArray(),
    'in-advance events: {_id: {$in}, org, subscription_ids, billable_metric_id: {$in}}': (e) =>
      e
        .find({
          _id: { $in: [`evt-${String(k).padStart(8, '0')}`, `evt-${String(k + 3).padStart(8, '0')}`] },
          organization_id: ORG,
          subscription_ids: s,
          billable_metric_id: { $in: ['bm-m-calls'] },
        })
        .toArray(),
    // Every route that names a customer (customerLookup in src/db/models/customer.ts): by external_id, then by id.
    'a customer by external_id: {org, deleted_at: null, $or: [{_id}, {external_id}]}': (e, customers) =>
      customers.findOne(lookup(`ext-${String(k).padStart(8, '0')}`)),
    'a customer by id: {org, deleted_at: null, $or: [{_id}, {external_id}]}': (e, customers) =>
      customers.findOne(lookup(`cid-${String(k).padStart(8, '0')}`)),
    // GET /v1/events' X-Total-Count: every event of the organization, counted from an index's entries.
    [LIST_TOTAL]: (e) => e.countDocuments({ organization_id: ORG }),
    // GET /v1/events with a filter: its total tests each entry of the (org, external_customer_id, code, timestamp) index.
    [CODE_TOTAL]: (e) => e.countDocuments({ organization_id: ORG, code: 'm-calls' }),
    [RANGE_TOTAL]: (e) => e.countDocuments({ organization_id: ORG, timestamp: { $gte: day, $lt: nextDay } }),
    // A page of a common code reads in created_at order (a few documents); a rare code's reads the documents of its entries.
    'a page of a code: {org, code} newest first, limit 20': (e) =>
      e.find({ organization_id: ORG, code: 'm-calls' }).sort({ created_at: -1, _id: -1 }).limit(20).toArray(),
    [RARE_PAGE]: (e) => e.find({ organization_id: ORG, code: RARE }).sort({ created_at: -1, _id: -1 }).limit(20).toArray(),
  };
}

function median(xs) {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function time(fn) {
  const runs = [];
  await fn(); // warm
  for (let i = 0; i < REPEAT; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    runs.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return median(runs);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'stand-in-bench-'));
  const server = await startStandIn(join(dir, 'bench.mv'));
  const client = await MongoClient.connect(server.url);
  try {
    const events = client.db('bench').collection('events');
    // The indexes src/db/models/event.ts declares.
    await events.createIndex({ organization_id: 1, transaction_id: 1 }, { unique: true });
    await events.createIndex({ organization_id: 1, subscription_ids: 1, billable_metric_id: 1, timestamp: 1 });
    await events.createIndex({ organization_id: 1, external_customer_id: 1, code: 1, timestamp: 1 });
    await events.createIndex({ organization_id: 1, created_at: -1, _id: -1 });
    // And those of src/db/models/customer.ts.
    const customers = client.db('bench').collection('customers');
    await customers.createIndex({ organization_id: 1, external_id: 1, deleted_at: 1 }, { unique: true });
    await customers.createIndex({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
    await customers.createIndex({ test_clock_id: 1 });
    const results = {};
    const ceiling = {};
    let stored = 0;
    for (const size of SIZES) {
      const t0 = Date.now();
      while (stored < size) {
        const batch = Array.from({ length: Math.min(10_000, size - stored) }, (_, j) => event(stored + j));
        await events.insertMany(batch, { ordered: false });
        await customers.insertMany(
          batch.map((_, j) => customer(stored + j)),
          { ordered: false },
        );
        stored += batch.length;
      }
      process.stderr.write(`${size} events and customers stored (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
      ceiling[size] = await time(() => events.findOne({ _id: `evt-${String(Math.floor(size / 2)).padStart(8, '0')}` }));
      for (const [name, query] of Object.entries(shapes(size))) {
        results[name] ??= {};
        results[name][size] = await time(() => query(events, customers));
      }
    }
    const first = SIZES[0];
    const last = SIZES[SIZES.length - 1];
    const rows = Object.entries(results).map(([name, bySize]) => ({
      shape: name,
      ...Object.fromEntries(SIZES.map((s) => [`${s} (ms)`, bySize[s].toFixed(2)])),
      ratio: (bySize[last] / bySize[first]).toFixed(2),
      goal: goalOf(name),
    }));
    rows.push({
      shape: 'ceiling: findOne {_id}',
      ...Object.fromEntries(SIZES.map((s) => [`${s} (ms)`, ceiling[s].toFixed(2)])),
      ratio: (ceiling[last] / ceiling[first]).toFixed(2),
      goal: '',
    });
    console.log(`stand-in query curve (indexes ${values.indexes}, median of ${REPEAT}, H2 file)`);
    console.table(rows);
    // For the bench table (scripts/bench.sh): each shape's time at the largest size, its ratio to the smallest.
    if (values['summary-json']) {
      const summary = Object.entries(results).map(([name, bySize]) => ({
        figure: `stand-in ${name} at ${last}`,
        value: Number(bySize[last].toFixed(2)),
        unit: 'ms',
        ceiling: Number(ceiling[last].toFixed(2)),
        ratio: Number((bySize[last] / bySize[first]).toFixed(2)),
        goal: goalOf(name) === '<= 3' ? `<= 3 (${last} / ${first})` : goalOf(name),
      }));
      writeFileSync(values['summary-json'], JSON.stringify(summary, null, 2) + '\n');
    }
    if (values.heap) printHeap(server.pid);
  } finally {
    await client.close();
    server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The stand-in's live heap: jcmd's class histogram (it collects garbage first), its largest rows. */
function printHeap(pid) {
  const histogram = spawnSync('jcmd', [String(pid), 'GC.class_histogram'], { encoding: 'utf8' });
  if (histogram.status !== 0) {
    console.log(`no heap histogram (jcmd: ${histogram.stderr || histogram.error})`);
    return;
  }
  const lines = histogram.stdout.split('\n');
  console.log(`stand-in live heap, largest classes:\n${lines.slice(1, 22).join('\n')}\n${lines.at(-2)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
