import { Schema } from 'mongoose';
import { collectionOptions, type BaseDoc } from '../base';

/**
 * Serializes the wallet consumption of one invoice (src/billing/wallets.ts). Consumption of
 * different invoices runs concurrently and is kept safe by the wallets' guarded updates; but two
 * attempts for the SAME invoice (an activity attempt that outlived its timeout, running beside its
 * retry) would each decide what remains due without seeing the other, and together consume more
 * than the invoice. The lease makes them take turns. `_id` is the invoice id; the row is removed
 * when the holder is done, and a holder that died loses it when `expires_at` passes.
 */
export interface WalletConsumptionLeaseDoc extends BaseDoc {
  organization_id: string;
  /** The attempt that holds the lease. */
  holder: string;
  expires_at: Date;
}

export const walletConsumptionLeaseSchema = new Schema<WalletConsumptionLeaseDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    holder: { type: String, required: true },
    expires_at: { type: Date, required: true },
  },
  collectionOptions<WalletConsumptionLeaseDoc>('wallet_consumption_leases'),
);
