/**
 * Every `/iam` response body, defined once: the OpenAPI document shows them as components, the end-to-end tests
 * check the gateway's real answers against them (test/e2e/openapi.test.ts), and test/unit/api-schema-types.test.ts
 * checks at compile time that what the handlers return has their `Static` type.
 */
import { Type, type Static } from '@sinclair/typebox';
import { FAILED_STEP_CODES, PASSED_STEP_CODES } from '../../authz/decision';
import { ESCALATION_RULE } from '../../domain/admin-repository';
import { PROBLEM_CATALOG, type ProblemCode } from '../../domain/problem';
import { REQUEST_ID_PATTERN } from '../../http/prepare-request';
import { Enum, HeaderSafe, Nullable, NullableString, Ref, StrictObject, Timestamp } from './kit';
import { Scope } from './requests';
import { PERMISSION_CODE_PATTERN } from '../../domain/permission-code';

const PROBLEM_CODES = Object.keys(PROBLEM_CATALOG) as ProblemCode[];

export const Problem = StrictObject(
  {
    type: Type.String({ format: 'uri', pattern: '^https://iam-gateway\\.dev/problems/[a-z-]+$' }),
    title: Type.String({ minLength: 1 }),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    detail: Type.String(),
    instance: Type.String({ description: 'The (normalized) request path; for forward-auth, the path of the original request once it is known.' }),
    code: Enum(PROBLEM_CODES, { description: 'Stable code from the catalog; match on this, never on `detail`.' }),
    requestId: Type.String({
      pattern: REQUEST_ID_PATTERN,
      description: 'A UUID the gateway made, or the `X-Request-Id` a trusted proxy sent. Also in the `X-Request-Id` header and the log.',
    }),
    decisionId: Type.Optional(Type.String({ format: 'uuid', description: 'Find the full decision with GET /iam/authorization/decisions/{decisionId}.' })),
    step: Type.Optional(Enum(FAILED_STEP_CODES, { description: 'The decision step that failed.' })),
    rule: Type.Optional(
      Enum([ESCALATION_RULE], {
        description: "An admin write refused by a rule rather than a decision: ESCALATION_PREVENTION = it would grant what the actor's active profile does not hold (`errors` names what).",
      }),
    ),
    errors: Type.Optional(
      Type.Array(StrictObject({ pointer: Type.String({ format: 'json-pointer' }), message: Type.String({ minLength: 1 }) }), { minItems: 1 }),
    ),
  },
  {
    description: 'RFC 9457 problem details (docs/http-contract.md). Never carries a stack trace or an internal cause.',
    if: { type: 'object', properties: { code: { const: 'IAM_VALIDATION_FAILED' } } },
    then: { type: 'object', required: ['errors'], properties: { errors: { type: 'array' } } },
  },
);

export const Principal = StrictObject({
  userId: HeaderSafe("The user (the host's id, never renumbered)."),
  identityId: HeaderSafe('The identity the user logged in with.'),
  identityDomain: HeaderSafe('The domain of that identity.'),
  activeProfileId: Nullable(HeaderSafe(), { description: 'The profile whose permissions this session carries; null when none applies to the client type.' }),
  displayName: Type.Optional(Type.String()),
  authorizationVersion: Type.Integer({ minimum: 0 }),
});

export const AuthenticationResult = StrictObject({
  accessToken: Type.String({ pattern: '^iamt_[A-Za-z0-9_-]{43}$', description: 'Send as `Authorization: Bearer <accessToken>` (docs/http-contract.md: 256 random bits, base64url).' }),
  sessionId: Type.String({ format: 'uuid' }),
  expiresAt: Timestamp('Absolute expiry of the session (ISO 8601 UTC).'),
  principal: Ref<typeof Principal>('Principal'),
});

/** A profile switch by a browser: the new session is in the `Set-Cookie`, never in the body. */
export const CookieSwitchResult = StrictObject({
  sessionId: Type.String({ format: 'uuid' }),
  expiresAt: Timestamp('Absolute expiry of the new session (ISO 8601 UTC).'),
  principal: Ref<typeof Principal>('Principal'),
});

export const Session = StrictObject(
  {
    sessionId: Type.String({ format: 'uuid' }),
    clientType: Type.String({ minLength: 1 }),
    activeProfileId: Nullable(HeaderSafe(), { description: 'The profile the session acts under.' }),
    createdAt: Timestamp('When the session was issued.'),
    expiresAt: Timestamp('Absolute expiry.'),
    lastSeenAt: Nullable(Timestamp('Last authenticated request (recorded with a short delay).')),
    state: Enum(['active', 'revoked', 'logged_out', 'expired'] as const),
    revokedAt: Nullable(Timestamp('When it was revoked.')),
    logoutAt: Nullable(Timestamp('When it logged out.')),
    revokeReason: NullableString(),
    current: Type.Boolean({ description: 'True for the session of the token that asked.' }),
  },
  {
    allOf: [
      { if: { type: 'object', properties: { state: { const: 'revoked' } } }, then: { type: 'object', properties: { revokedAt: { type: 'string' } } } },
      { if: { type: 'object', properties: { state: { const: 'logged_out' } } }, then: { type: 'object', properties: { logoutAt: { type: 'string' } } } },
    ],
  },
);

export const Profile = StrictObject({
  profileId: HeaderSafe('Chosen by the host or the admin.'),
  userId: HeaderSafe('Owner.'),
  profileName: Type.String({ minLength: 1 }),
  templateVersionId: HeaderSafe('The permission template version the profile aggregates.'),
  clientTypes: Type.Array(Type.String({ minLength: 1 }), { uniqueItems: true }),
  enabled: Type.Boolean(),
  revoked: Type.Boolean(),
  unscoped: Type.Boolean({ description: 'True: the permissions apply to every resource (no scopes). False: only to what `scopes` cover; none = no resource.' }),
  scopes: Type.Array(Ref<typeof Scope>('Scope'), { description: "What a scoped profile's permissions apply to; empty on a scoped profile = no resource." }),
  version: Type.Integer({ minimum: 0, description: "Raised on every change; the admin API's ETag." }),
});

/** A profile the caller can switch to: enabled and not revoked (GET /iam/authorization/profiles). */
export const AvailableProfile = Type.Unsafe<Static<typeof Profile>>({
  allOf: [{ $ref: '#/components/schemas/Profile' }, { type: 'object', properties: { enabled: { const: true }, revoked: { const: false } } }],
});

export const DecisionStep = StrictObject(
  { code: Enum([...PASSED_STEP_CODES, ...FAILED_STEP_CODES]), passed: Type.Boolean(), reason: Type.String({ minLength: 1 }) },
  {
    if: { type: 'object', properties: { passed: { const: true } } },
    then: { type: 'object', properties: { code: { enum: [...PASSED_STEP_CODES] } } },
    else: { type: 'object', properties: { code: { enum: [...FAILED_STEP_CODES] } } },
  },
);

export const DecisionRoute = StrictObject({
  id: Type.String({ minLength: 1 }),
  pattern: Type.String({ minLength: 1 }),
  file: Type.String({ minLength: 1 }),
  line: Type.Integer({ minimum: 1 }),
  mode: Enum(['enforce', 'shadow'] as const),
  public: Type.Boolean(),
  filter: Type.Optional(
    StrictObject(
      {
        type: Type.String({ minLength: 1 }),
        id: Type.String({ description: "JSON Pointer to an element's id, relative to the element." }),
        items: Type.String({ description: 'JSON Pointer to the list in the host\'s answer; "" is the answer itself.' }),
        access: Enum(['READ', 'WRITE'] as const),
      },
      { description: "The route's list filter: a caller whose plan for `type` is not ALL gets only the elements whose id it covers." },
    ),
  ),
});

export const DecisionResource = StrictObject({
  type: Type.String({ minLength: 1 }),
  id: Type.String(),
  access: Enum(['READ', 'WRITE'] as const),
  scopeRefs: Type.Optional(Type.Array(StrictObject({ type: Type.String(), id: Type.String() }))),
});

export const Decision = StrictObject(
  {
    decisionId: Type.String({ format: 'uuid' }),
    allowed: Type.Boolean(),
    permissionCode: NullableString(),
    profileId: Nullable(HeaderSafe(), { description: 'The profile that was evaluated.' }),
    userId: Nullable(HeaderSafe(), { description: 'The user the decision is about.' }),
    clientType: Type.Optional(NullableString({ description: 'The client type of the session decided for; null without a session.' })),
    route: Type.Optional(Nullable(Ref<typeof DecisionRoute>('DecisionRoute'), { description: 'The matched policy route (file:line); null when none.' })),
    resource: Type.Optional(Nullable(Ref<typeof DecisionResource>('DecisionResource'))),
    steps: Type.Array(Ref<typeof DecisionStep>('DecisionStep')),
    status: Type.Integer({ description: 'What enforcement answers: 200, or the problem status.' }),
    problemCode: Nullable(Enum(PROBLEM_CODES)),
    failedStep: Nullable(Enum(FAILED_STEP_CODES)),
    shadowed: Type.Boolean({ description: 'A shadow-mode route that would deny: enforcement lets it through.' }),
    evaluatedAt: Timestamp('When the decision was made.'),
    traceId: Type.Optional(Type.String({ pattern: '^[0-9a-f]{32}$', description: 'The trace of the request that was decided (when tracing was on).' })),
  },
  {
    description: 'The one decision the proxy, forward-auth and diagnostics share (docs/http-contract.md). Steps stop at the first failure.',
    allOf: [
      {
        if: { type: 'object', properties: { failedStep: { type: 'null' } } },
        then: { type: 'object', properties: { allowed: { const: true }, problemCode: { type: 'null' }, status: { const: 200 } } },
        else: { type: 'object', properties: { problemCode: { type: 'string' }, status: { type: 'integer', minimum: 400 } } },
      },
    ],
  },
);

export const Jwk = StrictObject(
  {
    kty: Enum(['EC', 'RSA', 'OKP'] as const),
    kid: Type.String({ minLength: 1 }),
    use: Type.Optional(Type.Literal('sig')),
    alg: Type.Optional(Type.String()),
    key_ops: Type.Optional(Type.Array(Type.Literal('verify'))),
    crv: Type.Optional(Type.String()),
    x: Type.Optional(Type.String()),
    y: Type.Optional(Type.String()),
    n: Type.Optional(Type.String()),
    e: Type.Optional(Type.String()),
  },
  { description: 'A public key (RFC 7517 §4). Private members (`d`, `p`, `q`, `k`…) are not allowed.' },
);

export const JwkSet = StrictObject({ keys: Type.Array(Ref<typeof Jwk>('Jwk'), { description: 'Empty when `iam.forward.assertion` is off.' }) });

export const OpenApi = Type.Object(
  {
    openapi: Type.Literal('3.1.0'),
    info: Type.Object({ title: Type.String(), version: Type.String() }),
    paths: Type.Object({}),
  },
  { description: 'This document.' },
);

export const Template = StrictObject({
  versionId: HeaderSafe('From the path.'),
  name: Type.String(),
  description: NullableString(),
  permissions: Type.Array(Type.String({ pattern: PERMISSION_CODE_PATTERN })),
  version: Type.Integer({ minimum: 0, description: "Raised on every change; the admin API's ETag." }),
});

export const User = StrictObject({
  userId: HeaderSafe("The host's user id."),
  displayName: NullableString(),
  enabled: Type.Boolean(),
  authorizationVersion: Type.Integer({ minimum: 0 }),
  sessionEpoch: Type.Optional(Type.Integer({ minimum: 0, description: 'Raised whenever every session of the user ends; tokens issued before are refused for good.' })),
  sessionsRevokedAt: Type.Optional(Nullable(Timestamp("When every session of the user last ended (null: never); the identity provider's access tokens issued before are refused for good."))),
  createdAt: Type.Optional(Timestamp('First seen.')),
  updatedAt: Type.Optional(Timestamp('Last changed.')),
  version: Type.Integer({ minimum: 0, description: "Raised on every change; the admin API's ETag." }),
});

export const Identity = StrictObject({
  identityId: HeaderSafe('From the path.'),
  userId: HeaderSafe('Owner.'),
  identityDomain: HeaderSafe('Domain.'),
  enabled: Type.Boolean(),
  version: Type.Integer({ minimum: 0, description: "Raised on every change; the admin API's ETag." }),
});

export const AuthorizationVersion = StrictObject({ userId: HeaderSafe('The user.'), authorizationVersion: Type.Integer({ minimum: 0 }) });

export const RevokedCount = StrictObject({ revoked: Type.Integer({ minimum: 0, description: 'How many sessions ended.' }) });

export const AuditEvent = StrictObject({
  id: Type.String({ minLength: 1 }),
  occurredAt: Timestamp('When.'),
  actorUserId: NullableString(),
  action: Type.String({ minLength: 1, description: 'e.g. auth.login, session.revoke, authz.deny, admin.profile.update.' }),
  targetType: NullableString(),
  targetId: NullableString(),
  outcome: Enum(['success', 'failure', 'denied', 'shadow_denied'] as const),
  requestId: NullableString(),
  decisionId: NullableString(),
  clientAddress: NullableString(),
  details: Type.Union([Type.Object({}), Type.Null()]),
});

/** One page of `name` items and the cursor of the next page. */
const page = (name: string) =>
  StrictObject({
    items: Type.Array(Type.Unsafe({ $ref: `#/components/schemas/${name}` })),
    nextCursor: NullableString({ description: 'Pass as `cursor` for the next page; null on the last page.' }),
  });
export const UserPage = page('User');
export const AuditPage = page('AuditEvent');

/** A route of the serving policy, as `GET /iam/admin/policy` lists it. */
export const PolicyRoute = StrictObject({
  id: Type.String({ minLength: 1, description: '`file:line`.' }),
  methods: Type.Array(Type.String({ minLength: 1 }), { description: 'Upper case; `*` = every method.' }),
  pattern: Type.String({ minLength: 1 }),
  public: Type.Boolean(),
  permission: NullableString(),
  resource: Nullable(
    StrictObject({
      type: Type.String({ minLength: 1 }),
      idParam: Type.String({ minLength: 1 }),
      access: Enum(['READ', 'WRITE'] as const),
      resolve: Enum(['optional', 'required'] as const),
    }),
  ),
  mode: Enum(['enforce', 'shadow'] as const),
  profile: Nullable(Enum(['optional'] as const)),
  file: Type.String({ minLength: 1 }),
  line: Type.Integer({ minimum: 1 }),
});

const PolicyIssueView = StrictObject({
  severity: Enum(['error', 'warning'] as const),
  kind: Type.String({ minLength: 1 }),
  message: Type.String(),
  file: NullableString(),
  line: Nullable(Type.Integer({ minimum: 1 })),
});

const CandidateOutcomeView = StrictObject({
  decision: Enum(['allow', 'deny', 'unknown'] as const, { description: '`unknown`: the candidate needed a grant or a resolution the live decision did not load (no extra call is made).' }),
  step: NullableString({ description: 'The failed step; null when allowed or unknown.' }),
  route: NullableString({ description: "The candidate's route pattern; null when its `default` decided." }),
});

/** One candidate route's divergences from the live policy, with recent examples. */
export const CandidateRouteDivergences = StrictObject({
  routeId: NullableString({ description: "The candidate's route (`file:line`); null for requests its `default` decided." }),
  route: NullableString({ description: 'Its pattern.' }),
  allowToDeny: Type.Integer({ minimum: 0, description: 'Live allowed, the candidate would deny.' }),
  denyToAllow: Type.Integer({ minimum: 0, description: 'Live denied, the candidate would allow.' }),
  unknown: Type.Integer({ minimum: 0, description: 'The candidate could not decide without a call of its own.' }),
  lastAt: Timestamp('The latest divergence.'),
  examples: Type.Array(
    StrictObject({
      at: Timestamp('When the request was decided.'),
      method: Type.String(),
      path: Type.String({ description: 'The normalized path, without the query.' }),
      userId: NullableString(),
      live: StrictObject({
        decision: Enum(['allow', 'deny'] as const, { description: "What was enforced (a shadow route's would-be denial went through: allow)." }),
        step: NullableString(),
        route: NullableString(),
        decisionId: Type.String({ description: 'The live decision (recorded in the audit trail when it denied).' }),
      }),
      candidate: CandidateOutcomeView,
    }),
    { description: 'The most recent first; at most 10.' },
  ),
});

/** The candidate policy (`iam.policy.candidate-dir`): decided beside the live one, never enforced. */
export const CandidatePolicyView = StrictObject({
  dir: Type.String({ description: 'The candidate directory.' }),
  loaded: Nullable(
    StrictObject({ hash: Type.String(), loadedAt: Timestamp('When the deciding candidate was loaded.'), files: Type.Array(Type.String()), routes: Type.Integer({ minimum: 0 }) }),
    { description: 'The candidate that decides; null while none could be loaded.' },
  ),
  lastError: Nullable(StrictObject({ at: Timestamp('When the load failed.'), issues: Type.Array(PolicyIssueView) }), {
    description: 'The last load that failed (the last good candidate, if any, keeps deciding); null when the last load succeeded.',
  }),
  divergences: Nullable(
    StrictObject({
      hash: Type.String({ description: 'The candidate the counts are about (a new candidate starts new counts).' }),
      since: Timestamp('When counting started.'),
      total: Type.Integer({ minimum: 0 }),
      routes: Type.Array(Ref<typeof CandidateRouteDivergences>('CandidateRouteDivergences'), { description: 'The routes with the most divergences first; at most 200.' }),
      otherRoutes: Type.Integer({ minimum: 0, description: 'Divergences on routes beyond the 200 listed.' }),
    }),
    { description: "This instance's divergences since the deciding candidate loaded; null while none is loaded." },
  ),
});

/** `GET /iam/admin/policy`: what the proxy serves now, and the last failed reload. */
export const PolicyView = StrictObject({
  hash: Type.String({ minLength: 1 }),
  loadedAt: Timestamp('When the serving policy was loaded.'),
  files: Type.Array(Type.String()),
  defaultAction: Enum(['deny', 'authenticated', 'allow'] as const),
  lastError: Nullable(StrictObject({ at: Timestamp('When the reload failed.'), issues: Type.Array(PolicyIssueView) }), {
    description: 'The last reload that failed after the serving policy was loaded (the policy kept serving); null when the last reload succeeded.',
  }),
  routes: Type.Array(Ref<typeof PolicyRoute>('PolicyRoute')),
  candidate: Nullable(Ref<typeof CandidatePolicyView>('CandidatePolicyView'), { description: 'The candidate policy; null when `iam.policy.candidate-dir` is not set.' }),
});

/** `POST /iam/admin/policy/coverage`: the host's operations the policy does not declare, and routes no operation uses. */
export const PolicyCoverage = StrictObject({
  operations: Type.Integer({ minimum: 0, description: 'Operations read from the document.' }),
  uncovered: Type.Array(StrictObject({ method: Type.String(), path: Type.String() }), { description: 'Decided by `default`, not by a route.' }),
  unusedRoutes: Type.Array(
    StrictObject({ id: Type.String(), methods: Type.Array(Type.String()), pattern: Type.String(), file: Type.String(), line: Type.Integer({ minimum: 1 }) }),
  ),
});

/** Who `POST /iam/authorization/check` and `/plan` decided for. */
export const DecisionSubjectView = StrictObject({
  userId: HeaderSafe('The user decided for.'),
  profileId: Nullable(HeaderSafe(), { description: 'Their active profile; null when none applies.' }),
  sessionId: Nullable(HeaderSafe(), { description: 'Their session; null for a subject named by user.' }),
});

/** One answer of `POST /iam/authorization/check`: the proxy's decision for such a route. */
export const CheckResult = StrictObject({
  allowed: Type.Boolean(),
  status: Type.Integer({ description: 'What the proxy would answer: 200, or 401/403/404/500/502; 429 (`RESOLUTION_BUDGET_EXCEEDED`) when the resource was not resolved because the call or the caller is over its resolution budget.' }),
  failedStep: Nullable(Enum(FAILED_STEP_CODES)),
  decisionId: Type.String({ format: 'uuid', description: 'Resolves at GET /iam/authorization/decisions/{decisionId}.' }),
});

export const CheckResponse = StrictObject({
  subject: DecisionSubjectView,
  results: Type.Array(CheckResult, { description: 'In the order of the checks.' }),
});

/** `POST /iam/authorization/plan`: `ALL`, `NONE`, or `SOME` with the ids the covering scopes name. */
export const PlanResponse = StrictObject({
  kind: Enum(['ALL', 'NONE', 'SOME'] as const),
  ids: Type.Optional(Type.Array(Type.String(), { description: 'With SOME: the resource ids the subject reaches (a WRITE scope covers READ).' })),
  subject: DecisionSubjectView,
});
