// With no OTEL_* variable set, tracing costs nothing: no tracer provider, no patched module, no
// driver command monitoring, no Temporal interceptor. (Each test file runs in its own process, so
// nothing here was registered by another file.)
import { Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { context, propagation, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { connectDb, type Db } from '../../src/db';
import { connectTemporal, type TemporalClient } from '../../src/temporal/client';
import { startTracingFromConfig } from '../../src/tracing';
import { testDbUri } from '../support/stack';

let db: Db;
let temporal: TemporalClient;
const tracing = startTracingFromConfig(loadConfig({}), 'billing-api');

beforeAll(async () => {
  db = await connectDb(testDbUri(), { maxPoolSize: 2, tracer: tracing?.tracer });
  temporal = await connectTemporal({
    address: inject('temporalAddress'),
    namespace: 'default',
    taskQueue: `test-${randomUUID()}`,
    tracing,
  });
});

afterAll(async () => {
  await db?.close();
  await temporal?.close();
});

describe('tracing, with OTEL_* unset', () => {
  it('starts nothing', () => {
    expect(tracing).toBeUndefined();
  });

  it('registers no tracer provider, context manager or propagator', () => {
    const span = trace.getTracer('probe').startSpan('probe');
    expect(span.isRecording()).toBe(false);
    // The no-op context manager carries nothing into the callback.
    expect(context.with(trace.setSpan(context.active(), span), () => trace.getSpan(context.active()))).toBeUndefined();
    span.end();
    expect(propagation.fields()).toEqual([]);
  });

  it('patches no module', () => {
    // instrumentation-http wraps Server.prototype.emit (shimmer marks wrapped functions).
    expect((Server.prototype.emit as { __wrapped?: boolean }).__wrapped).toBeUndefined();
  });

  it('leaves the driver without command monitoring and the Temporal client without interceptors', () => {
    expect(db.connection.getClient().options.monitorCommands).toBe(false);
    expect(db.connection.getClient().listenerCount('commandStarted')).toBe(0);
    expect(temporal.client.options.interceptors.workflow ?? []).toEqual([]);
  });
});
