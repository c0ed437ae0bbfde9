import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isDuplicateKeyError, type Models } from '../../db';
import { newId } from '../../db/base';
import type { IdempotencyKeyDoc } from '../../db/models/idempotency-key';
import { Conflict, Validation } from '../../errors';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route honours `Idempotency-Key` (api-contract.md "Idempotent requests"): every POST that
     * creates a resource or moves money sets it, and merges `idempotencyHeaders` into its
     * `headers` schema so that the OpenAPI document shows the header.
     */
    idempotent?: boolean;
  }
}

/** How long the first answer to a key is kept (api-contract.md). */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * An `in_progress` claim older than this belongs to a request whose API process died before it
 * answered (its onSend never ran): the same request may then take the key over and run again.
 * Far longer than a request runs (the longest deadline a route sets is the subscription's 20 s
 * readiness wait), so a live request is not overtaken. Running again is what a retry without a key
 * would do; the operations behind the flagged routes guard their own state (an invoice finalizes
 * once; a one-off invoice derives its own key from this one).
 */
export const IN_PROGRESS_TAKEOVER_MS = 5 * 60 * 1000;

const HEADER = 'idempotency-key';
const MAX_KEY_LENGTH = 255;

/** The header as each flagged route declares it: `headers: idempotencyHeaders` (or `.extend(...)`). */
export const idempotencyHeaders = z
  .object({
    [HEADER]: z
      .string()
      .min(1)
      .max(MAX_KEY_LENGTH)
      .optional()
      .describe(
        'Makes the request safe to retry: for 24 hours a repeat with the same key, path and body gets the first answer again ' +
          '(with Idempotent-Replayed: true); the same key with another path or body is 422 idempotency_key_reused; ' +
          'a repeat while the first still runs is 409 idempotency_key_in_use. A 4xx or 5xx answer is not kept.',
      ),
  })
  .loose();

/** JSON with object keys sorted, so that the same body sent with its keys in another order is the same request. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** sha256 of the method, the path (with its query string) and the canonical body. */
export function idempotencyRequestHash(method: string, path: string, body: unknown): string {
  const canonicalBody = body === undefined ? '' : canonicalJson(body);
  return createHash('sha256').update(`${method}\n${path}\n${canonicalBody}`).digest('hex');
}

interface PendingRequest {
  key: string;
  hash: string;
  /** The `_id` of the row this request claimed, once it has. */
  claimId?: string;
}

type ClaimOutcome = { claimed: string } | { replay: IdempotencyKeyDoc };

/** Claims after a released or taken-over row are retried this many times before answering 409. */
const CLAIM_ATTEMPTS = 3;

/**
 * Applies `Idempotency-Key` to the routes of the scope that declare `config: { idempotent: true }`.
 * Register it after the API key auth (it needs `request.organizationId`; keys are per
 * organization). Per flagged request with the header: the hash is taken from the body as sent
 * (preValidation, before zod transforms it), the key is claimed once the body is valid
 * (preHandler: a validation 422 costs no write), and the answer is recorded before it is sent
 * (onSend), so a retry that follows the answer always finds it.
 */
export function registerIdempotency(app: FastifyInstance, models: Models, now: () => Date): void {
  const { IdempotencyKey } = models;
  const pending = new WeakMap<FastifyRequest, PendingRequest>();

  async function claim(request: FastifyRequest, { key, hash }: PendingRequest): Promise<ClaimOutcome> {
    const organizationId = request.organizationId;
    for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
      const at = now();
      const row: IdempotencyKeyDoc = {
        _id: newId(),
        organization_id: organizationId,
        key,
        method: request.method,
        path: request.url,
        request_hash: hash,
        state: 'in_progress',
        response_status: null,
        response_body: null,
        content_type: null,
        created_at: at,
        expires_at: new Date(at.getTime() + IDEMPOTENCY_KEY_TTL_MS),
      };
      try {
        await IdempotencyKey.create(row);
        return { claimed: row._id };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      // Exactly the unique index's keys: the stand-in answers only such a query from the index.
      const existing = await IdempotencyKey.findOne({ organization_id: organizationId, key }).lean<IdempotencyKeyDoc>();
      if (!existing) continue; // released (a 4xx or 5xx) since our insert: claim again
      // Expired but not swept yet: the key is free. Deleted by _id, so a racer's new claim survives.
      if (existing.expires_at.getTime() <= at.getTime()) {
        await IdempotencyKey.deleteOne({ _id: existing._id });
        continue;
      }
      if (existing.request_hash !== hash) {
        const elsewhere = existing.method !== request.method || existing.path !== request.url;
        throw new Validation(
          [
            {
              path: HEADER,
              message: elsewhere
                ? `this key was used for ${existing.method} ${existing.path}; send another request with a new key`
                : 'this key was used with another request body; send another request with a new key',
            },
          ],
          'idempotency_key_reused',
        );
      }
      if (existing.state === 'completed') return { replay: existing };
      if (at.getTime() - existing.created_at.getTime() >= IN_PROGRESS_TAKEOVER_MS) {
        request.log.warn({ idempotencyKey: key, claimedAt: existing.created_at }, 'taking over an abandoned idempotency key');
        await IdempotencyKey.deleteOne({ _id: existing._id });
        continue;
      }
      break;
    }
    throw new Conflict('A request with this Idempotency-Key is still running; retry once it has answered', {}, 'idempotency_key_in_use');
  }

  function replay(reply: FastifyReply, kept: IdempotencyKeyDoc): FastifyReply {
    void reply.code(kept.response_status ?? 200).header('idempotent-replayed', 'true');
    if (kept.content_type) void reply.header('content-type', kept.content_type);
    // A string with a JSON content type is sent as it is: the kept bytes, not serialized again.
    return reply.send(kept.response_body ?? '');
  }

  /** The answer as kept, or null when it cannot be kept (a stream: no flagged route sends one). */
  function keptBody(payload: unknown): string | null {
    if (typeof payload === 'string') return payload;
    if (Buffer.isBuffer(payload)) return payload.toString('utf8');
    if (payload === null || payload === undefined) return '';
    return null;
  }

  app.addHook('preValidation', async (request) => {
    if (!request.routeOptions.config.idempotent || !request.organizationId) return;
    const key = request.headers[HEADER];
    if (key === undefined) return;
    if (typeof key !== 'string' || key.length < 1 || key.length > MAX_KEY_LENGTH) {
      throw Validation.field(HEADER, `must be 1 to ${MAX_KEY_LENGTH} characters`);
    }
    pending.set(request, { key, hash: idempotencyRequestHash(request.method, request.url, request.body) });
  });

  app.addHook('preHandler', async (request, reply) => {
    const entry = pending.get(request);
    if (!entry) return;
    const outcome = await claim(request, entry);
    if ('replay' in outcome) return replay(reply, outcome.replay);
    entry.claimId = outcome.claimed;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const entry = pending.get(request);
    const claimId = entry?.claimId;
    if (!entry || !claimId) return payload; // no key, a replay, or refused before the claim
    entry.claimId = undefined;
    const status = reply.statusCode;
    const body = keptBody(payload);
    try {
      if (status >= 200 && status < 400 && body !== null) {
        // By _id: a claim taken over meanwhile (see IN_PROGRESS_TAKEOVER_MS) is not ours to complete.
        const contentType = reply.getHeader('content-type');
        await IdempotencyKey.updateOne(
          { _id: claimId },
          {
            $set: {
              state: 'completed',
              response_status: status,
              response_body: body,
              content_type: contentType === undefined ? null : String(contentType),
            },
          },
        );
      } else {
        // A 4xx is not kept (api-contract.md): the caller fixes the request and reuses the key.
        // A 5xx is not kept either: the request may not have done its work, and a retry with the
        // same key must be able to run it again rather than replay the failure.
        await IdempotencyKey.deleteOne({ _id: claimId });
      }
    } catch (err) {
      // The answer stands; the claim stays in_progress until IN_PROGRESS_TAKEOVER_MS frees it.
      request.log.error({ err, idempotencyKey: entry.key }, 'could not record the answer to an idempotency key');
    }
    return payload;
  });
}
