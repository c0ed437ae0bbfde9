import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

/**
 * A verified provider notification (one event of a batch), stored once per (organization,
 * provider, event key): a replayed notification finds its row and changes nothing.
 */
export interface ProviderEventDoc extends BaseDoc {
  organization_id: string;
  provider: string;
  /** The provider's event id, or the SHA-256 of the body for providers without ids. */
  event_key: string;
  event_type: string;
  payment_id: string | null;
  outcome: string | null;
  /** The notification as the payment's workflow receives it. */
  notification: Record<string, unknown>;
  /** Set once the payment's workflow has the signal; a replay before that signals again. */
  delivered_at: Date | null;
}

export const providerEventSchema = new Schema<ProviderEventDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    provider: { type: String, required: true },
    event_key: { type: String, required: true },
    event_type: { type: String, required: true },
    payment_id: { type: String, default: null },
    outcome: { type: String, default: null },
    notification: { type: Schema.Types.Mixed, required: true },
    delivered_at: { type: Date, default: null },
  },
  { ...collectionOptions<ProviderEventDoc>('provider_events'), minimize: false },
);

providerEventSchema.index({ organization_id: 1, provider: 1, event_key: 1 }, { unique: true });
