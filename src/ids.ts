import { createHash } from 'node:crypto';

/**
 * A UUID derived from a key (the same key always gives the same id). Used where a retried
 * activity must find what its first attempt created: lifecycle event ids (entity, type, step),
 * webhook delivery ids (event, endpoint). Shaped as an RFC 9562 version 8 (custom) UUID.
 */
export function deterministicId(key: string): string {
  const hex = createHash('sha256').update(key).digest('hex').slice(0, 32).split('');
  hex[12] = '8';
  hex[16] = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * The id of the invoice created with `idempotencyKey` in an organization (createInvoice): known
 * before the invoice exists, so that a record pointing at it can be written first.
 */
export function invoiceIdFor(organizationId: string, idempotencyKey: string): string {
  return deterministicId(`invoice/${organizationId}/${idempotencyKey}`);
}
