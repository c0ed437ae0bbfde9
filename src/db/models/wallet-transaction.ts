import { Schema, type Types } from 'mongoose';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';

export type WalletTransactionType = 'inbound' | 'outbound';
export type WalletTransactionStatus = 'granted' | 'purchased' | 'voided' | 'invoiced';
export type WalletTransactionSource = 'manual' | 'interval' | 'threshold';

export const WALLET_TRANSACTION_SOURCES = ['manual', 'interval', 'threshold'] as const satisfies readonly WalletTransactionSource[];

/**
 * One balance change of a wallet: a grant or purchase (inbound), a consumption against an invoice
 * or a void (outbound). Its `_id` is the idempotency marker pushed onto the wallet by the same
 * atomic update that changed the balance, so a retried write finds it already applied. A purchase
 * (`purchased`) changes no balance when it is made: its credits arrive when its credit invoice is
 * paid (its settlement, with a marker of its own: walletPurchaseSettlementId).
 */
export interface WalletTransactionDoc extends BaseDoc {
  organization_id: string;
  wallet_id: string;
  customer_id: string;
  transaction_type: WalletTransactionType;
  status: WalletTransactionStatus;
  source: WalletTransactionSource;
  /** Minor units (cents) of the wallet's currency. */
  amount: Types.Decimal128;
  /** The same amount in credits (amount / rate_amount / 100). */
  credit_amount: Types.Decimal128;
  /** The consuming invoice (consumption), or the `credit` invoice of a purchase. */
  invoice_id: string | null;
  /**
   * When the credits moved: the creation instant, except for a purchase, null until its credit
   * invoice is paid. Absent on records written before the field existed (read as created_at).
   */
  settled_at?: Date | null;
}

export const walletTransactionSchema = new Schema<WalletTransactionDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    wallet_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    transaction_type: { type: String, enum: ['inbound', 'outbound'], required: true },
    status: { type: String, enum: ['granted', 'purchased', 'voided', 'invoiced'], required: true },
    source: { type: String, enum: WALLET_TRANSACTION_SOURCES, default: 'manual' },
    amount: { type: Decimal128, required: true },
    credit_amount: { type: Decimal128, required: true },
    invoice_id: { type: String, default: null },
    settled_at: { type: Date },
  },
  collectionOptions<WalletTransactionDoc>('wallet_transactions'),
);

// One consumption per (wallet, invoice, type) (workflows.md): a consumption's _id is derived from
// exactly that key (walletConsumptionId in src/billing/wallets.ts), so the _id index is the unique
// key. A unique index on the three fields themselves would make every top-up of a wallet collide
// (invoice_id null), and the stand-in has no partial indexes to leave them out.
walletTransactionSchema.index({ wallet_id: 1, invoice_id: 1, transaction_type: 1 });
walletTransactionSchema.index({ organization_id: 1, wallet_id: 1, created_at: -1, _id: -1 });
