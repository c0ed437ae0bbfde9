// Gapless document numbers (src/billing/document-numbers.ts): the takers of one sequence queue up
// inside a process and each starts from the number the previous one took, so a billing day costs
// one insert per number; numbers taken elsewhere (another worker, the API) are found through the
// unique index, never skipped, never given twice.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db';
import { takeDocumentNumber } from '../../src/billing/document-numbers';
import { connectMonitored, createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;
/** The stack's database through a connection that reports its commands (connectMonitored). */
let monitored: Db;

beforeAll(async () => {
  stack = await createTestStack();
  monitored = await connectMonitored(stack);
});
afterAll(async () => {
  await monitored?.close();
  await stack?.close();
});

const take = (organizationId: string, documentId: string, kind = 'invoice') =>
  takeDocumentNumber(stack.db, { organizationId, kind, documentId });

/** What another process does to take a number: insert its row at the maximum + 1. */
async function takeElsewhere(organizationId: string, documentId: string, sequence: number, kind = 'invoice') {
  await stack.db.models.DocumentNumber.collection.insertOne({
    _id: `${organizationId}|${kind}|${sequence}`,
    organization_id: organizationId,
    kind,
    document_id: documentId,
    sequence,
  } as never);
}

describe('takeDocumentNumber', () => {
  it('gives 60 concurrent documents the numbers 1 to 60, each once, and the same number again on a retry', async () => {
    const org = randomUUID();
    const documents = Array.from({ length: 60 }, () => randomUUID());
    const numbers = await Promise.all(documents.map((d) => take(org, d)));
    expect([...numbers].sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    const again = await Promise.all(documents.map((d) => take(org, d)));
    expect(again).toEqual(numbers);
    expect(await stack.db.models.DocumentNumber.countDocuments({ organization_id: org })).toBe(60);
  });

  it('goes on after the numbers another process took, without a gap or a duplicate', async () => {
    const org = randomUUID();
    const first = [randomUUID(), randomUUID(), randomUUID()];
    for (const d of first) await take(org, d); // this process remembers 3
    await takeElsewhere(org, randomUUID(), 4);
    await takeElsewhere(org, randomUUID(), 5);
    const next = await Promise.all([randomUUID(), randomUUID()].map((d) => take(org, d)));
    expect([...next].sort()).toEqual([6, 7]);
    // A retry of a document numbered before is still answered with its own number.
    expect(await take(org, first[1]!)).toBe(2);
    const rows = await stack.db.models.DocumentNumber.find({ organization_id: org }, { sequence: 1 }).lean();
    expect(rows.map((r) => r.sequence).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('keeps one sequence per organization and per kind', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    expect(await take(a, randomUUID())).toBe(1);
    expect(await take(b, randomUUID())).toBe(1);
    expect(await take(a, randomUUID(), 'credit_note:20261126')).toBe(1);
    expect(await take(a, randomUUID())).toBe(2);
  });

  it('takers that queued up together share one insert; a number taken elsewhere or a retried document in the batch costs only the rest their batch', async () => {
    const org = randomUUID();
    const { DocumentNumber } = stack.db.models;
    // Every taker here goes through the monitored connection: a queue drains through the connection of the taker that started it.
    const takeMonitored = (documentId: string) => takeDocumentNumber(monitored, { organizationId: org, kind: 'invoice', documentId });
    await takeMonitored(randomUUID()); // this process remembers 1
    const commands: string[] = [];
    const client = monitored.connection.getClient();
    const onStart = (event: { commandName: string; command: Record<string, unknown> }) => {
      if (event.command['insert'] === 'document_numbers') commands.push(event.commandName);
    };
    client.on('commandStarted', onStart);
    try {
      // 20 takers arrive together: one or two inserts (who arrived while an insert ran goes in the next one), not 20.
      const numbers = await Promise.all(Array.from({ length: 20 }, () => takeMonitored(randomUUID())));
      expect(commands.length).toBeGreaterThanOrEqual(1);
      expect([...numbers].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
      expect(commands.length).toBeLessThanOrEqual(2);
    } finally {
      client.off('commandStarted', onStart);
    }
    // Another process takes 22 and 23; a document numbered before (7) retries among 5 new ones:
    // the batch's first insert is refused at its first row, everyone ends with a right number.
    await takeElsewhere(org, randomUUID(), 22);
    await takeElsewhere(org, randomUUID(), 23);
    const seventh = (await DocumentNumber.findOne({ organization_id: org, sequence: 7 }).lean())!.document_id;
    const fresh = Array.from({ length: 5 }, () => randomUUID());
    const [blocker, ...rest] = await Promise.all([take(org, randomUUID()), take(org, seventh), ...fresh.map((d) => take(org, d))]);
    expect(rest[0]).toBe(7);
    expect([blocker!, ...rest.slice(1)].sort((a, b) => a - b)).toEqual([24, 25, 26, 27, 28, 29]);
    const rows = await DocumentNumber.find({ organization_id: org }, { sequence: 1 }).lean();
    expect(rows.map((r) => r.sequence).sort((a, b) => a - b)).toEqual(Array.from({ length: 29 }, (_, i) => i + 1));
  });
});
