import { Schema } from 'mongoose';

/**
 * The first answer to an `Idempotency-Key` of an organization (api-contract.md "Idempotent
 * requests"), kept 24 hours. A row is claimed `in_progress` before the route runs and becomes
 * `completed` with the answer; a 4xx or 5xx answer removes it so the key can be used again.
 * Expired rows are removed by the `sweep-idempotency-keys` schedule (the stand-in has no TTL
 * indexes). Every lookup is by exactly `{ organization_id, key }` or by `_id`: the stand-in
 * answers from an index only when the query's keys are exactly a unique index's keys.
 */
export interface IdempotencyKeyDoc {
  /** A fresh id per claim, so a request completes or releases only its own claim. */
  _id: string;
  organization_id: string;
  key: string;
  method: string;
  /** The request's URL path (with its query string, if any). */
  path: string;
  /** sha256 (hex) of the method, the path and the canonical JSON of the body. */
  request_hash: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: string | null;
  content_type: string | null;
  created_at: Date;
  expires_at: Date;
}

export const idempotencyKeySchema = new Schema<IdempotencyKeyDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    key: { type: String, required: true },
    method: { type: String, required: true },
    path: { type: String, required: true },
    request_hash: { type: String, required: true },
    state: { type: String, required: true, enum: ['in_progress', 'completed'] },
    response_status: { type: Number, default: null },
    response_body: { type: String, default: null },
    content_type: { type: String, default: null },
    created_at: { type: Date, required: true },
    expires_at: { type: Date, required: true },
  },
  // created_at comes from the API's clock (the one that sets expires_at), not from mongoose.
  { collection: 'idempotency_keys', versionKey: false, autoIndex: false, autoCreate: true },
);

idempotencyKeySchema.index({ organization_id: 1, key: 1 }, { unique: true });
idempotencyKeySchema.index({ expires_at: 1 });
