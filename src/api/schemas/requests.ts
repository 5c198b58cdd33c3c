/**
 * Every `/iam` request body, defined once: the routes validate with these (ajv, src/api/validate-body.ts), their
 * TypeScript types are `Static<typeof …>`, and the OpenAPI document shows them as components.
 */
import { Type, type Static } from '@sinclair/typebox';
import { MAX_PROFILE_SCOPES, MAX_TEMPLATE_PERMISSIONS } from '../../domain/grant-limits';
import { Enum, HeaderSafe, Identifier, StrictObject } from './kit';
import { PERMISSION_CODE_PATTERN } from '../../domain/permission-code';

const ACCESS_MODES = ['READ', 'WRITE'] as const;

/**
 * `POST /iam/auth/login`. `clientTypes` (the configured `iam.client-types`) narrows `clientType` for
 * validation; the document, written for every deployment, shows it without (null).
 */
export const loginRequest = (clientTypes: readonly string[] | null) =>
  StrictObject({
    username: Type.String({ minLength: 1, maxLength: 200 }),
    password: Type.String({ minLength: 1, maxLength: 1024, description: 'Write-only; never logged or stored.' }),
    clientType:
      clientTypes === null
        ? Type.String({ description: 'One of `iam.client-types` (default WEB, MOBILE, DESKTOP, API); others get 400.' })
        : Type.Unsafe<string>({ type: 'string', enum: [...clientTypes] }),
  });
export const LoginRequest = loginRequest(null);
export type LoginBody = Static<typeof LoginRequest>;

/** `POST /iam/login`, the browser login form (`application/x-www-form-urlencoded`); the client type is `WEB`. */
export const LoginForm = StrictObject({
  username: Type.String({ minLength: 1, maxLength: 200 }),
  password: Type.String({ minLength: 1, maxLength: 1024, description: 'Write-only; never logged or stored.' }),
  returnTo: Type.Optional(Type.String({ maxLength: 2048, description: 'A same-origin relative path to go back to; anything else is `/`.' })),
});
export type LoginFormBody = Static<typeof LoginForm>;

/** `POST /iam/auth/oidc/backchannel-logout` (`application/x-www-form-urlencoded`), OpenID Connect Back-Channel Logout 1.0 §2.5. */
export const LogoutTokenForm = StrictObject({
  logout_token: Type.String({ minLength: 1, maxLength: 16384, description: 'A JWT signed by the provider.' }),
});

/** `POST /iam/authorization/diagnostics`, the permission-check form (the caller's own principal; docs/threat-model.md #11.13). */
export const DiagnosticsPermissionCheck = StrictObject(
  {
    permissionCode: Type.String({ minLength: 3, maxLength: 200, description: 'e.g. `project:read`.' }),
    domain: Type.Optional(Type.String({ maxLength: 200, description: 'Identity domain the principal must have.' })),
    clientType: Type.Optional(Type.String({ maxLength: 50, description: "Checked against the profile instead of the session's own." })),
    resourceType: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Scope type.' })),
    resourceId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Scope reference id.' })),
    scopeAccess: Type.Optional(Enum(ACCESS_MODES, { default: 'READ' })),
  },
  { title: 'a permission check', dependentRequired: { resourceType: ['resourceId'], resourceId: ['resourceType'], scopeAccess: ['resourceType'] } },
);

/** `POST /iam/authorization/diagnostics`, the request form: explain a host request exactly as the proxy would. */
export const DiagnosticsRequestTarget = StrictObject({
  method: Type.String({ pattern: '^[A-Za-z]{1,20}$' }),
  path: Type.String({ minLength: 1, maxLength: 8192, description: 'Normalized as the proxy would (docs/http-contract.md); a refused path is a 400.' }),
  userId: Type.Optional(Identifier('Explain as this user (their default profile for `clientType`) instead of the caller; needs `iam.admin.diagnostics:read`.')),
  clientType: Type.Optional(Type.String({ minLength: 1, maxLength: 50, description: 'With `userId`: the client type whose default profile is used (default WEB).' })),
}, { title: 'a request to explain' });

/** Either form (`oneOf`: they exclude each other, as both refuse unknown properties). */
export const DiagnosticsRequest = Type.Unsafe<Static<typeof DiagnosticsRequestTarget> | Static<typeof DiagnosticsPermissionCheck>>({
  description: 'A permission check, or `{method, path}` to explain a host request exactly as the proxy would; both for the caller\'s own principal (any session). Only `userId` (explain as another user) needs `iam.admin.diagnostics:read`.',
  oneOf: [DiagnosticsRequestTarget, DiagnosticsPermissionCheck],
});
export type DiagnosticsBody = Static<typeof DiagnosticsRequest>;

/** `PUT /iam/admin/templates/{versionId}`. */
export const TemplateInput = StrictObject({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
  permissions: Type.Array(Type.String({ minLength: 3, maxLength: 200 }), {
    uniqueItems: true,
    maxItems: MAX_TEMPLATE_PERMISSIONS,
    // The grammar is checked after the schema, each code with its own error (docs/policy-format.md).
    description: 'Permission codes: `resource:action`, `resource:*` or `*:*`.',
  }),
});
export type TemplateBody = Static<typeof TemplateInput>;

/** `PUT /iam/admin/users/{userId}`. */
export const UserInput = StrictObject({
  displayName: Type.Optional(Type.String({ maxLength: 200 })),
  enabled: Type.Boolean(),
});
export type UserBody = Static<typeof UserInput>;

/** `PUT /iam/admin/identities/{identityId}`. */
export const IdentityInput = StrictObject({
  userId: Identifier('An existing user (else 422).'),
  identityDomain: HeaderSafe('Domain.'),
  enabled: Type.Boolean(),
});
export type IdentityBody = Static<typeof IdentityInput>;

/**
 * `PUT /iam/admin/profiles/{profileId}` (scopes have their own endpoint). `clientTypes` (the configured
 * `iam.client-types`) narrows the profile's client types for validation, as provisioning does; the document shows it
 * without (null).
 */
export const profileInput = (clientTypes: readonly string[] | null) =>
  StrictObject({
  userId: Identifier('An existing user (else 422).'),
  profileName: Type.String({ minLength: 1, maxLength: 200 }),
  templateVersionId: Identifier('An existing template version (else 422).'),
  clientTypes: Type.Array(
    clientTypes === null
      ? Type.String({ minLength: 1, maxLength: 50, description: 'One of `iam.client-types`; others get 400.' })
      : Type.Unsafe<string>({ type: 'string', enum: [...clientTypes] }),
    { uniqueItems: true, maxItems: 50 },
  ),
  enabled: Type.Boolean(),
  revoked: Type.Boolean(),
  unscoped: Type.Optional(
    Type.Boolean({
      description: 'True makes the profile apply to every resource and drops its scopes (audited; only an unscoped admin may). Omitted: true for a new profile, else unchanged.',
    }),
  ),
});
export const ProfileInput = profileInput(null);
export type ProfileBody = Static<typeof ProfileInput>;

/** One resource a profile's permissions apply to. */
export const Scope = StrictObject({
  scopeType: HeaderSafe('Resource type, e.g. PROJECT.'),
  scopeRefId: HeaderSafe('Resource id; `*` = every resource of the type.'),
  accessMode: Enum(ACCESS_MODES, { description: 'WRITE also covers READ.' }),
});

/** `PUT /iam/admin/profiles/{profileId}/scopes`. */
export const ScopesInput = Type.Array(Scope, {
  maxItems: MAX_PROFILE_SCOPES,
  description:
    'Replaces every scope of the profile and makes it scoped; [] leaves a scoped profile with no resource (unscoped only by `unscoped: true` on the profile). One entry per (scopeType, scopeRefId), else 400.',
});
export type ScopesBody = Static<typeof ScopesInput>;

/** `POST /iam/admin/users/{userId}/sessions/revoke` and the like: an optional reason. */
export const RevokeInput = StrictObject({
  // Stored as the session's revokeReason; visible ASCII only, like every identifier.
  reason: Type.Optional(Type.String({ pattern: '^[\\x20-\\x7E]{1,200}$', description: 'Printable ASCII.' })),
});
export type RevokeBody = Static<typeof RevokeInput>;

/** `POST /iam/admin/policy/coverage`: the host's OpenAPI document (JSON or YAML text). */
export const PolicyCoverageRequest = StrictObject({
  document: Type.String({ minLength: 1, description: 'The OpenAPI 3 document, as text (JSON or YAML).' }),
  basePath: Type.Optional(Type.String({ pattern: '^/', maxLength: 200, description: "Prefix of every path; default: the path of the document's first `servers` URL." })),
});

/** Who a decision is about, named in the body (needs `iam.authorization.decisions:check`). */
const DecisionSubject = Type.Union([
  StrictObject({ sessionId: Identifier('A live session: its user, profile and client type.') }),
  StrictObject({
    userId: Identifier('A user: the profile a login of theirs with `clientType` would have.'),
    clientType: Type.Optional(Type.String({ minLength: 1, maxLength: 50, description: 'Default WEB.' })),
  }),
]);

/** One question of `POST /iam/authorization/check`. */
export const HostCheck = StrictObject({
  permissionCode: Type.String({ pattern: PERMISSION_CODE_PATTERN, maxLength: 200, description: 'e.g. `project:read`.' }),
  resource: Type.Optional(
    StrictObject({
      type: HeaderSafe('Resource type, e.g. PROJECT.'),
      id: Type.String({ minLength: 1, maxLength: 200, description: 'The resource id as it appears in the host\'s paths.' }),
      access: Enum(ACCESS_MODES),
    }),
  ),
});

/** `POST /iam/authorization/check`: 1–100 checks, answered in order. */
export const CheckRequest = StrictObject({
  checks: Type.Array(HostCheck, { minItems: 1, maxItems: 100 }),
  subject: Type.Optional(DecisionSubject),
});
export type CheckBody = Static<typeof CheckRequest>;

/** `POST /iam/authorization/plan`: which resources of a type the subject reaches. */
export const PlanRequest = StrictObject({
  permissionCode: Type.String({ pattern: PERMISSION_CODE_PATTERN, maxLength: 200 }),
  resourceType: HeaderSafe('Resource type, e.g. PROJECT.'),
  access: Enum(ACCESS_MODES),
  subject: Type.Optional(DecisionSubject),
});
export type PlanBody = Static<typeof PlanRequest>;
