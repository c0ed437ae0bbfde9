import { Schema } from 'mongoose';

/**
 * Requests to /v1/events* of one organization in one minute. Shared by every API instance (it
 * lives in MongoDB, not in process memory); old windows are removed by a periodic sweep (the
 * stand-in has no TTL indexes).
 */
export interface RateLimitWindowDoc {
  /** `<organization>|<window start, unix seconds>` */
  _id: string;
  organization_id: string;
  window_start: Date;
  count: number;
}

export const rateLimitWindowSchema = new Schema<RateLimitWindowDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    window_start: { type: Date, required: true },
    count: { type: Number, required: true },
  },
  { collection: 'rate_limits', versionKey: false, autoIndex: false },
);

rateLimitWindowSchema.index({ organization_id: 1, window_start: 1 }, { unique: true });
rateLimitWindowSchema.index({ window_start: 1 });
