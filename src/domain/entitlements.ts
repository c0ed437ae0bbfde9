// What a plan may grant for a feature, by the feature's type. No I/O: the routes validate every
// value here before it is stored, so that what the entitlements cache serves is always well typed.

export const FEATURE_TYPES = ['boolean', 'quantity', 'custom'] as const;
export type FeatureType = (typeof FEATURE_TYPES)[number];

/** The value of an entitlement as the API reads and answers it (JSON). */
export type EntitlementValue = boolean | number | string | Record<string, unknown> | unknown[];

/** A custom value is stored as JSON text; this bounds it (a cache entry, a response). */
export const CUSTOM_VALUE_MAX_BYTES = 16_384;

/**
 * Why `value` is not a valid entitlement of a feature of `type`, or null when it is:
 * - boolean: true or false;
 * - quantity: a whole number from 0 to 2^53 - 1 (seats, projects, API keys...);
 * - custom: a string, a JSON object or a JSON array, at most 16 KiB as JSON.
 */
export function entitlementValueError(type: FeatureType, value: unknown): string | null {
  switch (type) {
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be true or false for a boolean feature';
    case 'quantity':
      return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
        ? null
        : 'must be a whole number >= 0 for a quantity feature';
    case 'custom': {
      const shapeOk = typeof value === 'string' || (typeof value === 'object' && value !== null);
      if (!shapeOk) return 'must be a string, a JSON object or a JSON array for a custom feature';
      if (new TextEncoder().encode(JSON.stringify(value)).length > CUSTOM_VALUE_MAX_BYTES) {
        return `must be at most ${CUSTOM_VALUE_MAX_BYTES} bytes as JSON`;
      }
      return null;
    }
  }
}
