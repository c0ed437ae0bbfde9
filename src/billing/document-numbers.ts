import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';

/** Per (organization, kind): the last number this process took, and the takers waiting for theirs. */
interface Sequence {
  last: number | null;
  waiting: Taker[];
  draining: boolean;
}
interface Taker {
  input: NumberRequest;
  resolve: (sequence: number) => void;
  reject: (err: unknown) => void;
}
type NumberRequest = { organizationId: string; kind: string; documentId: string };

const sequences = new Map<string, Sequence>();
const MAX_SEQUENCES = 10_000;
/** At most this many numbers in one insert. */
const MAX_BATCH = 100;

/**
 * Takes the next number of a per-organization sequence for a document, or returns the number the
 * document already took (a retried finalization). Gapless and unique under concurrency: a number
 * is taken by inserting (organization, kind, max + 1); when another document took it first, the
 * unique index refuses the insert and we read the maximum again. Nothing is reserved ahead, so a
 * crash between steps leaves no hole.
 *
 * Within a process the takers of one sequence queue up, and each starts from the number the one
 * before it took: one insert per number on a billing day instead of a race of every finalization
 * for the same maximum. The takers that queued up while an insert ran take consecutive numbers in
 * one insert (ordered: the numbers before a refused one are taken, the rest go one at a time). The
 * remembered number is never above the real maximum (numbers are never removed), so a stale one
 * only costs a refused insert and a fresh read: other processes (more workers, the API) are still
 * resolved by the unique index.
 */
export function takeDocumentNumber(db: Db, input: NumberRequest): Promise<number> {
  const key = `${input.organizationId}|${input.kind}`;
  let entry = sequences.get(key);
  if (!entry) {
    if (sequences.size >= MAX_SEQUENCES) sequences.clear();
    entry = { last: null, waiting: [], draining: false };
    sequences.set(key, entry);
  }
  const sequence = entry;
  return new Promise<number>((resolve, reject) => {
    sequence.waiting.push({ input, resolve, reject });
    if (!sequence.draining) void drain(db, sequence);
  });
}

async function drain(db: Db, entry: Sequence): Promise<void> {
  entry.draining = true;
  try {
    while (entry.waiting.length > 0) await takeBatch(db, entry.waiting.splice(0, MAX_BATCH), entry);
  } finally {
    entry.draining = false;
  }
}

async function takeBatch(db: Db, batch: Taker[], entry: Sequence): Promise<void> {
  let rest = batch;
  if (entry.last !== null && batch.length > 1) {
    const first = entry.last + 1;
    let inserted = batch.length;
    try {
      await db.models.DocumentNumber.collection.insertMany(batch.map((taker, i) => numberDocument(taker.input, first + i)) as never[], {
        ordered: true,
      });
    } catch (err) {
      // Ordered: the numbers before the first refused one are taken. Any other failure: the
      // takers find out one at a time (a number written before it is found by its document).
      const firstRefused = (err as { writeErrors?: { index?: number }[] }).writeErrors?.[0]?.index;
      inserted = isDuplicateKeyError(err) && typeof firstRefused === 'number' ? firstRefused : 0;
    }
    batch.slice(0, inserted).forEach((taker, i) => taker.resolve(first + i));
    entry.last = inserted === batch.length ? first + inserted - 1 : null;
    rest = batch.slice(inserted);
  }
  for (const taker of rest) {
    try {
      taker.resolve(await take(db, taker.input, entry));
    } catch (err) {
      taker.reject(err);
    }
  }
}

function numberDocument(input: NumberRequest, sequence: number) {
  return {
    _id: `${input.organizationId}|${input.kind}|${sequence}`,
    organization_id: input.organizationId,
    kind: input.kind,
    document_id: input.documentId,
    sequence,
    created_at: new Date(),
    updated_at: new Date(),
  };
}

async function take(db: Db, input: NumberRequest, entry: { last: number | null }): Promise<number> {
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
      await DocumentNumber.collection.insertOne(numberDocument(input, sequence) as never);
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
