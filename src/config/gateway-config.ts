import type { DatabaseSettings } from '../adapters/postgres/database';
import type { AuthenticatorConfig } from '../auth/authenticators';
import type { ClaimCondition, ProfileRule } from '../auth/oidc/claim-rules';

/**
 * The validated configuration, as the code sees it: YAML keys in camelCase, durations in milliseconds,
 * sizes in bytes. The YAML/env form (kebab-case keys, `8h`, `1mb`) is documented in config/default.yaml.
 */
export interface GatewayConfig {
  server: {
    /** `server.port` / `PORT`: proxy and /iam. */
    port: number;
    /** `server.management-port` / `MANAGEMENT_PORT`: health, readiness, metrics. */
    managementPort: number;
    /** `server.host`: listen address of the proxy port. */
    host: string;
    /** `server.management-host`: listen address of the management port (loopback by default: it has no authentication). */
    managementHost: string;
    /** `server.request-timeout`: a client must send its whole request within this (slowloris guard). */
    requestTimeoutMs: number;
    /** `server.headers-timeout`: a client must send its headers within this. */
    headersTimeoutMs: number;
    /** `server.keep-alive-timeout`: idle client connections are closed after this. */
    keepAliveTimeoutMs: number;
    /** `server.max-header-size`: bytes of request headers, 431 above. */
    maxHeaderSize: number;
    /** `server.max-url-length`: bytes of request target, 414 above. */
    maxUrlLength: number;
    /** `server.iam-body-limit`: bytes of a JSON body sent to /iam, 413 above. */
    iamBodyLimit: number;
    /** `server.shutdown-timeout`: in-flight requests get this long after SIGTERM. */
    shutdownTimeoutMs: number;
    /**
     * `server.workers` / `SERVER_WORKERS` (`serve --workers` wins): processes serving the proxy port; `auto` = one
     * per available core (`os.availableParallelism()`), resolved by `serve` (workers/).
     */
    workers: number | 'auto';
  };
  upstream: {
    /** `upstream.url` / `UPSTREAM_URL`: the host behind the gateway. */
    url: string;
    connectTimeoutMs: number;
    /** `upstream.response-timeout`: time to the host's response headers, 504 above. */
    responseTimeoutMs: number;
    /** `upstream.body-timeout`: max silence while streaming a body either way. */
    bodyTimeoutMs: number;
    /** `upstream.connections`: keep-alive pool size. */
    connections: number;
    /** `upstream.websocket-idle-timeout`: a tunnel with no bytes either way for this long is closed. */
    websocketIdleTimeoutMs: number;
    /** `upstream.websocket-recheck-interval`: longest time between two authorization checks of an open tunnel. */
    websocketRecheckIntervalMs: number;
  };
  /** `database.*`: the shape the database adapter opens with (adapters/postgres/database.ts). */
  database: DatabaseSettings['database'];
  redis: {
    /** `redis.url` / `REDIS_URL`; null → in-process token store (single instance only). */
    url: string | null;
    /** `redis.wait-replicas`: revocations wait for this many replicas (WAIT) when the primary has any; 0 = off. */
    waitReplicas: number;
    /** `redis.wait-timeout`: the longest a revocation waits for them. */
    waitTimeoutMs: number;
  };
  log: { level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent' };
  iam: {
    enabled: boolean;
    token: {
      storePrefix: string;
      ttlMs: number;
      /** 0 = off. */
      idleTimeoutMs: number;
      /** `iam.token.max-sessions-per-user`: live sessions per user; the oldest beyond it are revoked. */
      maxSessionsPerUser: number;
      /** `revalidateMs`: `iam.token.cache.revalidate-interval`, the longest a cached session goes unchecked. */
      cache: { enabled: boolean; maxEntries: number; revalidateMs: number };
    };
    schema: { historyTable: string };
    clientTypes: string[];
    login: { rateLimit: { maxFailures: number; maxFailuresPerAddress: number; windowMs: number }; maxPendingVerifications: number };
    /** `iam.authenticator.*`: the type and every registered login method's keys (`path`, `url`, `module`, `timeoutMs`). */
    authenticator: AuthenticatorConfig;
    provision: { file: string | null };
    policy: {
      /** `iam.policy.dir` / `IAM_POLICIES_DIR`. */
      dir: string;
      /** `iam.policy.candidate-dir` / `IAM_POLICY_CANDIDATE_DIR`, absolute; null = no candidate. */
      candidateDir: string | null;
      /** Periodic checksum check; 0 = off. */
      pollIntervalMs: number;
      /** Quiet time after a file event before reloading. */
      debounceMs: number;
    };
    changes: {
      /**
       * How often each instance reads the change feed and retries undelivered changes: how long an instance
       * may serve a revoked session or a stale grant when an event was lost (while PostgreSQL answers).
       */
      pollIntervalMs: number;
    };
    authz: {
      /** Bound of the in-process ability cache (LRU). */
      abilityCacheSize: number;
      /** Memory bound of the ability cache: approximate bytes of the compiled grants it holds (LRU). */
      abilityCacheBytes: number;
      /** Default timeout of resource resolvers without their own. */
      resolverTimeoutMs: number;
      /** The resolution budget of a caller's own check and diagnostics calls (authz/resolution-budget.ts), and their own pool. */
      callerResolutions: { perCall: number; inFlightPerCaller: number; connections: number };
    };
    gateway: {
      /** Accept `;` path parameters (refused by default, docs/http-contract.md). */
      allowPathParameters: boolean;
    };
    forward: {
      /** Addresses or CIDRs whose X-Forwarded-* / Forwarded headers are kept. */
      trustedProxies: string[];
      assertion: {
        enabled: boolean;
        ttlMs: number;
        issuer: string;
        audience: string | null;
        /** `iam.forward.assertion.key-file`: PEM Ed25519 private key; null = generated at start (one instance only). */
        keyFile: string | null;
      };
    };
    /** Browser sessions: the cookie carrying the session token, and CSRF (docs/http-contract.md). */
    sessionCookie: {
      /** `__Host-iam-session` with `Secure`; false: `iam-session` without it (plain-http development). */
      secure: boolean;
      /** Origins besides the gateway's own allowed to send unsafe cookie-authenticated requests. */
      trustedOrigins: string[];
    };
    /** `iam.ui.*`: the branding of the gateway's own browser pages (docs/http-contract.md). */
    ui: { title: string; logoUrl: string | null; templatesDir: string | null };
    /** `iam.access-log` and `iam.access-log-sample` (docs/observability.md). */
    accessLog: { mode: 'all' | 'denied' | 'off'; sample: number };
    /** OpenID Connect: the provider, this client, and how its claims become a principal (docs/oidc.md). */
    oidc: {
      issuer: string | null;
      clientId: string | null;
      clientSecret: string | null;
      redirectUri: string | null;
      postLogoutRedirectUri: string | null;
      scopes: string[];
      claims: { userId: string; identityDomain: string | null; profile: string | null };
      /** `jit`: users are created on first login; `existing`: only known users may log in. */
      users: 'jit' | 'existing';
      /** What, besides an admin, may join a new provider account to an existing user (docs/oidc.md). */
      linkBy: 'none' | 'verified-email';
      /** `iam.oidc.allowed`: claims a provider account must have to sign in. */
      allowed: ClaimCondition[];
      /** `iam.oidc.profiles`: rules from claims to projected profiles, applied at every login. */
      profiles: ProfileRule[];
      acceptAccessTokens: boolean;
      /** With `acceptAccessTokens`, set and not the client id (the configuration check refuses otherwise). */
      audience: string | null;
      /** The `typ` values a JWT access token may carry. */
      accessTokenTypes: string[];
      algorithms: string[];
      clockToleranceMs: number;
      /**
       * `iam.oidc.revocation-margin`: a provider access token issued (`iat`) less than this after its user's
       * sessions were all ended is refused too (a provider clock running ahead of the gateway's); 0 = the instant.
       */
      revocationMarginMs: number;
      timeoutMs: number;
    };
    cors: {
      enabled: boolean;
      origins: string[];
      methods: string[];
      headers: string[];
      maxAgeSeconds: number;
      credentials: boolean;
    };
    audit: { flushIntervalMs: number; spoolDir: string; spoolMaxBytes: number; retentionMs: number; anonymousDenialsPerMinute: number };
  };
  /** Absolute path of the file the configuration came from (for resolving relative paths). */
  source: { file: string; directory: string };
  /**
   * What loading noticed without refusing it: one line per `IAM_…` or `SERVER_…` environment variable that no key
   * reads (`unknown environment variable IAM_POLICY_DIRR (did you mean IAM_POLICY_DIR?)`), logged as warnings at start.
   */
  warnings: string[];
}
