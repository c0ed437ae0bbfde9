// Configuration: one schema parsed once, failing fast with a message naming every bad variable.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config';

function configError(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`expected loadConfig to throw for ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('applies the defaults to an empty environment', () => {
    expect(loadConfig({})).toEqual({
      NODE_ENV: 'development',
      HOST: '127.0.0.1',
      PORT: 3000,
      MONGODB_URI: 'mongodb://127.0.0.1:27017/billing',
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: 'billing',
      LOG_LEVEL: 'info',
      BODY_LIMIT_BYTES: 1024 * 1024,
      SHUTDOWN_TIMEOUT_MS: 10_000,
      API_WORKERS: 1,
      BILLING_JITTER_WINDOW_SECONDS: 120,
      PROGRESSIVE_BILLING_CHECK_MINUTES: 60,
      PAYMENT_PROVIDER_BASE_URL_OVERRIDE: false,
      OTEL_SDK_DISABLED: false,
      METRICS_ENABLED: true,
      WORKER_METRICS_PORT: 9465,
      WORKER_MAX_CACHED_WORKFLOWS: 100,
      WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: 20,
    });
    const config = loadConfig({});
    expect(config.BILLING_SIGNUP_TOKEN).toBeUndefined();
    expect(config.SECRETS_KEY).toBeUndefined();
    expect(config.PUBLIC_URL).toBeUndefined();
  });

  it('takes a 32-byte SECRETS_KEY as hex or base64 and refuses anything else', () => {
    const hex = 'ab'.repeat(32);
    expect(loadConfig({ SECRETS_KEY: hex }).SECRETS_KEY).toBe(hex);
    const b64 = Buffer.alloc(32, 7).toString('base64');
    expect(loadConfig({ SECRETS_KEY: b64 }).SECRETS_KEY).toBe(b64);
    expect(() => loadConfig({ SECRETS_KEY: 'too-short' })).toThrow(/SECRETS_KEY/);
    expect(loadConfig({ PAYMENT_PROVIDER_BASE_URL_OVERRIDE: 'true' }).PAYMENT_PROVIDER_BASE_URL_OVERRIDE).toBe(true);
    expect(() => loadConfig({ PAYMENT_PROVIDER_BASE_URL_OVERRIDE: 'yes' })).toThrow(/PAYMENT_PROVIDER_BASE_URL_OVERRIDE/);
  });

  it('reads given values, coercing the numbers', () => {
    const config = loadConfig({
      NODE_ENV: 'production',
      HOST: '0.0.0.0',
      PORT: '8080',
      MONGODB_URI: 'mongodb+srv://user:pw@cluster.example.net/billing?retryWrites=true',
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'billing-prod',
      TEMPORAL_TASK_QUEUE: 'billing-main',
      BILLING_SIGNUP_TOKEN: 'exactly-16-chars',
      LOG_LEVEL: 'warn',
      PUBLIC_URL: 'https://billing.example.com',
      BODY_LIMIT_BYTES: '2048',
      SHUTDOWN_TIMEOUT_MS: '0',
      BILLING_JITTER_WINDOW_SECONDS: '0',
      PROGRESSIVE_BILLING_CHECK_MINUTES: '1440',
    });
    expect(config).toMatchObject({
      NODE_ENV: 'production',
      HOST: '0.0.0.0',
      PORT: 8080,
      MONGODB_URI: 'mongodb+srv://user:pw@cluster.example.net/billing?retryWrites=true',
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'billing-prod',
      TEMPORAL_TASK_QUEUE: 'billing-main',
      BILLING_SIGNUP_TOKEN: 'exactly-16-chars',
      LOG_LEVEL: 'warn',
      PUBLIC_URL: 'https://billing.example.com',
      BODY_LIMIT_BYTES: 2048,
      SHUTDOWN_TIMEOUT_MS: 0,
      BILLING_JITTER_WINDOW_SECONDS: 0,
      PROGRESSIVE_BILLING_CHECK_MINUTES: 1440,
    });
  });

  it('ignores variables it does not know', () => {
    const config = loadConfig({ PATH: '/usr/bin', HOME: '/root' }) as Record<string, unknown>;
    expect(config.PATH).toBeUndefined();
    expect(config.HOME).toBeUndefined();
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['MONGODB_URI', 'postgres://localhost/billing'],
    ['MONGODB_URI', 'localhost:27017'],
    ['LOG_LEVEL', 'verbose'],
    ['LOG_LEVEL', 'INFO'],
    ['BILLING_SIGNUP_TOKEN', 'short'],
    ['BILLING_SIGNUP_TOKEN', 'fifteen-chars!!'],
    ['TEMPORAL_ADDRESS', 'localhost'],
    ['NODE_ENV', 'staging'],
    ['PUBLIC_URL', 'not a url'],
    ['BODY_LIMIT_BYTES', '10'],
  ])('a bad %s (%j) throws a ConfigError naming it, and only it', (name, value) => {
    const err = configError({ [name]: value });
    expect(err.name).toBe('ConfigError');
    expect(err.message).toContain(name);
    for (const other of ['PORT', 'MONGODB_URI', 'LOG_LEVEL', 'BILLING_SIGNUP_TOKEN', 'TEMPORAL_ADDRESS', 'NODE_ENV']) {
      if (other !== name) expect(err.message).not.toContain(other);
    }
  });

  it('names every bad variable at once', () => {
    const err = configError({
      PORT: 'eighty',
      MONGODB_URI: 'http://db.example.com',
      LOG_LEVEL: 'loud',
      BILLING_SIGNUP_TOKEN: 'tiny',
      TEMPORAL_NAMESPACE: 'ok',
    });
    const named = ['PORT', 'MONGODB_URI', 'LOG_LEVEL', 'BILLING_SIGNUP_TOKEN'].filter((v) => err.message.includes(v));
    expect(named).toEqual(['PORT', 'MONGODB_URI', 'LOG_LEVEL', 'BILLING_SIGNUP_TOKEN']);
    expect(err.message).not.toContain('TEMPORAL_NAMESPACE');
    // One line per bad variable after the heading.
    expect(err.message.split('\n').filter((l) => l.trim().length > 0)).toHaveLength(5);
  });

  it('does not echo the value of a bad signup token (it is a secret)', () => {
    const err = configError({ BILLING_SIGNUP_TOKEN: 'hunter2-secret' });
    expect(err.message).not.toContain('hunter2');
  });

  it('says why a short signup token is refused', () => {
    expect(configError({ BILLING_SIGNUP_TOKEN: 'short' }).message).toMatch(/16/);
  });

  it('treats an empty BILLING_SIGNUP_TOKEN as unset', () => {
    const config = loadConfig({ BILLING_SIGNUP_TOKEN: '' });
    expect(config.BILLING_SIGNUP_TOKEN).toBeUndefined();
    expect('BILLING_SIGNUP_TOKEN' in config && config.BILLING_SIGNUP_TOKEN !== undefined).toBe(false);
  });

  it('accepts a signup token of exactly 16 characters', () => {
    expect(loadConfig({ BILLING_SIGNUP_TOKEN: '0123456789abcdef' }).BILLING_SIGNUP_TOKEN).toBe('0123456789abcdef');
  });
});
