import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

export type IntegrationType = 'payment_provider' | 'accounting' | 'crm' | 'tax';
export type IntegrationStatus = 'active' | 'inactive' | 'error';

/**
 * An organization's connection to an outside provider (api-contract.md, Integrations). Secret
 * settings are stored sealed (src/payments/secrets.ts) under `secrets`, never in `settings`.
 */
export interface IntegrationDoc extends BaseDoc {
  organization_id: string;
  integration_type: IntegrationType;
  provider_type: string;
  /** Settings that are not secret, as given. */
  settings: Record<string, string>;
  /** Secret settings, sealed, by name. */
  secrets: Record<string, string>;
  /** The last 4 characters of each secret, for the masked read. */
  secret_hints: Record<string, string>;
  status: IntegrationStatus;
  /** Soft delete; part of the unique key so a deleted provider can be configured again. */
  deleted_at: Date | null;
}

export const integrationSchema = new Schema<IntegrationDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    integration_type: { type: String, enum: ['payment_provider', 'accounting', 'crm', 'tax'], required: true },
    provider_type: { type: String, required: true },
    settings: { type: Schema.Types.Mixed, default: () => ({}) },
    secrets: { type: Schema.Types.Mixed, default: () => ({}) },
    secret_hints: { type: Schema.Types.Mixed, default: () => ({}) },
    status: { type: String, enum: ['active', 'inactive', 'error'], default: 'active' },
    deleted_at: { type: Date, default: null },
  },
  { ...collectionOptions<IntegrationDoc>('integrations'), minimize: false },
);

// One live integration per provider and organization (specification, Integration).
integrationSchema.index({ organization_id: 1, provider_type: 1, deleted_at: 1 }, { unique: true });
integrationSchema.index({ organization_id: 1, deleted_at: 1, created_at: -1, _id: -1 });
