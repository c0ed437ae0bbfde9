import { Schema } from 'mongoose';
import { collectionOptions, uuidId, type BaseDoc } from '../base';

export type SubscriptionStatus = 'pending' | 'active' | 'paused' | 'canceled' | 'terminated';
export type OnTerminationAction = 'generate_invoice' | 'generate_credit_note' | 'skip';

/**
 * A subscription as the API reads it. The subscription's workflow is its only writer (through
 * activities); this document is the workflow's projection for reads, ingestion and usage.
 */
export interface SubscriptionDoc extends BaseDoc {
  organization_id: string;
  customer_id: string;
  /** The customer's external_id, denormalized: events arrive by external customer id. */
  external_customer_id: string;
  external_id: string;
  /** Live usage alerts on it, kept by the alerts API with $inc: ingestion looks them up only when > 0. */
  usage_alerts_count?: number;
  name: string | null;
  plan_id: string;
  status: SubscriptionStatus;
  billing_time: 'calendar' | 'anniversary';
  pay_in_advance: boolean;
  trial_period_days: number;
  trial_ended_at: Date | null;
  /** Pending downgrade target (specification: previous_plan_id holds the plan it will switch to). */
  previous_plan_id: string | null;
  downgraded_at: Date | null;
  started_at: Date;
  ending_at: Date | null;
  canceled_at: Date | null;
  terminated_at: Date | null;
  /** When the current pause started (status paused); absent on documents written before pausing existed. */
  paused_at?: Date | null;
  current_period_started_at: Date | null;
  current_period_ending_at: Date | null;
  on_termination_action: OnTerminationAction;
  /** The workflow's whole state after its last step: what the reconciler restarts it from. */
  workflow_state: Record<string, unknown> | null;
  /** The state's version: a projection write never replaces a newer one. */
  state_version: number;
}

export const subscriptionSchema = new Schema<SubscriptionDoc>(
  {
    _id: uuidId,
    organization_id: { type: String, required: true },
    customer_id: { type: String, required: true },
    external_customer_id: { type: String, required: true },
    external_id: { type: String, required: true },
    usage_alerts_count: { type: Number },
    name: { type: String, default: null },
    plan_id: { type: String, required: true },
    status: { type: String, enum: ['pending', 'active', 'paused', 'canceled', 'terminated'], required: true },
    billing_time: { type: String, enum: ['calendar', 'anniversary'], default: 'calendar' },
    pay_in_advance: { type: Boolean, default: false },
    trial_period_days: { type: Number, default: 0 },
    trial_ended_at: { type: Date, default: null },
    previous_plan_id: { type: String, default: null },
    downgraded_at: { type: Date, default: null },
    started_at: { type: Date, required: true },
    ending_at: { type: Date, default: null },
    canceled_at: { type: Date, default: null },
    terminated_at: { type: Date, default: null },
    paused_at: { type: Date, default: null },
    current_period_started_at: { type: Date, default: null },
    current_period_ending_at: { type: Date, default: null },
    on_termination_action: {
      type: String,
      enum: ['generate_invoice', 'generate_credit_note', 'skip'],
      default: 'generate_invoice',
    },
    workflow_state: { type: Schema.Types.Mixed, default: null },
    state_version: { type: Number, default: 0 },
  },
  collectionOptions<SubscriptionDoc>('subscriptions'),
);

subscriptionSchema.index({ organization_id: 1, external_id: 1 }, { unique: true });
// Event ingestion resolves "this customer's live subscriptions" on every event.
subscriptionSchema.index({ organization_id: 1, external_customer_id: 1, status: 1 });
subscriptionSchema.index({ organization_id: 1, customer_id: 1, status: 1 });
subscriptionSchema.index({ organization_id: 1, plan_id: 1, status: 1 });
subscriptionSchema.index({ organization_id: 1, created_at: -1, _id: -1 });
