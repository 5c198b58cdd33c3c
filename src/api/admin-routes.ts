import type Router from '@koa/router';
import type { Static } from '@sinclair/typebox';
import type { Context, Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import type { GrantProvider } from '../authz/grant-provider';
import { callerOf, factsOf } from './iam-context';
import { requirePermission } from './require-session';
import { withSpan } from '../observability/tracing';
import { assertValid, createBodyValidator } from './validate-body';
import type { VersionPrecondition } from '../domain/admin-repository';
import { ProblemError, problems } from '../domain/problem';
import { parseAuditListQuery, parseUserListQuery } from './admin-query';
import { parseSessionListQuery } from './session-query';
import { IDENTIFIER_PATTERN } from '../auth/identity-validation';
import { IdentityInput, profileInput, RevokeInput, ScopesInput, TemplateInput, UserInput, type ProfileBody } from './schemas/requests';
import type { AdminActor, AdminService } from './admin-service';

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

/**
 * `/iam/admin/...` (docs/http-contract.md). Every route checks the session (401) and then the admin
 * permission of the caller's active profile (403 IAM_ACCESS_DENIED) before reading the request.
 */
export function registerAdminRoutes(router: Router, deps: AdminRoutesDeps): void {
  const ajv = createBodyValidator();
  const validateTemplate = ajv.compile<Static<typeof TemplateInput>>(TemplateInput);
  const validateUser = ajv.compile<Static<typeof UserInput>>(UserInput);
  const validateIdentity = ajv.compile<Static<typeof IdentityInput>>(IdentityInput);
  const validateProfile = ajv.compile<ProfileBody>(profileInput(deps.clientTypes));
  const validateScopes = ajv.compile<Static<typeof ScopesInput>>(ScopesInput);
  const validateRevoke = ajv.compile<Static<typeof RevokeInput>>(RevokeInput);
  // An admin write is a span of its own when tracing is on (under the request's), named by its permission.
  const traced = (code: string): Middleware => (ctx, next) =>
    ctx.method === 'GET' ? next() : withSpan('admin write', { 'iam.permission': code, 'http.request.method': ctx.method, 'enduser.id': callerOf(ctx).record.principal.userId }, () => next());
  const guard = (code: string): Middleware[] => [deps.requireSession, requirePermission(deps.engine, code), traced(code)];
  const admin = deps.admin;
  const actorOf = (ctx: Context): Promise<AdminActor> => adminActor(ctx, deps.grants);

  router.get('/admin/templates', ...guard(ADMIN_PERMISSIONS.templatesRead), async (ctx) => {
    respond(ctx, 200, await admin.listTemplates());
  });

  router.get('/admin/templates/:versionId', ...guard(ADMIN_PERMISSIONS.templatesRead), async (ctx) => {
    respondVersioned(ctx, 200, await admin.getTemplate(pathId(ctx, 'versionId')));
  });

  router.put('/admin/templates/:versionId', ...guard(ADMIN_PERMISSIONS.templatesWrite), async (ctx) => {
    const body = assertValid(validateTemplate, ctx.request.body);
    const precondition = ifMatch(ctx);
    const { template, created } = await admin.upsertTemplate(await actorOf(ctx), pathId(ctx, 'versionId'), body, precondition);
    respondVersioned(ctx, created ? 201 : 200, template);
  });

  router.get('/admin/users', ...guard(ADMIN_PERMISSIONS.usersRead), async (ctx) => {
    respond(ctx, 200, await admin.listUsers(parseUserListQuery(ctx.query)));
  });

  router.get('/admin/users/:userId', ...guard(ADMIN_PERMISSIONS.usersRead), async (ctx) => {
    respondVersioned(ctx, 200, await admin.getUser(pathId(ctx, 'userId')));
  });

  router.put('/admin/users/:userId', ...guard(ADMIN_PERMISSIONS.usersWrite), async (ctx) => {
    const body = assertValid(validateUser, ctx.request.body);
    const precondition = ifMatch(ctx);
    const { user, created } = await admin.upsertUser(await actorOf(ctx), pathId(ctx, 'userId'), body, precondition);
    respondVersioned(ctx, created ? 201 : 200, user);
  });

  router.get('/admin/users/:userId/identities', ...guard(ADMIN_PERMISSIONS.usersRead), async (ctx) => {
    respond(ctx, 200, await admin.listIdentities(pathId(ctx, 'userId')));
  });

  router.get('/admin/users/:userId/profiles', ...guard(ADMIN_PERMISSIONS.profilesRead), async (ctx) => {
    respond(ctx, 200, await admin.listProfiles(pathId(ctx, 'userId')));
  });

  router.post('/admin/users/:userId/authorization-version', ...guard(ADMIN_PERMISSIONS.usersWrite), async (ctx) => {
    respond(ctx, 200, await admin.raiseAuthorizationVersion(await actorOf(ctx), pathId(ctx, 'userId')));
  });

  router.get('/admin/users/:userId/sessions', ...guard(ADMIN_PERMISSIONS.sessionsRead), async (ctx) => {
    const userId = pathId(ctx, 'userId');
    const { limit, after } = parseSessionListQuery(ctx.query);
    const page = await admin.listUserSessions(userId, limit, after);
    if (page.nextCursor !== null) ctx.set('Link', `</iam/admin/users/${encodeURIComponent(userId)}/sessions?limit=${limit}&cursor=${encodeURIComponent(page.nextCursor)}>; rel="next"`);
    respond(ctx, 200, page.items);
  });

  router.post('/admin/users/:userId/sessions/revoke', ...guard(ADMIN_PERMISSIONS.sessionsRevoke), async (ctx) => {
    const body = assertValid(validateRevoke, ctx.request.body ?? {});
    respond(ctx, 200, await admin.revokeUserSessions(await actorOf(ctx), pathId(ctx, 'userId'), body.reason));
  });

  router.put('/admin/identities/:identityId', ...guard(ADMIN_PERMISSIONS.identitiesWrite), async (ctx) => {
    const body = assertValid(validateIdentity, ctx.request.body);
    const precondition = ifMatch(ctx);
    const { identity, created } = await admin.upsertIdentity(await actorOf(ctx), pathId(ctx, 'identityId'), body, precondition);
    respondVersioned(ctx, created ? 201 : 200, identity);
  });

  router.get('/admin/profiles/:profileId', ...guard(ADMIN_PERMISSIONS.profilesRead), async (ctx) => {
    respondVersioned(ctx, 200, await admin.getProfile(pathId(ctx, 'profileId')));
  });

  router.put('/admin/profiles/:profileId', ...guard(ADMIN_PERMISSIONS.profilesWrite), async (ctx) => {
    const body = assertValid(validateProfile, ctx.request.body);
    const precondition = ifMatch(ctx);
    const { profile, created } = await admin.upsertProfile(await actorOf(ctx), pathId(ctx, 'profileId'), body, precondition);
    respondVersioned(ctx, created ? 201 : 200, profile);
  });

  router.put('/admin/profiles/:profileId/scopes', ...guard(ADMIN_PERMISSIONS.profilesWrite), async (ctx) => {
    const body = assertValid(validateScopes, ctx.request.body);
    const precondition = ifMatch(ctx);
    if (precondition === 'absent') throw problems.validation([{ pointer: '/If-None-Match', message: 'creates an object; a profile\'s scopes are replaced on the existing profile' }], 'The If-None-Match header does not apply here.');
    respondVersioned(ctx, 200, await admin.replaceScopes(await actorOf(ctx), pathId(ctx, 'profileId'), body, precondition));
  });

  router.post('/admin/sessions/:sessionId/revoke', ...guard(ADMIN_PERMISSIONS.sessionsRevoke), async (ctx) => {
    const body = assertValid(validateRevoke, ctx.request.body ?? {});
    await admin.revokeSession(await actorOf(ctx), pathId(ctx, 'sessionId'), body.reason);
    ctx.status = 204;
  });

  router.get('/admin/audit', ...guard(ADMIN_PERMISSIONS.auditRead), async (ctx) => {
    respond(ctx, 200, await admin.listAudit(parseAuditListQuery(ctx.query)));
  });
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

function respond(ctx: Context, status: number, body: unknown): void {
  ctx.status = status;
  ctx.body = body;
  ctx.set('Cache-Control', 'no-store');
}

/**
 * A writable object's version is its entity tag (RFC 9110 §8.8.3), for `If-Match` on the next write: every GET and
 * PUT of a template, user, identity or profile answers it.
 */
function respondVersioned(ctx: Context, status: number, object: { version?: number }): void {
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
