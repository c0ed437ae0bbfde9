// The events rate limit: requests to /v1/events* per organization per rolling minute, shared by
// every API instance through MongoDB (api-contract.md, Events).
//
// Rolling minute, estimated the usual way: the current fixed minute's count plus the previous
// minute's count weighted by how much of it still lies inside the last 60 seconds. Exact at
// minute boundaries for steady traffic, never more than one window's worth off. It costs at most
// one atomic $inc per request (concurrent requests of an organization share one, see Windows) and
// one read of the previous window per minute.
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
  const windowStart = Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS;
  const previousStart = windowStart - WINDOW_MS;
  const windows = windowsOf(db);
  const [count, previous] = await Promise.all([
    windows.increment(organizationId, windowStart),
    windows.closedCount(organizationId, previousStart),
  ]);
  const elapsed = (now.getTime() - windowStart) / WINDOW_MS;
  const used = count + Math.floor(previous * (1 - elapsed));
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

interface Waiter {
  resolve(count: number): void;
  reject(err: unknown): void;
}

/**
 * The windows as this process sees them. Requests of one organization that arrive while its $inc
 * is on its way are counted by the next one together ($inc n), each getting its own place in the
 * count, as if they had been counted one by one: one write per round trip instead of one per
 * request. A window that has ended no longer moves, so its count is read once.
 */
class Windows {
  private readonly queues = new Map<string, Waiter[]>();
  private readonly closed = new Map<string, Promise<number>>();

  constructor(private readonly db: Db) {}

  /** Counts one request in the organization's window; the window's count with it. */
  increment(organizationId: string, windowStart: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const id = `${organizationId}|${windowStart / 1000}`;
      const queue = this.queues.get(id);
      if (queue) {
        queue.push({ resolve, reject });
        return;
      }
      const started: Waiter[] = [{ resolve, reject }];
      this.queues.set(id, started);
      void this.drain(id, organizationId, windowStart, started);
    });
  }

  private async drain(id: string, organizationId: string, windowStart: number, queue: Waiter[]): Promise<void> {
    while (queue.length > 0) {
      const batch = queue.splice(0);
      try {
        const count = await this.add(id, organizationId, windowStart, batch.length);
        batch.forEach((waiter, i) => waiter.resolve(count - batch.length + i + 1));
      } catch (err) {
        for (const waiter of batch) waiter.reject(err);
      }
    }
    this.queues.delete(id);
  }

  private async add(id: string, organizationId: string, windowStart: number, n: number): Promise<number> {
    const { RateLimitWindow } = this.db.models;
    const window = await RateLimitWindow.findOneAndUpdate(
      { _id: id },
      { $inc: { count: n }, $setOnInsert: { organization_id: organizationId, window_start: new Date(windowStart) } },
      { upsert: true, returnDocument: 'after', lean: true },
    ).catch(async (err: unknown) => {
      // Two instances opening the same window at once: the loser retries as a plain update.
      if ((err as { code?: number }).code !== 11000) throw err;
      return RateLimitWindow.findOneAndUpdate({ _id: id }, { $inc: { count: n } }, { returnDocument: 'after', lean: true });
    });
    return window?.count ?? n;
  }

  /** The count of a window that has ended (0 when it had none), read once per process. */
  closedCount(organizationId: string, windowStart: number): Promise<number> {
    const id = `${organizationId}|${windowStart / 1000}`;
    let count = this.closed.get(id);
    if (!count) {
      if (this.closed.size >= 10_000) this.closed.clear();
      count = this.db.models.RateLimitWindow.findById(id, { count: 1 })
        .lean()
        .then((doc) => doc?.count ?? 0);
      this.closed.set(id, count);
      // A failed read is not remembered: the next request reads again.
      count.catch(() => this.closed.delete(id));
    }
    return count;
  }
}

const windowsByDb = new WeakMap<Db, Windows>();

function windowsOf(db: Db): Windows {
  let windows = windowsByDb.get(db);
  if (!windows) {
    windows = new Windows(db);
    windowsByDb.set(db, windows);
  }
  return windows;
}

/** Removes windows older than two minutes (no TTL indexes on the stand-in). */
export async function sweepRateLimitWindows(db: Db, now: Date): Promise<number> {
  const result = await db.models.RateLimitWindow.deleteMany({ window_start: { $lt: new Date(now.getTime() - 2 * WINDOW_MS) } });
  return result.deletedCount ?? 0;
}
