import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Models } from '../../db';
import type { ApiKeyDoc } from '../../db/models/api-key';
import { Unauthorized } from '../../errors';

declare module 'fastify' {
  interface FastifyRequest {
    /** The organization of the authenticated API key; every query filters on it. */
    organizationId: string;
    apiKeyId: string;
  }
}

export const API_KEY_PREFIX = 'bsk_live_';
const RAW_KEY_PATTERN = /^bsk_live_[A-Za-z0-9_-]{43}$/;
const LAST_USED_WRITE_INTERVAL_MS = 1000;

export function hashApiKey(rawKey: string): string {
  return createHash('sha256').update(rawKey).digest('hex');
}

/** The bearer token of a request, or null when the header is absent or not "Bearer <token>". */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

type KeyRow = Pick<ApiKeyDoc, '_id' | 'organization_id' | 'status' | 'expires_at' | 'last_used_at'>;

/**
 * Authenticates every request of the scope it is registered in. Cost: one lookup on the unique
 * key_hash index, shared by the requests with the same key that arrive while it is on its way,
 * nothing cached after it, so a revoked key fails on the first request that arrives once its
 * revocation's lookup could see it (at most one lookup's time, about a millisecond, later).
 * last_used_at writes are coalesced to one per key per second (api-contract.md), tracked in
 * process memory; that only skips writes, it never admits a request.
 */
export function registerApiKeyAuth(app: FastifyInstance, models: Models, now: () => Date): void {
  const lastWrite = new Map<string, number>();
  // Requests with the same key that arrive while its lookup is on its way share that lookup (a
  // burst of events costs one read, not one per request); the next request after it reads again.
  const lookups = new Map<string, Promise<KeyRow | null>>();
  const lookUp = (hash: string): Promise<KeyRow | null> => {
    let pending = lookups.get(hash);
    if (!pending) {
      // The driver directly: this runs on every request, and the lookup needs no casting.
      pending = models.ApiKey.collection
        .findOne<KeyRow>({ key_hash: hash }, { projection: { organization_id: 1, status: 1, expires_at: 1, last_used_at: 1 } })
        .finally(() => lookups.delete(hash));
      lookups.set(hash, pending);
    }
    return pending;
  };

  app.decorateRequest('organizationId', '');
  app.decorateRequest('apiKeyId', '');
  app.addHook('onRequest', async (request) => {
    if (!request.headers.authorization) throw new Unauthorized('Missing Authorization header: send "Authorization: Bearer <API key>"');
    const token = bearerToken(request);
    if (!token || !RAW_KEY_PATTERN.test(token)) {
      throw new Unauthorized('Malformed Authorization header: expected "Bearer bsk_live_..."');
    }
    const key = await lookUp(hashApiKey(token));
    if (!key) throw new Unauthorized('Unknown API key');
    if (key.status !== 'active') throw new Unauthorized('This API key has been revoked');
    const at = now();
    if (key.expires_at && key.expires_at.getTime() <= at.getTime()) throw new Unauthorized('This API key has expired');

    request.organizationId = key.organization_id;
    request.apiKeyId = key._id;

    const previous = Math.max(lastWrite.get(key._id) ?? 0, key.last_used_at?.getTime() ?? 0);
    if (at.getTime() - previous >= LAST_USED_WRITE_INTERVAL_MS) {
      lastWrite.set(key._id, at.getTime());
      if (lastWrite.size > 10_000) lastWrite.clear();
      models.ApiKey.updateOne({ _id: key._id }, { $max: { last_used_at: at } }, { timestamps: false })
        .exec()
        .catch((err: unknown) => request.log.warn({ err }, 'could not record last_used_at'));
    }
  });
}
