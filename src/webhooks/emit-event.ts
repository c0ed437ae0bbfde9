import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Models } from '../db';
import { isDuplicateKeyError } from '../db';
import type { LifecycleEventDoc } from '../db/models/lifecycle-event';
import type { WebhookEventType } from '../domain/webhook-schedule';
import { deterministicId } from '../ids';
import { toLifecycleEventPayload, type LifecycleEventPayload } from '../resources/lifecycle-event';
import type { TemporalClient } from '../temporal/client';
import type { WebhookDoc } from '../db/models/webhook';
import { endpointHostOf, startWebhookDeliveryWorkflow, type WebhookDeliveryLabels } from '../../workflows/webhook-delivery.messages';

export interface EmitDeps {
  models: Models;
  temporal: TemporalClient;
}

export interface EmitEventInput {
  organizationId: string;
  type: WebhookEventType;
  /**
   * What makes this event unique, e.g. `invoice/<id>/finalized`. The event id is derived from it,
   * so emitting twice (a retried activity) yields one event and one delivery per endpoint.
   */
  idempotencyKey: string;
  /** The resource as the API returns it (its mapper's output, from src/resources). */
  object: LifecycleEventPayload['data']['object'];
  /** When it happened: workflow time (or the customer's test-clock time). */
  occurredAt: Date;
  /** For the delivery workflows' search attributes (with its external id, read once when there is a delivery). */
  customerId?: string | null;
}

export interface EmittedEvent {
  eventId: string;
  deliveryIds: string[];
}

export function deliveryIdFor(eventId: string, endpointId: string): string {
  return deterministicId(`webhook-delivery/${eventId}/${endpointId}`);
}

/**
 * The one door for lifecycle events: records the event, then one delivery (record + workflow) per
 * active endpoint of the organization that subscribes to its type. Every step is idempotent:
 * the event and delivery ids are derived from the idempotency key, unique indexes refuse
 * duplicates, and a delivery workflow that already ran is not started again.
 */
export async function emitEvent(deps: EmitDeps, input: EmitEventInput): Promise<EmittedEvent> {
  const { LifecycleEvent, Webhook, WebhookEndpoint } = deps.models;
  const eventId = deterministicId(`event/${input.organizationId}/${input.idempotencyKey}`);

  let event: LifecycleEventDoc | null = null;
  try {
    event = (
      await LifecycleEvent.create({
        _id: eventId,
        organization_id: input.organizationId,
        type: input.type,
        object: input.object,
        occurred_at: input.occurredAt,
      })
    ).toObject();
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    // A retry: keep what the first attempt wrote, so every delivery carries the same payload.
    event = await LifecycleEvent.findById(eventId).lean();
  }
  if (!event) throw new Error(`lifecycle event ${eventId} vanished`);

  const endpoints = await WebhookEndpoint.find(
    {
      organization_id: input.organizationId,
      deleted_at: null,
      status: 'active',
      $or: [{ event_types: { $size: 0 } }, { event_types: input.type }],
    },
    { _id: 1, url: 1 },
  ).lean();
  // The customer's external id names the deliveries to an operator: one read, only when there are some.
  const customerExternalId =
    endpoints.length > 0 && input.customerId
      ? ((await deps.models.Customer.findById(input.customerId, { external_id: 1 }).lean())?.external_id ?? null)
      : null;

  const payload = toLifecycleEventPayload(event);
  const deliveryIds: string[] = [];
  for (const endpoint of endpoints) {
    const deliveryId = deliveryIdFor(eventId, endpoint._id);
    deliveryIds.push(deliveryId);
    await Webhook.updateOne(
      { _id: deliveryId },
      {
        $setOnInsert: {
          organization_id: input.organizationId,
          webhook_endpoint_id: endpoint._id,
          event_id: eventId,
          webhook_type: input.type,
          payload,
          status: 'pending',
        },
      },
      { upsert: true },
    ).catch((err: unknown) => {
      if (!isDuplicateKeyError(err)) throw err;
    });
    await startDelivery(
      deps.temporal,
      {
        deliveryId,
        organizationId: input.organizationId,
        customerId: input.customerId ?? null,
        labels: {
          eventType: input.type,
          endpointHost: endpointHostOf(endpoint.url),
          endpointId: endpoint._id,
          eventId,
          customerExternalId,
        },
      },
      'first',
    );
  }
  return { eventId, deliveryIds };
}

/**
 * Starts a delivery workflow (see startWebhookDeliveryWorkflow for `first` and `again`); a
 * delivery that already ran is not an error.
 */
export async function startDelivery(
  temporal: TemporalClient,
  delivery: { deliveryId: string; organizationId: string; customerId: string | null; labels: WebhookDeliveryLabels },
  mode: 'first' | 'again',
): Promise<void> {
  try {
    await startWebhookDeliveryWorkflow(
      temporal,
      { deliveryId: delivery.deliveryId, labels: delivery.labels },
      { organizationId: delivery.organizationId, customerId: delivery.customerId },
      mode,
    );
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * What names a delivery's run to an operator, from its record (a retry): the endpoint's host (one
 * read by id). The customer the event is about is not on the record: a retry carries none.
 */
export async function deliveryLabelsOf(
  models: Models,
  delivery: Pick<WebhookDoc, 'webhook_type' | 'webhook_endpoint_id' | 'event_id'>,
): Promise<WebhookDeliveryLabels> {
  const endpoint = await models.WebhookEndpoint.findById(delivery.webhook_endpoint_id, { url: 1 }).lean();
  return {
    eventType: delivery.webhook_type,
    endpointHost: endpoint ? endpointHostOf(endpoint.url) : '?',
    endpointId: delivery.webhook_endpoint_id,
    eventId: delivery.event_id,
    customerExternalId: null,
  };
}
