// The API process's tracing, started as src/server.ts's first import: the instrumentations patch
// `http` and `fastify` as they are required, so this must run before anything loads them.
import { bootTracing, type Tracing } from './index';

export const tracing: Tracing | undefined = bootTracing('billing-api');
