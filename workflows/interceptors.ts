// Not a workflow: the OpenTelemetry interceptors the worker adds to the workflow sandbox when
// tracing is on (src/temporal/worker.ts, interceptors.workflowModules). They continue the trace
// carried in the Temporal headers: RunWorkflow for the run, HandleSignal/HandleUpdate for messages,
// StartActivity for each activity (whose headers carry it on to the RunActivity span), and spans
// for child workflows, continue-as-new and signals sent. Their spans leave the sandbox through the
// worker's `exporter` sink, never while replaying.
//
// Deterministic: span and trace ids come from the sandbox's seeded Math.random, timestamps from
// the workflow clock, and the SDK's flags keep histories recorded without them replaying the same.
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [new OpenTelemetryInboundInterceptor()],
  outbound: [new OpenTelemetryOutboundInterceptor()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
