import type { GatewayConfig } from '../config';
import { startGateway as startWired, type StartOptions } from './start-gateway';

/**
 * A running gateway as the package offers it (docs/library.md): where it listens, and how to stop it. The wired
 * services behind it (repositories, token store, sessions) are not public API: they change with the code, and a
 * program that held them could bypass the gateway's own rules.
 */
export interface Gateway {
  /** Base URL of the proxy port, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  readonly port: number;
  readonly managementUrl: string;
  readonly managementPort: number;
  /** Graceful stop: readiness fails, listeners close, in-flight requests finish (up to the shutdown timeout). */
  close(): Promise<void>;
}

/** Starts the whole gateway in this process (proxy, `/iam`, management port); resolves once it listens. */
export async function startGateway(config: GatewayConfig, options?: StartOptions): Promise<Gateway> {
  const running = await startWired(config, options);
  return Object.freeze({
    url: running.url,
    port: running.port,
    managementUrl: running.managementUrl,
    managementPort: running.managementPort,
    close: () => running.close(),
  });
}

export type { StartOptions };
