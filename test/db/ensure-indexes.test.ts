// db.ensureIndexes on a database an earlier version created (src/db/index.ts, RETIRED_INDEXES):
// an index the schemas no longer declare is dropped, so that the one replacing it decides alone.
// The case that needs it: invoice idempotency keys, once unique on their own, are unique per
// organization, and the old index would still refuse a second organization's invoice (issue 12).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDb, type Db, isDuplicateKeyError } from '../../src/db';
import { testDbUri } from '../support/stack';

let api: Db;
let worker: Db;

beforeAll(async () => {
  // Two connections to one database: the API and the worker both run ensureIndexes at start-up.
  const uri = testDbUri();
  api = await connectDb(uri, { maxPoolSize: 5 });
  worker = await connectDb(uri, { maxPoolSize: 5 });
});

afterAll(async () => {
  await api?.connection.dropDatabase().catch(() => undefined);
  await Promise.all([api?.close(), worker?.close()]);
});

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the operation to fail');
}

describe('ensureIndexes on a database from before invoice keys were per organization', () => {
  it('drops the unique idempotency_key_1, keeps the key unique within each organization', async () => {
    const invoices = api.connection.collection('invoices');
    // What the earlier version left: the key unique across every organization.
    await invoices.createIndex({ idempotency_key: 1 }, { unique: true });
    expect((await invoices.indexes()).map((i) => i.name)).toContain('idempotency_key_1');

    // Both processes at once: one of them finds the index already gone, and neither fails.
    await Promise.all([api.ensureIndexes(), worker.ensureIndexes()]);
    const indexes = await invoices.indexes();
    expect(indexes.map((i) => i.name)).not.toContain('idempotency_key_1');
    expect(indexes.find((i) => i.name === 'organization_id_1_idempotency_key_1')).toMatchObject({
      key: { organization_id: 1, idempotency_key: 1 },
      unique: true,
    });

    // A restart finds nothing left to drop.
    await api.ensureIndexes();

    await invoices.insertOne({ _id: 'invoice-of-a' as never, organization_id: 'org-a', idempotency_key: 'one_off/order-42' });
    await invoices.insertOne({ _id: 'invoice-of-b' as never, organization_id: 'org-b', idempotency_key: 'one_off/order-42' });
    const again = await caught(
      invoices.insertOne({ _id: 'second-of-a' as never, organization_id: 'org-a', idempotency_key: 'one_off/order-42' }),
    );
    expect(isDuplicateKeyError(again)).toBe(true);
    expect(await invoices.countDocuments({ idempotency_key: 'one_off/order-42' })).toBe(2);
  });
});
