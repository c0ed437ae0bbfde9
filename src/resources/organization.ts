// The organization and its API keys as the API returns them.
import { z } from 'zod';
import type { ApiKeyDoc } from '../db/models/api-key';
import type { OrganizationDoc } from '../db/models/organization';
import { iso, nullableTimestamp, timestamp } from './format';

export const organizationResource = z
  .object({
    id: z.string(),
    name: z.string(),
    default_currency: z.string(),
    timezone: z.string(),
    net_payment_term: z.number().int(),
    invoice_grace_period: z.number().int(),
    document_number_prefix: z.string(),
    email: z.string().nullable(),
    legal_name: z.string().nullable(),
    address_line1: z.string().nullable(),
    address_line2: z.string().nullable(),
    city: z.string().nullable(),
    zipcode: z.string().nullable(),
    state: z.string().nullable(),
    country: z.string().nullable(),
    events_rate_limit_per_minute: z.number().int(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Organization' });

export type OrganizationResource = z.output<typeof organizationResource>;

export const apiKeyResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    name: z.string().nullable(),
    key_prefix: z.string(),
    status: z.enum(['active', 'revoked']),
    expires_at: nullableTimestamp,
    last_used_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'ApiKey' });

export type ApiKeyResource = z.output<typeof apiKeyResource>;

/** The key as answered at its creation, the only time its raw value is shown. */
export const apiKeyWithRawKey = apiKeyResource.extend({ raw_key: z.string() }).meta({ id: 'ApiKeyWithRawKey' });

export type ApiKeyWithRawKey = z.output<typeof apiKeyWithRawKey>;

export function toOrganizationResource(doc: OrganizationDoc): OrganizationResource {
  return {
    id: doc._id,
    name: doc.name,
    default_currency: doc.default_currency,
    timezone: doc.timezone,
    net_payment_term: doc.net_payment_term,
    invoice_grace_period: doc.invoice_grace_period,
    document_number_prefix: doc.document_number_prefix,
    email: doc.email ?? null,
    legal_name: doc.legal_name ?? null,
    address_line1: doc.address_line1 ?? null,
    address_line2: doc.address_line2 ?? null,
    city: doc.city ?? null,
    zipcode: doc.zipcode ?? null,
    state: doc.state ?? null,
    country: doc.country ?? null,
    events_rate_limit_per_minute: doc.events_rate_limit_per_minute,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

export function toApiKeyResource(doc: ApiKeyDoc): ApiKeyResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    name: doc.name ?? null,
    key_prefix: doc.key_prefix,
    status: doc.status,
    expires_at: iso(doc.expires_at),
    last_used_at: iso(doc.last_used_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
