// Which OTEL_* variables turn tracing on, where spans go, and what the configuration refuses
// (src/config.ts, src/tracing/settings.ts). Off is the default: nothing set, nothing registered.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config';
import { tracingSettings } from '../../src/tracing';

const settingsOf = (env: Record<string, string>) => tracingSettings(loadConfig(env), 'billing-api');

describe('tracing settings', () => {
  it.each([
    ['nothing set', {}],
    [
      'empty values (compose passes unset variables as "")',
      { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_EXPORTER: '', OTEL_SERVICE_NAME: '' },
    ],
    ['only a service name', { OTEL_SERVICE_NAME: 'billing' }],
    ['exporter none, endpoint set', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }],
    ['SDK disabled, endpoint set', { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }],
  ])('is off with %s', (_, env) => {
    expect(settingsOf(env)).toBeNull();
  });

  it.each([
    [
      'an endpoint: spans go to its /v1/traces',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' },
      { serviceName: 'billing-api', exporters: ['otlp'], otlpTracesUrl: 'http://collector:4318/v1/traces' },
    ],
    [
      'an endpoint with a path and a trailing slash',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example.com/ingest/' },
      { serviceName: 'billing-api', exporters: ['otlp'], otlpTracesUrl: 'https://otel.example.com/ingest/v1/traces' },
    ],
    [
      'a traces endpoint, used as is (and winning)',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom' },
      { serviceName: 'billing-api', exporters: ['otlp'], otlpTracesUrl: 'http://b:4318/custom' },
    ],
    [
      'exporter otlp alone: the default collector address',
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: 'billing-eu' },
      { serviceName: 'billing-eu', exporters: ['otlp'], otlpTracesUrl: 'http://localhost:4318/v1/traces' },
    ],
    [
      'console and otlp',
      {
        OTEL_TRACES_EXPORTER: 'console, otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      },
      { serviceName: 'billing-api', exporters: ['console', 'otlp'], otlpTracesUrl: 'http://collector:4318/v1/traces' },
    ],
    ['console only', { OTEL_TRACES_EXPORTER: 'console' }, { serviceName: 'billing-api', exporters: ['console'] }],
  ])('is on with %s', (_, env, expected) => {
    expect(settingsOf(env)).toMatchObject(expected);
  });

  it.each([
    ['OTEL_TRACES_EXPORTER', { OTEL_TRACES_EXPORTER: 'zipkin' }],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }],
    ['OTEL_SDK_DISABLED', { OTEL_SDK_DISABLED: 'yes' }],
  ])('refuses a bad %s at start-up', (name, env) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(name);
  });
});
