import { Schema } from 'mongoose';
import { collectionOptions, type BaseDoc } from '../base';

/**
 * One lifecycle event (invoice.finalized, ...). Its _id is deterministic (entity, type, step), so
 * a retried emitting activity finds the event its first attempt wrote instead of adding another.
 */
export interface LifecycleEventDoc extends BaseDoc {
  organization_id: string;
  type: string;
  /** The resource as the API returns it. */
  object: Record<string, unknown>;
  /** When the event happened (workflow or test-clock time), the payload's created_at. */
  occurred_at: Date;
}

export const lifecycleEventSchema = new Schema<LifecycleEventDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    type: { type: String, required: true },
    object: { type: Schema.Types.Mixed, required: true },
    occurred_at: { type: Date, required: true },
  },
  { ...collectionOptions<LifecycleEventDoc>('lifecycle_events'), minimize: false },
);

lifecycleEventSchema.index({ organization_id: 1, type: 1, occurred_at: -1 });
