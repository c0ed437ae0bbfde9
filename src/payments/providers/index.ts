import { adyenAdapter } from './adyen';
import { gocardlessAdapter } from './gocardless';
import { manualAdapter } from './manual';
import { stripeAdapter } from './stripe';
import type { PaymentProviderAdapter, ProviderCode } from './types';
import { ucpAdapter } from './ucp';

/** The adapter of each provider code (payment-providers.md §0), chosen by an exhaustive switch. */
export function adapterFor(code: ProviderCode): PaymentProviderAdapter {
  switch (code) {
    case 'provider_a':
      return stripeAdapter;
    case 'provider_b':
      return adyenAdapter;
    case 'provider_c':
      return gocardlessAdapter;
    case 'provider_d':
      return ucpAdapter;
    case 'manual':
      return manualAdapter;
  }
}
