// Shared by the catalog routes (customers, billable metrics, plans, taxes, coupons, add-ons,
// commitments, usage thresholds, webhook endpoints, test clocks) and the subscription routes:
// lookups by id or code that answer the resource's 404, updates and soft deletes of live
// documents, pages of a list, and the duplicate-code conflict.
import type { FastifyReply } from 'fastify';
import type { Model } from 'mongoose';
import { isDuplicateKeyError } from '../db';
import type { PlanDoc } from '../db/models/plan';
import type { SubscriptionDoc } from '../db/models/subscription';
import { Conflict, NotFound } from '../errors';
import { sendList } from './http';

/** How a resource is named in its 404: "<name> not found", with `code` as the error code. */
export interface ResourceName {
  name: string;
  code: string;
}

export function notFound(what: ResourceName): NotFound {
  return new NotFound(`${what.name} not found`, what.code);
}

/** Live (not soft-deleted) documents of one organization. */
export function live(organizationId: string): { organization_id: string; deleted_at: null } {
  return { organization_id: organizationId, deleted_at: null };
}

/**
 * A live document of the organization addressed by its id, or by one of `alternateKeys` (a code,
 * an external_id: api-contract.md lets such resources be addressed by either). Another
 * organization's, or a deleted one, is the resource's 404.
 */
export async function findLive<T>(
  model: Model<T>,
  organizationId: string,
  id: string,
  what: ResourceName,
  alternateKeys: readonly string[] = [],
): Promise<T> {
  const match = alternateKeys.length ? { $or: [{ _id: id }, ...alternateKeys.map((key) => ({ [key]: id }))] } : { _id: id };
  const doc = await model.findOne({ ...live(organizationId), ...match } as never).lean<T>();
  if (!doc) throw notFound(what);
  return doc;
}

/** A live document of the organization addressed by id or by code; 404 otherwise. */
export function findByIdOrCode<T>(model: Model<T>, organizationId: string, idOrCode: string, what: ResourceName): Promise<T> {
  return findLive(model, organizationId, idOrCode, what, ['code']);
}

/**
 * A document of a plan (a commitment, a usage threshold) of the organization, by id, while its plan
 * is live: deleting a plan takes them with it.
 */
export async function findOfLivePlan<T extends { plan_id: string }>(
  model: Model<T>,
  plans: Model<PlanDoc>,
  organizationId: string,
  id: string,
  what: ResourceName,
): Promise<T> {
  const doc = await model.findOne({ _id: id, organization_id: organizationId } as never).lean<T>();
  const planIsLive = doc ? await plans.exists({ _id: doc.plan_id, ...live(organizationId) }) : null;
  if (!doc || !planIsLive) throw notFound(what);
  return doc;
}

/** `$set` on the document `filter` matches; the document after it, or the resource's 404. */
export async function updateOr404<T>(
  model: Model<T>,
  filter: Record<string, unknown>,
  set: Record<string, unknown>,
  what: ResourceName,
): Promise<T> {
  const updated = await model.findOneAndUpdate(filter as never, { $set: set } as never, { returnDocument: 'after' }).lean<T>();
  if (!updated) throw notFound(what);
  return updated;
}

/** `$set` on a live document of the organization; a document deleted meanwhile is the 404. */
export function updateLive<T>(
  model: Model<T>,
  organizationId: string,
  id: string,
  set: Record<string, unknown>,
  what: ResourceName,
): Promise<T> {
  return updateOr404(model, { _id: id, ...live(organizationId) }, set, what);
}

/**
 * Soft delete: stamps `deleted_at` (and `also`) on a live document of the organization and answers
 * it. Deleted meanwhile (or twice) is the 404, as for any deleted resource.
 */
export function softDelete<T>(
  model: Model<T>,
  organizationId: string,
  id: string,
  at: Date,
  what: ResourceName,
  also: Record<string, unknown> = {},
): Promise<T> {
  return updateLive(model, organizationId, id, { deleted_at: at, ...also }, what);
}

/** Removes a document of the organization for good (what has no life of its own); 404 if it is gone. */
export async function deleteOr404<T>(model: Model<T>, organizationId: string, id: string, what: ResourceName): Promise<T> {
  const deleted = await model.findOneAndDelete({ _id: id, organization_id: organizationId } as never).lean<T>();
  if (!deleted) throw notFound(what);
  return deleted;
}

/** Answers one page of a list, newest first, with X-Total-Count. */
export async function listPage<T, R>(
  reply: FastifyReply,
  model: Model<T>,
  filter: Record<string, unknown>,
  page: { skip: number; limit: number },
  serialize: (doc: T) => R,
): Promise<R[]> {
  const [docs, total] = await Promise.all([
    model
      .find(filter as never)
      .sort({ created_at: -1, _id: -1 })
      .skip(page.skip)
      .limit(page.limit)
      .lean<T[]>(),
    model.countDocuments(filter as never),
  ]);
  return sendList(reply, docs.map(serialize), total);
}

/** Runs a write; a duplicate key (code taken) becomes 409 already_exists. */
export async function uniqueWrite<T>(write: () => Promise<T>, conflictMessage: string): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isDuplicateKeyError(err)) throw new Conflict(conflictMessage);
    throw err;
  }
}

/**
 * A subscription of the organization by id or external_id (subscriptions are never soft-deleted),
 * narrowed by `only` (e.g. its statuses); 404 otherwise.
 */
export async function findSubscription(
  model: Model<SubscriptionDoc>,
  organizationId: string,
  idOrExternalId: string,
  only: Record<string, unknown> = {},
): Promise<SubscriptionDoc> {
  const doc = await model
    .findOne({ organization_id: organizationId, ...only, $or: [{ _id: idOrExternalId }, { external_id: idOrExternalId }] } as never)
    .lean<SubscriptionDoc>();
  if (!doc) throw new NotFound('Subscription not found', 'subscription_not_found');
  return doc;
}
