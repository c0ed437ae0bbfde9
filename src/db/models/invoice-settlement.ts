import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export type SettlementType = 'payment' | 'credit_note' | 'wallet_credit';

/** Every payment, credit note application and wallet consumption against an invoice. */
export interface InvoiceSettlementDoc extends BaseDoc {
  organization_id: string;
  invoice_id: string;
  settlement_type: SettlementType;
  /** The payment, credit note or wallet. */
  source_id: string;
  amount_cents: Types.Decimal128;
}

export const invoiceSettlementSchema = new Schema<InvoiceSettlementDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    invoice_id: { type: String, required: true },
    settlement_type: { type: String, enum: ['payment', 'credit_note', 'wallet_credit'], required: true },
    source_id: { type: String, required: true },
    amount_cents: { type: Decimal128, required: true },
  },
  collectionOptions<InvoiceSettlementDoc>('invoice_settlements'),
);

// One settlement per (invoice, type, source): a retried activity cannot settle twice.
invoiceSettlementSchema.index({ invoice_id: 1, settlement_type: 1, source_id: 1 }, { unique: true });
// What a payment settled (paymentSettlements in src/billing/settlements.ts), read at each of its steps.
invoiceSettlementSchema.index({ source_id: 1, settlement_type: 1 });
