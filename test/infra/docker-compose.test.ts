// docker-compose.yml and its deploy/ configuration (Prometheus, the OpenTelemetry collector,
// Jaeger): `docker compose config` validates the whole file where the Compose plugin exists; the
// wiring between the services and the files they mount is checked here in any case.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(__dirname, '..', '..');
const readYaml = (file: string) => parse(readFileSync(join(ROOT, file), 'utf8'), { merge: true }) as Record<string, unknown>;

interface Service {
  image?: string;
  build?: unknown;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, unknown> | string[];
}

const compose = readYaml('docker-compose.yml') as { services: Record<string, Service>; volumes: Record<string, unknown> };
const services = compose.services;

/** `${NAME:-default}` as Compose reads it with NAME unset. */
const unset = (value: string) => value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');

const composeVersion = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' });
const hasCompose = composeVersion.status === 0;

describe('docker-compose.yml', () => {
  it('passes `docker compose config`', (ctx) => {
    if (!hasCompose) ctx.skip('the docker compose plugin is not installed on this machine (`docker compose version` fails)');
    execFileSync('docker', ['compose', '--file', 'docker-compose.yml', 'config', '--quiet'], {
      cwd: ROOT,
      env: { ...process.env, SECRETS_KEY: '00'.repeat(32) },
      stdio: 'pipe',
    });
  });

  it('mounts only files that exist', () => {
    const mounts = Object.values(services).flatMap((s) => s.volumes ?? []);
    const files = mounts.map((m) => m.split(':')[0]!).filter((source) => source.startsWith('./'));
    expect(files.sort()).toEqual(['./deploy/otel-collector.yaml', './deploy/prometheus.yml']);
    for (const file of files) expect(existsSync(join(ROOT, file)), file).toBe(true);
    // Named volumes are declared.
    const named = mounts.map((m) => m.split(':')[0]!).filter((source) => !source.startsWith('.') && !source.startsWith('/'));
    for (const volume of named) expect(Object.keys(compose.volumes), volume).toContain(volume);
  });

  it('has Prometheus scrape the API on its port and the worker on WORKER_METRICS_PORT', () => {
    const prometheus = readYaml('deploy/prometheus.yml') as {
      scrape_configs: { job_name: string; dns_sd_configs?: { names: string[]; port: number }[] }[];
    };
    const targets = Object.fromEntries(
      prometheus.scrape_configs.flatMap((job) =>
        (job.dns_sd_configs ?? []).map((sd) => [job.job_name, { names: sd.names, port: sd.port }]),
      ),
    );
    expect(targets).toEqual({
      'billing-api': { names: ['api'], port: Number(services.api!.environment!.PORT) },
      'billing-worker': { names: ['worker'], port: Number(services.worker!.environment!.WORKER_METRICS_PORT) },
    });
    // The worker's metrics server listens beyond the container's loopback.
    expect(services.worker!.environment!.HOST).toBe('0.0.0.0');
    expect(services.prometheus!.ports).toContain('127.0.0.1:9090:9090');
  });

  it('sends both processes’ spans to the collector, and the collector’s to Jaeger', () => {
    for (const name of ['api', 'worker']) {
      const env = services[name]!.environment!;
      expect(unset(env.OTEL_EXPORTER_OTLP_ENDPOINT!), name).toBe('http://otel-collector:4318');
      expect(unset(env.OTEL_TRACES_EXPORTER!), name).toBe('otlp');
      expect(env.OTEL_SERVICE_NAME, name).toBe(`billing-${name}`);
      expect(Object.keys(services[name]!.depends_on as Record<string, unknown>), name).toContain('otel-collector');
    }
    const collector = readYaml('deploy/otel-collector.yaml') as {
      receivers: { otlp: { protocols: { http: { endpoint: string } } } };
      processors: Record<string, unknown>;
      exporters: Record<string, { endpoint: string }>;
      extensions: Record<string, unknown>;
      service: { extensions: string[]; pipelines: Record<string, { receivers: string[]; processors: string[]; exporters: string[] }> };
    };
    expect(collector.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    const traces = collector.service.pipelines.traces!;
    // Every component a pipeline names is defined.
    for (const r of traces.receivers) expect(Object.keys(collector.receivers)).toContain(r);
    for (const p of traces.processors) expect(Object.keys(collector.processors)).toContain(p);
    for (const e of traces.exporters) expect(Object.keys(collector.exporters)).toContain(e);
    for (const x of collector.service.extensions) expect(Object.keys(collector.extensions)).toContain(x);
    expect(traces.exporters.map((e) => collector.exporters[e]!.endpoint)).toEqual(['jaeger:4317']);
    expect(services['otel-collector']!.image).toMatch(/^otel\/opentelemetry-collector:\d+\.\d+\.\d+$/);
    expect(services.jaeger!.image).toMatch(/^jaegertracing\/jaeger:2\.\d+\.\d+$/);
    expect(services.jaeger!.ports).toContain('127.0.0.1:16686:16686');
  });
});
