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
}

export class CatalogView {
  private readonly metrics = new Memo<MetricView>(MEMO_MS);
  private readonly metricIds = new Memo<MetricView>(MEMO_MS);
  private readonly plans = new Memo<PlanView>(MEMO_MS);
  private readonly terms = new Memo<PlanTerms>(MEMO_MS);

  constructor(private readonly db: Db) {}

  /** Live metrics of the organization by code; unknown codes are absent from the map. */
  async metricsByCode(organizationId: string, codes: string[]): Promise<Map<string, MetricView>> {
    const now = Date.now();
    const found = new Map<string, MetricView>();
    const missing: string[] = [];
    for (const code of codes) {
      const hit = this.metrics.get(`${organizationId}|${code}`, now);
      if (hit) found.set(code, hit);
      else missing.push(code);
    }
    if (missing.length > 0) {
      const docs = await this.db.connection
        .collection<MetricView>('billable_metrics')
        .find({ organization_id: organizationId, code: { $in: missing }, deleted_at: null })
        .toArray();
      for (const doc of docs) {
        const metric = { ...doc, filters: doc.filters ?? [] };
        this.metrics.set(`${organizationId}|${doc.code}`, metric, now);
        found.set(doc.code, metric);
      }
    }
    return found;
  }

  /** Metrics by id, deleted ones too (a plan may still bill one); memoized like the others. */
  async metricsById(organizationId: string, ids: string[]): Promise<Map<string, MetricView>> {
    const now = Date.now();
    const found = new Map<string, MetricView>();
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      const hit = this.metricIds.get(`${organizationId}|${id}`, now);
      if (hit) found.set(id, hit);
      else missing.push(id);
    }
    if (missing.length > 0) {
      const docs = await this.db.connection
        .collection<MetricView>('billable_metrics')
        .find({ organization_id: organizationId, _id: { $in: missing } })
        .toArray();
      for (const doc of docs) {
        const metric = { ...doc, filters: doc.filters ?? [] };
        this.metricIds.set(`${organizationId}|${doc._id}`, metric, now);
        found.set(doc._id, metric);
      }
    }
    return found;
  }

  /**
   * What a plan's invoices need besides its charges: its minimum commitment (null: none) and how
   * many usage thresholds it has. Memoized like the plan (`fresh`: read now).
   */
  async planTerms(planId: string, options: { fresh?: boolean } = {}): Promise<PlanTerms> {
    const now = Date.now();
    const hit = options.fresh ? undefined : this.terms.get(planId, now);
    if (hit) return hit;
    const [commitment, thresholds] = await Promise.all([
      this.db.models.Commitment.findOne({ plan_id: planId }, { amount_cents: 1 }).lean(),
      this.db.models.UsageThreshold.countDocuments({ plan_id: planId }),
    ]);
    const terms = { commitmentCents: commitment ? fromDecimal128(commitment.amount_cents)! : null, thresholds };
    this.terms.set(planId, terms, now);
    return terms;
  }

  async plansById(ids: string[], options: { fresh?: boolean } = {}): Promise<Map<string, PlanView>> {
    const now = Date.now();
    const found = new Map<string, PlanView>();
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      const hit = options.fresh ? undefined : this.plans.get(id, now);
      if (hit) found.set(id, hit);
      else missing.push(id);
    }
    if (missing.length > 0) {
      const docs = await this.db.connection
        .collection<PlanView>('plans')
        .find({ _id: { $in: missing } })
        .toArray();
      for (const doc of docs) {
        const plan = { ...doc, charges: (doc.charges ?? []).map((c) => ({ ...c, filters: c.filters ?? [] })) };
        this.plans.set(doc._id, plan, now);
        found.set(doc._id, plan);
      }
    }
    return found;
  }
}
