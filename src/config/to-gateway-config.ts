import * as path from 'node:path';
import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { toAuthenticatorConfig } from './authenticator-schema';
import type { RawConfig } from './config-schema';
import { parseByteSize, parseDuration } from './durations';
import type { GatewayConfig } from './gateway-config';

/** The validated YAML form → what the code uses. Nothing here can fail: validation ran first. */
export function toGatewayConfig(raw: RawConfig, cwd: string, file: string, warnings: string[], authenticators: AuthenticatorRegistry = AUTHENTICATORS): GatewayConfig {
  const ms = (value: string | number, key: string): number => parseDuration(value, key);
  const bytes = (value: string | number, key: string): number => parseByteSize(value, key);
  const fromCwd = (value: string): string => path.resolve(cwd, value);
  const { server, upstream, iam } = raw;
  const { token, forward, cors } = iam;
  return {
    server: {
      port: server.port,
      managementPort: server['management-port'],
      host: server.host,
      managementHost: server['management-host'],
      requestTimeoutMs: ms(server['request-timeout'], 'server.request-timeout'),
      headersTimeoutMs: ms(server['headers-timeout'], 'server.headers-timeout'),
      keepAliveTimeoutMs: ms(server['keep-alive-timeout'], 'server.keep-alive-timeout'),
      maxHeaderSize: bytes(server['max-header-size'], 'server.max-header-size'),
      maxUrlLength: bytes(server['max-url-length'], 'server.max-url-length'),
      iamBodyLimit: bytes(server['iam-body-limit'], 'server.iam-body-limit'),
      shutdownTimeoutMs: ms(server['shutdown-timeout'], 'server.shutdown-timeout'),
      workers: server.workers === 'auto' ? 'auto' : Number(server.workers),
    },
    upstream: {
      url: upstream.url,
      connectTimeoutMs: ms(upstream['connect-timeout'], 'upstream.connect-timeout'),
      responseTimeoutMs: ms(upstream['response-timeout'], 'upstream.response-timeout'),
      bodyTimeoutMs: ms(upstream['body-timeout'], 'upstream.body-timeout'),
      connections: upstream.connections,
      websocketIdleTimeoutMs: ms(upstream['websocket-idle-timeout'], 'upstream.websocket-idle-timeout'),
      websocketRecheckIntervalMs: ms(upstream['websocket-recheck-interval'], 'upstream.websocket-recheck-interval'),
    },
    database: {
      url: raw.database.url ?? null,
      embeddedDir: raw.database['embedded-dir'].startsWith('memory://')
        ? raw.database['embedded-dir']
        : fromCwd(raw.database['embedded-dir']),
      poolSize: raw.database['pool-size'],
      connectTimeoutMs: ms(raw.database['connect-timeout'], 'database.connect-timeout'),
      queryTimeoutMs: ms(raw.database['query-timeout'], 'database.query-timeout'),
      idleTimeoutMs: ms(raw.database['idle-timeout'], 'database.idle-timeout'),
    },
    redis: {
      url: raw.redis.url ?? null,
      waitReplicas: raw.redis['wait-replicas'],
      waitTimeoutMs: ms(raw.redis['wait-timeout'], 'redis.wait-timeout'),
    },
    log: { level: raw.log.level },
    iam: {
      enabled: iam.enabled,
      token: {
        storePrefix: token['store-prefix'],
        ttlMs: ms(token.ttl, 'iam.token.ttl'),
        idleTimeoutMs: ms(token['idle-timeout'], 'iam.token.idle-timeout'),
        maxSessionsPerUser: token['max-sessions-per-user'],
        cache: {
          enabled: token.cache.enabled,
          maxEntries: token.cache['max-entries'],
          revalidateMs: ms(token.cache['revalidate-interval'], 'iam.token.cache.revalidate-interval'),
        },
      },
      schema: { historyTable: iam.schema['history-table'] },
      clientTypes: [...iam['client-types']],
      login: {
        rateLimit: {
          maxFailures: iam.login['rate-limit']['max-failures'],
          maxFailuresPerAddress: iam.login['rate-limit']['max-failures-per-address'],
          windowMs: ms(iam.login['rate-limit'].window, 'iam.login.rate-limit.window'),
        },
        maxPendingVerifications: iam.login['max-pending-verifications'],
      },
      authenticator: toAuthenticatorConfig(iam.authenticator, cwd, authenticators),
      provision: { file: nullable(iam.provision.file, fromCwd) },
      policy: {
        dir: fromCwd(iam.policy.dir),
        candidateDir: iam.policy['candidate-dir'] == null ? null : fromCwd(iam.policy['candidate-dir']),
        pollIntervalMs: ms(iam.policy['poll-interval'], 'iam.policy.poll-interval'),
        debounceMs: ms(iam.policy.debounce, 'iam.policy.debounce'),
      },
      changes: { pollIntervalMs: ms(iam.changes['poll-interval'], 'iam.changes.poll-interval') },
      authz: {
        abilityCacheSize: iam.authz['ability-cache-size'],
        abilityCacheBytes: bytes(iam.authz['ability-cache-memory'], 'iam.authz.ability-cache-memory'),
        resolverTimeoutMs: ms(iam.authz['resolver-timeout'], 'iam.authz.resolver-timeout'),
        callerResolutions: {
          perCall: iam.authz['caller-resolutions']['per-call'],
          inFlightPerCaller: iam.authz['caller-resolutions']['in-flight-per-caller'],
          connections: iam.authz['caller-resolutions'].connections,
        },
      },
      gateway: { allowPathParameters: iam.gateway['allow-path-parameters'] },
      forward: {
        trustedProxies: [...forward['trusted-proxies']],
        assertion: {
          enabled: forward.assertion.enabled,
          ttlMs: ms(forward.assertion.ttl, 'iam.forward.assertion.ttl'),
          issuer: forward.assertion.issuer,
          audience: forward.assertion.audience ?? null,
          keyFile: nullable(forward.assertion['key-file'] ?? null, fromCwd),
        },
      },
      sessionCookie: { secure: iam['session-cookie'].secure, trustedOrigins: [...iam['session-cookie']['trusted-origins']] },
      ui: { title: iam.ui.title, logoUrl: iam.ui['logo-url'] ?? null, templatesDir: nullable(iam.ui['templates-dir'] ?? null, fromCwd) },
      accessLog: { mode: iam['access-log'], sample: iam['access-log-sample'] },
      oidc: {
        issuer: iam.oidc.issuer ?? null,
        clientId: iam.oidc['client-id'] ?? null,
        clientSecret: iam.oidc['client-secret'] ?? null,
        redirectUri: iam.oidc['redirect-uri'] ?? null,
        postLogoutRedirectUri: iam.oidc['post-logout-redirect-uri'] ?? null,
        scopes: [...iam.oidc.scopes],
        claims: { userId: iam.oidc.claims['user-id'], identityDomain: iam.oidc.claims['identity-domain'] ?? null, profile: iam.oidc.claims.profile ?? null },
        users: iam.oidc.users,
        linkBy: iam.oidc['link-by'],
        allowed: iam.oidc.allowed.map((condition) => ({ claim: condition.claim, values: [...(condition.values ?? [])] })),
        profiles: iam.oidc.profiles.map((rule) => ({
          name: rule.name,
          when: (rule.when ?? []).map((condition) => ({ claim: condition.claim, values: [...(condition.values ?? [])] })),
          profileName: rule['profile-name'] ?? rule.name,
          templateVersionId: rule['template-version'],
          clientTypes: [...rule['client-types']],
          scopes: (rule.scopes ?? []).map((scope) => (scope.claim != null ? { type: scope.type, claim: scope.claim, access: scope.access } : { type: scope.type, id: scope.id!, access: scope.access })),
          unscoped: rule.unscoped ?? null,
        })),
        acceptAccessTokens: iam.oidc['accept-access-tokens'],
        audience: iam.oidc.audience ?? null,
        accessTokenTypes: [...iam.oidc['access-token-types']],
        algorithms: [...iam.oidc.algorithms],
        clockToleranceMs: ms(iam.oidc['clock-tolerance'], 'iam.oidc.clock-tolerance'),
        revocationMarginMs: ms(iam.oidc['revocation-margin'], 'iam.oidc.revocation-margin'),
        timeoutMs: ms(iam.oidc.timeout, 'iam.oidc.timeout'),
      },
      cors: {
        enabled: cors.enabled,
        origins: [...cors.origins],
        methods: [...cors.methods],
        headers: [...cors.headers],
        maxAgeSeconds: cors['max-age'],
        credentials: cors.credentials,
      },
      audit: {
        flushIntervalMs: ms(iam.audit['flush-interval'], 'iam.audit.flush-interval'),
        spoolDir: fromCwd(iam.audit['spool-dir']),
        spoolMaxBytes: bytes(iam.audit['spool-max-bytes'], 'iam.audit.spool-max-bytes'),
        retentionMs: ms(iam.audit.retention, 'iam.audit.retention'),
        anonymousDenialsPerMinute: iam.audit['anonymous-denials-per-minute'],
      },
    },
    source: { file, directory: path.dirname(file) },
    warnings,
  };
}

const nullable = (value: string | null | undefined, map: (value: string) => string): string | null =>
  value === undefined || value === null ? null : map(value);
