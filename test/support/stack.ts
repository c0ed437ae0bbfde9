// Per-test-file access to the run's servers: a private database, the API, a Temporal client.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';
import { buildApp } from '../../src/api/app';
import { connectDb, type Db } from '../../src/db';
import { connectTemporal, type TemporalClient } from '../../src/temporal/client';

/** A new database's URI on the run's server, or on `mongoUrl` (a server of the test file's own). */
export function testDbUri(mongoUrl: string = inject('mongoUrl')): string {
  return `${mongoUrl}/test_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
}

/** A fresh database with every index. */
export async function createTestDb(mongoUrl?: string): Promise<Db> {
  const db = await connectDb(testDbUri(mongoUrl), { maxPoolSize: 10 });
  await db.ensureIndexes();
  return db;
}

/**
 * The stack's database through a connection of its own that reports its commands (the driver's
 * command monitoring). Returned once its models have created their collections: mongoose does that
 * in the background after connecting, and a late `create` would land among the commands a test counts.
 */
export async function connectMonitored(stack: Pick<TestStack, 'db'>): Promise<Db> {
  const monitored = await connectDb(`${inject('mongoUrl')}/${stack.db.connection.name}`, { maxPoolSize: 4, monitorCommands: true });
  await Promise.all(Object.values(monitored.models).map((model) => model.init()));
  return monitored;
}

/** The test run's SECRETS_KEY (32 bytes, hex): the API and the workers of a stack share it. */
export const TEST_SECRETS_KEY = '5ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2';

export interface TestStack {
  db: Db;
  temporal: TemporalClient;
  app: FastifyInstance;
  taskQueue: string;
  close(): Promise<void>;
}

/** `logLevel`: the API's log level (default: silent), e.g. 'error' to see the cause of a 500. */
export async function createTestStack(
  options: {
    signupToken?: string;
    now?: () => Date;
    logLevel?: 'error' | 'warn' | 'info';
    /** PAYMENT_PROVIDER_BASE_URL_OVERRIDE (default true: the providers' local fakes need it). */
    allowProviderBaseUrl?: boolean;
    publicUrl?: string;
    /** A MongoDB server of the test file's own (default: the run's). */
    mongoUrl?: string;
  } = {},
): Promise<TestStack> {
  const db = await createTestDb(options.mongoUrl);
  const taskQueue = `test-${randomUUID()}`;
  const temporal = await connectTemporal({ address: inject('temporalAddress'), namespace: 'default', taskQueue });
  const app = await buildApp({
    config: {
      LOG_LEVEL: options.logLevel ?? 'silent',
      BILLING_SIGNUP_TOKEN: options.signupToken,
      BODY_LIMIT_BYTES: 1024 * 1024,
      SECRETS_KEY: TEST_SECRETS_KEY,
      PAYMENT_PROVIDER_BASE_URL_OVERRIDE: options.allowProviderBaseUrl ?? true,
      ...(options.publicUrl ? { PUBLIC_URL: options.publicUrl } : {}),
    },
    db,
    temporal,
    logger: options.logLevel !== undefined,
    ...(options.now ? { now: options.now } : {}),
  });
  await app.ready();
  return {
    db,
    temporal,
    app,
    taskQueue,
    async close() {
      await app.close();
      await db.connection.dropDatabase().catch(() => undefined);
      await db.close();
      await temporal.close();
    },
  };
}

export interface TestOrganization {
  id: string;
  apiKey: string;
  apiKeyId: string;
  headers: { authorization: string };
}

export async function createOrganization(app: FastifyInstance, body: Record<string, unknown> = {}): Promise<TestOrganization> {
  const res = await app.inject({ method: 'POST', url: '/v1/organizations', payload: { name: 'Acme Corp', ...body } });
  if (res.statusCode !== 201) throw new Error(`organization creation failed: ${res.statusCode} ${res.body}`);
  const org = res.json<{ id: string; api_key: { id: string; raw_key: string } }>();
  return {
    id: org.id,
    apiKey: org.api_key.raw_key,
    apiKeyId: org.api_key.id,
    headers: { authorization: `Bearer ${org.api_key.raw_key}` },
  };
}

/** A customer of `org` created through the API (so with the read flags the API sets), in USD; its id. */
export async function createCustomer(app: FastifyInstance, org: Pick<TestOrganization, 'headers'>): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/customers',
    headers: org.headers,
    payload: { external_id: `cus_${randomUUID()}`, currency: 'USD' },
  });
  if (res.statusCode !== 201) throw new Error(`customer creation failed: ${res.statusCode} ${res.body}`);
  return res.json<{ id: string }>().id;
}
