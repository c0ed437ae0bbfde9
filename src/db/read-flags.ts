// What billing may skip reading (docs/performance.md, "Billing day: database commands per
// subscription boundary"). Most customers never have a coupon, a credit note or a wallet, and many
// organizations no tax and no webhook endpoint; billing read each of them for every invoice.
//
// A customer or organization created since these flags exist starts with them false. The schemas
// of the documents they stand for (applied coupons, credit notes, wallets; taxes, webhook
// endpoints) set the flag to true in a hook that runs before the document's first write, whatever
// path creates it, and nothing ever sets one back to false: a false is always true to its word.
// Documents older than the flags have none (undefined), and billing reads as it always did.
//
// A document created while an invoice is being billed may be missed by that invoice, as it would
// have been a moment later; it is there for the next one (a credit note or a wallet keeps its
// balance, a coupon its uses).
import type { Schema } from 'mongoose';

export const CUSTOMER_READ_FLAGS = ['has_applied_coupons', 'has_credit_notes', 'has_wallets'] as const;
export const ORGANIZATION_READ_FLAGS = ['has_taxes', 'has_webhook_endpoints'] as const;

export type CustomerReadFlag = (typeof CUSTOMER_READ_FLAGS)[number];
export type OrganizationReadFlag = (typeof ORGANIZATION_READ_FLAGS)[number];
export type CustomerReadFlags = Partial<Record<CustomerReadFlag, boolean | null>>;
export type OrganizationReadFlags = Partial<Record<OrganizationReadFlag, boolean | null>>;

/** The flags of a new customer: it has none of them yet. */
export const newCustomerReadFlags = (): Record<CustomerReadFlag, false> => ({
  has_applied_coupons: false,
  has_credit_notes: false,
  has_wallets: false,
});

/** The flags of a new organization. */
export const newOrganizationReadFlags = (): Record<OrganizationReadFlag, false> => ({ has_taxes: false, has_webhook_endpoints: false });

/**
 * Whether billing must read what `flag` stands for: only an explicit false says there is nothing.
 * (A document without the flag, or not read at all, may have some.)
 */
export function mayHave<F extends string>(doc: Partial<Record<F, boolean | null>> | null | undefined, flag: F): boolean {
  return doc?.[flag] !== false;
}

/** Schema fields for the flags: no default, so that a document older than them stays undefined. */
export function readFlagFields<F extends string>(flags: readonly F[]): Record<F, { type: BooleanConstructor }> {
  return Object.fromEntries(flags.map((flag) => [flag, { type: Boolean }])) as Record<F, { type: BooleanConstructor }>;
}

/**
 * Sets `flag` on the owner (`Customer` by the document's `customer_id`, `Organization` by its
 * `organization_id`) before a new document of `schema` is first saved. Only an explicit false is
 * changed: the update is a no-op once the flag is true, and a document without it keeps none.
 */
export function setsReadFlag(
  schema: Schema,
  owner:
    | { model: 'Customer'; key: 'customer_id'; flag: CustomerReadFlag }
    | { model: 'Organization'; key: 'organization_id'; flag: OrganizationReadFlag },
): void {
  schema.pre('save', async function setReadFlag() {
    if (!this.isNew) return;
    const ownerId = this.get(owner.key) as string | null | undefined;
    if (!ownerId) return;
    await this.db.model(owner.model).updateOne({ _id: ownerId, [owner.flag]: false }, { $set: { [owner.flag]: true } });
  });
  schema.pre('insertMany', function refuseBulk() {
    throw new Error(`${owner.model}.${owner.flag}: create these one at a time (save), so that the flag is set`);
  });
}

/** A projection that reads `flags` (with whatever else the caller lists). */
export function readFlagsProjection<F extends string>(flags: readonly F[]): Record<F, 1> {
  return Object.fromEntries(flags.map((flag) => [flag, 1])) as Record<F, 1>;
}
