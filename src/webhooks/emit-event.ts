import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Models } from '../db';
import { isDuplicateKeyError } from '../db';
import type { LifecycleEventDoc } from '../db/models/lifecycle-event';
import type { WebhookEventType } from '../domain/webhook-schedule';
import { deterministicId } from '../ids';
import { mayHave, type OrganizationReadFlags } from '../db/read-flags';
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
 * A copy of a resource as MongoDB stores it (and as mongoose's insertMany stored it): an undefined
 * property or array item becomes null. A retry reads back the same, so every delivery of an event
 * carries one payload.
 */
function asStored<T>(value: T): T {
  if (value === undefined) return null as T;
  if (Array.isArray(value)) return value.map(asStored) as T;
  if (value === null || typeof value !== 'object') return value;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value; // a Date, a Decimal128: kept as they are
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, asStored(field)])) as T;
}

/**
 * The one door for lifecycle events: records the event, then one delivery (record + workflow) per
 * active endpoint of the organization that subscribes to its type. Every step is idempotent:
 * the event and delivery ids are derived from the idempotency key, unique indexes refuse
 * duplicates, and a delivery workflow that already ran is not started again.
 */
export async function emitEvent(deps: EmitDeps, input: EmitEventInput, known?: KnownOrganization): Promise<EmittedEvent> {
  return (await emitEvents(deps, [input], known))[0]!;
}

/** What the caller already read of the organization: an explicit has_webhook_endpoints false spares the endpoints' read. */
export interface KnownOrganization {
  organization?: OrganizationReadFlags | null;
}

/**
 * Several events of one organization that happen together (an invoice created and finalized at
 * once), in their order: one write for the events and one read of the endpoints for all of them.
 */
export async function emitEvents(deps: EmitDeps, inputs: EmitEventInput[], known?: KnownOrganization): Promise<EmittedEvent[]> {
  const { LifecycleEvent, Webhook, WebhookEndpoint } = deps.models;
  if (inputs.length === 0) return [];
  const organizationId = inputs[0]!.organizationId;
  if (inputs.some((input) => input.organizationId !== organizationId)) throw new Error('emitEvents: events of one organization only');
  const eventIds = inputs.map((input) => deterministicId(`event/${input.organizationId}/${input.idempotencyKey}`));
  // Written without mongoose's casting: a date must be one already.
  const notADate = inputs.find((input) => !(input.occurredAt instanceof Date));
  if (notADate) throw new Error(`emitEvents: occurredAt of ${notADate.idempotencyKey} is not a Date`);
  const now = new Date();
  // Every field of the schema, as mongoose would write them (test/billing/driver-writes.test.ts):
  // written through the driver, since an invoice's resource is a large document to cast and copy.
  const docs: LifecycleEventDoc[] = inputs.map((input, i) => ({
    _id: eventIds[i]!,
    organization_id: input.organizationId,
    type: input.type,
    object: asStored(input.object),
    occurred_at: input.occurredAt,
    created_at: now,
    updated_at: now,
  }));

  let events: (LifecycleEventDoc | undefined)[];
  try {
    await LifecycleEvent.collection.insertMany(docs as never[], { ordered: false });
    events = docs;
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    // A retry: keep what the first attempt wrote, so every delivery carries the same payload.
    const stored = await LifecycleEvent.find({ _id: { $in: eventIds } }).lean();
    const byId = new Map(stored.map((doc) => [doc._id, doc]));
    events = eventIds.map((id) => byId.get(id));
  }
  const missing = eventIds.find((_, i) => !events[i]);
  if (missing) throw new Error(`lifecycle event ${missing} vanished`);

  const types = [...new Set(inputs.map((input) => input.type))];
  const endpoints = !mayHave(known?.organization, 'has_webhook_endpoints')
    ? []
    : await WebhookEndpoint.find(
        {
          organization_id: organizationId,
          deleted_at: null,
          status: 'active',
          $or: [{ event_types: { $size: 0 } }, { event_types: { $in: types } }],
        },
        { _id: 1, url: 1, event_types: 1 },
      ).lean();
  // The customer's external id names the deliveries to an operator: one read, only when there are some.
  const customerId = inputs.find((input) => input.customerId)?.customerId;
  const customerExternalId =
    endpoints.length > 0 && customerId
      ? ((await deps.models.Customer.findById(customerId, { external_id: 1 }).lean())?.external_id ?? null)
      : null;

  const emitted: EmittedEvent[] = [];
  for (const [i, input] of inputs.entries()) {
    const eventId = eventIds[i]!;
    const payload = toLifecycleEventPayload(events[i]!);
    const deliveryIds: string[] = [];
    for (const endpoint of endpoints.filter((e) => e.event_types.length === 0 || e.event_types.includes(input.type))) {
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
            customerExternalId: input.customerId === customerId ? customerExternalId : null,
          },
        },
        'first',
      );
    }
    emitted.push({ eventId, deliveryIds });
  }
  return emitted;
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
