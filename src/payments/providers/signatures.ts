/**
 * The pieces of webhook verification that several adapters share: the header chain of
 * payment-providers.md §1.2, hex HMAC-SHA256 over the exact raw bytes with constant-time
 * comparison, the body hash used as event key by providers without event ids, and the lenient JSON
 * reading that `references()` needs for payloads nobody has verified yet.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

import { InvalidProviderSignature, type NotificationInput, type ProviderContext, type RawHeaders } from './types';

/** bxb reads the first present of these for every provider (payment-providers.md §1.2). */
export const signatureHeaderChain = ['stripe-signature', 'x-ucp-signature', 'webhook-signature', 'x-webhook-signature'] as const;

/** A header's value, trimmed; null when absent or blank (a blank header is no signature at all). */
export function headerValue(headers: RawHeaders, name: string): string | null {
  const raw = headers[name.toLowerCase()];
  const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  return value ? value : null;
}

/** The provider's own header when present, else the first present of the §1.2 chain. */
export function signatureHeader(headers: RawHeaders, preferred: string): string | null {
  for (const name of [preferred, ...signatureHeaderChain]) {
    const value = headerValue(headers, name);
    if (value !== null) return value;
  }
  return null;
}

/** Lowercase hex HMAC-SHA256; the key is the secret's text as configured, never decoded. */
export function hmacSha256Hex(secret: string, message: Buffer | string): string {
  return createHmac('sha256', secret).update(message).digest('hex');
}

/** Compares two strings without leaking where they differ (their length is not secret). */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Whether `signature` is the hex HMAC-SHA256 of `message` under `secret`. A leading `sha256=`
 * (GitHub-style senders) is stripped, and hex digits are compared case-insensitively because
 * some senders upper-case them; the digest itself is recomputed over the bytes as received.
 */
export function verifyHexHmac(secret: string, message: Buffer, signature: string): boolean {
  const given = signature
    .trim()
    .replace(/^sha256=/i, '')
    .toLowerCase();
  return constantTimeEqual(hmacSha256Hex(secret, message), given);
}

/**
 * The scheme UCP and manual share: the integration's `webhook_secret`, a hex HMAC-SHA256 of
 * `message` in the `header` (or the §1.2 chain), then a JSON object body. Throws
 * InvalidProviderSignature for a missing secret or signature and a mismatch.
 */
export function verifyHexSignedJson(
  label: string,
  ctx: ProviderContext,
  input: NotificationInput,
  header: string,
  message: Buffer,
): Record<string, unknown> {
  const secret = ctx.settings.webhook_secret;
  if (!secret) throw new InvalidProviderSignature(`${label}: no webhook_secret is configured`);
  const signature = signatureHeader(input.headers, header);
  if (!signature) throw new InvalidProviderSignature(`${label}: the notification has no signature`);
  if (!verifyHexHmac(secret, message, signature)) throw new InvalidProviderSignature(`${label}: the signature does not match`);
  const body = parseJsonObject(input.rawBody);
  if (!body) throw new Error(`${label}: the notification body is not a JSON object`);
  return body;
}

/** SHA-256 (hex) of a body: the event key of providers whose notifications carry no event id. */
export function sha256Hex(body: Buffer | string): string {
  return createHash('sha256').update(body).digest('hex');
}

export function asRecord(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

/** A non-empty string, else null: payload fields are read defensively, `""` means absent. */
export function asString(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** The body as a JSON object, or null when it is not JSON or not an object (never throws). */
export function parseJsonObject(rawBody: Buffer): Record<string, unknown> | null {
  try {
    return asRecord(JSON.parse(rawBody.toString('utf8')));
  } catch {
    return null;
  }
}
