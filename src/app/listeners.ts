import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listen, stopServer, trackConnections } from '../http/server-lifecycle';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { GatewayConfig } from '../config';
import { serveManagement, type ManagementEndpoints } from './management-server';
import type { GatewayServices, RunningGateway } from './running-gateway';

/** The management port a worker of `serve --workers N` names: its primary's (which serves it for every worker). */
export interface PrimaryManagementPort {
  url: string;
  port: number;
}

/**
 * Opens the proxy and management ports and returns the running gateway. A failed start holds no port
 * (#11.20). `close()` is the graceful stop: readiness fails, listeners close, in-flight requests finish (up to
 * `server.shutdown-timeout`), then the subsystems close (`afterStop`: the cleanup stack, audit events kept first,
 * every step within its own bound).
 * In a worker (`primary` set) only the proxy port is opened: in cluster mode it is shared with the other
 * workers, and the primary serves the management port.
 */
export async function startListening(
  config: GatewayConfig,
  logger: Logger,
  metrics: GatewayMetrics,
  server: Server,
  endpoints: ManagementEndpoints,
  hooks: { services: GatewayServices | null; beforeStop: () => void; afterStop: () => Promise<void>; primary?: PrimaryManagementPort },
): Promise<RunningGateway> {
  const connections = trackConnections(server);
  const management = hooks.primary === undefined ? serveManagement(endpoints, config.server, logger) : null;
  const listeners = management === null ? [server] : [server, management];
  try {
    await listen(server, config.server.port, config.server.host);
    if (management !== null) await listen(management, config.server.managementPort, config.server.managementHost);
  } catch (error) {
    // A failed start holds no port (#11.20): close whichever listener did open, then fail.
    await Promise.all(listeners.map((listener) => new Promise<void>((resolve) => (listener.listening ? listener.close(() => resolve()) : resolve()))));
    throw error;
  }
  const port = (server.address() as AddressInfo).port;
  const host = urlHost(config.server.host);
  const managementPort = management === null ? hooks.primary!.port : (management.address() as AddressInfo).port;
  const managementUrl = management === null ? hooks.primary!.url : `http://${urlHost(config.server.managementHost)}:${managementPort}`;
  if (management === null) logger.info({ port, pid: process.pid }, 'iam-gateway worker listening');
  else logger.info({ port, managementPort, upstream: config.upstream.url, enabled: config.iam.enabled }, 'iam-gateway listening');
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}`,
    port,
    managementUrl,
    managementPort,
    managementEndpoints: endpoints,
    logger,
    metrics,
    services: hooks.services,
    close() {
      closing ??= (async () => {
        hooks.beforeStop();
        await stopServer(server, connections, config.server.shutdownTimeoutMs);
        if (management !== null) {
          await new Promise<void>((resolve) => management.close(() => resolve()));
          management.closeAllConnections();
        }
        // Bounded step by step (cleanup-stack.ts): a silent database or token store cannot hold the stop forever.
        await hooks.afterStop();
        logger.info({}, 'iam-gateway stopped');
      })();
      return closing;
    },
  };
}

/** The address to reach a listener bound to `host` from this machine (wildcards → loopback; IPv6 in brackets). */
export function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
