// The service's reads that once scanned a whole collection (docs/performance.md, "Queries that read
// a whole collection") are answered from an index: the stand-in (H2, as under npm start) runs with
// its scan log on, and each read must find its documents and leave no report, while the same read
// without its organization still scans.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decimal128 } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paymentSettlements } from '../../src/billing/settlements';
import { progressiveInvoices } from '../../src/billing/subscription/shared';
import { connectDb, type Db } from '../../src/db';
import { overdueInvoices } from '../../src/payments/dunning';
import { scanLogReports, startMongoStandIn, type RunningServer } from '../support/servers';

const dir = mkdtempSync(join(tmpdir(), 'indexed-reads-'));
const reports = join(dir, 'scans.log');
let server: RunningServer;
let db: Db;

const reported = (): string[] => scanLogReports(reports);

const PERIOD = new Date('2026-11-01T00:00:00Z');

beforeAll(async () => {
  server = await startMongoStandIn({
    storage: join(dir, 'data.mv'),
    env: { MONGO_STAND_IN_SCAN_LOG: '1', MONGO_STAND_IN_SCAN_LOG_FILE: reports },
  });
  db = await connectDb(`${server.address}/indexed_reads`, { maxPoolSize: 2 });
  await db.ensureIndexes();
  // Two organizations' invoices: a subscription's progressive ones, a customer's overdue ones.
  await db.connection.collection('invoices').insertMany(
    Array.from({ length: 40 }, (_, i) => ({
      _id: `inv-${String(i).padStart(2, '0')}` as never,
      organization_id: `org-${i % 2}`,
      idempotency_key: `key-${i}`,
      customer_id: `cus-${i % 4}`,
      subscription_id: `sub-${i % 4}`,
      invoice_type: i % 8 < 4 ? 'progressive_billing' : 'subscription',
      period_started_at: PERIOD,
      status: 'finalized',
      currency: 'USD',
      payment_overdue: i % 3 === 0,
      deleted_at: null,
      created_at: new Date(PERIOD.getTime() + i * 60_000),
    })),
  );
  await db.connection.collection('invoice_settlements').insertMany(
    Array.from({ length: 20 }, (_, i) => ({
      _id: `set-${String(i).padStart(2, '0')}` as never,
      organization_id: 'org-0',
      invoice_id: `inv-${String(i).padStart(2, '0')}`,
      settlement_type: i % 2 === 0 ? 'payment' : 'credit_note',
      source_id: `pay-${i % 4}`,
      amount_cents: Decimal128.fromString(String(100 + i)),
    })),
  );
}, 120_000);

afterAll(async () => {
  await db?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('reads that grow with a collection', () => {
  it('are answered from an index, with the right documents', async () => {
    const progressive = await progressiveInvoices({ db }, { organizationId: 'org-1', subscriptionId: 'sub-1' }, PERIOD);
    // i % 4 == 1 and i % 8 < 4: 1, 9, 17, 25, 33 (organization 1), oldest first.
    expect(progressive.map((i) => i._id)).toEqual(['inv-01', 'inv-09', 'inv-17', 'inv-25', 'inv-33']);

    const overdue = await overdueInvoices(db, { _id: 'cus-2', organization_id: 'org-0' }, 'USD');
    // i % 4 == 2 and i % 3 == 0: 6, 18, 30.
    expect(overdue.map((i) => i._id)).toEqual(['inv-06', 'inv-18', 'inv-30']);

    const settled = await paymentSettlements(db, 'pay-2');
    // i % 4 == 2, all payments: 2, 6, 10, 14, 18.
    expect(settled.map((s) => s.invoice_id)).toEqual(['inv-02', 'inv-06', 'inv-10', 'inv-14', 'inv-18']);
    expect(settled.map((s) => s.amount_cents.toString())).toEqual(['102', '106', '110', '114', '118']);

    expect(reported()).toEqual([]);
  });

  it('scan without their organization (the log sees what the reads above avoid)', async () => {
    await db.models.Invoice.find({ customer_id: 'cus-2', currency: 'USD', status: 'finalized', payment_overdue: true }).lean();
    expect(reported()).toEqual([
      '[stand-in] scan of 40 documents: indexed_reads.invoices {customer_id: eq, currency: eq, status: eq, payment_overdue: eq}',
    ]);
  });
});
