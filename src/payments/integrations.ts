// Integrations (api-contract.md, Integrations): each provider's settings, which of them are secret,
// sealing them at rest, the masked read, and the decrypted view an adapter is given.
import type { Db } from '../db';
import type { IntegrationDoc } from '../db/models/integration';
import { Validation, type FieldError } from '../errors';
import { isProviderCode, type ProviderCode, type ProviderContext } from './providers/types';
import type { SecretBox } from './secrets';

interface SettingRule {
  required?: boolean;
  secret?: boolean;
  /** Allowed values. */
  values?: readonly string[];
  check?: (value: string) => string | null;
  /** The setting is where the service sends requests: outside overrides it must be a public https address. */
  addressOverride?: boolean;
}

/** A public https address (no loopback, private or link-local host): what a tenant may point the service at. */
function publicHttps(value: string): string | null {
  const url = new URL(value);
  if (url.protocol !== 'https:') return 'must be an https URL';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const privateHost =
    /^(localhost|.*\.local|.*\.internal)$/i.test(host) ||
    /^(127\.|10\.|0\.|169\.254\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)/.test(host) ||
    /^(::1?|f[cd][0-9a-f]{2}:.*|fe80:.*)$/i.test(host);
  return privateHost ? 'must be a public address' : null;
}

const hex = (value: string) => (/^(?:[0-9a-fA-F]{2})+$/.test(value) ? null : 'must be a hex string');
const httpUrl = (value: string) => {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? null : 'must be an http or https URL';
  } catch {
    return 'must be an http or https URL';
  }
};

/** Every payment provider's settings, as the contract names them. */
export const providerSettings: Record<ProviderCode, Record<string, SettingRule>> = {
  provider_a: {
    api_key: { required: true, secret: true },
    webhook_secret: { required: true, secret: true },
    success_redirect_url: { check: httpUrl },
  },
  provider_b: {
    api_key: { required: true, secret: true },
    merchant_account: { required: true },
    hmac_key: { required: true, secret: true, check: hex },
    environment: { values: ['test', 'live'] },
    live_url_prefix: {},
    success_redirect_url: { check: httpUrl },
  },
  provider_c: {
    access_token: { required: true, secret: true },
    webhook_secret: { required: true, secret: true },
    environment: { values: ['sandbox', 'live'] },
    success_redirect_url: { check: httpUrl },
  },
  provider_d: {
    base_url: { required: true, check: httpUrl, addressOverride: true },
    api_key: { required: true, secret: true },
    webhook_secret: { required: true, secret: true },
    merchant_id: {},
    success_redirect_url: { check: httpUrl },
  },
  manual: { webhook_secret: { required: true, secret: true } },
};

/** Integrations of the other types have no behaviour yet: settings whose names look secret are sealed all the same. */
const SECRET_LOOKING = /key|secret|token|password/i;

export const isPaymentProvider = isProviderCode;

export interface SettingsPolicy {
  /** PAYMENT_PROVIDER_BASE_URL_OVERRIDE */
  allowBaseUrlOverride: boolean;
}

/**
 * Checks settings given for an integration (the whole set on create, a part on update) and
 * normalises the specification's alias names (`provider_a_api_key`) to the contract's.
 */
export function normaliseSettings(
  integrationType: string,
  providerType: string,
  given: Record<string, unknown>,
  policy: SettingsPolicy,
): Record<string, string> {
  const errors: FieldError[] = [];
  const out: Record<string, string> = {};
  const rules = integrationType === 'payment_provider' && isPaymentProvider(providerType) ? providerSettings[providerType] : null;
  for (const [rawName, value] of Object.entries(given)) {
    const name = rules && rawName.startsWith(`${providerType}_`) ? rawName.slice(providerType.length + 1) : rawName;
    const path = `settings.${rawName}`;
    if (typeof value !== 'string' || value.length === 0 || value.length > 4096) {
      errors.push({ path, message: 'must be a non-empty string of at most 4096 characters' });
      continue;
    }
    if (rules) {
      if (name === 'api_base_url') {
        if (!policy.allowBaseUrlOverride) {
          errors.push({ path, message: 'is accepted only when the server runs with PAYMENT_PROVIDER_BASE_URL_OVERRIDE=true' });
          continue;
        }
        const bad = httpUrl(value);
        if (bad) errors.push({ path, message: bad });
      } else {
        const rule = rules[name];
        if (!rule) {
          errors.push({ path, message: `is not a setting of ${providerType} (${Object.keys(rules).join(', ')}, api_base_url)` });
          continue;
        }
        if (rule.values && !rule.values.includes(value)) errors.push({ path, message: `must be one of ${rule.values.join(', ')}` });
        const bad = rule.check?.(value) ?? (rule.addressOverride && !policy.allowBaseUrlOverride ? publicHttps(value) : null);
        if (bad) errors.push({ path, message: bad });
      }
    }
    if (name in out) errors.push({ path, message: `given twice (as ${name} and its alias)` });
    out[name] = value;
  }
  if (errors.length) throw new Validation(errors);
  return out;
}

/** The required settings a payment provider integration lacks (checked on the merged settings). */
export function missingRequired(integrationType: string, providerType: string, names: Iterable<string>): FieldError[] {
  if (integrationType !== 'payment_provider' || !isPaymentProvider(providerType)) return [];
  const present = new Set(names);
  return Object.entries(providerSettings[providerType])
    .filter(([name, rule]) => rule.required && !present.has(name))
    .map(([name]) => ({ path: `settings.${name}`, message: 'Required' }));
}

function isSecret(integrationType: string, providerType: string, name: string): boolean {
  if (integrationType === 'payment_provider' && isPaymentProvider(providerType))
    return providerSettings[providerType][name]?.secret ?? false;
  return SECRET_LOOKING.test(name);
}

const owner = (organizationId: string, providerType: string, name: string) => `${organizationId}/${providerType}/${name}`;

/** Splits normalised settings into what is stored as is and what is sealed (with the hint kept for reads). */
export function sealSettings(
  box: SecretBox,
  doc: Pick<IntegrationDoc, 'organization_id' | 'integration_type' | 'provider_type'>,
  settings: Record<string, string>,
): { plain: Record<string, string>; secrets: Record<string, string>; hints: Record<string, string> } {
  const plain: Record<string, string> = {};
  const secrets: Record<string, string> = {};
  const hints: Record<string, string> = {};
  for (const [name, value] of Object.entries(settings)) {
    if (isSecret(doc.integration_type, doc.provider_type, name)) {
      secrets[name] = box.seal(value, owner(doc.organization_id, doc.provider_type, name));
      // The last 4 characters identify a secret without revealing it; a short one shows nothing.
      hints[name] = value.length >= 12 ? value.slice(-4) : '';
    } else {
      plain[name] = value;
    }
  }
  return { plain, secrets, hints };
}

/** What an adapter works with: every setting in clear, and the API address override. */
export function providerContext(box: SecretBox, integration: IntegrationDoc): ProviderContext {
  const settings: Record<string, string> = { ...integration.settings };
  for (const [name, sealed] of Object.entries(integration.secrets ?? {})) {
    settings[name] = box.open(sealed, owner(integration.organization_id, integration.provider_type, name));
  }
  const { api_base_url: apiBaseUrl, ...rest } = settings;
  return { settings: rest, apiBaseUrl: apiBaseUrl ?? null };
}

/** The organization's active integration of a payment provider, or null. */
export async function activeProviderIntegration(db: Db, organizationId: string, provider: ProviderCode): Promise<IntegrationDoc | null> {
  // Exactly the unique index's keys, so that the MongoDB stand-in answers from the index.
  const integration = await db.models.Integration.findOne({
    organization_id: organizationId,
    provider_type: provider,
    deleted_at: null,
  }).lean();
  return integration?.status === 'active' && integration.integration_type === 'payment_provider' ? integration : null;
}
