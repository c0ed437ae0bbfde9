import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';
import { setsReadFlag } from '../read-flags';

export interface WebhookEndpointDoc extends BaseDoc {
  organization_id: string;
  url: string;
  signature_algo: 'hmac';
  status: 'active' | 'inactive';
  /** Empty: every event type. */
  event_types: string[];
  /**
   * The HMAC signing secret. Stored as is because every delivery must sign with it; returned by
   * the API only at creation and rotation.
   */
  secret: string;
  deleted_at: Date | null;
}

export const webhookEndpointSchema = new Schema<WebhookEndpointDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    url: { type: String, required: true },
    signature_algo: { type: String, enum: ['hmac'], default: 'hmac' },
    status: { type: String, enum: ['active', 'inactive'], default: 'active' },
    event_types: { type: [String], default: [] },
    secret: { type: String, required: true },
    deleted_at: { type: Date, default: null },
  },
  collectionOptions<WebhookEndpointDoc>('webhook_endpoints'),
);

webhookEndpointSchema.index({ organization_id: 1, deleted_at: 1, status: 1 });
webhookEndpointSchema.index({ organization_id: 1, created_at: -1, _id: -1 });

// Billing reads these only for an owner whose flag says it may have some (src/db/read-flags.ts).
setsReadFlag(webhookEndpointSchema, { model: 'Organization', key: 'organization_id', flag: 'has_webhook_endpoints' });
