/** The `/iam/admin` paths of the `/iam` OpenAPI document; each operation names its `iam.admin.*` permission. */
import { IDENTIFIER_PATTERN } from '../auth/identity-validation';
import { BODY_FAILURES, NO_STORE, PROBLEM_MEDIA_TYPE, PROTECTED_FAILURES, empty, header, json, jsonBody, param, problem, ref, response, sessionGranting } from './openapi-builders';
import type { JsonSchema, OperationObject, PathItemObject, ResponseObject } from './openapi-types';

/** Admin operations (docs/http-contract.md): a session (bearer or cookie) whose active profile grants `permission`. */
function admin(permission: string, operation: Omit<OperationObject, 'tags' | 'security' | 'x-permission'>): OperationObject {
  return {
    ...operation,
    tags: ['admin'],
    description: `${operation.description ? `${operation.description} ` : ''}Needs \`${permission}\` in the caller's active profile.`,
    // OpenAPI 3.1 §4.8.30: for non-OAuth schemes the array lists the roles required (bearer or cookie alike).
    security: sessionGranting(permission),
    'x-permission': permission,
    responses: { ...operation.responses, '403': ADMIN_DENIED, ...PROTECTED_FAILURES },
  };
}

/**
 * An admin 403: the caller's profile lacks the endpoint's permission (`decisionId`, `step`), or the write would
 * grant what the caller does not hold (`rule: ESCALATION_PREVENTION`, `errors`).
 */
const ADMIN_DENIED: ResponseObject = (() => {
  const denied = problem(403, ['IAM_ACCESS_DENIED'], 'The caller lacks the permission (`decisionId`, `step`), or the write would grant codes or scopes the caller does not hold (`rule`, `errors`).');
  const schema = denied.content![PROBLEM_MEDIA_TYPE]!.schema as { allOf: JsonSchema[] };
  schema.allOf.push({ type: 'object', anyOf: [{ type: 'object', required: ['decisionId', 'step'] }, { type: 'object', required: ['rule', 'errors'] }] });
  return denied;
})();

/** Admin answers are never cached (they may name users and sessions). */

const upserted = (schema: JsonSchema, what: string, headers: ResponseObject['headers'] = {}): OperationObject['responses'] => ({
  '200': json(`The ${what} existed and was updated (or was already so).`, schema, { ...NO_STORE, ...headers }),
  '201': json(`The ${what} did not exist and was created.`, schema, { ...NO_STORE, ...headers }),
});

/** Every admin write: the path id and the body are checked (400) before anything is written. */
const ADMIN_WRITE_FAILURES = { '400': response('ValidationFailed'), ...BODY_FAILURES };
const conflict = (description: string): ResponseObject => problem(409, ['IAM_CONFLICT'], description);
const unknownUser = problem(404, ['IAM_NOT_FOUND'], 'No such user.');

/** The `/iam/admin/*` path items. */
export const adminPaths: Record<string, PathItemObject> = {
  '/iam/admin/templates': {
    get: admin('iam.admin.templates:read', {
      operationId: 'listTemplates',
      summary: 'List every permission template version',
      responses: { '200': json('Template versions, by versionId.', { type: 'array', items: ref('Template') }, NO_STORE) },
    }),
  },
  '/iam/admin/templates/{versionId}': {
    parameters: [{ name: 'versionId', in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } }],
    get: admin('iam.admin.templates:read', {
      operationId: 'getTemplate',
      summary: 'Read one permission template version, with its version as ETag (send it back in If-Match)',
      responses: { '200': json('The template version.', ref('Template'), { ...NO_STORE, ETag: header('ETag') }), '400': response('ValidationFailed'), '404': problem(404, ['IAM_NOT_FOUND'], 'No such template version.') },
    }),
    put: admin('iam.admin.templates:write', {
      operationId: 'putTemplate',
      summary: 'Create or update a permission template version (optimistic locking with If-Match)',
      description: 'Changing the permissions raises the authorization version of every user with a profile on it.',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      requestBody: jsonBody(ref('TemplateInput')),
      responses: {
        ...upserted(ref('Template'), 'template version', { ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
  },
  '/iam/admin/users': {
    get: admin('iam.admin.users:read', {
      operationId: 'listUsers',
      summary: 'List users, by userId',
      parameters: [
        param('Limit'),
        param('Cursor'),
        { name: 'q', in: 'query', description: 'Matches userId or displayName.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
        { name: 'domain', in: 'query', description: 'Only users with an identity in this domain.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
      ],
      responses: { '200': json('One page.', ref('UserPage'), NO_STORE), '400': response('ValidationFailed') },
    }),
  },
  '/iam/admin/users/{userId}': {
    parameters: [param('UserId')],
    get: admin('iam.admin.users:read', {
      operationId: 'getUser',
      summary: 'One user, with its version as ETag (send it back in If-Match)',
      responses: { '200': json('The user.', ref('User'), { ...NO_STORE, ETag: header('ETag') }), '404': unknownUser },
    }),
    put: admin('iam.admin.users:write', {
      operationId: 'putUser',
      summary: 'Create or update a user (optimistic locking with If-Match)',
      description: 'Disabling a user ends every session of the user at once.',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      requestBody: jsonBody(ref('UserInput')),
      responses: {
        ...upserted(ref('User'), 'user', { ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
  },
  '/iam/admin/users/{userId}/identities': {
    parameters: [param('UserId')],
    get: admin('iam.admin.users:read', {
      operationId: 'listUserIdentities',
      summary: 'List a user\'s identities',
      responses: { '200': json('Identities, by identityId.', { type: 'array', items: ref('Identity') }, NO_STORE), '400': response('ValidationFailed'), '404': unknownUser },
    }),
  },
  '/iam/admin/identities/{identityId}': {
    parameters: [{ name: 'identityId', in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } }],
    put: admin('iam.admin.identities:write', {
      operationId: 'putIdentity',
      summary: 'Create or update an identity (optimistic locking with If-Match: the version is in the user\'s identity list)',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      requestBody: jsonBody(ref('IdentityInput')),
      responses: {
        ...upserted(ref('Identity'), 'identity', { ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, the identity belongs to another user (identities are never moved), or a concurrent write.'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'The body names an unknown user.'),
      },
    }),
  },
  '/iam/admin/users/{userId}/profiles': {
    parameters: [param('UserId')],
    get: admin('iam.admin.profiles:read', {
      operationId: 'listUserProfiles',
      summary: "List a user's profiles, every state",
      responses: { '200': json('Profiles, by profileId (disabled and revoked ones too).', { type: 'array', items: ref('Profile') }, NO_STORE), '400': response('ValidationFailed'), '404': unknownUser },
    }),
  },
  '/iam/admin/profiles/{profileId}': {
    parameters: [param('ProfileId')],
    get: admin('iam.admin.profiles:read', {
      operationId: 'getProfile',
      summary: 'Read one profile, with its version as ETag (send it back in If-Match)',
      responses: {
        '200': json('The profile.', ref('Profile'), { ...NO_STORE, ETag: header('ETag') }),
        '400': response('ValidationFailed'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such profile.'),
      },
    }),
    put: admin('iam.admin.profiles:write', {
      operationId: 'putProfile',
      summary: 'Create or update a profile (optimistic locking with If-Match)',
      description: 'A disabled or revoked profile stops granting on the next request of every session using it.',
      parameters: [param('IfMatch'), param('IfNoneMatch')],
      requestBody: jsonBody(ref('ProfileInput')),
      responses: {
        ...upserted(ref('Profile'), 'profile', { ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, the profile belongs to another user, or a concurrent write.'),
        '422': problem(422, ['IAM_VALIDATION_FAILED'], 'A well-formed body naming an unknown user or template version (RFC 9110 §15.5.21).'),
      },
    }),
  },
  '/iam/admin/profiles/{profileId}/scopes': {
    parameters: [param('ProfileId')],
    put: admin('iam.admin.profiles:write', {
      operationId: 'putProfileScopes',
      summary: 'Replace a profile\'s scopes',
      parameters: [param('IfMatch')],
      requestBody: jsonBody(ref('ScopesInput')),
      responses: {
        '200': json('The profile with its new scopes.', ref('Profile'), { ...NO_STORE, ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such profile.'),
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
  },
  '/iam/admin/users/{userId}/authorization-version': {
    parameters: [param('UserId')],
    post: admin('iam.admin.users:write', {
      operationId: 'raiseAuthorizationVersion',
      summary: 'Raise a user\'s authorization version (live sessions pick up fresh permissions)',
      responses: { '200': json('The new version.', ref('AuthorizationVersion'), NO_STORE), '400': response('ValidationFailed'), '404': unknownUser },
    }),
  },
  '/iam/admin/sessions/{sessionId}/revoke': {
    parameters: [param('SessionId')],
    post: admin('iam.admin.sessions:revoke', {
      operationId: 'adminRevokeSession',
      summary: 'Revoke any session',
      description:
        'While the database is down the session is ended by its id (every instance refuses it at once) and recorded when the database is back, also across a restart; an unknown id is then not told apart (204, and the record ends nothing).',
      requestBody: jsonBody(ref('RevokeInput'), 'Optional reason (default `revoked_by_admin`), kept with the session and in the audit trail.', false),
      responses: { '204': empty('Revoked (or already ended).'), ...ADMIN_WRITE_FAILURES, '404': problem(404, ['IAM_SESSION_NOT_FOUND'], 'No such session.') },
    }),
  },
  '/iam/admin/users/{userId}/sessions': {
    parameters: [param('UserId')],
    get: admin('iam.admin.sessions:read', {
      operationId: 'listUserSessions',
      summary: "A user's sessions, every state, newest first",
      parameters: [
        { name: 'limit', in: 'query', description: 'Page size; default and cap 200.', schema: { type: 'integer', minimum: 1, default: 200 } },
        { name: 'cursor', in: 'query', description: "From the previous page's `Link: <…>; rel=\"next\"` header.", schema: { type: 'string' } },
      ],
      responses: {
        '200': json('One page of the sessions (`current` is always false here).', { type: 'array', items: ref('Session') }, {
          ...NO_STORE,
          Link: { description: 'RFC 8288: the next page while more sessions follow.', schema: { type: 'string' } },
        }),
        '400': response('ValidationFailed'),
        '404': unknownUser,
      },
    }),
  },
  '/iam/admin/policy': {
    get: admin('iam.admin.policy:read', {
      operationId: 'getPolicy',
      summary: 'The policy the proxy serves now: routes with file:line, hash, load time, the last failed reload',
      responses: { '200': json('The serving policy.', ref('PolicyView'), NO_STORE) },
    }),
  },
  '/iam/admin/policy/coverage': {
    post: admin('iam.admin.policy:read', {
      operationId: 'checkPolicyCoverage',
      summary: "Check a host OpenAPI document against the serving policy: operations no route declares, routes no operation uses",
      requestBody: jsonBody(ref('PolicyCoverageRequest')),
      responses: { '200': json('The coverage report.', ref('PolicyCoverage'), NO_STORE), '400': response('ValidationFailed'), ...BODY_FAILURES },
    }),
  },
  '/iam/admin/users/{userId}/sessions/revoke': {
    parameters: [param('UserId')],
    post: admin('iam.admin.sessions:revoke', {
      operationId: 'revokeUserSessions',
      summary: 'Revoke every session of a user',
      description:
        "Every token of the user issued before is refused for good, on every instance: the gateway's own (the user's session epoch is raised) and, with `iam.oidc.accept-access-tokens`, the identity provider's access tokens issued (`iat`) at or before the recorded instant (`sessionsRevokedAt` of the user), also those never presented before. While the database is down the sessions the token store lists end at once (200 with their count) and the record (session epoch raised, revocation instant, rows, audit rows) follows when the database is back, also across a restart; an unknown user is then not told apart (200, revoked 0).",
      requestBody: jsonBody(ref('RevokeInput'), 'Optional reason (default `revoked_by_admin`).', false),
      responses: { '200': json('How many sessions ended.', ref('RevokedCount'), NO_STORE), ...ADMIN_WRITE_FAILURES, '404': unknownUser },
    }),
  },
  '/iam/admin/audit': {
    get: admin('iam.admin.audit:read', {
      operationId: 'listAuditEvents',
      summary: 'Read the audit trail, newest first',
      parameters: [
        { name: 'userId', in: 'query', description: 'Acting user.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
        { name: 'action', in: 'query', description: 'e.g. authz.deny.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
        { name: 'since', in: 'query', description: 'ISO 8601 timestamp with a zone.', schema: { type: 'string', format: 'date-time' } },
        param('Limit'),
        param('Cursor'),
      ],
      responses: { '200': json('One page.', ref('AuditPage'), NO_STORE), '400': response('ValidationFailed') },
    }),
  },
};
