// An invoice's settlement as the API returns it: what paid part of the invoice (a payment, a credit note, a wallet).
import { z } from 'zod';
import type { InvoiceSettlementDoc } from '../db/models/invoice-settlement';
import { d4, iso, timestamp } from './format';

export const settlementResource = z
  .object({
    id: z.string(),
    invoice_id: z.string(),
    settlement_type: z.enum(['payment', 'credit_note', 'wallet_credit']),
    source_id: z.string(),
    amount_cents: z.string(),
    created_at: timestamp,
  })
  .meta({ id: 'InvoiceSettlement' });

export type SettlementResource = z.output<typeof settlementResource>;

export function toSettlementResource(doc: InvoiceSettlementDoc): SettlementResource {
  return {
    id: doc._id,
    invoice_id: doc.invoice_id,
    settlement_type: doc.settlement_type,
    source_id: doc.source_id,
    amount_cents: d4(doc.amount_cents),
    created_at: iso(doc.created_at),
  };
}
