// MongoDB spans from the driver's command monitoring events (commandStarted, then commandSucceeded
// or commandFailed, paired by request id). @opentelemetry/instrumentation-mongodb would patch the
// driver's internals instead, but its releases that know driver 7 need the OpenTelemetry SDK 2
// line, while @temporalio/interceptors-opentelemetry 1.24 is built on the 1.x line; the events are
// the driver's public, versioned API (docs/operations.md "Tracing").
import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { mongo } from 'mongoose';

/** Commands still open at once; beyond it the oldest is ended unanswered, so a lost event cannot leak spans. */
const MAX_OPEN = 10_000;

/**
 * Starts a span for each command sent inside a traced operation (an HTTP request, an activity):
 * commands with no active span (start-up, background monitoring) make no trace of their own.
 * Neither command bodies nor error messages are recorded: they carry customers' data.
 */
export function traceCommands(client: mongo.MongoClient, tracer: Tracer): void {
  const open = new Map<number, Span>();

  client.on('commandStarted', (event: mongo.CommandStartedEvent) => {
    const parent = context.active();
    if (!trace.getSpan(parent)) return;
    const collection = collectionOf(event);
    const [host, port] = event.address.split(':');
    const span = tracer.startSpan(
      collection ? `${event.commandName} ${collection}` : `${event.commandName} ${event.databaseName}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'mongodb',
          'db.system': 'mongodb',
          'db.namespace': event.databaseName,
          'db.operation.name': event.commandName,
          ...(collection ? { 'db.collection.name': collection } : {}),
          ...(host ? { 'server.address': host } : {}),
          ...(port ? { 'server.port': Number(port) } : {}),
        },
      },
      parent,
    );
    if (open.size >= MAX_OPEN) {
      const [oldestId, oldest] = open.entries().next().value as [number, Span];
      oldest.end();
      open.delete(oldestId);
    }
    open.set(event.requestId, span);
  });

  client.on('commandSucceeded', (event: mongo.CommandSucceededEvent) => {
    const span = open.get(event.requestId);
    if (!span) return;
    open.delete(event.requestId);
    span.end();
  });

  client.on('commandFailed', (event: mongo.CommandFailedEvent) => {
    const span = open.get(event.requestId);
    if (!span) return;
    open.delete(event.requestId);
    // The error's kind, not its message: a duplicate key error quotes the key's values.
    const failure = event.failure as Error & { code?: unknown; codeName?: unknown };
    const kind = typeof failure.codeName === 'string' ? failure.codeName : failure.name;
    if (typeof failure.code === 'number') span.setAttribute('db.response.status_code', String(failure.code));
    span.setAttribute('error.type', kind);
    span.setStatus({ code: SpanStatusCode.ERROR, message: kind });
    span.end();
  });
}

/** The collection a command names (`{ find: 'invoices' }`; getMore names it in `collection`). */
function collectionOf(event: mongo.CommandStartedEvent): string | undefined {
  const target: unknown = event.command[event.commandName];
  if (typeof target === 'string') return target;
  const named: unknown = event.command.collection;
  return typeof named === 'string' ? named : undefined;
}
