/**
 * The payment provider codes of the specification (payment-providers.md §0): `provider_a` Stripe,
 * `provider_b` Adyen, `provider_c` GoCardless, `provider_d` UCP, and `manual`.
 */
export const providerCodes = ['provider_a', 'provider_b', 'provider_c', 'provider_d', 'manual'] as const;
export type ProviderCode = (typeof providerCodes)[number];

export function isProviderCode(value: string): value is ProviderCode {
  return (providerCodes as readonly string[]).includes(value);
}
