// Sends a manual-payment notification the way an offline reconciler would (payment-providers.md
// §6): hex HMAC-SHA256 of the raw body in `X-Webhook-Signature`, or of `"<ts>.<raw body>"` when a
// timestamp is sent in `X-Webhook-Timestamp`.
import { createHmac } from 'node:crypto';

export interface ManualNotifyResult {
  status: number;
  body: string;
}

/** POSTs `payload` (serialized once; a string is sent as is), signed with `secret`. */
export async function notifyManual(
  url: string,
  secret: string,
  payload: unknown,
  options: { timestamp?: number } = {},
): Promise<ManualNotifyResult> {
  const raw = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const signed = options.timestamp === undefined ? raw : `${options.timestamp}.${raw}`;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-webhook-signature': createHmac('sha256', secret).update(signed).digest('hex'),
  };
  if (options.timestamp !== undefined) headers['x-webhook-timestamp'] = String(options.timestamp);
  const response = await fetch(url, { method: 'POST', headers, body: raw });
  return { status: response.status, body: await response.text() };
}
