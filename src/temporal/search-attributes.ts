import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes every entity workflow carries, so an operator can find any organization's,
 * customer's or entity's workflows in the Temporal UI (docs/operations.md). All Keyword.
 */
export const BillingOrganizationId = defineSearchAttributeKey('BillingOrganizationId', SearchAttributeType.KEYWORD);
export const BillingCustomerId = defineSearchAttributeKey('BillingCustomerId', SearchAttributeType.KEYWORD);
export const BillingEntityType = defineSearchAttributeKey('BillingEntityType', SearchAttributeType.KEYWORD);
export const BillingStatus = defineSearchAttributeKey('BillingStatus', SearchAttributeType.KEYWORD);

export const billingSearchAttributes = [BillingOrganizationId, BillingCustomerId, BillingEntityType, BillingStatus] as const;

export type BillingEntityTypeValue =
  'subscription' | 'invoice' | 'payment' | 'wallet' | 'dunning_campaign' | 'payment_request' | 'webhook' | 'diagnostic' | 'test_clock';

/** The typed search attributes of an entity workflow at start. */
export function entitySearchAttributes(attrs: {
  organizationId: string;
  entityType: BillingEntityTypeValue;
  customerId?: string | null;
  status?: string;
}) {
  const pairs = [
    { key: BillingOrganizationId, value: attrs.organizationId },
    { key: BillingEntityType, value: attrs.entityType },
  ];
  if (attrs.customerId) pairs.push({ key: BillingCustomerId, value: attrs.customerId });
  if (attrs.status) pairs.push({ key: BillingStatus, value: attrs.status });
  return pairs;
}
