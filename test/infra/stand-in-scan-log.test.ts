// The stand-in's scan log (tools/mongo-stand-in/ScanLog.java, MONGO_STAND_IN_SCAN_LOG): a query
// that no index helps is reported once per collection and shape, without its values, when the
// collection holds at least the given number of documents; a query an index answers is not. Ids
// with a tenant's conditions (`{_id: {$in: ids}, organization_id}`) are read from the _id index. A
// $or is read branch by branch when an index narrows each; a lookup of one document that reads all
// of an organization's (no index narrows one branch of its $or) is reported.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanLogReports, startMongoStandIn, type RunningServer } from '../support/servers';

const dir = mkdtempSync(join(tmpdir(), 'stand-in-scans-'));
const backends = [
  { name: 'memory', storage: undefined, reports: join(dir, 'memory.log') },
  { name: 'H2', storage: join(dir, 'scans.mv'), reports: join(dir, 'h2.log') },
];
let servers: RunningServer[] = [];
let clients: MongoClient[] = [];

beforeAll(async () => {
  servers = await Promise.all(
    backends.map((backend) =>
      startMongoStandIn({
        ...(backend.storage ? { storage: backend.storage } : {}),
        env: { MONGO_STAND_IN_SCAN_LOG: '5', MONGO_STAND_IN_SCAN_LOG_FILE: backend.reports },
      }),
    ),
  );
  clients = await Promise.all(servers.map((server) => MongoClient.connect(server.address)));
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await Promise.all(servers.map((server) => server.stop()));
  rmSync(dir, { recursive: true, force: true });
});

const reportsOf = scanLogReports;

describe.each(backends.map((backend, i) => ({ ...backend, i })))('the scan log ($name)', ({ i, reports, storage }) => {
  it('reports each unindexed query shape once, without values, and not the ones an index answers', async () => {
    const db = clients[i]!.db('scans');
    // _id may be null in a query's $in.
    const docs = db.collection<{ _id: string | null; organization_id: string; status: string; n: number }>('docs');
    await docs.createIndex({ organization_id: 1, status: 1 });
    await docs.insertMany(
      Array.from({ length: 10 }, (_, n) => ({ _id: `doc-${n}`, organization_id: `org-${n % 2}`, status: n < 5 ? 'draft' : 'final', n })),
    );
    // A collection under the threshold (5 documents) is not reported.
    const small = db.collection<{ _id: string; status: string }>('small');
    await small.insertMany([
      { _id: 's-1', status: 'draft' },
      { _id: 's-2', status: 'final' },
    ]);

    // Answered from an index: the _id index (ids, alone or with a tenant's conditions) and the compound one.
    expect(
      (await docs.find({ _id: { $in: ['doc-1', 'doc-3', 'doc-4', 'nope'] }, organization_id: 'org-1' }).toArray()).map((d) => d._id),
    ).toEqual(['doc-1', 'doc-3']);
    expect(
      (await docs.find({ _id: { $in: ['doc-2', 'doc-7'] }, status: { $ne: 'final' }, n: { $gte: 0 } }).toArray()).map((d) => d._id),
    ).toEqual(['doc-2']);
    expect(await docs.countDocuments({ organization_id: 'org-0', status: 'final' })).toBe(2);
    expect(await docs.findOne({ _id: 'doc-9' })).toMatchObject({ n: 9 });
    expect(reportsOf(reports)).toEqual([]);

    // By a scan: no index has status first; a $in with a null is not looked up in the _id index (and n has none).
    expect(await docs.countDocuments({ status: 'draft', n: { $lt: 3 } })).toBe(3);
    expect((await docs.find({ status: 'draft', n: { $lt: 3 } }).toArray()).length).toBe(3);
    expect((await docs.find({ status: 'final', n: { $lt: 9 } }).toArray()).length).toBe(4);
    expect((await docs.find({ _id: { $in: ['doc-5', null] }, n: { $gte: 5 } }).toArray()).map((d) => d._id)).toEqual(['doc-5']);
    expect(
      (
        await docs
          .find({ $or: [{ n: 1 }, { n: { $gt: 8 } }] })
          .sort({ n: -1 })
          .toArray()
      ).map((d) => d.n),
    ).toEqual([9, 1]);
    expect(await small.countDocuments({ status: 'draft' })).toBe(1);

    const lines = reportsOf(reports);
    expect(lines).toEqual([
      '[stand-in] scan of 10 documents: scans.docs {status: eq, n: {$lt}}',
      '[stand-in] scan of 10 documents: scans.docs {_id: {$in}, n: {$gte}}',
      '[stand-in] scan of 10 documents: scans.docs {$or: [{n: eq}, {n: {$gt}}]} sort {n: -1}',
    ]);
    for (const value of ['doc-', 'org-', 'draft', 'final']) expect(lines.join('\n')).not.toContain(value);
  });

  it('reads a $in on the first key of a compound unique index from it in H2 (the memory backend scans)', async () => {
    const fees = clients[i]!.db('scans').collection<{ _id: string; invoice_id: string; key: string }>('fees');
    await fees.createIndex({ invoice_id: 1, key: 1 }, { unique: true });
    await fees.insertMany(
      Array.from({ length: 12 }, (_, n) => ({ _id: `fee-${String(n).padStart(2, '0')}`, invoice_id: `inv-${n % 4}`, key: `k-${n}` })),
    );
    const before = reportsOf(reports).length;
    const found = await fees.find({ invoice_id: { $in: ['inv-3', 'inv-1', 'inv-3', 'inv-9'] }, key: { $ne: 'k-1' } }).toArray();
    expect(found.map((f) => f._id)).toEqual(['fee-03', 'fee-05', 'fee-07', 'fee-09', 'fee-11']);
    expect(await fees.countDocuments({ invoice_id: { $in: [] } })).toBe(0);
    const added = reportsOf(reports).slice(before);
    if (storage) expect(added).toEqual([]);
    else
      expect(added).toEqual([
        '[stand-in] scan of 12 documents: scans.fees {invoice_id: {$in}, key: {$ne}}',
        '[stand-in] scan of 12 documents: scans.fees {invoice_id: {$in}}',
      ]);
  });

  it('reads a $or by its branches when an index narrows each, and reports a lookup of one document by its organization alone', async () => {
    const customers = clients[i]!.db('scans').collection<{ _id: string; organization_id: string; external_id: string; name: string }>(
      'customers',
    );
    await customers.createIndex({ organization_id: 1, external_id: 1 });
    await customers.createIndex({ organization_id: 1, name: 1, _id: 1 }, { unique: true });
    await customers.insertMany(
      Array.from({ length: 10 }, (_, n) => ({
        _id: `c-${n}`,
        organization_id: `org-${n % 2}`,
        external_id: `e-${n}`,
        name: `name-${n % 3}`,
      })),
    );
    const before = reportsOf(reports).length;
    // By id or by external_id (the service's customer lookup): each branch from its own index.
    expect(await customers.findOne({ organization_id: 'org-1', $or: [{ _id: 'e-3' }, { external_id: 'e-3' }] })).toMatchObject({
      _id: 'c-3',
    });
    expect(await customers.findOne({ organization_id: 'org-1', $or: [{ _id: 'c-5' }, { external_id: 'c-5' }] })).toMatchObject({
      _id: 'c-5',
    });
    expect(await customers.findOne({ organization_id: 'org-0', $or: [{ _id: 'c-5' }, { external_id: 'e-5' }] })).toBeNull();
    expect(reportsOf(reports).slice(before)).toEqual([]);

    // A branch no index narrows beyond the organization: the lookup reads all of it, and says so; a list (no limit of 1) does not.
    expect(
      await customers.findOne({ organization_id: 'org-0', $or: [{ _id: 'nope' }, { nickname: 'x' }, { external_id: 'e-4' }] }),
    ).toMatchObject({
      _id: 'c-4',
    });
    expect(
      (await customers.find({ organization_id: 'org-0', $or: [{ _id: 'c-2' }, { nickname: 'x' }] }).toArray()).map((c) => c._id),
    ).toEqual(['c-2']);
    expect(reportsOf(reports).slice(before)).toEqual([
      '[stand-in] lookup of one document by organization_id alone, among 10 documents: scans.customers {organization_id: eq, $or: [{_id: eq}, {nickname: eq}, {external_id: eq}]}',
    ]);
  });
});
