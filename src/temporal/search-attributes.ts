import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';

/**
 * Search attributes every entity workflow carries, so an operator can find any organization's,
 * customer's or entity's workflows in the Temporal UI by what a support ticket carries
 * (docs/operations.md). Registered by `npm start` (scripts/start.sh), the tests' servers and
 * docker-compose.yml, all from the names and types below (test/infra/search-attributes.test.ts).
 */
export const BillingOrganizationId = defineSearchAttributeKey('BillingOrganizationId', SearchAttributeType.KEYWORD);
export const BillingCustomerId = defineSearchAttributeKey('BillingCustomerId', SearchAttributeType.KEYWORD);
export const BillingEntityType = defineSearchAttributeKey('BillingEntityType', SearchAttributeType.KEYWORD);
export const BillingStatus = defineSearchAttributeKey('BillingStatus', SearchAttributeType.KEYWORD);
/** The customer's `external_id` (the tenant's own id for it). */
export const BillingCustomerExternalId = defineSearchAttributeKey('BillingCustomerExternalId', SearchAttributeType.KEYWORD);
/** A subscription's `external_id`. */
export const BillingSubscriptionExternalId = defineSearchAttributeKey('BillingSubscriptionExternalId', SearchAttributeType.KEYWORD);
/** A subscription's current plan code. */
export const BillingPlanCode = defineSearchAttributeKey('BillingPlanCode', SearchAttributeType.KEYWORD);
/** An invoice's number (`ACME-202611-000001`). */
export const BillingInvoiceNumber = defineSearchAttributeKey('BillingInvoiceNumber', SearchAttributeType.KEYWORD);
/**
 * In cents: an invoice's total while it is a draft or finalized (0 once paid, voided or deleted;
 * a partial settlement does not lower it), a payment's or payment request's amount while open.
 */
export const BillingAmountDueCents = defineSearchAttributeKey('BillingAmountDueCents', SearchAttributeType.INT);

export const billingSearchAttributes = [
  BillingOrganizationId,
  BillingCustomerId,
  BillingEntityType,
  BillingStatus,
  BillingCustomerExternalId,
  BillingSubscriptionExternalId,
  BillingPlanCode,
  BillingInvoiceNumber,
  BillingAmountDueCents,
] as const;

/** Name and CLI type (`temporal operator search-attribute create --type`) of each. */
export const SEARCH_ATTRIBUTE_TYPES: ReadonlyArray<{ name: string; type: 'Keyword' | 'Int' }> = billingSearchAttributes.map((key) => ({
  name: key.name,
  type: key.type === SearchAttributeType.INT ? 'Int' : 'Keyword',
}));

export type BillingEntityTypeValue =
  | 'subscription'
  | 'invoice'
  | 'payment'
  | 'wallet'
  | 'dunning_campaign'
  | 'payment_request'
  | 'webhook'
  | 'diagnostic'
  | 'test_clock'
  | 'plan_simulation';

/** What names an entity to an operator, beyond its internal ids (all optional). */
export interface EntityLabels {
  customerExternalId?: string | null;
  subscriptionExternalId?: string | null;
  planCode?: string | null;
  invoiceNumber?: string | null;
  amountDueCents?: number | null;
}

/** The typed search attributes of an entity workflow at start. */
export function entitySearchAttributes(
  attrs: {
    organizationId: string;
    entityType: BillingEntityTypeValue;
    customerId?: string | null;
    status?: string;
  } & EntityLabels,
): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [
    { key: BillingOrganizationId, value: attrs.organizationId },
    { key: BillingEntityType, value: attrs.entityType },
  ];
  if (attrs.customerId) pairs.push({ key: BillingCustomerId, value: attrs.customerId });
  if (attrs.status) pairs.push({ key: BillingStatus, value: attrs.status });
  return [...pairs, ...labelSearchAttributes(attrs)];
}

/** The labels' search attributes (those given); workflows upsert them when they change. */
export function labelSearchAttributes(labels: EntityLabels): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [];
  if (labels.customerExternalId) pairs.push({ key: BillingCustomerExternalId, value: labels.customerExternalId });
  if (labels.subscriptionExternalId) pairs.push({ key: BillingSubscriptionExternalId, value: labels.subscriptionExternalId });
  if (labels.planCode) pairs.push({ key: BillingPlanCode, value: labels.planCode });
  if (labels.invoiceNumber) pairs.push({ key: BillingInvoiceNumber, value: labels.invoiceNumber });
  if (labels.amountDueCents !== undefined && labels.amountDueCents !== null)
    pairs.push({ key: BillingAmountDueCents, value: labels.amountDueCents });
  return pairs;
}
