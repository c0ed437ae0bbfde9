// The customer resource as the API returns it (and as customer.created carries it).
import { z } from 'zod';
import type { CustomerDoc } from '../db/models/customer';
import { iso, nullableTimestamp, timestamp } from './format';

export const customerResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    external_id: z.string(),
    name: z.string().nullable(),
    email: z.string().nullable(),
    currency: z.string(),
    billing_metadata: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    net_payment_term: z.number().int().nullable(),
    invoice_grace_period: z.number().int().nullable(),
    timezone: z.string().nullable(),
    test_clock_id: z.string().nullable(),
    payment_provider: z.string().nullable(),
    provider_customer_id: z.string().nullable(),
    payment_method_id: z.string().nullable(),
    applied_dunning_campaign_id: z.string().nullable(),
    exclude_from_dunning_campaign: z.boolean(),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Customer' });

export type CustomerResource = z.output<typeof customerResource>;

export function toCustomerResource(doc: CustomerDoc): CustomerResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    external_id: doc.external_id,
    name: doc.name ?? null,
    email: doc.email ?? null,
    currency: doc.currency,
    billing_metadata: doc.billing_metadata ?? {},
    net_payment_term: doc.net_payment_term ?? null,
    invoice_grace_period: doc.invoice_grace_period ?? null,
    timezone: doc.timezone ?? null,
    test_clock_id: doc.test_clock_id ?? null,
    payment_provider: doc.payment_provider ?? null,
    provider_customer_id: doc.provider_customer_id ?? null,
    payment_method_id: doc.payment_method_id ?? null,
    applied_dunning_campaign_id: doc.applied_dunning_campaign_id ?? null,
    exclude_from_dunning_campaign: doc.exclude_from_dunning_campaign ?? false,
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
