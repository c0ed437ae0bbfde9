// The OTLP exporter as the configuration sets it up: OTEL_EXPORTER_OTLP_ENDPOINT set, spans are
// posted as OTLP/HTTP JSON to <endpoint>/v1/traces, under the configured service name, and
// shutdown() sends what is still batched. The collector stand-in runs in a child process: in this
// one, the HTTP instrumentation would trace the collector's own requests.
import { spawn, type ChildProcess } from 'node:child_process';
import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { startTracingFromConfig } from '../../src/tracing';

const COLLECTOR = `
const received = [];
require('node:http')
  .createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (req.method === 'POST') received.push({ path: req.url, type: req.headers['content-type'], body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.method === 'POST' ? '{}' : JSON.stringify(received));
    });
  })
  .listen(0, '127.0.0.1', function () {
    process.stdout.write(this.address().port + '\\n');
  });
`;

interface Received {
  path: string;
  type: string;
  body: string;
}

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string };
}

interface OtlpBody {
  resourceSpans: { resource: { attributes: OtlpAttribute[] }; scopeSpans: { spans: { name: string; traceId: string }[] }[] }[];
}

let collector: ChildProcess;
let endpoint: string;

beforeAll(async () => {
  collector = spawn(process.execPath, ['-e', COLLECTOR], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    collector.once('error', reject);
    collector.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString().trim()));
  });
  endpoint = `http://127.0.0.1:${port}`;
});

afterAll(() => {
  collector?.kill();
});

describe('OTLP export', () => {
  it('posts the spans to the endpoint configured by OTEL_EXPORTER_OTLP_ENDPOINT, named by OTEL_SERVICE_NAME', async () => {
    const tracing = startTracingFromConfig(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'billing-otlp-test' }),
      'billing-api',
    );
    expect(tracing).toBeDefined();
    const tracer = trace.getTracer('probe');
    tracer.startActiveSpan('outer', (outer) => {
      tracer.startSpan('inner').end();
      outer.end();
    });
    // Batched: nothing is sent before the batch delay, or before shutdown flushes it.
    await tracing!.shutdown();

    const received = (await (await fetch(endpoint)).json()) as Received[];
    expect(received.map((r) => [r.path, r.type])).toEqual([['/v1/traces', 'application/json']]);
    const body = JSON.parse(received[0]!.body) as OtlpBody;
    const [resourceSpans] = body.resourceSpans;
    expect(resourceSpans!.resource.attributes).toContainEqual({ key: 'service.name', value: { stringValue: 'billing-otlp-test' } });
    const spans = resourceSpans!.scopeSpans.flatMap((s) => s.spans);
    expect(spans.map((s) => s.name).sort()).toEqual(['inner', 'outer']);
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
  });
});
