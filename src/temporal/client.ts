import { Client, Connection, type WorkflowClientInterceptor } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from '../tracing';

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  /**
   * Tracing is on: starting a workflow, signalling, updating or querying it makes a span (on the
   * tracer provider startTracing registered) whose context travels to the workflow in its headers.
   */
  tracing?: Tracing;
}

/** The API's handle on Temporal: the client, and the task queue every workflow runs on. */
export interface TemporalClient {
  client: Client;
  taskQueue: string;
  namespace: string;
  /** Resolves when the frontend answers. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export async function connectTemporal(settings: TemporalSettings): Promise<TemporalClient> {
  const connection = await Connection.connect({ address: settings.address });
  return fromConnection(connection, settings);
}

export function fromConnection(connection: Connection, settings: Omit<TemporalSettings, 'address'>): TemporalClient {
  const workflow: WorkflowClientInterceptor[] = settings.tracing ? [new OpenTelemetryWorkflowClientInterceptor()] : [];
  return wrapClient(new Client({ connection, namespace: settings.namespace, interceptors: { workflow } }), settings.taskQueue);
}

/** Wraps an existing client (the test environments' own clients, for instance). */
export function wrapClient(client: Client, taskQueue: string): TemporalClient {
  const connection = client.connection;
  return {
    client,
    taskQueue,
    namespace: client.options.namespace,
    async ping() {
      await connection.workflowService.getSystemInfo({});
    },
    async close() {
      await connection.close();
    },
  };
}
