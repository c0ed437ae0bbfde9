import { Schema, type QueryFilter } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';
import { CUSTOMER_READ_FLAGS, readFlagFields, type CustomerReadFlags } from '../read-flags';

export type BillingMetadata = Record<string, string | number | boolean>;

export interface CustomerDoc extends BaseDoc, CustomerReadFlags {
  organization_id: string;
  external_id: string;
  name: string | null;
  email: string | null;
  currency: string;
  billing_metadata: BillingMetadata;
  /** null: the organization's value applies. */
  net_payment_term: number | null;
  invoice_grace_period: number | null;
  timezone: string | null;
  test_clock_id: string | null;
  /** Who collects this customer's payments, and what the provider saved for it (a method, a mandate). */
  payment_provider: string | null;
  provider_customer_id: string | null;
  payment_method_id: string | null;
  /**
   * The campaign that chases this customer's overdue invoices; null: the organization's default.
   * Deleting a campaign leaves its id here (no sweep over the customers, nothing to race with a
   * PUT): a deleted campaign governs no one, so such a customer follows the default as null does
   * (campaignOf, src/payments/dunning.ts).
   */
  applied_dunning_campaign_id: string | null;
  exclude_from_dunning_campaign: boolean;
  /** Soft delete: set once, never cleared. */
  deleted_at: Date | null;
}

export const customerSchema = new Schema<CustomerDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    external_id: { type: String, required: true },
    name: { type: String, default: null },
    email: { type: String, default: null },
    currency: { type: String, required: true },
    billing_metadata: { type: Schema.Types.Mixed, default: () => ({}) },
    net_payment_term: { type: Number, default: null },
    invoice_grace_period: { type: Number, default: null },
    timezone: { type: String, default: null },
    test_clock_id: { type: String, default: null },
    payment_provider: { type: String, default: null },
    provider_customer_id: { type: String, default: null },
    payment_method_id: { type: String, default: null },
    applied_dunning_campaign_id: { type: String, default: null },
    exclude_from_dunning_campaign: { type: Boolean, default: false },
    deleted_at: { type: Date, default: null },
    // Whether it ever had an applied coupon, a credit note, a wallet (src/db/read-flags.ts).
    ...readFlagFields(CUSTOMER_READ_FLAGS),
  },
  { ...collectionOptions<CustomerDoc>('customers'), minimize: false },
);

// One live customer per external_id and organization. deleted_at is part of the key (instead of
// a partial index, which the MongoDB stand-in lacks) so that a deleted customer's external_id can
// be used again: live rows all have deleted_at null and collide, deleted rows differ by timestamp.
customerSchema.index({ organization_id: 1, external_id: 1, deleted_at: 1 }, { unique: true });
customerSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
// A test clock's customers: its advances, deletion and in-use check.
customerSchema.index({ test_clock_id: 1 });

/** A live customer of the organization, addressed by id or by external_id (api-contract.md). */
export function customerLookup(organizationId: string, idOrExternalId: string): QueryFilter<CustomerDoc> {
  return {
    organization_id: organizationId,
    deleted_at: null,
    $or: [{ _id: idOrExternalId }, { external_id: idOrExternalId }],
  };
}
