// The wallet resource as the API returns it (and as wallet.* events and the wallet workflow's
// terminate update carry it).
import { z } from 'zod';
import type { WalletDoc } from '../db/models/wallet';
import { RULE_INTERVALS } from '../domain/wallet-rules';
import { d4, d4OrNull, decimal4, iso, nullableTimestamp, plain, timestamp } from './format';

export const walletRuleResource = z
  .object({
    id: z.string(),
    trigger: z.enum(['interval', 'threshold']),
    interval: z.enum(RULE_INTERVALS).nullable(),
    threshold_credits: decimal4.nullable(),
    paid_credits: decimal4,
    granted_credits: decimal4,
    started_at: nullableTimestamp.describe("interval rules: the anchor of the anniversaries (null: the wallet's creation)"),
    created_at: timestamp,
  })
  .meta({ id: 'RecurringTransactionRule' });

export const walletResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    customer_id: z.string(),
    name: z.string().nullable(),
    code: z.string().nullable(),
    currency: z.string(),
    status: z.enum(['active', 'terminated']),
    rate_amount: z.string().describe('plain decimal, e.g. "2.5"'),
    credits_balance: decimal4,
    balance_cents: decimal4.describe('credits_balance x rate_amount x 100'),
    priority: z.number().int(),
    expiration_at: nullableTimestamp,
    terminated_at: nullableTimestamp,
    recurring_transaction_rules: z.array(walletRuleResource),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Wallet' });

export type WalletResource = z.output<typeof walletResource>;

export function toWalletResource(doc: WalletDoc): WalletResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    customer_id: doc.customer_id,
    name: doc.name ?? null,
    code: doc.code ?? null,
    currency: doc.currency,
    status: doc.status,
    rate_amount: plain(doc.rate_amount),
    credits_balance: d4(doc.credits_balance),
    balance_cents: d4(doc.balance_cents),
    priority: doc.priority,
    expiration_at: iso(doc.expiration_at),
    terminated_at: iso(doc.terminated_at),
    recurring_transaction_rules: (doc.recurring_transaction_rules ?? []).map((rule) => ({
      id: rule.id,
      trigger: rule.trigger,
      interval: rule.interval ?? null,
      threshold_credits: d4OrNull(rule.threshold_credits),
      paid_credits: d4(rule.paid_credits),
      granted_credits: d4(rule.granted_credits),
      started_at: iso(rule.started_at),
      created_at: iso(rule.created_at),
    })),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
