/**
 * A resolver host on loopback for the tests of decisions that resolve a resource (docs/policy-format.md, resolvers):
 * `answer` gets each request's resource id (the last path segment, decoded) and answers it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ResolverHost {
  /** `http://127.0.0.1:<port>`, for a policy's `resolver.url`. */
  origin: string;
  close(): Promise<void>;
}

/** The JSON answer of a resource whose scope is `{type, id}`. */
export function answerScope(res: ServerResponse, type: string, id: string): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ scopes: [{ type, id }] }));
}

export async function startResolverHost(answer: (id: string, res: ServerResponse, req: IncomingMessage) => void): Promise<ResolverHost> {
  const server = createServer((req, res) => answer(decodeURIComponent((req.url ?? '').split('/').pop() ?? ''), res, req));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
