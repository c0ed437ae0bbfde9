// OpenTelemetry tracing (docs/operations.md "Tracing"): one trace from an HTTP request through the
// workflows it starts, their activities and the MongoDB commands of both. Off unless the OTEL_*
// variables ask for it (./settings.ts); then nothing here is even constructed.
//
// Who makes which spans:
//   - @opentelemetry/instrumentation-http: the request's server span (and outgoing HTTP calls);
//   - @opentelemetry/instrumentation-fastify: the route's handler and hooks under it;
//   - @temporalio/interceptors-opentelemetry: StartWorkflow/SignalWorkflow... in the Temporal
//     client (src/temporal/client.ts), RunWorkflow/StartActivity in the workflow sandbox (exported
//     through a sink) and RunActivity in the worker (src/temporal/worker.ts); the trace context
//     travels in the Temporal headers;
//   - src/db/command-spans.ts: MongoDB commands, from the driver's command monitoring events.
//
// The instrumentations patch `http` and `fastify` as they are required: startTracing must run
// before anything loads fastify, which is why the entry points import ./api-process or
// ./worker-process first.
import { context, propagation, trace, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { envDetectorSync, Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { ConfigError, loadConfig } from '../config';
import { FastifyInstrumentationKeepingExports } from './fastify';
import { tracingSettings, type TracingConfig, type TracingSettings } from './settings';

export { tracingSettings, type TracingConfig, type TracingSettings } from './settings';

export interface Tracing {
  /** For the spans the service makes itself (MongoDB commands). */
  readonly tracer: Tracer;
  /** Where the workflow sandbox's spans go (Temporal's workflow span exporter sink). */
  readonly spanProcessor: SpanProcessor;
  readonly resource: Resource;
  /** Exports what is still buffered, then unpatches and unregisters everything. */
  shutdown(): Promise<void>;
}

export interface StartTracingOptions {
  serviceName: string;
  /** Where finished spans go: the configured exporters' processors, or a test's in-memory one. */
  spanProcessors: SpanProcessor[];
}

/**
 * Scrapes and probes would each make a trace, every few seconds, about nothing: the Prometheus
 * endpoints (API and worker) and the health checks are left out.
 */
const UNTRACED_PATHS = new Set(['/metrics', '/health', '/ready']);

/** Registers the tracer provider, the context manager, the propagator and the instrumentations. */
export function startTracing(options: StartTracingOptions): Tracing {
  // OTEL_RESOURCE_ATTRIBUTES (deployment.environment.name=..., read by the SDK's detector), then
  // the service name from the configuration.
  const resource = Resource.default()
    .merge(envDetectorSync.detect())
    .merge(new Resource({ [ATTR_SERVICE_NAME]: options.serviceName }));
  const provider = new NodeTracerProvider({ resource, mergeResourceWithDefaults: false, spanProcessors: options.spanProcessors });
  // Node's AsyncLocalStorage context manager and the W3C trace-context + baggage propagators.
  provider.register();
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.has((request.url ?? '').split('?')[0]!),
      }),
      new FastifyInstrumentationKeepingExports(),
    ],
  });
  return {
    tracer: provider.getTracer('billing-service'),
    spanProcessor: provider.activeSpanProcessor,
    resource,
    async shutdown() {
      unregister();
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** startTracing as the configuration asks (undefined when tracing is off: nothing registered). */
export function startTracingFromConfig(config: TracingConfig, defaultServiceName: string): Tracing | undefined {
  const settings = tracingSettings(config, defaultServiceName);
  if (!settings) return undefined;
  return startTracing({
    serviceName: settings.serviceName,
    spanProcessors: exportersOf(settings).map((exporter) => new BatchSpanProcessor(exporter)),
  });
}

function exportersOf(settings: TracingSettings): SpanExporter[] {
  return settings.exporters.map((name) => {
    switch (name) {
      case 'otlp':
        // OTLP/HTTP with a JSON body; headers, timeout and compression from OTEL_EXPORTER_OTLP_*.
        return new OTLPTraceExporter({ url: settings.otlpTracesUrl });
      case 'console':
        return new ConsoleSpanExporter();
    }
  });
}

/**
 * For the entry points' first import (./api-process.ts, ./worker-process.ts). An invalid
 * configuration starts nothing here: the entry point's own loadConfig reports it.
 */
export function bootTracing(defaultServiceName: string): Tracing | undefined {
  let config: TracingConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) return undefined;
    throw err;
  }
  return startTracingFromConfig(config, defaultServiceName);
}
