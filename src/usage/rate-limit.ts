// The events rate limit: requests to /v1/events* per organization per rolling minute, shared by
// every API instance through MongoDB (api-contract.md, Events).
//
// Rolling minute, estimated the usual way: the current fixed minute's count plus the previous
// minute's count weighted by how much of it still lies inside the last 60 seconds. Exact at
// minute boundaries for steady traffic, never more than one window's worth off, and it costs one
// atomic $inc (plus a read of the previous window) per request.
import type { Db } from '../db';

const WINDOW_MS = 60_000;

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds when the current window ends. */
  resetAt: number;
  /** Seconds to wait before retrying (when refused). */
  retryAfter: number;
}

export async function consumeEventsRateLimit(db: Db, organizationId: string, limit: number, now: Date): Promise<RateLimitDecision> {
  const { RateLimitWindow } = db.models;
  const windowStart = Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS;
  const previousStart = windowStart - WINDOW_MS;
  const [current, previous] = await Promise.all([
    RateLimitWindow.findOneAndUpdate(
      { _id: `${organizationId}|${windowStart / 1000}` },
      { $inc: { count: 1 }, $setOnInsert: { organization_id: organizationId, window_start: new Date(windowStart) } },
      { upsert: true, returnDocument: 'after', lean: true },
    ).catch(async (err: unknown) => {
      // Two instances opening the same window at once: the loser retries as a plain update.
      if ((err as { code?: number }).code !== 11000) throw err;
      return RateLimitWindow.findOneAndUpdate(
        { _id: `${organizationId}|${windowStart / 1000}` },
        { $inc: { count: 1 } },
        { returnDocument: 'after', lean: true },
      );
    }),
    RateLimitWindow.findById(`${organizationId}|${previousStart / 1000}`, { count: 1 }).lean(),
  ]);
  const elapsed = (now.getTime() - windowStart) / WINDOW_MS;
  const used = (current?.count ?? 1) + Math.floor((previous?.count ?? 0) * (1 - elapsed));
  const resetAt = Math.ceil((windowStart + WINDOW_MS) / 1000);
  const allowed = used <= limit;
  return {
    allowed,
    limit,
    remaining: Math.max(0, limit - used),
    resetAt,
    retryAfter: allowed ? 0 : Math.max(1, resetAt - Math.floor(now.getTime() / 1000)),
  };
}

/** Removes windows older than two minutes (no TTL indexes on the stand-in). */
export async function sweepRateLimitWindows(db: Db, now: Date): Promise<number> {
  const result = await db.models.RateLimitWindow.deleteMany({ window_start: { $lt: new Date(now.getTime() - 2 * WINDOW_MS) } });
  return result.deletedCount ?? 0;
}
