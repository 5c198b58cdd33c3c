import type { AuditTrail } from '../audit/audit-trail';
import type { LoginService } from '../auth/login-service';
import type { DecisionEngine } from '../authz/decision-engine';
import type { GrantProvider } from '../authz/grant-provider';
import type { IamRepository } from '../domain/iam-repository';
import type { EventSubscription, TokenStore } from '../domain/token-store';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { PolicyHolder } from '../policy/policy-holder';
import type { PolicyReloader } from '../policy/policy-watcher';
import type { SessionService } from '../sessions/session-service';
import type { ManagementEndpoints } from './management-server';

/** A started gateway: both ports listening (a worker of `serve --workers N`: the proxy port; the primary serves the management port). */
export interface RunningGateway {
  /** Base URL of the proxy port, e.g. http://127.0.0.1:8080. */
  url: string;
  port: number;
  managementUrl: string;
  managementPort: number;
  /** What this process's management port serves (readiness, metrics); a worker answers its primary with it. */
  managementEndpoints: ManagementEndpoints;
  logger: Logger;
  metrics: GatewayMetrics;
  /** Present when `iam.enabled`. */
  services: GatewayServices | null;
  /** Graceful stop: readiness fails, listeners close, in-flight requests finish (up to the shutdown timeout). */
  close(): Promise<void>;
}

/** The wired services, for the CLI, tests and the admin API. */
export interface GatewayServices {
  repository: IamRepository;
  /** The token store adapter itself; the gateway's components use it through InstrumentedTokenStore (counted). */
  store: TokenStore;
  sessions: SessionService;
  login: LoginService;
  engine: DecisionEngine;
  grants: GrantProvider;
  policy: PolicyHolder;
  /** Hot reload of the policies directory (file events, periodic checksum, SIGHUP). */
  policyReloader: PolicyReloader;
  audit: AuditTrail;
  subscription: EventSubscription;
}
