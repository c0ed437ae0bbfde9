import { Schema } from 'mongoose';
import { collectionOptions, type BaseDoc } from '../base';

export type WebhookStatus = 'pending' | 'succeeded' | 'failed';

export interface WebhookAttempt {
  attempt: number;
  /** The instant the workflow scheduled this attempt for (workflow time). */
  attempted_at: Date;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
}

/** One delivery of one event to one endpoint (the specification's Webhook). */
export interface WebhookDoc extends BaseDoc {
  organization_id: string;
  webhook_endpoint_id: string;
  event_id: string;
  webhook_type: string;
  /** The exact JSON body that is POSTed (and signed). */
  payload: Record<string, unknown>;
  status: WebhookStatus;
  /** Attempts made so far, over every run. */
  attempts: number;
  /** Failed attempts before the last one (a first-time success has 0). */
  retries: number;
  http_status: number | null;
  last_error: string | null;
  last_attempt_at: Date | null;
  attempt_log: WebhookAttempt[];
}

export const webhookSchema = new Schema<WebhookDoc>(
  {
    _id: { type: String, required: true },
    organization_id: { type: String, required: true },
    webhook_endpoint_id: { type: String, required: true },
    event_id: { type: String, required: true },
    webhook_type: { type: String, required: true },
    payload: { type: Schema.Types.Mixed, required: true },
    status: { type: String, enum: ['pending', 'succeeded', 'failed'], default: 'pending' },
    attempts: { type: Number, default: 0 },
    retries: { type: Number, default: 0 },
    http_status: { type: Number, default: null },
    last_error: { type: String, default: null },
    last_attempt_at: { type: Date, default: null },
    attempt_log: {
      type: [
        {
          _id: false,
          attempt: Number,
          attempted_at: Date,
          http_status: { type: Number, default: null },
          error: { type: String, default: null },
          duration_ms: Number,
        },
      ],
      default: [],
    },
  },
  { ...collectionOptions<WebhookDoc>('webhooks'), minimize: false },
);

// One delivery per (event, endpoint): a retried emission cannot create a second one.
webhookSchema.index({ event_id: 1, webhook_endpoint_id: 1 }, { unique: true });
webhookSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
webhookSchema.index({ organization_id: 1, webhook_endpoint_id: 1, status: 1 });
