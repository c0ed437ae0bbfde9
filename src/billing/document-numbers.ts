import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';

/** Per (organization, kind): the last number this process took, and the tail of its queue of takers. */
const sequences = new Map<string, { last: number | null; tail: Promise<unknown> }>();
const MAX_SEQUENCES = 10_000;

/**
 * Takes the next number of a per-organization sequence for a document, or returns the number the
 * document already took (a retried finalization). Gapless and unique under concurrency: a number
 * is taken by inserting (organization, kind, max + 1); when another document took it first, the
 * unique index refuses the insert and we read the maximum again. Nothing is reserved ahead, so a
 * crash between steps leaves no hole.
 *
 * Within a process the takers of one sequence queue up, and each starts from the number the one
 * before it took: one insert per number on a billing day instead of a race of every finalization
 * for the same maximum. The remembered number is never above the real maximum (numbers are never
 * removed), so a stale one only costs a refused insert and a fresh read: other processes (more
 * workers, the API) are still resolved by the unique index.
 */
export async function takeDocumentNumber(db: Db, input: { organizationId: string; kind: string; documentId: string }): Promise<number> {
  const key = `${input.organizationId}|${input.kind}`;
  let entry = sequences.get(key);
  if (!entry) {
    if (sequences.size >= MAX_SEQUENCES) sequences.clear();
    entry = { last: null, tail: Promise.resolve() };
    sequences.set(key, entry);
  }
  const taken = entry.tail.then(() => take(db, input, entry));
  entry.tail = taken.catch(() => undefined);
  return taken;
}

async function take(
  db: Db,
  input: { organizationId: string; kind: string; documentId: string },
  entry: { last: number | null },
): Promise<number> {
  const { DocumentNumber } = db.models;
  const mine = { organization_id: input.organizationId, kind: input.kind, document_id: input.documentId };
  for (let attempt = 0; attempt < 1000; attempt++) {
    if (entry.last === null) {
      const existing = await DocumentNumber.findOne(mine, { sequence: 1 }).lean();
      if (existing) return existing.sequence;
      const last = await DocumentNumber.findOne({ organization_id: input.organizationId, kind: input.kind }, { sequence: 1 })
        .sort({ sequence: -1 })
        .lean();
      entry.last = last?.sequence ?? 0;
    }
    const sequence = entry.last + 1;
    try {
      await DocumentNumber.collection.insertOne({
        _id: `${input.organizationId}|${input.kind}|${sequence}`,
        ...mine,
        sequence,
        created_at: new Date(),
        updated_at: new Date(),
      } as never);
      entry.last = sequence;
      return sequence;
    } catch (err) {
      if (!isDuplicateKeyError(err)) {
        entry.last = null;
        throw err;
      }
      // Either this document already has its number (a retry: found on the next pass), or
      // another process took this one (the next pass reads the maximum again).
      entry.last = null;
    }
  }
  throw new Error(`could not take a ${input.kind} number for ${input.documentId}`);
}

export function invoiceNumber(prefix: string, sequence: number): string {
  return `${prefix}-${String(sequence).padStart(6, '0')}`;
}

/**
 * A draft's number (api-contract.md, Invoices): `<prefix>-DRAFT-<first 8 hex digits of the id>`,
 * lowercase as in the id (the id is a lowercase UUID, so these are its first 8 characters).
 */
export function draftInvoiceNumber(prefix: string, invoiceId: string): string {
  return `${prefix}-DRAFT-${invoiceId.replaceAll('-', '').slice(0, 8)}`;
}
