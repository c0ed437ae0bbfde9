import { Schema, type Types } from 'mongoose';
import type { RuleInterval } from '../../domain/wallet-rules';
import { collectionOptions, Decimal128, uuidId, type BaseDoc } from '../base';
import { setsReadFlag } from '../read-flags';

export type WalletStatusValue = 'active' | 'terminated';

/**
 * A prepaid wallet of a customer. Its walletWorkflow (`wallet/<id>`) owns the status (expiry and
 * termination); the balance is shared by every invoice finalization of the customer, so it only
 * ever changes through one atomic findOneAndUpdate guarded by the status, the balance and the
 * transaction id not yet applied (src/billing/wallets.ts).
 */
export interface WalletDoc extends BaseDoc {
  organization_id: string;
  customer_id: string;
  name: string | null;
  code: string | null;
  /**
   * What makes "at most one active wallet per (customer, code)" a unique index without partial
   * indexes (the MongoDB stand-in has none): `code:<code>` while the wallet is active and has a
   * code, the wallet's own id otherwise. Termination moves it to the id in the same update, which
   * frees the code for a new wallet. Never shown by the API.
   */
  code_slot: string;
  currency: string;
  status: WalletStatusValue;
  /** Value of one credit in currency units; balance_cents = credits x rate_amount x 100. */
  rate_amount: Types.Decimal128;
  credits_balance: Types.Decimal128;
  /** In minor units (cents) of the currency. */
  balance_cents: Types.Decimal128;
  /** 1 is consumed first, 50 last. */
  priority: number;
  expiration_at: Date | null;
  terminated_at: Date | null;
  /**
   * The creation instant in the customer's time (its test clock's; created_at stays real time, the
   * tie-break of wallets of one priority): the default anchor of interval rules. Absent on wallets
   * made before it existed (created_at then).
   */
  opened_at?: Date;
  /**
   * Idempotency markers: the ids of the wallet transactions whose change is applied (a purchase's
   * id when it is made, its walletPurchaseSettlementId when its credits arrive).
   */
  applied_transaction_ids: string[];
  /**
   * Balance changes applied but whose wallet_transactions record is not written yet. Pushed by the
   * same atomic update that changes the balance and pulled once the record exists, so a crash in
   * between loses nothing: the next write on the wallet (or a retry) records it from here.
   */
  pending_transactions: PendingWalletTransaction[];
  /** At most 5 (api-contract.md, Wallets): interval rules are timers of the wallet's workflow, threshold rules fire on consumption. */
  recurring_transaction_rules: WalletRuleDoc[];
  /**
   * Threshold top-ups owed and not made yet: pushed by the same atomic update as the consumption
   * that crossed the rule's threshold (so a crossing is never lost nor counted twice), pulled once
   * the rule's top-up exists (applyThresholdTopUps, run by the wallet's workflow).
   */
  threshold_crossings: ThresholdCrossing[];
}

export type WalletRuleTrigger = 'interval' | 'threshold';

export interface WalletRuleDoc {
  id: string;
  trigger: WalletRuleTrigger;
  /** Interval rules: weekly, monthly, quarterly or yearly. */
  interval: RuleInterval | null;
  /** Threshold rules: the credits balance at or below which it tops up. */
  threshold_credits: Types.Decimal128 | null;
  paid_credits: Types.Decimal128;
  granted_credits: Types.Decimal128;
  /** Interval rules: the anchor of the anniversaries (null: the wallet's creation). */
  started_at: Date | null;
  created_at: Date;
}

export interface ThresholdCrossing {
  rule_id: string;
  /** The consumption (outbound invoiced transaction) that crossed the threshold. */
  transaction_id: string;
  /** The consumption's instant: the top-up is made for it. */
  at: Date;
}

export interface PendingWalletTransaction {
  id: string;
  transaction_type: 'inbound' | 'outbound';
  status: 'granted' | 'purchased' | 'voided' | 'invoiced';
  source: 'manual' | 'interval' | 'threshold';
  amount: Types.Decimal128;
  credit_amount: Types.Decimal128;
  invoice_id: string | null;
  created_at: Date;
  /**
   * The record's settled_at: null for a purchase not paid yet; an entry parked by a purchase's
   * settlement carries the payment instant (its record exists already and only gets this field).
   * Absent on entries parked before the field existed (read as created_at).
   */
  settled_at?: Date | null;
}

export const walletSchema = new Schema<WalletDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    name: { type: String, default: null },
    code: { type: String, default: null },
    code_slot: { type: String, required: true },
    currency: { type: String, required: true },
    status: { type: String, enum: ['active', 'terminated'], default: 'active' },
    rate_amount: { type: Decimal128, required: true },
    credits_balance: { type: Decimal128, required: true },
    balance_cents: { type: Decimal128, required: true },
    priority: { type: Number, default: 1, min: 1, max: 50 },
    expiration_at: { type: Date, default: null },
    terminated_at: { type: Date, default: null },
    opened_at: { type: Date },
    applied_transaction_ids: { type: [String], default: [] },
    pending_transactions: {
      type: [
        new Schema<PendingWalletTransaction>(
          {
            id: { type: String, required: true },
            transaction_type: { type: String, required: true },
            status: { type: String, required: true },
            source: { type: String, required: true },
            amount: { type: Decimal128, required: true },
            credit_amount: { type: Decimal128, required: true },
            invoice_id: { type: String, default: null },
            created_at: { type: Date, required: true },
            settled_at: { type: Date },
          },
          { _id: false },
        ),
      ],
      default: [],
    },
    recurring_transaction_rules: {
      type: [
        new Schema<WalletRuleDoc>(
          {
            id: { type: String, required: true },
            trigger: { type: String, enum: ['interval', 'threshold'], required: true },
            interval: { type: String, default: null },
            threshold_credits: { type: Decimal128, default: null },
            paid_credits: { type: Decimal128, required: true },
            granted_credits: { type: Decimal128, required: true },
            started_at: { type: Date, default: null },
            created_at: { type: Date, required: true },
          },
          { _id: false },
        ),
      ],
      default: [],
    },
    threshold_crossings: {
      type: [
        new Schema<ThresholdCrossing>(
          {
            rule_id: { type: String, required: true },
            transaction_id: { type: String, required: true },
            at: { type: Date, required: true },
          },
          { _id: false },
        ),
      ],
      default: [],
    },
  },
  collectionOptions<WalletDoc>('wallets'),
);

export function walletCodeSlot(walletId: string, code: string | null | undefined): string {
  return code ? `code:${code}` : walletId;
}

// At most one active wallet per (customer, code); see code_slot.
walletSchema.index({ organization_id: 1, customer_id: 1, code_slot: 1 }, { unique: true });
// Consumption: the customer's active wallets in one currency.
walletSchema.index({ organization_id: 1, customer_id: 1, status: 1, currency: 1 });
walletSchema.index({ organization_id: 1, created_at: -1, _id: -1 });

// Billing reads these only for an owner whose flag says it may have some (src/db/read-flags.ts).
setsReadFlag(walletSchema, { model: 'Customer', key: 'customer_id', flag: 'has_wallets' });
