import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

export type ApiKeyStatus = 'active' | 'revoked';

export interface ApiKeyDoc extends BaseDoc {
  organization_id: string;
  name: string | null;
  /** SHA-256 of the raw key, hex. The raw key itself is never stored. */
  key_hash: string;
  key_prefix: string;
  status: ApiKeyStatus;
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export const apiKeySchema = new Schema<ApiKeyDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    name: { type: String, default: null },
    key_hash: { type: String, required: true },
    key_prefix: { type: String, required: true },
    status: { type: String, enum: ['active', 'revoked'], required: true, default: 'active' },
    expires_at: { type: Date, default: null },
    last_used_at: { type: Date, default: null },
    revoked_at: { type: Date, default: null },
  },
  collectionOptions<ApiKeyDoc>('api_keys'),
);

// Authentication is exactly one lookup on this index.
apiKeySchema.index({ key_hash: 1 }, { unique: true });
apiKeySchema.index({ organization_id: 1, created_at: -1, _id: -1 });
