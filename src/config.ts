import { z } from 'zod';

/**
 * The whole configuration of the API and the worker: one schema, parsed once at start-up.
 * Nothing else in the code base reads process.env (but the OpenTelemetry SDK, for its own OTEL_*
 * variables: see OTEL_SDK_DISABLED below).
 */
const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const port = z.coerce.number().int().min(0).max(65535);

export const configSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: port.default(3000),
  MONGODB_URI: z
    .string()
    .regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// or mongodb+srv:// URI')
    .default('mongodb://127.0.0.1:27017/billing'),
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d+$/, 'must be host:port')
    .default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('billing'),
  /** When set, POST /v1/organizations requires `Authorization: Bearer <token>`. */
  BILLING_SIGNUP_TOKEN: z
    .string()
    .min(16, 'must be at least 16 characters when set')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  LOG_LEVEL: z.enum(logLevels).default('info'),
  /** Public address printed in docs and used in links (defaults to http://HOST:PORT). */
  PUBLIC_URL: z.url().optional(),
  /** Largest accepted request body, in bytes. */
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(50 * 1024 * 1024)
    .default(1024 * 1024),
  /**
   * API processes on this machine (node:cluster, one listening socket). 1 in containers, where
   * you scale by running more of them; the dev stack uses one per core.
   */
  API_WORKERS: z.coerce.number().int().min(1).max(64).default(1),
  /** Workflows a worker keeps in memory between their tasks; an evicted one replays its history. */
  WORKER_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).max(100_000).default(100),
  /**
   * Workflow tasks a worker runs at once (the SDK's default is 40). A subscription's boundary is a
   * local activity inside its workflow task, so this bounds how many boundaries bill at once: over
   * a million events, 10,000 boundaries billed at 39.9/s with 20, 33.5/s with 40 and 23.5/s with 100
   * (docs/performance.md, "The reconciler and the stand-in's garbage collector"). At most
   * WORKER_MAX_CACHED_WORKFLOWS when that is above 0.
   */
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: z.coerce.number().int().min(2).max(10_000).default(20),
  /**
   * Billing day: subscriptions sharing a boundary (most are calendar-aligned) bill it spread over
   * this window, each at its own deterministic offset. Amounts never depend on the offset.
   */
  BILLING_JITTER_WINDOW_SECONDS: z.coerce.number().int().min(0).max(86_400).default(120),
  /** How often a subscription whose plan has usage thresholds checks its usage (progressive billing). */
  PROGRESSIVE_BILLING_CHECK_MINUTES: z.coerce.number().int().min(1).max(44_640).default(60),
  /**
   * Encrypts the integrations' secrets at rest (AES-256-GCM): 32 bytes, as 64 hex characters or
   * base64. `npm start` generates one into .data/ when unset. Without it, integrations cannot be
   * created (503 secrets_not_configured) and payments cannot reach providers.
   */
  SECRETS_KEY: z
    .string()
    .refine((v) => secretsKeyBytes(v) !== null, 'must be 32 bytes, as 64 hex characters or base64')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /**
   * Lets integrations set `api_base_url` (a sandbox, a proxy, a local fake). Off in production, so a
   * tenant cannot point the service at internal addresses.
   */
  PAYMENT_PROVIDER_BASE_URL_OVERRIDE: z
    .enum(['true', 'false', ''])
    .default('false')
    .transform((v) => v === 'true'),
  /** How long graceful shutdown waits for in-flight requests, in milliseconds. */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(10_000),
  /**
   * Prometheus metrics: GET /metrics on the API (summed over its API_WORKERS) and on the worker's
   * WORKER_METRICS_PORT. `false` turns both off (the routes answer 404, nothing listens).
   */
  METRICS_ENABLED: z
    .enum(['true', 'false', ''])
    .default('true')
    .transform((v) => v !== 'false'),
  /**
   * Where the worker process serves its GET /metrics (on HOST), with the Temporal SDK's worker
   * metrics. Several workers on one host need one port each (0: any free port, printed at start).
   */
  WORKER_METRICS_PORT: port.default(9465),
  // Tracing (docs/operations.md "Tracing"): the standard OpenTelemetry variables, off unless
  // OTEL_TRACES_EXPORTER names an exporter or an OTLP endpoint is set. These decide whether and
  // where spans go; the OpenTelemetry SDK reads its other OTEL_* variables itself (headers, timeout,
  // sampler, batch sizes, OTEL_RESOURCE_ATTRIBUTES), the one exception to "nothing else reads
  // process.env".
  /** `true` turns tracing off whatever the other OTEL_* variables say. */
  OTEL_SDK_DISABLED: z
    .enum(['true', 'false', ''])
    .default('false')
    .transform((v) => v === 'true'),
  /** Where spans go: `otlp`, `console` (stdout, for debugging), both (comma-separated) or `none`. Default: `otlp` when an OTLP endpoint is set, else none. */
  OTEL_TRACES_EXPORTER: z
    .string()
    .regex(/^\s*(otlp|console|none)\s*(,\s*(otlp|console|none)\s*)*$/, 'must list otlp, console or none (comma-separated)')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /** The collector's OTLP/HTTP base address (spans go to its /v1/traces), e.g. http://otel-collector:4318. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /** The full OTLP/HTTP address for spans, used as is; wins over OTEL_EXPORTER_OTLP_ENDPOINT. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /** Spans are sent as OTLP/HTTP (JSON, which collectors accept on the same port as protobuf); gRPC is not shipped. */
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .enum(['http/json', 'http/protobuf'], 'must be http/json or http/protobuf (this service sends OTLP over HTTP, not gRPC)')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
    .enum(['http/json', 'http/protobuf'], 'must be http/json or http/protobuf (this service sends OTLP over HTTP, not gRPC)')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /** The service name on spans; default billing-api for the API, billing-worker for the worker. */
  OTEL_SERVICE_NAME: z
    .string()
    .min(1)
    .optional()
    .or(z.literal('').transform(() => undefined)),
});

export type Config = z.infer<typeof configSchema>;

/** The 32 bytes of a SECRETS_KEY (64 hex characters or base64), else null. */
export function secretsKeyBytes(text: string): Buffer | null {
  const bytes = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  return bytes.length === 32 ? bytes : null;
}

/** The service's public address (PUBLIC_URL, else where the API listens), without a trailing slash: links and providers' return addresses. */
export function publicUrlOf(config: Partial<Pick<Config, 'PUBLIC_URL' | 'HOST' | 'PORT'>>): string {
  const host = config.HOST && config.HOST !== '0.0.0.0' ? config.HOST : '127.0.0.1';
  return (config.PUBLIC_URL ?? `http://${host}:${config.PORT ?? 3000}`).replace(/\/$/, '');
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Parses the environment; a bad value throws a ConfigError naming every offending variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
