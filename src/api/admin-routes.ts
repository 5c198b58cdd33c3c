import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import type { GrantProvider } from '../authz/grant-provider';
import { callerOf, factsOf } from './iam-context';
import type { VersionPrecondition } from '../domain/admin-repository';
import { ProblemError, problems } from '../domain/problem';
import { Type } from '@sinclair/typebox';
import { sessionPageOf } from './session-query';
import { AuditListQuery, MAX_LIMIT, SessionListQuery, UserListQuery } from './schemas/queries';
import { AuditPage, AuthorizationVersion, Identity, Profile, RevokedCount, Session, Template, User, UserPage } from './schemas/responses';
import { IDENTIFIER_PATTERN } from '../auth/identity-validation';
import { IdentityInput, ProfileInput, profileInput, RevokeInput, ScopesInput, TemplateInput, UserInput } from './schemas/requests';
import type { AdminActor, AdminService } from './admin-service';
import { BODY_FAILURES, NO_STORE, empty, header, param, problem, response } from './openapi-builders';
import type { ParameterObject, ResponseObject } from './openapi-types';
import { registerDeclaredRoutes, route, type DeclaredOperation, type RouteDeclaration } from './route-declaration';

/** A path parameter naming an object: the identifier rule of the bodies. */
const IDENTIFIER_REGEX = new RegExp(IDENTIFIER_PATTERN);

export interface AdminRoutesDeps {
  admin: AdminService;
  engine: Pick<DecisionEngine, 'decide'>;
  /** The actor's compiled grant: what an admin write may grant at most (escalation prevention). */
  grants: Pick<GrantProvider, 'getGrant'>;
  requireSession: Middleware;
  /** `iam.client-types`: a profile may name only these (400 otherwise, as provisioning refuses them). */
  clientTypes: readonly string[];
}

/** The admin permission codes (docs/http-contract.md). */
export const ADMIN_PERMISSIONS = {
  templatesRead: 'iam.admin.templates:read',
  templatesWrite: 'iam.admin.templates:write',
  usersRead: 'iam.admin.users:read',
  usersWrite: 'iam.admin.users:write',
  identitiesWrite: 'iam.admin.identities:write',
  profilesRead: 'iam.admin.profiles:read',
  profilesWrite: 'iam.admin.profiles:write',
  sessionsRead: 'iam.admin.sessions:read',
  sessionsRevoke: 'iam.admin.sessions:revoke',
  policyRead: 'iam.admin.policy:read',
  auditRead: 'iam.admin.audit:read',
  /** The `{permissionCode, resourceType?, resourceId?}` form of POST /iam/authorization/diagnostics. */
  diagnosticsRead: 'iam.admin.diagnostics:read',
} as const;

/** An admin operation (tag `admin`); its `security`, `x-permission` and 403 come from the declaration's permission. */
export const adminOperation = (operation: Omit<DeclaredOperation, 'tags'>): DeclaredOperation => ({ ...operation, tags: ['admin'] });

/** What the admin handlers share: the service, the caller as an actor, the configured client types (profile bodies). */
interface AdminContext {
  admin: AdminService;
  actorOf: (ctx: Context) => Promise<AdminActor>;
  clientTypes: readonly string[];
}

/** The answers of an upsert: 200 updated, 201 created, the same body and its version as ETag. */
const upserted = (what: string) => ({
  description: `The ${what} existed and was updated (or was already so).`,
  created: `The ${what} did not exist and was created.`,
  headers: { ...NO_STORE, ETag: header('ETag') },
});

/** Every admin write: the path id and the body are checked (400) before anything is written. */
const ADMIN_WRITE_FAILURES = { '400': response('ValidationFailed'), ...BODY_FAILURES };
const conflict = (description: string): ResponseObject => problem(409, ['IAM_CONFLICT'], description);
const unknownUser = problem(404, ['IAM_NOT_FOUND'], 'No such user.');
const identifierParameter = (name: string): ParameterObject => ({ name, in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } });

/**
 * `/iam/admin/...` (docs/http-contract.md), each route declared once (route-declaration.ts): every route checks the
 * session (401) and then the admin permission of the caller's active profile (403 IAM_ACCESS_DENIED) before reading
 * the request, and its OpenAPI operation publishes that permission. Admin answers are never cached (they may name
 * users and sessions).
 */
export const adminRoutes: ReadonlyArray<RouteDeclaration<AdminContext>> = [
  route({
    method: 'get',
    path: '/iam/admin/templates',
    access: { permission: ADMIN_PERMISSIONS.templatesRead },
    response: { schema: Type.Array(Template), description: 'Template versions, by versionId.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'listTemplates',
      summary: 'List every permission template version',
      responses: {},
    }),
    handler: ({ admin }) => async (ctx) => {
      respond(ctx, 200, await admin.listTemplates());
    },
  }),
  route({
    method: 'get',
    path: '/iam/admin/templates/{versionId}',
    access: { permission: ADMIN_PERMISSIONS.templatesRead },
    pathParameters: [identifierParameter('versionId')],
    response: { schema: Template, description: 'The template version.', headers: { ...NO_STORE, ETag: header('ETag') } },
    operation: adminOperation({
      operationId: 'getTemplate',
      summary: 'Read one permission template version, with its version as ETag (send it back in If-Match)',
      responses: { '400': response('ValidationFailed'), '404': problem(404, ['IAM_NOT_FOUND'], 'No such template version.') },
    }),
    handler: ({ admin }) => async (ctx) => {
      respondVersioned(ctx, 200, await admin.getTemplate(pathId(ctx, 'versionId')));
    },
  }),
  route({
    method: 'put',
    path: '/iam/admin/templates/{versionId}',
    access: { permission: ADMIN_PERMISSIONS.templatesWrite },
    pathParameters: [identifierParameter('versionId')],
    body: { schema: TemplateInput },
    response: { schema: Template, ...upserted('template version') },
    operation: adminOperation({
      operationId: 'putTemplate',
      summary: 'Create or update a permission template version (optimistic locking with If-Match)',
      description: 'Changing the permissions raises the authorization version of every user with a profile on it.',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      responses: {
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      const precondition = ifMatch(ctx);
      const { template, created } = await admin.upsertTemplate(await actorOf(ctx), pathId(ctx, 'versionId'), body, precondition);
      respondVersioned(ctx, created ? 201 : 200, template);
    },
   }),
  route({
    method: 'get',
    path: '/iam/admin/users',
    access: { permission: ADMIN_PERMISSIONS.usersRead },
    query: UserListQuery,
    response: { schema: UserPage, description: 'One page.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'listUsers',
      summary: 'List users, by userId',
      responses: { '400': response('ValidationFailed') },
    }),
    handler: ({ admin }, _body, query) => async (ctx) => {
      const { limit, cursor, q, domain } = query.read(ctx);
      respond(ctx, 200, await admin.listUsers({ limit: pageLimit(limit), cursor: cursor ?? null, q: q ?? null, domain: domain ?? null }));
    },
  }),
  route({
    method: 'get',
    path: '/iam/admin/users/{userId}',
    access: { permission: ADMIN_PERMISSIONS.usersRead },
    pathParameters: [param('UserId')],
    response: { schema: User, description: 'The user.', headers: { ...NO_STORE, ETag: header('ETag') } },
    operation: adminOperation({
      operationId: 'getUser',
      summary: 'One user, with its version as ETag (send it back in If-Match)',
      responses: { '404': unknownUser },
    }),
    handler: ({ admin }) => async (ctx) => {
      respondVersioned(ctx, 200, await admin.getUser(pathId(ctx, 'userId')));
    },
  }),
  route({
    method: 'put',
    path: '/iam/admin/users/{userId}',
    access: { permission: ADMIN_PERMISSIONS.usersWrite },
    pathParameters: [param('UserId')],
    body: { schema: UserInput },
    response: { schema: User, ...upserted('user') },
    operation: adminOperation({
      operationId: 'putUser',
      summary: 'Create or update a user (optimistic locking with If-Match)',
      description: 'Disabling a user ends every session of the user at once.',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      responses: {
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      const precondition = ifMatch(ctx);
      const { user, created } = await admin.upsertUser(await actorOf(ctx), pathId(ctx, 'userId'), body, precondition);
      respondVersioned(ctx, created ? 201 : 200, user);
    },
   }),
  route({
    method: 'get',
    path: '/iam/admin/users/{userId}/identities',
    access: { permission: ADMIN_PERMISSIONS.usersRead },
    pathParameters: [param('UserId')],
    response: { schema: Type.Array(Identity), description: 'Identities, by identityId.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'listUserIdentities',
      summary: 'List a user\'s identities',
      responses: { '400': response('ValidationFailed'), '404': unknownUser },
    }),
    handler: ({ admin }) => async (ctx) => {
      respond(ctx, 200, await admin.listIdentities(pathId(ctx, 'userId')));
    },
  }),
  route({
    method: 'put',
    path: '/iam/admin/identities/{identityId}',
    access: { permission: ADMIN_PERMISSIONS.identitiesWrite },
    pathParameters: [identifierParameter('identityId')],
    body: { schema: IdentityInput },
    response: { schema: Identity, ...upserted('identity') },
    operation: adminOperation({
      operationId: 'putIdentity',
      summary: 'Create or update an identity (optimistic locking with If-Match: the version is in the user\'s identity list)',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      responses: {
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, the identity belongs to another user (identities are never moved), or a concurrent write.'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'The body names an unknown user.'),
      },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      const precondition = ifMatch(ctx);
      const { identity, created } = await admin.upsertIdentity(await actorOf(ctx), pathId(ctx, 'identityId'), body, precondition);
      respondVersioned(ctx, created ? 201 : 200, identity);
    },
   }),
  route({
    method: 'get',
    path: '/iam/admin/users/{userId}/profiles',
    access: { permission: ADMIN_PERMISSIONS.profilesRead },
    pathParameters: [param('UserId')],
    response: { schema: Type.Array(Profile), description: 'Profiles, by profileId (disabled and revoked ones too).', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'listUserProfiles',
      summary: "List a user's profiles, every state",
      responses: { '400': response('ValidationFailed'), '404': unknownUser },
    }),
    handler: ({ admin }) => async (ctx) => {
      respond(ctx, 200, await admin.listProfiles(pathId(ctx, 'userId')));
    },
  }),
  route({
    method: 'get',
    path: '/iam/admin/profiles/{profileId}',
    access: { permission: ADMIN_PERMISSIONS.profilesRead },
    pathParameters: [param('ProfileId')],
    response: { schema: Profile, description: 'The profile.', headers: { ...NO_STORE, ETag: header('ETag') } },
    operation: adminOperation({
      operationId: 'getProfile',
      summary: 'Read one profile, with its version as ETag (send it back in If-Match)',
      responses: {
        '400': response('ValidationFailed'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such profile.'),
      },
    }),
    handler: ({ admin }) => async (ctx) => {
      respondVersioned(ctx, 200, await admin.getProfile(pathId(ctx, 'profileId')));
    },
  }),
  route({
    method: 'put',
    path: '/iam/admin/profiles/{profileId}',
    access: { permission: ADMIN_PERMISSIONS.profilesWrite },
    pathParameters: [param('ProfileId')],
    body: { schema: ProfileInput, configured: ({ clientTypes }) => profileInput(clientTypes) },
    response: { schema: Profile, ...upserted('profile') },
    operation: adminOperation({
      operationId: 'putProfile',
      summary: 'Create or update a profile (optimistic locking with If-Match)',
      description: 'A disabled or revoked profile stops granting on the next request of every session using it.',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      responses: {
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, the profile belongs to another user, or a concurrent write.'),
        '422': problem(422, ['IAM_VALIDATION_FAILED'], 'A well-formed body naming an unknown user or template version (RFC 9110 §15.5.21).'),
      },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      const precondition = ifMatch(ctx);
      const { profile, created } = await admin.upsertProfile(await actorOf(ctx), pathId(ctx, 'profileId'), body, precondition);
      respondVersioned(ctx, created ? 201 : 200, profile);
    },
   }),
  route({
    method: 'put',
    path: '/iam/admin/profiles/{profileId}/scopes',
    access: { permission: ADMIN_PERMISSIONS.profilesWrite },
    pathParameters: [param('ProfileId')],
    body: { schema: ScopesInput },
    response: { schema: Profile, description: 'The profile with its new scopes.', headers: { ...NO_STORE, ETag: header('ETag') } },
    operation: adminOperation({
      operationId: 'putProfileScopes',
      summary: 'Replace a profile\'s scopes',
      parameters: [param('IfMatch')],
      responses: {
        ...ADMIN_WRITE_FAILURES,
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such profile.'),
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      const precondition = ifMatch(ctx);
      if (precondition === 'absent') throw problems.validation([{ pointer: '/If-None-Match', message: 'creates an object; a profile\'s scopes are replaced on the existing profile' }], 'The If-None-Match header does not apply here.');
      respondVersioned(ctx, 200, await admin.replaceScopes(await actorOf(ctx), pathId(ctx, 'profileId'), body, precondition));
    },
   }),
  route({
    method: 'post',
    path: '/iam/admin/users/{userId}/authorization-version',
    access: { permission: ADMIN_PERMISSIONS.usersWrite },
    pathParameters: [param('UserId')],
    response: { schema: AuthorizationVersion, description: 'The new version.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'raiseAuthorizationVersion',
      summary: 'Raise a user\'s authorization version (live sessions pick up fresh permissions)',
      responses: { '400': response('ValidationFailed'), '404': unknownUser },
    }),
    handler: ({ admin, actorOf }) => async (ctx) => {
      respond(ctx, 200, await admin.raiseAuthorizationVersion(await actorOf(ctx), pathId(ctx, 'userId')));
    },
  }),
  route({
    method: 'post',
    path: '/iam/admin/sessions/{sessionId}/revoke',
    access: { permission: ADMIN_PERMISSIONS.sessionsRevoke },
    pathParameters: [param('SessionId')],
    body: { schema: RevokeInput, description: 'Optional reason (default `revoked_by_admin`), kept with the session and in the audit trail.', absent: {} },
    operation: adminOperation({
      operationId: 'adminRevokeSession',
      summary: 'Revoke any session',
      description:
        'While the database is down the session is ended by its id (every instance refuses it at once) and recorded when the database is back, also across a restart; an unknown id is then not told apart (204, and the record ends nothing).',
      responses: { '204': empty('Revoked (or already ended).'), ...ADMIN_WRITE_FAILURES, '404': problem(404, ['IAM_SESSION_NOT_FOUND'], 'No such session.') },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      await admin.revokeSession(await actorOf(ctx), pathId(ctx, 'sessionId'), body.reason);
      ctx.status = 204;
    },
   }),
  route({
    method: 'get',
    path: '/iam/admin/users/{userId}/sessions',
    access: { permission: ADMIN_PERMISSIONS.sessionsRead },
    pathParameters: [param('UserId')],
    query: SessionListQuery,
    response: {
      schema: Type.Array(Session),
      description: 'One page of the sessions (`current` is always false here).',
      headers: { ...NO_STORE, Link: { description: 'RFC 8288: the next page while more sessions follow.', schema: { type: 'string' } } },
    },
    operation: adminOperation({
      operationId: 'listUserSessions',
      summary: "A user's sessions, every state, newest first",
      responses: {
        '400': response('ValidationFailed'),
        '404': unknownUser,
      },
    }),
    handler: ({ admin }, _body, query) => async (ctx) => {
      const userId = pathId(ctx, 'userId');
      const { limit, after } = sessionPageOf(query.read(ctx));
      const page = await admin.listUserSessions(userId, limit, after);
      if (page.nextCursor !== null) ctx.set('Link', `</iam/admin/users/${encodeURIComponent(userId)}/sessions?limit=${limit}&cursor=${encodeURIComponent(page.nextCursor)}>; rel="next"`);
      respond(ctx, 200, page.items);
    },
  }),
  route({
    method: 'post',
    path: '/iam/admin/users/{userId}/sessions/revoke',
    access: { permission: ADMIN_PERMISSIONS.sessionsRevoke },
    pathParameters: [param('UserId')],
    body: { schema: RevokeInput, description: 'Optional reason (default `revoked_by_admin`).', absent: {} },
    response: { schema: RevokedCount, description: 'How many sessions ended.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'revokeUserSessions',
      summary: 'Revoke every session of a user',
      description:
        "Every token of the user issued before is refused for good, on every instance: the gateway's own (the user's session epoch is raised) and, with `iam.oidc.accept-access-tokens`, the identity provider's access tokens issued (`iat`) at or before the recorded instant (`sessionsRevokedAt` of the user), also those never presented before. While the database is down the sessions the token store lists end at once (200 with their count) and the record (session epoch raised, revocation instant, rows, audit rows) follows when the database is back, also across a restart; an unknown user is then not told apart (200, revoked 0).",
      responses: { ...ADMIN_WRITE_FAILURES, '404': unknownUser },
    }),
    handler: ({ admin, actorOf }, request) => async (ctx) => {
      const body = request.read(ctx);
      respond(ctx, 200, await admin.revokeUserSessions(await actorOf(ctx), pathId(ctx, 'userId'), body.reason));
    },
   }),
  route({
    method: 'get',
    path: '/iam/admin/audit',
    access: { permission: ADMIN_PERMISSIONS.auditRead },
    query: AuditListQuery,
    response: { schema: AuditPage, description: 'One page.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'listAuditEvents',
      summary: 'Read the audit trail, newest first',
      responses: { '400': response('ValidationFailed') },
    }),
    handler: ({ admin }, _body, query) => async (ctx) => {
      const { limit, cursor, userId, action, since } = query.read(ctx);
      respond(ctx, 200, await admin.listAudit({ limit: pageLimit(limit), cursor: cursor ?? null, userId: userId ?? null, action: action ?? null, since: since === undefined ? null : new Date(since) }));
    },
  }),
];

/** Registers {@link adminRoutes}: their guards from their permissions, their handlers with the admin context. */
export function registerAdminRoutes(router: Router, deps: AdminRoutesDeps): void {
  const context: AdminContext = { admin: deps.admin, actorOf: (ctx) => adminActor(ctx, deps.grants), clientTypes: deps.clientTypes };
  registerDeclaredRoutes(router, adminRoutes, context, { requireSession: deps.requireSession, engine: deps.engine });
}

/** The caller and what their active profile grants (refused when it grants nothing any more). */
async function adminActor(ctx: Context, grants: AdminRoutesDeps['grants']): Promise<AdminActor> {
  const principal = callerOf(ctx).record.principal;
  const grant = await grants.getGrant(principal);
  if (grant === null) throw new ProblemError('IAM_ACCESS_DENIED', `profile ${principal.activeProfileId ?? '(none)'} is not available`);
  return { userId: principal.userId, facts: factsOf(ctx), holds: { permissions: grant.permissions, unscoped: !grant.scoped, scopes: grant.scopes, clientTypes: grant.clientTypes } };
}

/** Path ids follow the identifier rule of the bodies (visible ASCII, 1–200 characters). */
function pathId(ctx: Context, name: string): string {
  const value = (ctx.params as Record<string, string | undefined>)[name] ?? '';
  if (!IDENTIFIER_REGEX.test(value)) throw problems.validation([{ pointer: `/${name}`, message: 'must be 1 to 200 visible ASCII characters, without / \\ % or ;, and not . or ..' }], 'The path is not valid.');
  return value;
}

/** A page's size: the declared default when absent, capped at {@link MAX_LIMIT}. */
const pageLimit = (limit: number | undefined): number => Math.min(limit ?? MAX_LIMIT, MAX_LIMIT);

/** Sets the declared response (`ctx.body` is typed by the route's `response`: another shape does not compile). */
function respond<Body>(ctx: Pick<Context, 'status' | 'set'> & { body: Body }, status: number, body: NoInfer<Body>): void {
  ctx.status = status;
  ctx.body = body;
  ctx.set('Cache-Control', 'no-store');
}

/**
 * A writable object's version is its entity tag (RFC 9110 §8.8.3), for `If-Match` on the next write: every GET and
 * PUT of a template, user, identity or profile answers it.
 */
function respondVersioned<Body>(ctx: Pick<Context, 'status' | 'set'> & { body: Body }, status: number, object: NoInfer<Body> & { version?: number }): void {
  respond(ctx, status, object);
  if (object.version !== undefined) ctx.set('ETag', `"${object.version}"`);
}

/**
 * `If-Match` (RFC 9110 §13.1.1): `*`, or one strong tag `"<version>"` (a bare number is accepted too). A weak
 * tag never matches under the strong comparison If-Match requires, so it is refused as malformed.
 */
function ifMatch(ctx: Context): VersionPrecondition {
  const header = ctx.get('if-match').trim();
  // `If-None-Match: *` (RFC 9110 §13.1.2): create only; the write is refused when the object exists (two admins
  // creating the same id: one wins, the other gets 409, nothing is overwritten).
  const noneMatch = ctx.get('if-none-match').trim();
  if (noneMatch !== '') {
    if (noneMatch !== '*' || header !== '') {
      throw problems.validation([{ pointer: '/If-None-Match', message: 'only * (create only) is accepted, and not together with If-Match' }], 'The If-None-Match header is not valid.');
    }
    return 'absent';
  }
  if (header === '') return null;
  if (header === '*') return '*';
  const match = /^"?([0-9]{1,9})"?$/.exec(header);
  if (match === null || (header.startsWith('"') !== header.endsWith('"'))) {
    throw problems.validation([{ pointer: '/If-Match', message: 'must be * or one version tag, e.g. "3" (the ETag of the object)' }], 'The If-Match header is not valid.');
  }
  return Number(match[1]);
}
