import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface ReadinessCheck {
  name: string;
  /** Resolves with a detail object when healthy; rejects (or resolves `ok: false`) when not. */
  check: () => Promise<{ ok: boolean; detail?: Record<string, unknown> }>;
}

/**
 * The management port (design.md §2): `/health/live` (the process answers), `/health/ready` (database,
 * token store and policy), `/metrics` (Prometheus). Kept off the proxy port so it is never exposed with it.
 */
export function createManagementServer(options: { registry: Registry; checks: ReadinessCheck[]; isShuttingDown: () => boolean }): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown, type = 'application/json'): void => {
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { status: 'method not allowed' });
    if (path === '/health/live') return send(200, { status: 'ok' });
    if (path === '/health/ready') {
      void readiness(options.checks, options.isShuttingDown()).then(({ ready, checks }) => send(ready ? 200 : 503, { status: ready ? 'ready' : 'not ready', checks }));
      return;
    }
    if (path === '/metrics') {
      void options.registry.metrics().then((text) => send(200, text, options.registry.contentType), () => send(500, { status: 'metrics failed' }));
      return;
    }
    send(404, { status: 'not found' });
  });
}

async function readiness(checks: ReadinessCheck[], shuttingDown: boolean): Promise<{ ready: boolean; checks: Record<string, unknown> }> {
  const results: Record<string, unknown> = {};
  let ready = !shuttingDown;
  if (shuttingDown) results.shutdown = { ok: false, detail: { reason: 'shutting down' } };
  await Promise.all(
    checks.map(async ({ name, check }) => {
      try {
        const result = await withTimeout(check(), 2000);
        results[name] = result;
        if (!result.ok) ready = false;
      } catch (error) {
        results[name] = { ok: false, detail: { error: (error as Error).message } };
        ready = false;
      }
    }),
  );
  return { ready, checks: results };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
