// Usage alerts (docs/usage-alerts.md): checked as events arrive, never by polling subscriptions.
//
// Cost: ingestion already reads every subscription an event goes to; a subscription with alerts
// carries `usage_alerts_count` > 0 (kept by the alerts API with $inc), so an organization without
// alerts pays nothing at all, not even a query. For subscriptions with alerts, one indexed query
// reads their alerts, then their current period's usage is priced by computeChargeUsage (the code
// current_usage and invoices use), restricted to the charges the alerts watch.
//
// Exactly once per crossing: a crossing is a trigger document whose _id and unique index are
// (alert, period start, revision, crossing). Concurrent checks in several processes all try to
// insert it; only the one whose insert wins emits `usage_alert.triggered`.
//
// Durability: the check runs inside Ingestor.ingest, before the events are acknowledged. If it
// fails, the request fails; the client's retry (a duplicate) checks the same subscriptions again.
// A trigger recorded whose event was not yet emitted (the process died in between) is emitted by
// the next check of its alert (emission is idempotent: the event id derives from the trigger's).
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { isDuplicateKeyError } from '../db';
import { toDecimal128, fromDecimal128 } from '../db/decimal';
import type { SubscriptionDoc } from '../db/models/subscription';
import type { UsageAlertDoc } from '../db/models/usage-alert';
import type { UsageAlertTriggerDoc } from '../db/models/usage-alert-trigger';
import { Dec, sum } from '../domain/money';
import { deterministicId } from '../ids';
import { toUsageAlertTriggerResource } from '../resources/usage-alert';
import { emitEvent, type EmitDeps } from '../webhooks/emit-event';
import type { CatalogView } from './catalog-view';
import { currentRange, type CurrentRange } from './current-range';
import { computeChargeUsage } from './period-usage';

/** Crossings recorded by one check at most (a recurring alert with a tiny threshold and a huge batch). */
const MAX_CROSSINGS_PER_CHECK = 100;

/** A subscription that received events, with its customer's time zone and present (test clock time). */
export interface TouchedSubscription {
  subscription: SubscriptionDoc;
  timezone: string;
  now: Date;
  /** The metrics the events were for: an alert on another metric cannot have been crossed (absent: any). */
  metricIds?: Set<string>;
}

/** The counter the alerts API keeps on a subscription document (not part of the workflow's projection). */
export function hasUsageAlerts(subscription: SubscriptionDoc): boolean {
  return (subscription.usage_alerts_count ?? 0) > 0;
}

/** Adds `delta` to the subscription's alert count: +1 before an alert is created, -1 after one is deleted. */
export async function countUsageAlert(db: Db, subscriptionId: string, delta: 1 | -1): Promise<void> {
  await db.models.Subscription.collection.updateOne({ _id: subscriptionId as never }, { $inc: { usage_alerts_count: delta } });
}

export interface AlertMeasure {
  alert: UsageAlertDoc;
  range: CurrentRange;
  value: Decimal;
  threshold: Decimal;
  /** Multiples of the threshold reached (capped at 1 for a one-shot alert). */
  crossings: number;
}

function crossingsOf(alert: UsageAlertDoc, value: Decimal, threshold: Decimal): number {
  const reached = value.div(threshold).floor().toNumber();
  return alert.recurring ? reached : Math.min(reached, 1);
}

/**
 * Measures the alerts of one subscription over its current period: units or amounts of the charges
 * they watch, priced by computeChargeUsage (one call for all of them).
 */
export async function measureAlerts(
  db: Db,
  catalog: CatalogView,
  touched: TouchedSubscription,
  alerts: UsageAlertDoc[],
): Promise<AlertMeasure[]> {
  const { subscription, timezone, now } = touched;
  const plan = (await catalog.plansById([subscription.plan_id])).get(subscription.plan_id);
  if (!plan) return [];
  const range = currentRange(subscription, plan, timezone, now);
  const everyCharge = alerts.some((a) => a.alert_type === 'current_usage_amount');
  const watched = new Set(alerts.map((a) => a.billable_metric_id));
  const charges = plan.charges.filter((c) => everyCharge || watched.has(c.billable_metric_id));
  const metrics = await catalog.metricsById(subscription.organization_id, [...new Set(charges.map((c) => c.billable_metric_id))]);
  const usage =
    charges.length === 0
      ? []
      : await computeChargeUsage(db, { ...plan, charges }, metrics, {
          subscriptionId: subscription._id,
          organizationId: subscription.organization_id,
          from: range.from,
          to: range.period.to,
          subscriptionStartedAt: subscription.started_at,
          timezone,
          now,
          proration: range.proration,
        });
  return alerts.map((alert) => {
    const mine = usage.filter(
      (u) => alert.alert_type === 'current_usage_amount' || u.charge.billable_metric_id === alert.billable_metric_id,
    );
    // Every charge of one metric counts the same events: the units are the first one's.
    const value =
      alert.alert_type === 'billable_metric_current_usage_units'
        ? (mine[0]?.fees.units ?? new Dec(0))
        : sum(mine.map((u) => u.fees.amount));
    const threshold = fromDecimal128(alert.threshold)!;
    return { alert, range, value, threshold, crossings: crossingsOf(alert, value, threshold) };
  });
}

export function triggerIdOf(alertId: string, periodFrom: Date, revision: number, crossing: number): string {
  return deterministicId(`usage-alert-trigger/${alertId}/${periodFrom.toISOString()}/${revision}/${crossing}`);
}

/** Checks the usage alerts of subscriptions that just received events (see the header). */
export class UsageAlertChecker {
  constructor(
    private readonly db: Db,
    private readonly catalog: CatalogView,
    private readonly emitDeps: EmitDeps,
  ) {}

  async check(organizationId: string, touched: TouchedSubscription[]): Promise<void> {
    const watched = touched.filter((t) => t.subscription.status === 'active' && hasUsageAlerts(t.subscription));
    if (watched.length === 0) return;
    const { UsageAlert, UsageAlertTrigger } = this.db.models;
    const alerts = await UsageAlert.find({
      subscription_id: { $in: watched.map((t) => t.subscription._id) },
      deleted_at: null,
    }).lean<UsageAlertDoc[]>();
    if (alerts.length === 0) return;
    const bySubscription = new Map<string, UsageAlertDoc[]>();
    for (const alert of alerts) bySubscription.set(alert.subscription_id, [...(bySubscription.get(alert.subscription_id) ?? []), alert]);

    const [unemitted] = await Promise.all([
      UsageAlertTrigger.find({ usage_alert_id: { $in: alerts.map((a) => a._id) }, emitted_at: null }).lean<UsageAlertTriggerDoc[]>(),
      ...watched.map(async (t) => {
        const mine = bySubscription
          .get(t.subscription._id)
          ?.filter((a) => a.billable_metric_id === null || !t.metricIds || t.metricIds.has(a.billable_metric_id));
        if (!mine?.length) return;
        const measures = await measureAlerts(this.db, this.catalog, t, mine);
        for (const measure of measures) await this.record(organizationId, t, measure);
      }),
    ]);
    // Triggers another check recorded but did not emit (it died in between), found before this
    // check's own inserts: emitting them again is harmless, the event id is the trigger's.
    const alertById = new Map(alerts.map((a) => [a._id, a]));
    for (const trigger of unemitted) {
      const alert = alertById.get(trigger.usage_alert_id);
      const customerId = watched.find((t) => t.subscription._id === trigger.subscription_id)?.subscription.customer_id ?? null;
      if (alert) await this.emit(organizationId, alert, trigger, customerId);
    }
  }

  /** Records the crossings not yet recorded; emits the event of each one this process inserted. */
  private async record(organizationId: string, touched: TouchedSubscription, measure: AlertMeasure): Promise<void> {
    const { alert, range, crossings } = measure;
    const periodFrom = range.period.from;
    const last = alert.last_crossing;
    const recorded = last && last.period_from.getTime() === periodFrom.getTime() && last.revision === alert.revision ? last.crossing : 0;
    if (crossings <= recorded) return;
    const first = Math.max(recorded + 1, crossings - MAX_CROSSINGS_PER_CHECK + 1);
    const now = new Date();
    const docs: UsageAlertTriggerDoc[] = [];
    for (let crossing = first; crossing <= crossings; crossing++) {
      docs.push({
        _id: triggerIdOf(alert._id, periodFrom, alert.revision, crossing),
        organization_id: organizationId,
        usage_alert_id: alert._id,
        subscription_id: alert.subscription_id,
        period_from: periodFrom,
        period_to: range.period.to,
        revision: alert.revision,
        crossing,
        threshold_value: toDecimal128(measure.threshold.times(crossing)),
        current_value: toDecimal128(measure.value),
        triggered_at: touched.now,
        emitted_at: null,
        created_at: now,
        updated_at: now,
      });
    }
    const { UsageAlert, UsageAlertTrigger } = this.db.models;
    const won = await insertOrIgnore(UsageAlertTrigger.collection, docs);
    // The shortcut for later checks; a stale one only costs ignored inserts.
    await UsageAlert.collection.updateOne(
      {
        _id: alert._id as never,
        $or: [
          { last_crossing: null },
          { 'last_crossing.period_from': { $ne: periodFrom } },
          { 'last_crossing.revision': { $ne: alert.revision } },
          { 'last_crossing.crossing': { $lt: crossings } },
        ],
      },
      { $set: { last_crossing: { period_from: periodFrom, revision: alert.revision, crossing: crossings } } },
    );
    if (won.length === 0) return;
    await UsageAlert.collection.updateOne({ _id: alert._id as never }, { $max: { last_triggered_at: touched.now } });
    for (const trigger of won) await this.emit(organizationId, alert, trigger, touched.subscription.customer_id);
  }

  private async emit(
    organizationId: string,
    alert: UsageAlertDoc,
    trigger: UsageAlertTriggerDoc,
    customerId: string | null,
  ): Promise<void> {
    await emitEvent(this.emitDeps, {
      organizationId,
      type: 'usage_alert.triggered',
      idempotencyKey: `usage_alert_trigger/${trigger._id}/triggered`,
      object: toUsageAlertTriggerResource(trigger, alert),
      occurredAt: trigger.triggered_at,
      customerId,
    });
    await this.db.models.UsageAlertTrigger.updateOne({ _id: trigger._id, emitted_at: null }, { $set: { emitted_at: new Date() } });
  }
}

/** Inserts every document it can; answers those this call inserted (a duplicate key means another did). */
async function insertOrIgnore(
  collection: { insertMany(docs: never[], options: { ordered: boolean }): Promise<unknown> },
  docs: UsageAlertTriggerDoc[],
): Promise<UsageAlertTriggerDoc[]> {
  try {
    await collection.insertMany(docs as never[], { ordered: false });
    return docs;
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    const writeErrors = (err as { writeErrors?: { code?: number; index: number }[] | { code?: number; index: number } }).writeErrors;
    const list = Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : [];
    if (list.some((w) => w.code !== 11000)) throw err;
    const lost = new Set(list.map((w) => w.index));
    // A single-document duplicate may come back without writeErrors: then nothing was inserted.
    if (list.length === 0) return [];
    return docs.filter((_, i) => !lost.has(i));
  }
}
