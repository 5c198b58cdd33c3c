/** `components.schemas` of the `/iam` OpenAPI document (JSON Schema 2020-12). */
import { MAX_PROFILE_SCOPES, MAX_TEMPLATE_PERMISSIONS } from '../domain/grant-limits';
import { PROBLEM_CATALOG } from '../domain/problem';
import { identifier, nullable, ref, strictObject, timestamp } from './openapi-builders';
import type { JsonSchema } from './openapi-types';

const STEP_PASSED = ['AUTHENTICATED', 'PROFILE_ACTIVE', 'PERMISSION_GRANTED', 'RESOURCE_RESOLVED', 'SCOPE_GRANTED'];
// UNAUTHENTICATED appears only in decisions of the proxy path (an auditor may read those by id).
const STEP_FAILED = [
  'UNAUTHENTICATED',
  'NO_ACTIVE_PROFILE',
  'DOMAIN_MISMATCH',
  'CLIENT_TYPE_MISMATCH',
  'PERMISSION_DENIED',
  'RESOURCE_NOT_FOUND',
  'RESOURCE_RESOLUTION_UNAVAILABLE',
  'SCOPE_DENIED',
  'ROUTE_NOT_DECLARED',
];
const PERMISSION_CODE_PATTERN = '^(\\*:\\*|[A-Za-z0-9_.-]+:([A-Za-z0-9_.-]+|\\*))$';

const page = (item: string): JsonSchema =>
  strictObject({
    items: { type: 'array', items: ref(item) },
    nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last page.' },
  });

/** Every component schema, by name (`#/components/schemas/<name>`). */
export const schemas: Record<string, JsonSchema> = {
  Problem: {
    description: 'RFC 9457 problem details (docs/http-contract.md). Never carries a stack trace or an internal cause.',
    type: 'object',
    additionalProperties: false,
    required: ['type', 'title', 'status', 'detail', 'instance', 'code', 'requestId'],
    properties: {
      type: { type: 'string', format: 'uri', pattern: '^https://iam-gateway\\.dev/problems/[a-z-]+$' },
      title: { type: 'string', minLength: 1 },
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string' },
      instance: { type: 'string', description: 'The (normalized) request path.' },
      code: { enum: Object.keys(PROBLEM_CATALOG), description: 'Stable code from the catalog; match on this, never on `detail`.' },
      requestId: { type: 'string', format: 'uuid', description: 'Also in the `X-Request-Id` header and the log.' },
      decisionId: { type: 'string', format: 'uuid', description: 'Find the full decision with GET /iam/authorization/decisions/{decisionId}.' },
      step: { enum: STEP_FAILED, description: 'The decision step that failed.' },
      rule: {
        enum: ['ESCALATION_PREVENTION'],
        description: 'An admin write refused by a rule rather than a decision: ESCALATION_PREVENTION = it would grant what the actor\'s active profile does not hold (`errors` names what).',
      },
      errors: {
        type: 'array',
        minItems: 1,
        items: strictObject({ pointer: { type: 'string', format: 'json-pointer' }, message: { type: 'string', minLength: 1 } }),
      },
    },
    if: { type: 'object', properties: { code: { const: 'IAM_VALIDATION_FAILED' } } },
    then: { type: 'object', required: ['errors'], properties: { errors: { type: 'array' } } },
  },
  Principal: strictObject(
    {
      userId: identifier('The user (the host\'s id, never renumbered).'),
      identityId: identifier('The identity the user logged in with.'),
      identityDomain: identifier('The domain of that identity.'),
      activeProfileId: nullable(identifier('The profile whose permissions this session carries; null when none applies to the client type.')),
      displayName: { type: 'string' },
      authorizationVersion: { type: 'integer', minimum: 0 },
    },
    ['userId', 'identityId', 'identityDomain', 'activeProfileId', 'authorizationVersion'],
  ),
  AuthenticationResult: strictObject({
    accessToken: { type: 'string', pattern: '^iamt_[A-Za-z0-9_-]{43}$', description: 'Send as `Authorization: Bearer <accessToken>` (docs/http-contract.md: 256 random bits, base64url).' },
    sessionId: { type: 'string', format: 'uuid' },
    expiresAt: timestamp('Absolute expiry of the session (ISO 8601 UTC).'),
    principal: ref('Principal'),
  }),
  Session: {
    ...strictObject({
      sessionId: { type: 'string', format: 'uuid' },
      clientType: { type: 'string', minLength: 1 },
      activeProfileId: nullable(identifier('The profile the session acts under.')),
      createdAt: timestamp('When the session was issued.'),
      expiresAt: timestamp('Absolute expiry.'),
      lastSeenAt: nullable(timestamp('Last authenticated request (recorded with a short delay).')),
      state: { enum: ['active', 'revoked', 'logged_out', 'expired'] },
      revokedAt: nullable(timestamp('When it was revoked.')),
      logoutAt: nullable(timestamp('When it logged out.')),
      revokeReason: { type: ['string', 'null'] },
      current: { type: 'boolean', description: 'True for the session of the token that asked.' },
    }),
    allOf: [
      { if: { type: 'object', properties: { state: { const: 'revoked' } } }, then: { type: 'object', properties: { revokedAt: { type: 'string' } } } },
      { if: { type: 'object', properties: { state: { const: 'logged_out' } } }, then: { type: 'object', properties: { logoutAt: { type: 'string' } } } },
    ],
  },
  Scope: strictObject({
    scopeType: identifier('Resource type, e.g. PROJECT.'),
    scopeRefId: identifier('Resource id; `*` = every resource of the type.'),
    accessMode: { enum: ['READ', 'WRITE'], description: 'WRITE also covers READ.' },
  }),
  Profile: strictObject({
    profileId: identifier('Chosen by the host or the admin.'),
    userId: identifier('Owner.'),
    profileName: { type: 'string', minLength: 1 },
    templateVersionId: identifier('The permission template version the profile aggregates.'),
    clientTypes: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    unscoped: { type: 'boolean', description: 'True: the permissions apply to every resource (no scopes). False: only to what `scopes` cover; none = no resource.' },
    scopes: { type: 'array', items: ref('Scope'), description: 'What a scoped profile\'s permissions apply to; empty on a scoped profile = no resource.' },
    version: { type: 'integer', minimum: 0, description: 'Raised on every change; the admin API\'s ETag.' },
  }),
  DecisionStep: {
    ...strictObject({ code: { enum: [...STEP_PASSED, ...STEP_FAILED] }, passed: { type: 'boolean' }, reason: { type: 'string', minLength: 1 } }),
    if: { type: 'object', properties: { passed: { const: true } } },
    then: { type: 'object', properties: { code: { enum: STEP_PASSED } } },
    else: { type: 'object', properties: { code: { enum: STEP_FAILED } } },
  },
  DecisionRoute: strictObject({
    id: { type: 'string', minLength: 1 },
    pattern: { type: 'string', minLength: 1 },
    file: { type: 'string', minLength: 1 },
    line: { type: 'integer', minimum: 1 },
    mode: { enum: ['enforce', 'shadow'] },
    public: { type: 'boolean' },
  }),
  DecisionResource: strictObject(
    {
      type: { type: 'string', minLength: 1 },
      id: { type: 'string' },
      access: { enum: ['READ', 'WRITE'] },
      scopeRefs: { type: 'array', items: strictObject({ type: { type: 'string' }, id: { type: 'string' } }) },
    },
    ['type', 'id', 'access'],
  ),
  Decision: {
    description: 'The one decision the proxy, forward-auth and diagnostics share (docs/http-contract.md). Steps stop at the first failure.',
    ...strictObject(
      {
        decisionId: { type: 'string', format: 'uuid' },
        allowed: { type: 'boolean' },
        permissionCode: { type: ['string', 'null'] },
        profileId: nullable(identifier('The profile that was evaluated.')),
        userId: nullable(identifier('The user the decision is about.')),
        route: { anyOf: [ref('DecisionRoute'), { type: 'null' }], description: 'The matched policy route (file:line); null when none.' },
        resource: { anyOf: [ref('DecisionResource'), { type: 'null' }] },
        steps: { type: 'array', items: ref('DecisionStep') },
        status: { type: 'integer', description: 'What enforcement answers: 200, or the problem status.' },
        problemCode: { anyOf: [{ enum: Object.keys(PROBLEM_CATALOG) }, { type: 'null' }] },
        failedStep: { anyOf: [{ enum: STEP_FAILED }, { type: 'null' }] },
        shadowed: { type: 'boolean', description: 'A shadow-mode route that would deny: enforcement lets it through.' },
        evaluatedAt: timestamp('When the decision was made.'),
      },
      ['decisionId', 'allowed', 'permissionCode', 'profileId', 'userId', 'steps', 'status', 'problemCode', 'failedStep', 'shadowed', 'evaluatedAt'],
    ),
    allOf: [
      {
        if: { type: 'object', properties: { failedStep: { type: 'null' } } },
        then: { type: 'object', properties: { allowed: { const: true }, problemCode: { type: 'null' }, status: { const: 200 } } },
        else: { type: 'object', properties: { problemCode: { type: 'string' }, status: { type: 'integer', minimum: 400 } } },
      },
    ],
  },
  LoginRequest: strictObject({
    username: { type: 'string', minLength: 1, maxLength: 200 },
    password: { type: 'string', minLength: 1, maxLength: 1024, description: 'Write-only; never logged or stored.' },
    clientType: { type: 'string', description: 'One of `iam.client-types` (default WEB, MOBILE, DESKTOP, API); others get 400.' },
  }),
  DiagnosticsRequest: {
    description: 'A permission check (needs `iam.admin.diagnostics:read`), or `{method, path}` to explain a host request exactly as the proxy would (any session).',
    oneOf: [ref('DiagnosticsPermissionCheck'), ref('DiagnosticsRequestTarget')],
  },
  DiagnosticsPermissionCheck: {
    ...strictObject(
      {
        permissionCode: { type: 'string', minLength: 3, maxLength: 200, description: 'e.g. `project:read`.' },
        domain: { type: 'string', maxLength: 200, description: 'Identity domain the principal must have.' },
        clientType: { type: 'string', maxLength: 50, description: 'Checked against the profile instead of the session\'s own.' },
        resourceType: { type: 'string', minLength: 1, maxLength: 100, description: 'Scope type.' },
        resourceId: { type: 'string', minLength: 1, maxLength: 200, description: 'Scope reference id.' },
        scopeAccess: { enum: ['READ', 'WRITE'], default: 'READ' },
      },
      ['permissionCode'],
    ),
    dependentRequired: { resourceType: ['resourceId'], resourceId: ['resourceType'], scopeAccess: ['resourceType'] },
  },
  DiagnosticsRequestTarget: strictObject({
    method: { type: 'string', pattern: '^[A-Za-z]{1,20}$' },
    path: { type: 'string', minLength: 1, maxLength: 8192, description: 'Normalized as the proxy would (docs/http-contract.md); a refused path is a 400.' },
  }),
  JwkSet: strictObject({ keys: { type: 'array', items: ref('Jwk'), description: 'Empty when `iam.forward.assertion` is off.' } }),
  Jwk: {
    description: 'A public key (RFC 7517 §4). Private members (`d`, `p`, `q`, `k`…) are not allowed.',
    ...strictObject(
      {
        kty: { enum: ['EC', 'RSA', 'OKP'] },
        kid: { type: 'string', minLength: 1 },
        use: { const: 'sig' },
        alg: { type: 'string' },
        key_ops: { type: 'array', items: { const: 'verify' } },
        crv: { type: 'string' },
        x: { type: 'string' },
        y: { type: 'string' },
        n: { type: 'string' },
        e: { type: 'string' },
      },
      ['kty', 'kid'],
    ),
  },
  OpenApi: {
    description: 'This document.',
    type: 'object',
    required: ['openapi', 'info', 'paths'],
    properties: {
      openapi: { const: '3.1.0' },
      info: { type: 'object', required: ['title', 'version'], properties: { title: { type: 'string' }, version: { type: 'string' } } },
      paths: { type: 'object' },
    },
  },
  TemplateInput: strictObject(
    {
      name: { type: 'string', minLength: 1, maxLength: 200 },
      description: { type: 'string', maxLength: 2000 },
      permissions: { type: 'array', uniqueItems: true, maxItems: MAX_TEMPLATE_PERMISSIONS, items: { type: 'string', pattern: PERMISSION_CODE_PATTERN, maxLength: 200 } },
    },
    ['name', 'permissions'],
  ),
  Template: strictObject({
    versionId: identifier('From the path.'),
    name: { type: 'string' },
    description: { type: ['string', 'null'] },
    permissions: { type: 'array', items: { type: 'string', pattern: PERMISSION_CODE_PATTERN } },
  }),
  User: strictObject(
    {
      userId: identifier('The host\'s user id.'),
      displayName: { type: ['string', 'null'] },
      enabled: { type: 'boolean' },
      authorizationVersion: { type: 'integer', minimum: 0 },
      sessionEpoch: { type: 'integer', minimum: 0, description: 'Raised whenever every session of the user ends; tokens issued before are refused for good.' },
      createdAt: timestamp('First seen.'),
      updatedAt: timestamp('Last changed.'),
    },
    ['userId', 'displayName', 'enabled', 'authorizationVersion'],
  ),
  UserInput: strictObject({ displayName: { type: 'string', maxLength: 200 }, enabled: { type: 'boolean' } }, ['enabled']),
  Identity: strictObject({
    identityId: identifier('From the path.'),
    userId: identifier('Owner.'),
    identityDomain: identifier('Domain.'),
    enabled: { type: 'boolean' },
  }),
  IdentityInput: strictObject({ userId: identifier('An existing user (else 422).'), identityDomain: identifier('Domain.'), enabled: { type: 'boolean' } }),
  ProfileInput: strictObject({
    userId: identifier('An existing user (else 422).'),
    profileName: { type: 'string', minLength: 1, maxLength: 200 },
    templateVersionId: identifier('An existing template version (else 422).'),
    clientTypes: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50 }, uniqueItems: true, maxItems: 50 },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    unscoped: {
      type: 'boolean',
      description: 'True makes the profile apply to every resource and drops its scopes (audited; only an unscoped admin may). Omitted: true for a new profile, else unchanged.',
    },
  }, ['userId', 'profileName', 'templateVersionId', 'clientTypes', 'enabled', 'revoked']),
  ScopesInput: {
    type: 'array',
    items: ref('Scope'),
    maxItems: MAX_PROFILE_SCOPES,
    description: 'Replaces every scope of the profile and makes it scoped; [] leaves a scoped profile with no resource (unscoped only by `unscoped: true` on the profile). One entry per (scopeType, scopeRefId), else 400.',
  },
  AuthorizationVersion: strictObject({ userId: identifier('The user.'), authorizationVersion: { type: 'integer', minimum: 0 } }),
  RevokeInput: strictObject({ reason: { type: 'string', pattern: '^[\\x20-\\x7E]{1,200}$', description: 'Printable ASCII.' } }, []),
  RevokedCount: strictObject({ revoked: { type: 'integer', minimum: 0, description: 'How many sessions ended.' } }),
  AuditEvent: strictObject({
    id: { type: 'string', minLength: 1 },
    occurredAt: timestamp('When.'),
    actorUserId: { type: ['string', 'null'] },
    action: { type: 'string', minLength: 1, description: 'e.g. auth.login, session.revoke, authz.deny, admin.profile.update.' },
    targetType: { type: ['string', 'null'] },
    targetId: { type: ['string', 'null'] },
    outcome: { enum: ['success', 'failure', 'denied', 'shadow_denied'] },
    requestId: { type: ['string', 'null'] },
    decisionId: { type: ['string', 'null'] },
    clientAddress: { type: ['string', 'null'] },
    details: { type: ['object', 'null'] },
  }),
  UserPage: page('User'),
  AuditPage: page('AuditEvent'),
};
