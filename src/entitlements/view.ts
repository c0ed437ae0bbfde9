// What the customer of a subscription may use: its current plan's entitlements, read on every
// request of GET /v1/subscriptions/{external_id}/entitlements (goal: p99 under 5 ms).
//
// Several API processes answer it and a worker changes plans at period boundaries, so the cache is
// built so that no process ever needs to be told anything:
// - The subscription -> plan link is never cached: each request reads the subscription (one
//   lookup on the unique (organization_id, external_id) index). A plan change, by the API at once
//   or by the worker at a downgrade's boundary, is therefore visible at the very next request in
//   every process.
// - A plan's entitlements (with their features) are cached per process, keyed by (organization,
//   plan), under the version of the organization's entitlements stamp read before they were
//   loaded. Every write to a feature or an entitlement, in any process, increments that stamp
//   after it wrote (bumpEntitlementsStamp). Each request reads the stamp in parallel with the
//   subscription (same round trip) and serves the cached entry only while the versions are equal:
//   a write is visible at the next request everywhere, with no TTL to tune and no stale window.
//   Read before the write and loaded after it, an entry holds newer data under an older version:
//   it is simply reloaded once more. The stamp must never be bumped before the write it covers.
// So a request costs the API key lookup plus one round trip of two indexed point reads; a miss
// (the first request after a write, or of a plan) adds two reads.
import type { Db } from '../db';
import type { EntitlementDoc, EntitlementStampDoc } from '../db/models/entitlement';
import type { FeatureDoc } from '../db/models/feature';
import type { SubscriptionDoc } from '../db/models/subscription';
import type { EntitlementValue } from '../domain/entitlements';
import type { GrantedEntitlement } from '../resources/feature';

/** Increments the organization's entitlements stamp. Call it after every feature or entitlement write. */
export async function bumpEntitlementsStamp(db: Db, organizationId: string): Promise<void> {
  await stamps(db).updateOne({ _id: organizationId }, { $inc: { version: 1 } }, { upsert: true });
}

/** The stamps, through the driver: the hot path reads one on every request and needs no casting. */
const stamps = (db: Db) => db.connection.collection<EntitlementStampDoc>('entitlement_stamps');

const MAX_ENTRIES = 20_000;

/**
 * Values stored under the version they were read at; an entry answers only for that version. In
 * the style of src/usage/catalog-view.ts's Memo, with a version check in place of its TTL.
 */
class StampedMemo<V> {
  private readonly entries = new Map<string, { version: number; value: V }>();
  /** Loads on their way, shared by the requests that miss the same entry meanwhile. */
  private readonly loads = new Map<string, Promise<V>>();

  async get(key: string, version: number, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && hit.version === version) return hit.value;
    const loadKey = `${key}@${version}`;
    let pending = this.loads.get(loadKey);
    if (!pending) {
      pending = load()
        .then((value) => {
          const current = this.entries.get(key);
          // A slower load of an older version never replaces a newer entry.
          if (!current || current.version <= version) {
            if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
            this.entries.set(key, { version, value });
          }
          return value;
        })
        .finally(() => this.loads.delete(loadKey));
      this.loads.set(loadKey, pending);
    }
    return pending;
  }
}

type SubscriptionRow = Pick<SubscriptionDoc, '_id' | 'external_id' | 'plan_id' | 'status'>;

export interface SubscriptionEntitlements {
  subscription: SubscriptionRow;
  entitlements: GrantedEntitlement[];
}

/** Only an active subscription (in trial or not) grants its plan's entitlements. */
const GRANTING_STATUSES: ReadonlySet<string> = new Set(['active']);

export class EntitlementView {
  private readonly plans = new StampedMemo<GrantedEntitlement[]>();

  constructor(private readonly db: Db) {}

  /**
   * The entitlements of the subscription addressed by `idOrExternalId` (its external_id first, then
   * its id), or null when the organization has no such subscription.
   */
  async forSubscription(organizationId: string, idOrExternalId: string): Promise<SubscriptionEntitlements | null> {
    const [subscription, version] = await Promise.all([this.subscription(organizationId, idOrExternalId), this.stamp(organizationId)]);
    if (!subscription) return null;
    if (!GRANTING_STATUSES.has(subscription.status)) return { subscription, entitlements: [] };
    const entitlements = await this.plans.get(`${organizationId}|${subscription.plan_id}`, version, () =>
      this.load(organizationId, subscription.plan_id),
    );
    return { subscription, entitlements };
  }

  private async subscription(organizationId: string, idOrExternalId: string): Promise<SubscriptionRow | null> {
    const subscriptions = this.db.models.Subscription.collection;
    const projection = { external_id: 1, plan_id: 1, status: 1 };
    // Two point reads on unique indexes rather than one $or, which the stand-in answers by a scan.
    return (
      (await subscriptions.findOne<SubscriptionRow>({ organization_id: organizationId, external_id: idOrExternalId }, { projection })) ??
      (await subscriptions.findOne<SubscriptionRow>({ _id: idOrExternalId as never, organization_id: organizationId }, { projection }))
    );
  }

  private async stamp(organizationId: string): Promise<number> {
    const doc = await stamps(this.db).findOne({ _id: organizationId }, { projection: { version: 1 } });
    return doc?.version ?? 0;
  }

  /** A plan's entitlements of live features, by feature code. */
  private async load(organizationId: string, planId: string): Promise<GrantedEntitlement[]> {
    const rows = await this.db.models.Entitlement.collection
      .find<Pick<EntitlementDoc, 'feature_id' | 'value_json'>>(
        { organization_id: organizationId, plan_id: planId },
        { projection: { feature_id: 1, value_json: 1 } },
      )
      .toArray();
    if (rows.length === 0) return [];
    const features = await this.db.models.Feature.collection
      .find<Pick<FeatureDoc, '_id' | 'code' | 'name' | 'feature_type'>>(
        { organization_id: organizationId, _id: { $in: rows.map((r) => r.feature_id) } as never, deleted_at: null },
        { projection: { code: 1, name: 1, feature_type: 1 } },
      )
      .toArray();
    const byId = new Map(features.map((f) => [f._id, f]));
    const granted: GrantedEntitlement[] = [];
    for (const row of rows) {
      const feature = byId.get(row.feature_id);
      if (!feature) continue;
      granted.push({
        feature_id: feature._id,
        feature_code: feature.code,
        feature_name: feature.name,
        feature_type: feature.feature_type,
        value: JSON.parse(row.value_json) as EntitlementValue,
      });
    }
    return granted.sort((a, b) => (a.feature_code < b.feature_code ? -1 : a.feature_code > b.feature_code ? 1 : 0));
  }
}
