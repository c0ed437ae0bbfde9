// The integration resource as the API returns it: secret settings masked to their last 4 characters.
import { z } from 'zod';
import type { IntegrationDoc } from '../db/models/integration';
import { iso, nullableTimestamp, timestamp } from './format';

export const integrationResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    integration_type: z.enum(['payment_provider', 'accounting', 'crm', 'tax']),
    provider_type: z.string(),
    settings: z.record(z.string(), z.string()).describe('secrets masked: "••••1f2e"'),
    status: z.enum(['active', 'inactive', 'error']),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Integration' });

export type IntegrationResource = z.output<typeof integrationResource>;

export function toIntegrationResource(doc: IntegrationDoc): IntegrationResource {
  const masked = Object.fromEntries(Object.keys(doc.secrets ?? {}).map((name) => [name, `••••${doc.secret_hints?.[name] ?? ''}`]));
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    integration_type: doc.integration_type,
    provider_type: doc.provider_type,
    settings: { ...doc.settings, ...masked },
    status: doc.status,
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
