// Gapless document numbers (src/billing/document-numbers.ts): the takers of one sequence queue up
// inside a process and each starts from the number the previous one took, so a billing day costs
// one insert per number; numbers taken elsewhere (another worker, the API) are found through the
// unique index, never skipped, never given twice.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeDocumentNumber } from '../../src/billing/document-numbers';
import { createTestStack, type TestStack } from '../support/stack';

let stack: TestStack;

beforeAll(async () => {
  stack = await createTestStack();
});
afterAll(async () => stack?.close());

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
});
