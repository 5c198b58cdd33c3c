import type { IncomingMessage, ServerResponse } from 'node:http';
import { createIamApp } from '../api/iam-app';
import { registerIamRoutes, type IamRoutesDeps } from '../api/iam-routes';
import type { Logger } from '../observability/logger';
import type { OutageLog } from '../observability/outage-log';
import type { GatewayConfig } from './config';

/** The `/iam` application with every route group (docs/http-contract.md), as a Node request listener. */
export function createIamApi(
  config: GatewayConfig,
  deps: Omit<IamRoutesDeps, 'clientTypes' | 'allowPathParameters' | 'maxUrlLength' | 'sessionCookie'> & { logger: Logger; outages: OutageLog },
): (req: IncomingMessage, res: ServerResponse) => unknown {
  const app = createIamApp({
    logger: deps.logger,
    outages: deps.outages,
    bodyLimit: config.server.iamBodyLimit,
    register: (router) =>
      registerIamRoutes(router, {
        ...deps,
        clientTypes: config.iam.clientTypes,
        sessionCookie: { secure: config.iam.sessionCookie.secure, trustedOrigins: new Set(config.iam.sessionCookie.trustedOrigins) },
        allowPathParameters: config.iam.gateway.allowPathParameters,
        maxUrlLength: config.server.maxUrlLength,
      }),
  });
  return app.callback();
}
