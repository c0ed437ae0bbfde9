// The slices of the catalog that ingestion and usage read: metrics and plans with their charges.
// Read from the raw collections (lean, no casting) with short-lived per-process memo for the hot
// ingestion path. A memo entry only ever speeds up a lookup that would give the same answer a
// few seconds earlier; nothing here admits a request that should be refused.
import type Decimal from 'decimal.js';
import type { Db } from '../db';
import { fromDecimal128 } from '../db/decimal';
import type { AggregationMetric } from '../domain/aggregation/metric';
import type { ChargeModel } from '../domain/charge-models';

export interface MetricView extends AggregationMetric {
  _id: string;
  organization_id: string;
  code: string;
  filters: { key: string; values: string[] }[];
}

export interface ChargeFilterView {
  _id: string;
  values: Record<string, string[]>;
  properties: Record<string, unknown>;
  invoice_display_name?: string | null;
}

export interface ChargeView {
  _id: string;
  billable_metric_id: string;
  charge_model: ChargeModel;
  properties: Record<string, unknown>;
  pay_in_advance: boolean;
  invoiceable?: boolean;
  prorated?: boolean;
  min_amount_cents: unknown;
  max_amount_cents: unknown;
  invoice_display_name?: string | null;
  filters: ChargeFilterView[];
}

export interface PlanView {
  _id: string;
  organization_id: string;
  code: string;
  name: string;
  interval: 'weekly' | 'monthly' | 'quarterly' | 'yearly';
  amount_cents: number;
  currency: string;
  charges: ChargeView[];
}

export interface PlanTerms {
  commitmentCents: Decimal | null;
  thresholds: number;
}

const MEMO_MS = 3000;

class Memo<V> {
  private readonly entries = new Map<string, { at: number; value: V }>();
  constructor(private readonly ttlMs: number) {}
  get(key: string, now: number): V | undefined {
    const hit = this.entries.get(key);
    return hit && now - hit.at < this.ttlMs ? hit.value : undefined;
  }
  set(key: string, value: V, now: number): void {
    if (this.entries.size > 50_000) this.entries.clear();
    this.entries.set(key, { at: now, value });
  }

  /**
   * The values of `keys` (memoized under `scope|key`), the missing ones read together by `load`,
   * which answers them as [key, value] pairs (an unknown key is absent). `fresh`: all read now.
   */
  async many(
    scope: string,
    keys: Iterable<string>,
    load: (missing: string[]) => Promise<[string, V][]>,
    fresh = false,
  ): Promise<Map<string, V>> {
    const now = Date.now();
    const found = new Map<string, V>();
    const missing: string[] = [];
    for (const key of new Set(keys)) {
      const hit = fresh ? undefined : this.get(`${scope}|${key}`, now);
      if (hit) found.set(key, hit);
      else missing.push(key);
    }
    if (missing.length > 0) {
      for (const [key, value] of await load(missing)) {
        this.set(`${scope}|${key}`, value, now);
        found.set(key, value);
      }
    }
    return found;
  }
}

const metricView = (doc: MetricView): MetricView => ({ ...doc, filters: doc.filters ?? [] });

export class CatalogView {
  private readonly metrics = new Memo<MetricView>(MEMO_MS);
  private readonly metricIds = new Memo<MetricView>(MEMO_MS);
  private readonly plans = new Memo<PlanView>(MEMO_MS);
  private readonly terms = new Memo<PlanTerms>(MEMO_MS);

  constructor(private readonly db: Db) {}

  private get metricsCollection() {
    return this.db.connection.collection<MetricView>('billable_metrics');
  }

  /** Live metrics of the organization by code; unknown codes are absent from the map. */
  metricsByCode(organizationId: string, codes: string[]): Promise<Map<string, MetricView>> {
    return this.metrics.many(organizationId, codes, async (missing) =>
      (await this.metricsCollection.find({ organization_id: organizationId, code: { $in: missing }, deleted_at: null }).toArray()).map(
        (doc) => [doc.code, metricView(doc)],
      ),
    );
  }

  /** Metrics by id, deleted ones too (a plan may still bill one); memoized like the others. */
  metricsById(organizationId: string, ids: string[]): Promise<Map<string, MetricView>> {
    return this.metricIds.many(organizationId, ids, async (missing) =>
      (await this.metricsCollection.find({ organization_id: organizationId, _id: { $in: missing } }).toArray()).map((doc) => [
        doc._id,
        metricView(doc),
      ]),
    );
  }

  /**
   * What a plan's invoices need besides its charges: its minimum commitment (null: none) and how
   * many usage thresholds it has. Memoized like the plan (`fresh`: read now).
   */
  async planTerms(planId: string, options: { fresh?: boolean } = {}): Promise<PlanTerms> {
    const terms = await this.terms.many(
      'plan',
      [planId],
      async () => {
        const [commitment, thresholds] = await Promise.all([
          this.db.models.Commitment.findOne({ plan_id: planId }, { amount_cents: 1 }).lean(),
          this.db.models.UsageThreshold.countDocuments({ plan_id: planId }),
        ]);
        return [[planId, { commitmentCents: commitment ? fromDecimal128(commitment.amount_cents)! : null, thresholds }]];
      },
      options.fresh,
    );
    return terms.get(planId)!;
  }

  plansById(ids: string[], options: { fresh?: boolean } = {}): Promise<Map<string, PlanView>> {
    return this.plans.many(
      'plan',
      ids,
      async (missing) =>
        (
          await this.db.connection
            .collection<PlanView>('plans')
            .find({ _id: { $in: missing } })
            .toArray()
        ).map((doc) => [doc._id, { ...doc, charges: (doc.charges ?? []).map((c) => ({ ...c, filters: c.filters ?? [] })) }]),
      options.fresh,
    );
  }
}
