// The credit note resource and its items, as the API returns them (and as credit_note.* events carry them).
import { z } from 'zod';
import { CREDIT_NOTE_REASONS, type CreditNoteDoc, type CreditNoteItemDoc } from '../db/models/credit-note';
import { d4, decimal4, iso, nullableTimestamp, timestamp } from './format';

export const creditNoteItemResource = z.object({ id: z.string(), fee_id: z.string(), amount_cents: decimal4 });

export type CreditNoteItemResource = z.output<typeof creditNoteItemResource>;

export const creditNoteResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    customer_id: z.string(),
    invoice_id: z.string(),
    number: z
      .string()
      .describe('CN-<YYYYMMDD>-<4 digits>: the creation date in the organization time zone, per-organization daily sequence'),
    sequential_id: z.number().int(),
    issuing_date: z.string().describe('The creation date in the organization time zone, YYYY-MM-DD'),
    currency: z.string(),
    status: z.enum(['draft', 'finalized', 'voided']),
    credit_note_type: z.literal('credit'),
    reason: z.enum(CREDIT_NOTE_REASONS),
    description: z.string().nullable(),
    credit_amount_cents: decimal4,
    balance_amount_cents: decimal4.describe('What is left to apply to later invoices of the customer'),
    items: z.array(creditNoteItemResource),
    applications: z
      .array(z.object({ invoice_id: z.string(), amount_cents: decimal4, applied_at: timestamp }))
      .describe('Invoices the balance went to'),
    finalized_at: nullableTimestamp,
    voided_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'CreditNote' });

export type CreditNoteResource = z.output<typeof creditNoteResource>;

export function toCreditNoteItemResource(item: CreditNoteItemDoc): CreditNoteItemResource {
  return { id: item._id, fee_id: item.fee_id, amount_cents: d4(item.amount_cents) };
}

export function toCreditNoteResource(doc: CreditNoteDoc): CreditNoteResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    customer_id: doc.customer_id,
    invoice_id: doc.invoice_id,
    number: doc.number,
    sequential_id: doc.sequential_id,
    issuing_date: doc.issuing_date,
    currency: doc.currency,
    status: doc.status,
    credit_note_type: doc.credit_note_type,
    reason: doc.reason,
    description: doc.description ?? null,
    credit_amount_cents: d4(doc.credit_amount_cents),
    balance_amount_cents: d4(doc.balance_amount_cents),
    items: doc.items.map(toCreditNoteItemResource),
    applications: (doc.applications ?? []).map((a) => ({
      invoice_id: a.invoice_id,
      amount_cents: d4(a.amount_cents),
      applied_at: iso(a.applied_at),
    })),
    finalized_at: iso(doc.finalized_at),
    voided_at: iso(doc.voided_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
