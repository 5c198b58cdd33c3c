import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import type { GatewayConfig } from '../config';
import type { Logger } from '../observability/logger';
import { serverOptions } from '../http/server-lifecycle';

export interface ReadinessCheck {
  name: string;
  /** Resolves with a detail object when healthy; rejects (or resolves `ok: false`) when not. The detail is logged, never served. */
  check: () => Promise<{ ok: boolean; detail?: Record<string, unknown> }>;
}

/** The body of `/health/ready`: only `ok` per component (why one is not ready goes to the log). */
export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, { ok: boolean }>;
}

/**
 * What the management port serves besides liveness. One process: its own checks and registry
 * ({@link localEndpoints}); `serve --workers N`: the primary asks every worker (workers/primary.ts).
 */
export interface ManagementEndpoints {
  readiness(): Promise<ReadinessReport>;
  /** The Prometheus text exposition. */
  metrics(): Promise<string>;
  contentType: string;
}

export interface ManagementServerOptions {
  registry: Registry;
  checks: ReadinessCheck[];
  isShuttingDown: () => boolean;
  /** The proxy port's limits and timeouts apply here too (`server.*`). */
  server: GatewayConfig['server'];
  logger: Logger;
}

/** One process's readiness (its checks, each state change logged once) and its registry. */
export function localEndpoints(options: Pick<ManagementServerOptions, 'registry' | 'checks' | 'isShuttingDown' | 'logger'>): ManagementEndpoints {
  const lastState = new Map<string, boolean>();
  return {
    readiness: () => readiness(options.checks, options.isShuttingDown(), options.logger, lastState),
    metrics: () => options.registry.metrics(),
    contentType: options.registry.contentType,
  };
}

/**
 * The management port: `/health/live` (the process answers), `/health/ready` (database,
 * token store and policy), `/metrics` (Prometheus). Kept off the proxy port so it is never exposed with it.
 * It has no authentication: it listens on loopback by default (`server.management-host`), and readiness
 * serves only `ok` per component; why a component is not ready (file names, error text) goes to the log.
 */
export function createManagementServer(options: ManagementServerOptions): Server {
  return serveManagement(localEndpoints(options), options.server, options.logger);
}

/** The management port's HTTP server over `endpoints` (one process's, or the primary's for all workers). */
export function serveManagement(endpoints: ManagementEndpoints, limits: GatewayConfig['server'], logger: Logger): Server {
  return createServer(
    serverOptions(limits),
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const send = (status: number, body: unknown, type = 'application/json'): void => {
        const text = typeof body === 'string' ? body : JSON.stringify(body);
        res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { status: 'method not allowed' });
      if (path === '/health/live') return send(200, { status: 'ok' });
      if (path === '/health/ready') {
        void endpoints.readiness().then(({ ready, checks }) => send(ready ? 200 : 503, { status: ready ? 'ready' : 'not ready', checks }));
        return;
      }
      if (path === '/metrics') {
        void endpoints.metrics().then(
          (text) => send(200, text, endpoints.contentType),
          (error: unknown) => {
            logger.error({ err: error }, 'management: metrics failed');
            send(500, { status: 'metrics failed' });
          },
        );
        return;
      }
      send(404, { status: 'not found' });
    },
  );
}

async function readiness(checks: ReadinessCheck[], shuttingDown: boolean, logger: Logger, lastState: Map<string, boolean>): Promise<ReadinessReport> {
  const results: Record<string, { ok: boolean }> = {};
  let ready = !shuttingDown;
  if (shuttingDown) results.shutdown = { ok: false };
  await Promise.all(
    checks.map(async ({ name, check }) => {
      let ok: boolean;
      let detail: Record<string, unknown> | undefined;
      try {
        const result = await withTimeout(check(), 2000);
        ok = result.ok;
        detail = result.detail;
      } catch (error) {
        ok = false;
        detail = { error: (error as Error).message };
      }
      results[name] = { ok };
      if (!ok) ready = false;
      // Logged when a component changes state, so a probe every few seconds does not flood the log.
      const previous = lastState.get(name);
      if (previous !== ok) {
        lastState.set(name, ok);
        if (ok && previous !== undefined) logger.info({ component: name, detail }, `readiness: ${name} ready`);
        else if (!ok) logger.warn({ component: name, detail }, `readiness: ${name} not ready`);
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
