import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';

/**
 * Takes the next number of a per-organization sequence for a document, or returns the number the
 * document already took (a retried finalization). Gapless and unique under concurrency: a number
 * is taken by inserting (organization, kind, max + 1); when another document took it first, the
 * unique index refuses the insert and we try the next one. Nothing is reserved ahead, so a crash
 * between steps leaves no hole.
 */
export async function takeDocumentNumber(db: Db, input: { organizationId: string; kind: string; documentId: string }): Promise<number> {
  const { DocumentNumber } = db.models;
  const mine = { organization_id: input.organizationId, kind: input.kind, document_id: input.documentId };
  for (let attempt = 0; attempt < 1000; attempt++) {
    const existing = await DocumentNumber.findOne(mine, { sequence: 1 }).lean();
    if (existing) return existing.sequence;
    const last = await DocumentNumber.findOne({ organization_id: input.organizationId, kind: input.kind }, { sequence: 1 })
      .sort({ sequence: -1 })
      .lean();
    const sequence = (last?.sequence ?? 0) + 1;
    try {
      await DocumentNumber.create({ _id: `${input.organizationId}|${input.kind}|${sequence}`, ...mine, sequence });
      return sequence;
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      // Either another document took this number (try the next), or this document got one
      // concurrently (found on the next pass).
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
