// A real local HTTP server standing in for a tenant's webhook receiver.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  receivedAt: number;
}

/** What the receiver does with the n-th request (1-based) to a path: a status, or 'hang'. */
export type Behaviour = (n: number) => number | 'hang';

export interface Receiver {
  url(path: string): string;
  on(path: string, behaviour: Behaviour): void;
  requests(path: string): ReceivedRequest[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const behaviours = new Map<string, Behaviour>();
  const received = new Map<string, ReceivedRequest[]>();
  const hanging = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const list = received.get(path) ?? [];
      list.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), receivedAt: Date.now() });
      received.set(path, list);
      const action = (behaviours.get(path) ?? (() => 200))(list.length);
      if (action === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(action, { 'content-type': 'text/plain' }).end(String(action));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    on: (path, behaviour) => behaviours.set(path, behaviour),
    requests: (path) => received.get(path) ?? [],
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
