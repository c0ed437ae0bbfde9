import type { Config } from '../config';

export type TracingExporter = 'otlp' | 'console';

/** What the OTEL_* variables of the configuration ask for, once tracing is on. */
export interface TracingSettings {
  serviceName: string;
  exporters: TracingExporter[];
  /** Where the OTLP exporter posts spans (OTLP/HTTP, JSON). */
  otlpTracesUrl: string;
}

export type TracingConfig = Pick<
  Config,
  'OTEL_SDK_DISABLED' | 'OTEL_TRACES_EXPORTER' | 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' | 'OTEL_SERVICE_NAME'
>;

/** The collector's default OTLP/HTTP address for spans (the specification's default endpoint). */
const DEFAULT_OTLP_TRACES_URL = 'http://localhost:4318/v1/traces';

/**
 * Null (tracing off: nothing registered, nothing patched) unless OTEL_TRACES_EXPORTER names an
 * exporter or an OTLP endpoint is set; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none win.
 * The specification's default exporter is otlp, but a service that posts spans to localhost:4318
 * because nobody configured anything would only log export failures: off is the safer default.
 */
export function tracingSettings(config: TracingConfig, defaultServiceName: string): TracingSettings | null {
  if (config.OTEL_SDK_DISABLED) return null;
  const endpoint = config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? config.OTEL_EXPORTER_OTLP_ENDPOINT;
  const named = config.OTEL_TRACES_EXPORTER?.split(',').map((name) => name.trim());
  if (named?.includes('none')) return null;
  const exporters = [...new Set(named ?? (endpoint ? ['otlp'] : []))] as TracingExporter[];
  if (exporters.length === 0) return null;
  return {
    serviceName: config.OTEL_SERVICE_NAME ?? defaultServiceName,
    exporters,
    otlpTracesUrl: otlpTracesUrl(config),
  };
}

/**
 * As the specification reads them: the per-signal endpoint is used as is, the general one gets
 * `v1/traces` appended to its path.
 */
function otlpTracesUrl(config: TracingConfig): string {
  if (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (config.OTEL_EXPORTER_OTLP_ENDPOINT) return `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`;
  return DEFAULT_OTLP_TRACES_URL;
}
