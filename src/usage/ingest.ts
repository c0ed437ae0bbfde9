// Event ingestion: validate references, resolve each event to its subscription(s), store it
// (durably, before the API answers), and maintain the daily pre-aggregate. Events never go through
// Temporal one by one.
//
// Exactly once: the unique (organization_id, transaction_id) index decides which of several
// concurrent submissions of one event is stored; only that one adds to daily_usage.
import type { AnyBulkWriteOperation } from 'mongodb';
import { bulkUpsert, type Db } from '../db';
import { newId } from '../db/base';
import type { CustomerDoc } from '../db/models/customer';
import type { EventDoc } from '../db/models/event';
import type { SubscriptionDoc } from '../db/models/subscription';
import { dailyContributionReader, dailyRollUpSupport } from '../domain/aggregation/daily';
import { billedPerEvent } from '../domain/charge-rules';
import { Dec } from '../domain/money';
import { localDate } from '../domain/periods';
import { toDecimal128 } from '../db/decimal';
import { eventsIngested, eventsRefused } from '../metrics/registry';
import type { CatalogView, MetricView } from './catalog-view';
import { hasUsageAlerts, type TouchedSubscription, type UsageAlertChecker } from './alerts';

export interface EventInput {
  transaction_id: string;
  external_customer_id: string;
  external_subscription_id?: string | undefined;
  code: string;
  timestamp?: Date | undefined;
  properties: Record<string, unknown>;
}

export type IngestOutcome =
  | { status: 'created'; event: EventDoc }
  | { status: 'duplicate'; existingEventId: string | null }
  | { status: 'invalid'; code: string; path: string; message: string };

/** The stable key of an event's values for its metric's filter keys (only allowed values). */
export function dimensionsOf(metric: Pick<MetricView, 'filters'>, properties: Record<string, unknown>): Record<string, string> {
  const dims: Record<string, string> = {};
  for (const filter of [...metric.filters].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) {
    const raw = properties[filter.key];
    if (raw === undefined || raw === null || typeof raw === 'object') continue;
    const value = typeof raw === 'string' ? raw : JSON.stringify(raw);
    if (filter.values.includes(value)) dims[filter.key] = value;
  }
  return dims;
}

export function dimensionsKey(dims: Record<string, string>): string {
  return JSON.stringify(dims);
}

export function dailyRowId(subscriptionId: string, metricId: string, date: string, dimsKey: string): string {
  return `${subscriptionId}|${metricId}|${date}|${dimsKey}`;
}

/** Metrics: stored events, and the others by reason (each event once: its outcome is decided here). */
function countOutcomes(outcomes: (IngestOutcome | null)[]): void {
  let created = 0;
  const refused = new Map<string, number>();
  for (const outcome of outcomes) {
    if (outcome?.status === 'created') created++;
    else if (outcome) {
      const reason = outcome.status === 'duplicate' ? 'duplicate' : outcome.code;
      refused.set(reason, (refused.get(reason) ?? 0) + 1);
    }
  }
  if (created > 0) eventsIngested.inc(created);
  for (const [reason, n] of refused) eventsRefused.inc({ reason }, n);
}

/** A subscription takes an event when the event falls inside its life. */
function covers(subscription: SubscriptionDoc, at: Date): boolean {
  if (subscription.status === 'pending') return false;
  if (subscription.started_at.getTime() > at.getTime()) return false;
  return subscription.ending_at === null || at.getTime() < subscription.ending_at.getTime();
}

/** The subscriptions with usage alerts that these events went to, at their customers' present. */
function touchedWithAlerts(
  docs: { doc: EventDoc; timezone: string }[],
  subscriptions: SubscriptionDoc[],
  customers: Pick<CustomerDoc, '_id' | 'test_clock_id'>[],
  clockTimes: Map<string, Date>,
  now: Date,
): TouchedSubscription[] {
  const byId = new Map(subscriptions.filter(hasUsageAlerts).map((s) => [s._id, s]));
  const clockOf = new Map(customers.map((c) => [c._id, c.test_clock_id ? clockTimes.get(c.test_clock_id) : undefined]));
  const touched = new Map<string, TouchedSubscription>();
  for (const { doc, timezone } of docs) {
    for (const id of doc.subscription_ids) {
      const subscription = byId.get(id);
      if (!subscription) continue;
      const entry = touched.get(id) ?? { subscription, timezone, now: clockOf.get(doc.customer_id) ?? now, metricIds: new Set<string>() };
      entry.metricIds!.add(doc.billable_metric_id);
      touched.set(id, entry);
    }
  }
  return [...touched.values()];
}

export class Ingestor {
  /** Ids whose daily contribution is applied but not yet marked (marked in batches, off the request path). */

  /**
   * `inAdvance`: told, once the events are stored, which of them each subscription bills in
   * advance (a charge paid in advance prices their metric); the events API signals the
   * subscriptions' workflows, which bill them at once (a lost notice is billed at the period end).
   */
  constructor(
    private readonly db: Db,
    private readonly catalog: CatalogView,
    private readonly inAdvance?: (subscriptionId: string, eventIds: string[]) => Promise<void>,
    /** Usage alerts of the subscriptions that received events, checked before the events are acknowledged (src/usage/alerts.ts). */
    private readonly alerts?: Pick<UsageAlertChecker, 'check'>,
  ) {}

  /**
   * Ingests events of one organization. Returns one outcome per input, in order. Invalid inputs
   * and duplicates do not stop the others (a batch stores every valid event).
   */
  async ingest(organization: { _id: string; timezone: string }, inputs: EventInput[], now: Date): Promise<IngestOutcome[]> {
    const { Customer, Event, Subscription } = this.db.models;
    const organizationId = organization._id;
    const externalCustomerIds = [...new Set(inputs.map((i) => i.external_customer_id))];
    const [metrics, customers, subscriptions] = await Promise.all([
      this.catalog.metricsByCode(organizationId, [...new Set(inputs.map((i) => i.code))]),
      Customer.find(
        { organization_id: organizationId, external_id: { $in: externalCustomerIds }, deleted_at: null },
        { external_id: 1, timezone: 1, test_clock_id: 1 },
      ).lean<Pick<CustomerDoc, '_id' | 'external_id' | 'timezone' | 'test_clock_id'>[]>(),
      Subscription.find({
        organization_id: organizationId,
        external_customer_id: { $in: externalCustomerIds },
        status: { $ne: 'pending' },
      }).lean<SubscriptionDoc[]>(),
    ]);
    const customerByExternalId = new Map(customers.map((c) => [c.external_id, c]));
    const clockTimes = await this.clockTimes(customers);
    const subscriptionsByCustomer = new Map<string, SubscriptionDoc[]>();
    for (const s of subscriptions) {
      const list = subscriptionsByCustomer.get(s.external_customer_id) ?? [];
      list.push(s);
      subscriptionsByCustomer.set(s.external_customer_id, list);
    }
    const plans = await this.catalog.plansById(subscriptions.map((s) => s.plan_id));
    const chargesMetric = (subscription: SubscriptionDoc, metricId: string) =>
      plans.get(subscription.plan_id)?.charges.some((c) => c.billable_metric_id === metricId) ?? false;

    // Validate and resolve each event.
    const outcomes: (IngestOutcome | null)[] = inputs.map(() => null);
    const docs: { index: number; doc: EventDoc; metric: MetricView; timezone: string }[] = [];
    inputs.forEach((input, index) => {
      const metric = metrics.get(input.code);
      if (!metric) {
        outcomes[index] = {
          status: 'invalid',
          code: 'billable_metric_not_found',
          path: 'code',
          message: `no billable metric "${input.code}"`,
        };
        return;
      }
      const customer = customerByExternalId.get(input.external_customer_id);
      if (!customer) {
        outcomes[index] = {
          status: 'invalid',
          code: 'customer_not_found',
          path: 'external_customer_id',
          message: `no customer "${input.external_customer_id}"`,
        };
        return;
      }
      // A test clock's customer lives at the clock's time: events default to it and none may come
      // from after it (billing-wise they would be from the future).
      let timestamp = input.timestamp ?? now;
      if (customer.test_clock_id) {
        const clockTime = clockTimes.get(customer.test_clock_id);
        if (!clockTime) {
          outcomes[index] = {
            status: 'invalid',
            code: 'customer_not_found',
            path: 'external_customer_id',
            message: "the customer's test clock is deleted",
          };
          return;
        }
        if (input.timestamp && input.timestamp.getTime() > clockTime.getTime()) {
          outcomes[index] = {
            status: 'invalid',
            code: 'validation_error',
            path: 'timestamp',
            message: `is after the customer's test clock time (${clockTime.toISOString()})`,
          };
          return;
        }
        timestamp = input.timestamp ?? clockTime;
      }
      const own = subscriptionsByCustomer.get(input.external_customer_id) ?? [];
      let targets: SubscriptionDoc[];
      if (input.external_subscription_id !== undefined) {
        const named = own.find((s) => s.external_id === input.external_subscription_id);
        if (!named) {
          outcomes[index] = {
            status: 'invalid',
            code: 'subscription_not_found',
            path: 'external_subscription_id',
            message: `no active subscription "${input.external_subscription_id}" for this customer`,
          };
          return;
        }
        // A named subscription takes the event only inside its life; outside it the event is
        // stored (it is the client's data) but attributed to nobody, like an unnamed one.
        targets = covers(named, timestamp) ? [named] : [];
      } else {
        targets = own.filter((s) => covers(s, timestamp) && chargesMetric(s, metric._id));
      }
      const dims = dimensionsOf(metric, input.properties);
      docs.push({
        index,
        metric,
        timezone: customer.timezone ?? organization.timezone,
        doc: {
          _id: newId(),
          organization_id: organizationId,
          transaction_id: input.transaction_id,
          external_customer_id: input.external_customer_id,
          customer_id: customer._id,
          external_subscription_id: input.external_subscription_id ?? null,
          subscription_ids: targets.map((s) => s._id),
          code: input.code,
          billable_metric_id: metric._id,
          timestamp,
          properties: input.properties,
          dimensions_key: dimensionsKey(dims),
          created_at: now,
          updated_at: now,
        },
      });
    });

    // Store. ordered:false stores every event that is not a duplicate, whatever the others do.
    const duplicates = new Set<number>();
    if (docs.length > 0) {
      try {
        await Event.collection.insertMany(docs.map((d) => d.doc) as never[], { ordered: false });
      } catch (err) {
        const writeErrors = (err as { writeErrors?: { code?: number; index: number }[] | { code?: number; index: number } }).writeErrors;
        const list = Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : [];
        if (list.length === 0 || list.some((w) => w.code !== 11000)) throw err;
        for (const w of list) duplicates.add(w.index);
      }
    }
    const stored = docs.filter((_, i) => !duplicates.has(i));
    const dupDocs = docs.filter((_, i) => duplicates.has(i));
    if (dupDocs.length > 0) {
      const existing = await Event.find(
        { organization_id: organizationId, transaction_id: { $in: dupDocs.map((d) => d.doc.transaction_id) } },
        { transaction_id: 1 },
      ).lean();
      const idByTransaction = new Map(existing.map((e) => [e.transaction_id, e._id]));
      for (const d of dupDocs) {
        // Two events of one batch with the same transaction_id: the first is stored, the second is a duplicate.
        outcomes[d.index] = { status: 'duplicate', existingEventId: idByTransaction.get(d.doc.transaction_id) ?? null };
      }
    }
    for (const d of stored) outcomes[d.index] = { status: 'created', event: d.doc };
    countOutcomes(outcomes);

    await this.rollUp(stored);
    if (this.alerts && subscriptions.some(hasUsageAlerts)) {
      // Duplicates too: a retry after a failed check checks again.
      await this.alerts.check(organizationId, touchedWithAlerts(docs, subscriptions, customers, clockTimes, now));
    }
    if (this.inAdvance) {
      const subscriptionsById = new Map(subscriptions.map((s) => [s._id, s]));
      const billedNow = new Map<string, string[]>();
      for (const { doc, metric } of stored) {
        for (const subscriptionId of doc.subscription_ids) {
          const plan = plans.get(subscriptionsById.get(subscriptionId)?.plan_id ?? '');
          if (!plan?.charges.some((c) => c.billable_metric_id === metric._id && billedPerEvent(c, metric))) continue;
          billedNow.set(subscriptionId, [...(billedNow.get(subscriptionId) ?? []), doc._id]);
        }
      }
      await Promise.all([...billedNow].map(([subscriptionId, eventIds]) => this.inAdvance!(subscriptionId, eventIds)));
    }
    return outcomes.map((o) => o!);
  }

  /** The frozen time of each live test clock of these customers (no query when none is on a clock). */
  private async clockTimes(customers: Pick<CustomerDoc, 'test_clock_id'>[]): Promise<Map<string, Date>> {
    const ids = [...new Set(customers.flatMap((c) => (c.test_clock_id ? [c.test_clock_id] : [])))];
    if (ids.length === 0) return new Map();
    const clocks = await this.db.models.TestClock.find({ _id: { $in: ids }, deleted_at: null }, { frozen_time: 1 }).lean();
    return new Map(clocks.map((c) => [c._id, c.frozen_time]));
  }

  /** Adds the stored events to daily_usage: one upsert per (subscription, metric, day, dimensions). */
  private async rollUp(stored: { doc: EventDoc; metric: MetricView; timezone: string }[]): Promise<void> {
    const rows = new Map<
      string,
      { filter: Record<string, unknown>; combine: 'add' | 'max'; value: Dec; count: number; insert: Record<string, unknown> }
    >();
    // One reader per metric for the whole batch: an expression is parsed once, not per event.
    const readers = new Map<string, ReturnType<typeof dailyContributionReader> | null>();
    const readerOf = (metric: MetricView) => {
      if (!readers.has(metric._id)) readers.set(metric._id, dailyRollUpSupport(metric).exact ? dailyContributionReader(metric) : null);
      return readers.get(metric._id)!;
    };
    for (const { doc, metric, timezone } of stored) {
      const read = readerOf(metric);
      if (doc.subscription_ids.length === 0 || !read) continue;
      const contribution = read({ transactionId: doc.transaction_id, timestamp: doc.timestamp, properties: doc.properties });
      if (!contribution) continue; // not numeric: contributes nothing (and counts nothing)
      const date = localDate(doc.timestamp, timezone);
      for (const subscriptionId of doc.subscription_ids) {
        const id = dailyRowId(subscriptionId, metric._id, date, doc.dimensions_key);
        const row = rows.get(id);
        if (row) {
          row.value = contribution.combine === 'add' ? row.value.plus(contribution.value) : Dec.max(row.value, contribution.value);
          row.count += 1;
        } else {
          rows.set(id, {
            filter: { _id: id },
            combine: contribution.combine,
            value: contribution.value,
            count: 1,
            insert: {
              organization_id: doc.organization_id,
              subscription_id: subscriptionId,
              billable_metric_id: metric._id,
              usage_date: date,
              dimensions_key: doc.dimensions_key,
              created_at: doc.created_at,
            },
          });
        }
      }
    }
    if (rows.size > 0) {
      const ops: AnyBulkWriteOperation[] = [...rows.values()].map((row) => ({
        updateOne: {
          filter: row.filter,
          update:
            row.combine === 'add'
              ? {
                  $inc: { usage_value: toDecimal128(row.value), events_count: row.count },
                  $setOnInsert: row.insert,
                  $set: { updated_at: new Date() },
                }
              : {
                  $max: { usage_value: toDecimal128(row.value) },
                  $inc: { events_count: row.count },
                  $setOnInsert: row.insert,
                  $set: { updated_at: new Date() },
                },
          upsert: true,
        },
      }));
      // Two processes creating the same daily row at once: the loser updates it (bulkUpsert).
      await bulkUpsert(this.db.models.DailyUsage.collection, ops);
    }
  }
}
