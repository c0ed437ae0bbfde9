// The wallet transaction resource as the API returns it (and as wallet_transaction.created and
// wallet_transaction.settled carry it).
import { z } from 'zod';
import { WALLET_TRANSACTION_SOURCES, type WalletTransactionDoc } from '../db/models/wallet-transaction';
import { d4, decimal4, iso, nullableTimestamp, plain, timestamp } from './format';

export const walletTransactionResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    wallet_id: z.string(),
    customer_id: z.string(),
    transaction_type: z.enum(['inbound', 'outbound']),
    status: z.enum(['granted', 'purchased', 'voided', 'invoiced']),
    source: z.enum(WALLET_TRANSACTION_SOURCES),
    amount: decimal4.describe('cents'),
    credit_amount: z.string().describe('credits, plain decimal'),
    invoice_id: z.string().nullable().describe('the consuming invoice (outbound invoiced), or the credit invoice of a purchase'),
    settled_at: nullableTimestamp.describe(
      'when the credits moved: null while a purchase is unpaid (its credit invoice); the creation instant otherwise',
    ),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'WalletTransaction' });

export type WalletTransactionResource = z.output<typeof walletTransactionResource>;

/** A record written before settled_at existed was settled when it was made (no purchase existed then). */
export function settledAtOf(doc: Pick<WalletTransactionDoc, 'settled_at' | 'status' | 'created_at'>): Date | null {
  if (doc.settled_at !== undefined) return doc.settled_at;
  return doc.status === 'purchased' ? null : doc.created_at;
}

export function toWalletTransactionResource(doc: WalletTransactionDoc): WalletTransactionResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    wallet_id: doc.wallet_id,
    customer_id: doc.customer_id,
    transaction_type: doc.transaction_type,
    status: doc.status,
    source: doc.source,
    amount: d4(doc.amount),
    credit_amount: plain(doc.credit_amount),
    invoice_id: doc.invoice_id ?? null,
    settled_at: iso(settledAtOf(doc)),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
