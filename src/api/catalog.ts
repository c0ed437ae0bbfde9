// Shared by the catalog routes (billable metrics, plans, taxes, coupons, add-ons, ...): lookups by
// id or code, pages of a list, and the duplicate-code conflict.
import type { FastifyReply } from 'fastify';
import type { Model } from 'mongoose';
import { isDuplicateKeyError } from '../db';
import { Conflict, NotFound } from '../errors';
import { sendList } from './http';

/** Live (not soft-deleted) documents of one organization. */
export function live(organizationId: string): { organization_id: string; deleted_at: null } {
  return { organization_id: organizationId, deleted_at: null };
}

/**
 * A live document of the organization addressed by id or by code (api-contract.md: resources
 * with a code may be addressed by either). Another organization's, or a deleted one, is a 404.
 */
export async function findByIdOrCode<T>(
  model: Model<T>,
  organizationId: string,
  idOrCode: string,
  what: { name: string; code: string },
): Promise<T> {
  const doc = await model
    .findOne({ ...live(organizationId), $or: [{ _id: idOrCode }, { code: idOrCode }] } as never)
    .lean<T>();
  if (!doc) throw new NotFound(`${what.name} not found`, what.code);
  return doc;
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
