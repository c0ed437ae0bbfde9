// The MongoDB stand-in's secondary indexes (tools/mongo-stand-in: SecondaryIndex, QueryPlanner;
// issue 17) never change an answer: a differential test. Two stand-ins, one answering from its
// indexes and one by scans (STAND_IN_INDEXES=off), get the same random documents (nulls, missing
// fields, arrays, nested documents, Decimal128, dates, mixed types), the same random updates and
// deletes, then the same random queries of the shapes the indexes serve (equality on a prefix, a
// range or $in on the next key, more fields than the index, dotted paths, sorts, skips, limits):
// every answer must be the same documents in the same order, every countDocuments the same count
// (answered through the planner: CountPipeline), every change the same outcome. An H2 file
// reopened rebuilds its indexes from its documents.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { type Collection, Decimal128, type Document, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMongoStandIn, type RunningServer } from '../support/servers';

const RUNS = Number(process.env.STAND_IN_RUNS ?? 25);

let servers: RunningServer[] = [];
let indexedClient: MongoClient;
let scannedClient: MongoClient;
/**
 * The H2 backend (npm start's), with and without indexes: its entries hold a document's position
 * bare when it is its _id, and its natural order (the _id's) is not the memory backend's.
 */
let indexedH2Client: MongoClient;
let scannedH2Client: MongoClient;
const h2Dir = mkdtempSync(join(tmpdir(), 'stand-in-diff-'));

beforeAll(async () => {
  servers = await Promise.all([
    startMongoStandIn(),
    startMongoStandIn({ indexes: false }),
    startMongoStandIn({ storage: join(h2Dir, 'indexed.mv') }),
    startMongoStandIn({ storage: join(h2Dir, 'scanned.mv'), indexes: false }),
  ]);
  const clients = await Promise.all(servers.map((server) => MongoClient.connect(server.address)));
  [indexedClient, scannedClient, indexedH2Client, scannedH2Client] = clients as [MongoClient, MongoClient, MongoClient, MongoClient];
}, 120_000);

afterAll(async () => {
  await Promise.all([indexedClient, scannedClient, indexedH2Client, scannedH2Client].map((client) => client?.close()));
  await Promise.all(servers.map((server) => server.stop()));
  rmSync(h2Dir, { recursive: true, force: true });
});

// ---- values, documents, queries ---------------------------------------------------------------

const DATES = [0, 1, 2, 3, 5, 8].map((d) => new Date(Date.UTC(2030, 0, 1 + d)));
const scalar = fc.oneof(
  fc.constant(null),
  fc.integer({ min: -3, max: 6 }),
  fc.constantFrom(0.5, 2.0, 2.5, -1.5),
  fc.constantFrom('1', '2.50', '3').map((v) => Decimal128.fromString(v)),
  fc.constantFrom('a', 'b', 'c', 'ab', ''),
  fc.boolean(),
  fc.constantFrom(...DATES),
);
const nested = fc.record({ x: scalar }, { requiredKeys: [] });
const value = fc.oneof({ weight: 6, arbitrary: scalar }, { weight: 1, arbitrary: nested });
/** Arrays only under `a`: a compound index refuses two arrays in one document (as MongoDB does), which a scan would not. */
const arrayOrValue = fc.oneof({ weight: 6, arbitrary: value }, { weight: 2, arbitrary: fc.array(scalar, { maxLength: 3 }) });
/** A field present or missing. */
const field = (v: fc.Arbitrary<unknown>) => fc.option(v, { nil: undefined, freq: 4 });

const documentArb = fc.record({
  a: field(arrayOrValue),
  b: field(value),
  c: field(value),
  d: field(value),
  n: fc.option(fc.record({ x: scalar }), { nil: undefined }),
  t: field(value),
});

const INDEXES: Document[] = [
  { a: 1 },
  { a: 1, b: 1 },
  { b: 1, c: -1, d: 1 },
  { 'n.x': 1 },
  { t: 1, a: 1 },
  { b: 1, t: -1, _id: -1 },
  { t: 1, c: 1 },
];
/**
 * Compound unique indexes (unique whatever c holds, since _id is): a query with equality on c alone
 * reads a range of this index (TupleUniqueIndex.prefixes on the H2 backend).
 */
const UNIQUE_INDEXES: Document[] = [{ c: 1, _id: 1 }];

function strip(doc: Record<string, unknown>): Document {
  return Object.fromEntries(Object.entries(doc).filter(([, v]) => v !== undefined));
}

const rangeArb = (v: fc.Arbitrary<unknown>): fc.Arbitrary<Document> =>
  fc
    .record({
      low: fc.option(fc.tuple(fc.constantFrom('$gt', '$gte'), v), { nil: undefined }),
      high: fc.option(fc.tuple(fc.constantFrom('$lt', '$lte'), v), { nil: undefined }),
    })
    .filter((r) => r.low !== undefined || r.high !== undefined)
    .map((r) => Object.fromEntries([r.low, r.high].filter((x) => x !== undefined)) as Document);

/** A condition on one field: a value, $eq, $in, a range, or (unusable by an index) $ne / $exists. */
const conditionArb = fc.oneof(
  { weight: 4, arbitrary: scalar },
  { weight: 1, arbitrary: scalar.map((v) => ({ $eq: v })) },
  { weight: 2, arbitrary: fc.array(scalar, { minLength: 1, maxLength: 3 }).map((vs) => ({ $in: vs })) },
  { weight: 3, arbitrary: rangeArb(scalar) },
  { weight: 1, arbitrary: scalar.map((v) => ({ $ne: v })) },
  { weight: 1, arbitrary: fc.boolean().map((v) => ({ $exists: v })) },
);

const FIELDS = ['a', 'b', 'c', 'd', 'n.x', 't'];

/** An _id of the test's documents (doc-0 to doc-39, and a number in some runs), or one of none. */
const idArb = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 40 }).map((i) => `doc-${i}`) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 40 }) },
);

/** `{$in: ids}` (now and then with a null or a regular expression, which the _id index does not look up). */
const idsInArb = fc
  .array(fc.oneof({ weight: 8, arbitrary: idArb }, { weight: 1, arbitrary: fc.constantFrom(null, /^doc-1/) }), {
    minLength: 0,
    maxLength: 4,
  })
  .map((ids): Document => ({ $in: ids }));

/** Any conditions on any fields (an _id now and then): most use no index, or a part of one. */
const anyQueryArb = fc
  .record(
    {
      a: conditionArb,
      b: conditionArb,
      c: conditionArb,
      d: conditionArb,
      'n.x': conditionArb,
      t: conditionArb,
      _id: fc.option(fc.oneof(idArb, rangeArb(idArb), idsInArb), { nil: undefined, freq: 4 }),
    },
    { requiredKeys: [] },
  )
  .map((q) => Object.fromEntries(Object.entries(q).filter(([, v]) => v !== undefined)) as Document);

/** The shapes an index serves: equality on a prefix of its keys, then a range, $in or nothing on the next, maybe one more field. */
const indexShapedArb = fc.constantFrom(...INDEXES, ...UNIQUE_INDEXES).chain((index) => {
  const keys = Object.keys(index);
  return fc
    .record({
      prefix: fc.integer({ min: 0, max: keys.length - 1 }),
      equal: fc.array(scalar, { minLength: keys.length, maxLength: keys.length }),
      next: fc.option(
        fc.oneof(
          rangeArb(scalar),
          fc.array(scalar, { minLength: 1, maxLength: 3 }).map((vs) => ({ $in: vs })),
          scalar,
        ),
        {
          nil: undefined,
        },
      ),
      extra: fc.option(fc.tuple(fc.constantFrom(...FIELDS), conditionArb), { nil: undefined }),
    })
    .map(({ prefix, equal, next, extra }) => {
      const query: Document = {};
      if (extra && !keys.includes(extra[0])) query[extra[0]] = extra[1];
      keys.slice(0, prefix).forEach((key, i) => (query[key] = equal[i]));
      if (next !== undefined) query[keys[prefix]!] = next;
      return query;
    });
});

/** Ids and a tenant's conditions (`{_id: {$in: ids}, organization_id, deleted_at: null}`): the _id index's candidates, filtered. */
const idsAndMoreArb = fc
  .record({ ids: idsInArb, more: fc.array(fc.tuple(fc.constantFrom(...FIELDS), conditionArb), { minLength: 1, maxLength: 2 }) })
  .map(({ ids, more }): Document => ({ _id: ids, ...Object.fromEntries(more) }));

/**
 * A $or (the customer by id or external_id: `{organization_id, deleted_at: null, $or: [{_id}, {external_id}]}`):
 * branches an index serves, now and then one none does (no plan of its own: the query is read as a
 * whole), an empty one, an _id or ids, a nested $or; the query's other conditions sometimes name a
 * branch's field too (the planner then reads it as a whole).
 */
const orArb = fc
  .record({
    branches: fc.array(
      fc.oneof(
        { weight: 4, arbitrary: indexShapedArb },
        { weight: 1, arbitrary: fc.oneof(idArb, idsInArb).map((id): Document => ({ _id: id })) },
        { weight: 1, arbitrary: anyQueryArb },
      ),
      { minLength: 1, maxLength: 3 },
    ),
    outer: fc.array(fc.tuple(fc.constantFrom(...FIELDS), conditionArb), { maxLength: 2 }),
    nested: fc.boolean(),
  })
  .map(({ branches, outer, nested }): Document => {
    const or = nested && branches.length >= 2 ? [...branches.slice(0, -2), { $or: branches.slice(-2) }] : branches;
    return { ...Object.fromEntries(outer), $or: or };
  });

/**
 * The service's $or: an index's first key outside (b, of the index {b, c, d}), then ids and
 * conditions on its next key (c), each branch narrowed by an index, so the planner reads the union.
 */
const tenantOrArb = fc
  .record({
    b: scalar,
    branches: fc.array(
      fc.oneof(
        fc.oneof(idArb, idsInArb).map((id): Document => ({ _id: id })),
        scalar.map((c): Document => ({ c })),
        fc.array(scalar, { minLength: 1, maxLength: 3 }).map((vs): Document => ({ c: { $in: vs } })),
        rangeArb(scalar).map((range): Document => ({ c: range })),
      ),
      { minLength: 2, maxLength: 4 },
    ),
  })
  .map(({ b, branches }): Document => ({ b, $or: branches }));

const queryArb = fc.oneof(
  { weight: 1, arbitrary: anyQueryArb },
  { weight: 3, arbitrary: indexShapedArb },
  { weight: 1, arbitrary: idsAndMoreArb },
  { weight: 1, arbitrary: orArb },
  { weight: 1, arbitrary: tenantOrArb },
);

// Sorts an index follows after its equality prefix (read in index order, stopping at skip + limit) and others.
const SORTS: Document[] = [
  { a: 1, _id: 1 },
  { t: -1, _id: 1 },
  { $natural: -1 },
  { t: 1 },
  { t: -1, a: -1 },
  { c: -1, d: -1 },
  { c: 1 },
  { t: -1, _id: -1 },
  // By _id alone (a page after the last id): H2 reads its data map in key order when every _id is a string.
  { _id: 1 },
  { _id: -1 },
];

const findArb = fc.record({
  query: queryArb,
  sort: fc.option(fc.constantFrom(...SORTS), { nil: undefined, freq: 2 }),
  skip: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined, freq: 3 }),
  limit: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined, freq: 2 }),
});

const changeArb = fc.oneof(
  fc.record({ kind: fc.constant('update' as const), query: queryArb, set: fc.record({ a: arrayOrValue, c: value }, { requiredKeys: [] }) }),
  fc.record({ kind: fc.constant('delete' as const), query: queryArb }),
  // The bench's cleanup deletes by ids: the _id index answers it (H2: IndexedH2Backend's deleteMany).
  fc.record({
    kind: fc.constant('delete' as const),
    query: fc.array(idArb, { minLength: 1, maxLength: 6 }).map((ids): Document => ({ _id: { $in: ids } })),
  }),
);

async function answer(
  client: MongoClient,
  db: string,
  find: { query: Document; sort?: Document | undefined; skip?: number | undefined; limit?: number | undefined },
) {
  let cursor = client.db(db).collection('docs').find(find.query);
  if (find.sort) cursor = cursor.sort(find.sort);
  if (find.skip) cursor = cursor.skip(find.skip);
  if (find.limit) cursor = cursor.limit(find.limit);
  const options = { ...(find.skip ? { skip: find.skip } : {}), ...(find.limit ? { limit: find.limit } : {}) };
  try {
    // countDocuments is an aggregation, which the indexed stand-in answers through its planner.
    const count = await client.db(db).collection('docs').countDocuments(find.query, options);
    return { documents: await cursor.toArray(), count };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

describe('the stand-in answers the same with and without its secondary indexes', () => {
  it('for random documents, changes and queries', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(documentArb, { minLength: 5, maxLength: 40 }),
        fc.array(changeArb, { maxLength: 4 }),
        fc.array(findArb, { minLength: 10, maxLength: 25 }),
        async (documents, changes, finds) => {
          const db = `diff_${process.pid}_${run++}`;
          // A run in four has some numeric _ids (no key order by _id then: the planner must not use it).
          const mixedIds = run % 4 === 3;
          const docs: Document[] = documents.map((d, i) => ({ _id: mixedIds && i % 5 === 2 ? i : `doc-${i}`, ...strip(d) }));
          const outcomes: unknown[][] = [];
          const clients = [indexedClient, scannedClient, indexedH2Client, scannedH2Client];
          for (const client of clients) {
            const collection = client.db(db).collection('docs');
            // Half the runs index first and insert after, half insert first (the index is filled from the data).
            const createIndexes = async () => {
              for (const key of INDEXES) await collection.createIndex(key);
              for (const key of UNIQUE_INDEXES) await collection.createIndex(key, { unique: true });
            };
            if (run % 2 === 0) await createIndexes();
            await collection.insertMany(docs.map((d) => ({ ...d })));
            if (run % 2 === 1) await createIndexes();
            const outcome: unknown[] = [];
            for (const change of changes) {
              const done =
                change.kind === 'update'
                  ? collection.updateMany(change.query, { $set: strip(change.set) }).then((r) => r.modifiedCount)
                  : collection.deleteMany(change.query).then((r) => r.deletedCount);
              outcome.push(await done.catch((err: Error) => `error: ${err.message}`));
            }
            outcomes.push(outcome);
          }
          // Changes succeed or fail alike, and change as many documents.
          expect(outcomes[0]).toEqual(outcomes[1]);
          expect(outcomes[2]).toEqual(outcomes[3]);
          // The H2 backend deletes its own way (IndexedH2Backend.Collection.deleteDocuments, one
          // document at a time): it deletes what the memory backend's (mongo-java-server's) does.
          expect(outcomes[2], 'H2 against memory').toEqual(outcomes[0]);
          const left = await Promise.all(
            clients.map(async (client) =>
              (
                await client
                  .db(db)
                  .collection('docs')
                  .find({}, { projection: { _id: 1 } })
                  .toArray()
              )
                .map((d) => String(d._id))
                .sort(),
            ),
          );
          expect(left[2], 'H2 against memory').toEqual(left[0]);
          for (const find of finds) {
            const [withIndexes, byScan, withH2Indexes, byH2Scan] = await Promise.all(clients.map((client) => answer(client, db, find)));
            expect(withIndexes, JSON.stringify(find)).toEqual(byScan);
            expect(withH2Indexes, `H2: ${JSON.stringify(find)}`).toEqual(byH2Scan);
          }
          await Promise.all(clients.map((client) => client.db(db).dropDatabase()));
        },
      ),
      { numRuns: RUNS },
    );
  }, 600_000);

  it('answers a tenant-scoped range query with a field beyond the index, as computed by hand', async () => {
    const collection = indexedClient.db('diff_one').collection('docs');
    await collection.createIndex({ organization_id: 1, customer_id: 1, timestamp: 1 });
    await collection.insertMany(
      Array.from({ length: 2000 }, (_, i) => ({
        _id: `e-${i}` as unknown as never,
        organization_id: `org-${i % 4}`,
        customer_id: `cus-${i % 50}`,
        timestamp: new Date(Date.UTC(2030, 0, 1 + (i % 30))),
      })),
    );
    const found = await collection
      .find({
        organization_id: 'org-1',
        customer_id: 'cus-1',
        timestamp: { $gte: DATES[2], $lt: new Date(Date.UTC(2030, 0, 30)) },
        extra: { $exists: false },
      })
      .toArray();
    // i % 4 == 1 and i % 50 == 1: i = 1, 101, 201, ... (i % 100 == 1), days 1 + (i % 30) from January 3.
    const expected = Array.from({ length: 2000 }, (_, i) => i).filter((i) => i % 100 === 1 && 1 + (i % 30) >= 3 && 1 + (i % 30) < 30);
    expect(found.map((d) => d._id)).toEqual(expected.map((i) => `e-${i}`));
    await indexedClient.db('diff_one').dropDatabase();
  });

  it("answers a customer by id or external_id (a $or read branch by branch) with every branch's documents, in natural order, and counts a list", async () => {
    for (const client of [indexedClient, indexedH2Client]) {
      const collection = client
        .db('diff_or')
        .collection<{ _id: string; organization_id: string; external_id: string; deleted_at: Date | null; created_at: Date }>('customers');
      await collection.createIndex({ organization_id: 1, external_id: 1, deleted_at: 1 }, { unique: true });
      await collection.createIndex({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
      await collection.insertMany(
        Array.from({ length: 600 }, (_, i) => ({
          _id: `c-${String(i).padStart(3, '0')}`,
          organization_id: `org-${i % 3}`,
          external_id: `x-${i}`,
          deleted_at: i % 7 === 0 ? new Date(Date.UTC(2030, 0, 1)) : null,
          created_at: new Date(Date.UTC(2030, 0, 1, 0, 0, i)),
        })),
      );
      // Branches out of natural order, one matching nothing, one a deleted customer, one another organization's.
      const live = { organization_id: 'org-1', deleted_at: null };
      const found = await collection
        .find({
          ...live,
          $or: [{ external_id: 'x-502' }, { _id: 'c-004' }, { external_id: { $in: ['x-10', 'x-7', 'x-9'] } }, { _id: 'nope' }],
        })
        .toArray();
      // org-1: i % 3 == 1; live: i % 7 != 0 (7 is deleted, 9 is org-0).
      expect(found.map((d) => d._id)).toEqual(['c-004', 'c-010', 'c-502']);
      expect(await collection.countDocuments({ ...live, $or: [{ _id: 'c-004' }, { external_id: 'x-4' }, { external_id: 'x-502' }] })).toBe(
        2,
      );
      expect(await collection.findOne({ ...live, $or: [{ _id: 'x-502' }, { external_id: 'x-502' }] })).toMatchObject({ _id: 'c-502' });
      // A list's total (X-Total-Count), counted from the (organization_id, deleted_at, ...) index's entries:
      // org-1 is i % 3 == 1 (200), of which i % 21 == 7 are deleted (29).
      expect(await collection.countDocuments({ organization_id: 'org-1' })).toBe(200);
      expect(await collection.countDocuments(live)).toBe(171);
      expect(await collection.countDocuments(live, { skip: 170 })).toBe(1);
      expect(await collection.countDocuments(live, { skip: 2, limit: 5 })).toBe(5);
      expect(await collection.countDocuments({ organization_id: 'org-1', deleted_at: { $eq: null } })).toBe(171);
      await client.db('diff_or').dropDatabase();
    }
  });
});

describe('counts', () => {
  it("counts and pages an organization's events by code or time from an index's entries (keys after its prefix), as a scan and by hand", async () => {
    // GET /v1/events?code=...&from=...: the count tests code and timestamp on each entry of the
    // (organization_id, external_customer_id, code, timestamp) index; a page of a rare code reads the
    // documents whose entries pass, one of a common code reads in created_at order.
    const start = Date.UTC(2030, 0, 1);
    const events = Array.from({ length: 3000 }, (_, i) => {
      const timestamp: unknown =
        i % 500 === 10 ? 'not a date' : i % 500 === 12 ? null : i % 500 === 14 ? undefined : new Date(start + (i % 100) * 3_600_000);
      return {
        _id: `e-${String(i).padStart(4, '0')}`,
        organization_id: `org-${i % 2}`,
        external_customer_id: `cus-${i % 7}`,
        code: i % 250 === 0 ? 'rare' : i % 600 === 2 ? { not: 'a string' } : 'common',
        ...(timestamp === undefined ? {} : { timestamp }),
        created_at: new Date(start + i * 1000),
      };
    });
    const from = new Date(start + 10 * 3_600_000);
    const to = new Date(start + 20 * 3_600_000);
    const inRange = (e: (typeof events)[number]) => e.timestamp instanceof Date && e.timestamp >= from && e.timestamp < to;
    const org0 = events.filter((e) => e.organization_id === 'org-0');
    const queries: { query: Document; expected: number }[] = [
      { query: { organization_id: 'org-0', code: 'rare' }, expected: org0.filter((e) => e.code === 'rare').length },
      { query: { organization_id: 'org-0', code: 'common' }, expected: org0.filter((e) => e.code === 'common').length },
      {
        query: { organization_id: 'org-0', code: 'common', timestamp: { $gte: from, $lt: to } },
        expected: org0.filter((e) => e.code === 'common' && inRange(e)).length,
      },
      { query: { organization_id: 'org-0', timestamp: { $gte: from, $lt: to } }, expected: org0.filter(inRange).length },
      {
        query: { organization_id: 'org-0', timestamp: { $gt: from } },
        expected: org0.filter((e) => e.timestamp instanceof Date && e.timestamp > from).length,
      },
      // A string sorts before every date: a range of dates must still leave it out.
      {
        query: { organization_id: 'org-0', timestamp: { $lt: to } },
        expected: org0.filter((e) => e.timestamp instanceof Date && e.timestamp < to).length,
      },
      { query: { organization_id: 'org-0', timestamp: null }, expected: org0.filter((e) => e.timestamp == null).length },
      {
        query: { organization_id: 'org-0', external_customer_id: 'cus-3', code: 'rare' },
        expected: org0.filter((e) => e.external_customer_id === 'cus-3' && e.code === 'rare').length,
      },
      { query: { organization_id: 'org-1', code: 'rare' }, expected: 0 },
    ];
    const answers: unknown[][] = [];
    for (const client of [indexedClient, scannedClient, indexedH2Client, scannedH2Client]) {
      const collection = client.db('diff_events').collection('events');
      await collection.createIndex({ organization_id: 1, external_customer_id: 1, code: 1, timestamp: 1 });
      await collection.createIndex({ organization_id: 1, created_at: -1, _id: -1 });
      await collection.insertMany(events.map((e) => ({ ...e })) as unknown as Document[]);
      const answer: unknown[] = [];
      for (const { query } of queries) {
        answer.push(await collection.countDocuments(query));
        answer.push(await collection.countDocuments(query, { skip: 3, limit: 4 }));
        answer.push((await collection.find(query).sort({ created_at: -1, _id: -1 }).skip(1).limit(3).toArray()).map((e) => e._id));
      }
      answers.push(answer);
      await client.db('diff_events').dropDatabase();
    }
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2], 'H2').toEqual(answers[0]);
    expect(answers[3], 'H2 scanned').toEqual(answers[0]);
    queries.forEach(({ query, expected }, i) => {
      expect(answers[0]![i * 3], JSON.stringify(query)).toBe(expected);
      expect(answers[0]![i * 3 + 1], JSON.stringify(query)).toBe(Math.min(4, Math.max(0, expected - 3)));
    });
    // org-0's rare events are i % 250 == 0 (i = 0, 250, ..., 2750): the page skips the newest.
    expect(answers[0]![2]).toEqual(['e-2500', 'e-2250', 'e-2000']);
    expect(answers[0]![5]).toEqual(['e-2996', 'e-2994', 'e-2992']);
  }, 120_000);

  it('counts and pages a date the server set finer than a millisecond ($currentDate) as a scan does', async () => {
    // The index keeps a date cut to the millisecond; the document keeps the server's finer one. Its
    // entry then no longer says whether the document matches: no count or filter reads the entries.
    const answers: unknown[][] = [];
    for (const client of [indexedClient, scannedClient, indexedH2Client, scannedH2Client]) {
      const collection = client.db('diff_submillisecond').collection<{ _id: string; org: string; ts?: Date; created?: number }>('docs');
      await collection.createIndex({ org: 1, code: 1, ts: 1 });
      await collection.createIndex({ org: 1, created: -1, _id: -1 });
      await collection.insertMany([
        { _id: 'a', org: 'o', created: 1 },
        { _id: 'b', org: 'o', ts: DATES[1]!, created: 2 },
      ]);
      await collection.updateOne({ _id: 'a' }, { $currentDate: { ts: true } });
      const ts = (await collection.findOne({ _id: 'a' }))!.ts!;
      const answer: unknown[] = [];
      for (const query of [
        { org: 'o', ts },
        { org: 'o', ts: { $gt: ts } },
        { org: 'o', ts: { $lte: ts } },
        { org: 'o', ts: { $gte: ts } },
      ]) {
        answer.push(await collection.countDocuments(query));
        answer.push((await collection.find(query).sort({ created: -1, _id: -1 }).limit(5).toArray()).map((d) => d._id));
      }
      answers.push(answer);
      await client.db('diff_submillisecond').dropDatabase();
    }
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[3], 'H2').toEqual(answers[2]);
  });

  it("answers a count pipeline of another shape than the driver's ($limit before $skip, two $skip) as mongo-java-server does", async () => {
    const answers = [];
    for (const client of [indexedClient, scannedClient, indexedH2Client, scannedH2Client]) {
      const collection = client.db('diff_count').collection<{ _id: string; a: string }>('docs');
      await collection.createIndex({ a: 1 });
      await collection.insertMany(Array.from({ length: 6 }, (_, i) => ({ _id: `d-${i}`, a: i < 4 ? 'x' : 'y' })));
      const count = async (...middle: Document[]) =>
        (await collection.aggregate([{ $match: { a: 'x' } }, ...middle, { $group: { _id: 1, n: { $sum: 1 } } }]).toArray())[0]?.n as number;
      answers.push([
        await count({ $limit: 2 }, { $skip: 1 }),
        await count({ $skip: 1 }, { $skip: 1 }),
        await count({ $skip: 1 }, { $limit: 2 }),
        await count(),
      ]);
      await client.db('diff_count').dropDatabase();
    }
    expect(answers).toEqual(Array.from({ length: 4 }, () => [1, 2, 2, 4]));
  });
});

describe("pages by _id (H2: read in its data map's key order)", () => {
  it('answers an _id range sorted by _id with a limit as a scan does, all string _ids or not', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(documentArb, { minLength: 5, maxLength: 40 }),
        fc.boolean(),
        fc.array(
          fc.record({
            range: fc.option(rangeArb(idArb), { nil: undefined, freq: 4 }),
            extra: fc.option(fc.tuple(fc.constantFrom(...FIELDS), conditionArb), { nil: undefined }),
            direction: fc.constantFrom(1, -1),
            skip: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined, freq: 3 }),
            limit: fc.integer({ min: 1, max: 8 }),
          }),
          { minLength: 10, maxLength: 25 },
        ),
        async (documents, mixedIds, pages) => {
          const db = `pages_${process.pid}_${run++}`;
          // Zero-padded and not: string order is not numeric order (doc-10 < doc-9).
          const docs: Document[] = documents.map((d, i) => ({ _id: mixedIds && i % 5 === 2 ? i : `doc-${i}`, ...strip(d) }));
          for (const client of [indexedH2Client, scannedH2Client])
            await client
              .db(db)
              .collection('docs')
              .insertMany(docs.map((d) => ({ ...d })));
          for (const page of pages) {
            const query: Document = {};
            if (page.range) query._id = page.range;
            if (page.extra) query[page.extra[0]] = page.extra[1];
            const find = { query, sort: { _id: page.direction }, skip: page.skip, limit: page.limit };
            const [indexed, scanned] = await Promise.all([indexedH2Client, scannedH2Client].map((client) => answer(client, db, find)));
            expect(indexed, JSON.stringify(find)).toEqual(scanned);
          }
          await Promise.all([indexedH2Client, scannedH2Client].map((client) => client.db(db).dropDatabase()));
        },
      ),
      { numRuns: RUNS },
    );
  }, 600_000);
});

describe('a compound unique index (H2)', () => {
  it('answers equality on its first keys from a range of it, as a scan does', async () => {
    // Like a fee's {invoice_id} on the unique (invoice_id, key): several documents per first key,
    // numbers equal as values (2 and 2.0), arrays (one entry per element), null and missing.
    const firstKeys: unknown[] = ['i1', 'i2', 2, 2.0, 'i3', null, undefined, ['i1', 'i9']];
    const docs: Record<string, unknown>[] = Array.from({ length: 120 }, (_, i) => {
      const inv = firstKeys[i % firstKeys.length];
      return { _id: `f-${String(i).padStart(3, '0')}`, key: `k-${119 - i}`, n: i % 4, ...(inv === undefined ? {} : { inv }) };
    });
    // An array under the second key: two entries of the index, one document in the answer.
    docs.push({ _id: 'f-array-key', inv: 'i9', key: ['k-a', 'k-b'], n: 0 });
    // An empty array under the second key: no entry at all, so the index's ranges would miss it.
    const unlisted = { _id: 'f-empty-key', inv: 'i1', key: [], n: 3 };
    const queries: Document[] = [
      { inv: 'i1' },
      { inv: { $eq: 'i2' } },
      { inv: 2 },
      { inv: 'i1', n: { $gte: 2 } },
      { inv: 'i9' },
      { inv: 'absent' },
      // A $in on the first key: one range per value (a repeated one finds nothing more), none for an empty $in.
      { inv: { $in: ['i1', 2, 'i9', 'i1'] } },
      { inv: { $in: [2.0] } },
      { inv: { $in: [] } },
      { inv: { $in: ['i3', 'absent'] }, n: { $lt: 2 } },
    ];
    const answerAll = async (client: MongoClient, db: string, withUnlisted: boolean) => {
      const collection = client.db(db).collection('fees');
      await collection.createIndex({ inv: 1, key: 1 }, { unique: true });
      await collection.insertMany(docs.map((d) => ({ ...d })) as unknown as Document[]);
      if (withUnlisted) await collection.insertOne({ ...unlisted } as unknown as Document);
      const answer: unknown[] = [];
      for (const query of queries) {
        answer.push((await collection.find(query).toArray()).map((d) => d._id));
        answer.push((await collection.find(query).sort({ key: 1 }).toArray()).map((d) => d._id));
      }
      return answer;
    };
    const db = `unique_prefix_${process.pid}`;
    const answers = [await answerAll(indexedH2Client, db, false), await answerAll(scannedH2Client, db, false)];
    expect(answers[0]).toEqual(answers[1]);
    // Several documents under one first key, and the array's elements found through the index.
    expect((answers[0]![0] as string[]).length).toBe(30);
    expect((answers[0]![8] as string[]).length).toBe(16);
    // i1 (15), 2 and 2.0 (30), i9 (15 as an array element, and f-array-key), i1 repeated adds none.
    expect((answers[0]![12] as string[]).length).toBe(61);
    expect(answers[0]![16]).toEqual([]);
    // Once a document without an entry is added, the index reads no range: the answers stay a scan's.
    const withUnlisted = [
      await answerAll(indexedH2Client, `${db}_unlisted`, true),
      await answerAll(scannedH2Client, `${db}_unlisted`, true),
    ];
    expect(withUnlisted[0]).toEqual(withUnlisted[1]);
    expect(withUnlisted[0]![0] as string[]).toContain('f-empty-key');
  }, 60_000);
});

describe('an H2 file reopened', () => {
  it('rebuilds its secondary indexes from its documents and answers as before', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stand-in-h2-'));
    try {
      const file = join(dir, 'data.mv');
      const docs = Array.from({ length: 300 }, (_, i) => ({
        _id: `d-${String(i).padStart(3, '0')}`,
        a: i % 7,
        b: `v${i % 5}`,
        t: DATES[i % DATES.length],
      }));
      const first = await startMongoStandIn({ storage: file });
      const client = await MongoClient.connect(first.address);
      await client.db('h2').collection('docs').createIndex({ a: 1, t: 1 });
      await client
        .db('h2')
        .collection('docs')
        .insertMany(docs.map((d) => ({ ...d })) as unknown as Document[]);
      const query = { a: 3, t: { $gte: DATES[1] } };
      const before = await client.db('h2').collection('docs').find(query).toArray();
      await client.close();
      await first.stop();

      const again = await startMongoStandIn({ storage: file });
      const reopened = await MongoClient.connect(again.address);
      const after = await reopened.db('h2').collection('docs').find(query).toArray();
      // Changes after the reopen are indexed too.
      await reopened
        .db('h2')
        .collection('docs')
        .updateOne({ _id: 'd-000' as unknown as never }, { $set: { a: 3, t: DATES[5] } });
      const updated = await reopened.db('h2').collection('docs').find(query).toArray();
      await reopened.close();
      await again.stop();

      const expected = docs.filter((d) => d.a === 3 && d.t!.getTime() >= DATES[1]!.getTime()).map((d) => d._id);
      expect(before.map((d) => d._id)).toEqual(expected);
      expect(after.map((d) => d._id)).toEqual(expected);
      expect(updated.map((d) => d._id)).toEqual(['d-000', ...expected]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('answers listDatabases from the databases it has open, and opens a dropped one anew', async () => {
    // mongo-java-server's listDatabases opened each database again: in H2 a second instance whose
    // collections rebuilt their secondary indexes from every document (a million events: the heap twice over).
    const dir = mkdtempSync(join(tmpdir(), 'stand-in-h2-'));
    try {
      const file = join(dir, 'data.mv');
      const first = await startMongoStandIn({ storage: file });
      const client = await MongoClient.connect(first.address);
      await client.db('h2l').collection('docs').createIndex({ a: 1, t: 1 });
      await client
        .db('h2l')
        .collection('docs')
        .insertMany(Array.from({ length: 50 }, (_, i) => ({ a: i % 3, t: DATES[i % DATES.length] })));
      await client.close();
      await first.stop();

      const again = await startMongoStandIn({ storage: file });
      const reopened = await MongoClient.connect(again.address);
      const listed = async () => (await reopened.db().admin().listDatabases()).databases.map((d) => [d.name, d.empty]);
      expect(await listed()).toContainEqual(['h2l', false]);
      expect(await listed()).toContainEqual(['h2l', false]);
      // The open database answered: no collection of it was opened (and indexed) again by a request.
      expect(again.log!()).not.toMatch(/mongo-server-worker\d+\] INFO .*adding .*index .*for collection docs/);
      expect(await reopened.db('h2l').collection('docs').countDocuments({ a: 1 })).toBe(17);
      // Dropped, then named again: a new, empty database, not the dropped instance.
      await reopened.db('h2l').dropDatabase();
      expect((await listed()).map(([name]) => name)).not.toContain('h2l');
      await reopened.db('h2l').collection('docs').insertOne({ a: 1 });
      expect(await reopened.db('h2l').collection('docs').countDocuments({})).toBe(1);
      expect(await listed()).toContainEqual(['h2l', false]);
      await reopened.close();
      await again.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('keeps its unique indexes (tuples compared as values) through a reopen, a drop and a rebuild', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stand-in-h2-'));
    try {
      const file = join(dir, 'data.mv');
      const docs = Array.from({ length: 400 }, (_, i) => ({ _id: `u-${i}`, org: `o${i % 3}`, tx: `t-${i}`, n: i }));
      const refusedCode = async (collection: Collection, doc: object) =>
        collection.insertOne(doc as never).then(
          () => 0,
          (err: { code?: number }) => err.code ?? -1,
        );
      const first = await startMongoStandIn({ storage: file });
      const client = await MongoClient.connect(first.address);
      const docsOf = (c: MongoClient) => c.db('h2u').collection('docs');
      await docsOf(client).createIndex({ org: 1, tx: 1 }, { unique: true });
      await docsOf(client).insertMany(docs.map((d) => ({ ...d })) as unknown as Document[]);
      expect(await refusedCode(docsOf(client), { _id: 'dup', org: 'o1', tx: 't-1' })).toBe(11000);
      expect(await refusedCode(docsOf(client), { _id: 'u-5', org: 'ox', tx: 'fresh' })).toBe(11000);
      expect(await refusedCode(docsOf(client), { _id: 'ok-1', org: 'o2', tx: 't-1' })).toBe(0);
      await client.close();
      await first.stop();

      const again = await startMongoStandIn({ storage: file });
      const reopened = await MongoClient.connect(again.address);
      expect(await refusedCode(docsOf(reopened), { _id: 'dup-2', org: 'o1', tx: 't-1' })).toBe(11000);
      expect(await refusedCode(docsOf(reopened), { _id: 'u-7', org: 'oy', tx: 'fresh' })).toBe(11000);
      expect((await docsOf(reopened).findOne({ org: 'o1', tx: 't-301' }))?._id).toBe('u-301');
      expect(await docsOf(reopened).countDocuments({})).toBe(401);
      // Without the index the pair is accepted; built again, the index refuses to be built over it.
      await docsOf(reopened).dropIndex('org_1_tx_1');
      expect(await refusedCode(docsOf(reopened), { _id: 'dup-3', org: 'o1', tx: 't-1' })).toBe(0);
      await expect(docsOf(reopened).createIndex({ org: 1, tx: 1 }, { unique: true })).rejects.toThrow();
      await docsOf(reopened).deleteOne({ _id: 'dup-3' as unknown as never });
      await docsOf(reopened).createIndex({ org: 1, tx: 1 }, { unique: true });
      expect(await refusedCode(docsOf(reopened), { _id: 'dup-4', org: 'o1', tx: 't-1' })).toBe(11000);
      await reopened.db('h2u').dropDatabase();
      // A database created again under the same name starts empty, its indexes too.
      await docsOf(reopened).createIndex({ org: 1, tx: 1 }, { unique: true });
      expect(await refusedCode(docsOf(reopened), { _id: 'u-1', org: 'o1', tx: 't-1' })).toBe(0);
      await reopened.close();
      await again.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('unique indexes (H2: TupleUniqueIndex) refuse what mongo-java-server refuses', () => {
  // Plain key tuples (strings, dates, booleans, null or missing, an array of those under one key)
  // are checked without the library's path rules (TupleUniqueIndex.checkAdd); the others with
  // them. The memory backend keeps the library's own unique index: both must accept and refuse
  // the same inserts and updates, with the same error.
  const keyValue = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('a', 'b', 'c') },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.boolean() },
    { weight: 1, arbitrary: fc.constantFrom(DATES[0], DATES[1]) },
    { weight: 1, arbitrary: fc.constantFrom(1, 1.0, 2) },
    { weight: 2, arbitrary: fc.array(fc.constantFrom('a', 'b', 'd', null), { maxLength: 3 }) },
    { weight: 1, arbitrary: fc.record({ x: fc.constantFrom('a', 'b') }) },
  );
  const uniqueDoc = fc.record({ u: field(keyValue), v: field(keyValue), w: field(keyValue) }, { requiredKeys: [] });
  const step = fc.oneof(
    // An insert may reuse an earlier _id: the _id index refuses it through the same check.
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('insert' as const),
        doc: uniqueDoc,
        reuse: fc.option(fc.integer({ min: 0, max: 15 }), { nil: undefined, freq: 4 }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('update' as const), id: fc.integer({ min: 0, max: 15 }), set: uniqueDoc }) },
  );

  it('for random inserts and updates of plain and other key values', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 30 }), async (steps) => {
        const db = `unique_${process.pid}_${run++}`;
        const clients = [indexedClient, indexedH2Client];
        const outcomes: unknown[][] = [];
        for (const client of clients) {
          const collection = client.db(db).collection('docs');
          await collection.createIndex({ u: 1 }, { unique: true });
          await collection.createIndex({ v: 1, w: 1 }, { unique: true });
          const outcome: unknown[] = [];
          let next = 0;
          for (const s of steps) {
            const done =
              s.kind === 'insert'
                ? collection.insertOne({ _id: `doc-${s.reuse ?? next++}` as unknown as never, ...strip(s.doc) }).then(() => 'inserted')
                : collection.updateOne({ _id: `doc-${s.id}` as unknown as never }, { $set: strip(s.set) }).then((r) => r.modifiedCount);
            outcome.push(await done.catch((err: { code?: number; message: string }) => `error ${err.code}: ${err.message}`));
          }
          const stored = await collection.find({}).sort({ _id: 1 }).toArray();
          outcomes.push([outcome, stored]);
        }
        expect(outcomes[1], 'H2 against memory').toEqual(outcomes[0]);
        await Promise.all(clients.map((client) => client.db(db).dropDatabase()));
      }),
      { numRuns: RUNS * 4 },
    );
  }, 600_000);
});
