/**
 * docs/http-contract.md: the permission the OpenAPI document publishes for an operation (`x-permission`, and the
 * role of its `security` requirement) is the one its guard enforces — checked by behaviour, on the document the
 * running gateway serves (GET /iam/openapi.json), in both directions:
 * - every operation with `x-permission` refuses (403 IAM_ACCESS_DENIED, the guard's `decisionId`/`step`) a profile
 *   holding every other permission code, and lets through (no 401/403) a profile holding only its x-permission;
 * - every route the router registers that refuses a profile with no code at all is documented, and exactly one code
 *   (among every `iam.admin.*` code and every published x-permission) opens it: its published x-permission.
 * A 400/404/409/422 after the guard is fine here: only who gets past the guard matters. A failure is a document
 * that lies about who may call an endpoint: the guard is what runs, so fix the document (or the guard, when
 * it is the one that is wrong).
 */
import { randomUUID } from 'node:crypto';
import { ADMIN_PERMISSIONS } from '../../src/api/admin-routes';
import { HTTP_METHODS, type OpenApiDocument, type OperationObject } from '../../src/api/openapi-document';
import type { RunningGateway } from '../../src/app/start-gateway';
import type { ProvisioningDocument } from '../../src/domain/records';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { registeredIamRoutes } from '../support/iam-routes';
import { createResponseValidator, type ResponseValidator } from '../support/openapi-validator';

interface Answer {
  status: number;
  contentType: string | null;
  headers: Headers;
  /** Parsed JSON for JSON media types, else the text. */
  body: unknown;
}

interface Operation {
  method: string;
  pathTemplate: string;
  operation: OperationObject;
}

/** The objects the calls name in their paths and bodies: a user of its own, so no write touches a caller. */
const TARGET: Record<string, string> = {
  userId: 'u-drift-target',
  profileId: 'p-drift-target',
  versionId: 't-drift-target',
  identityId: 'id-drift-target',
  sessionId: randomUUID(),
};

/**
 * A minimal valid body per operationId (checked against the served document below): a write goes through its
 * handler, and grants nothing (so escalation prevention, a 403 of its own, never answers). An operation with a
 * required body missing here gets `{}`: a 400 after the guard still says who got past it.
 */
const BODIES: Record<string, unknown> = {
  putTemplate: { name: 'drift target', permissions: [] },
  putUser: { displayName: 'Drift target', enabled: true },
  putIdentity: { userId: TARGET.userId, identityDomain: 'example.com', enabled: true },
  putProfile: { userId: TARGET.userId, profileName: 'target', templateVersionId: TARGET.versionId, clientTypes: ['WEB'], enabled: true, revoked: false },
  putProfileScopes: [],
  checkPolicyCoverage: { document: JSON.stringify({ openapi: '3.1.0', info: { title: 'host', version: '1' }, paths: {} }) },
};

let fixture: GatewayWithUpstream;
let gateway: RunningGateway;
let document: OpenApiDocument;
let validator: ResponseValidator;
/** The operations of the served document that publish an x-permission. */
let guarded: Operation[];
/** Every admin code and every published x-permission. */
let codes: string[];
/** `all`, `not:<code>`, `only:<code>`: a session whose active profile holds those codes. */
const tokens = new Map<string, string>();

const idOf = (code: string): string => code.replace(/[^A-Za-z0-9]+/g, '-');
const concrete = (pathTemplate: string): string => pathTemplate.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(TARGET[name] ?? 'drift-unknown'));
const keyOf = (method: string, pathTemplate: string): string => `${method.toUpperCase()} ${pathTemplate}`;

async function send(method: string, path: string, token: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { ...bearer(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    redirect: 'manual',
  });
  const text = await response.text();
  const contentType = response.headers.get('content-type');
  const isJson = contentType !== null && /^application\/([a-z.+-]+\+)?json/i.test(contentType);
  return { status: response.status, contentType, headers: response.headers, body: isJson && text !== '' ? JSON.parse(text) : text };
}

/** The body an operation is called with: its table entry, `{}` for another required body, none when optional. */
function bodyFor(operation: OperationObject): unknown {
  if (operation.operationId in BODIES) return BODIES[operation.operationId];
  return operation.requestBody?.required ? {} : undefined;
}

const call = (op: Operation, token: string): Promise<Answer> => send(op.method, concrete(op.pathTemplate), token, bodyFor(op.operation));

/** The guard's refusal: 403 IAM_ACCESS_DENIED with the decision (not escalation prevention's `rule`). */
function isGuardDenial(answer: Answer): boolean {
  const body = answer.body as Record<string, unknown>;
  return answer.status === 403 && body?.code === 'IAM_ACCESS_DENIED' && typeof body.decisionId === 'string' && typeof body.step === 'string' && body.rule === undefined;
}

const passed = (answer: Answer): boolean => answer.status !== 401 && answer.status !== 403;
const brief = (answer: Answer): string => `${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`;

async function switchTo(base: string, profileId: string): Promise<string> {
  const switched = await send('POST', `/iam/authorization/profiles/${profileId}/switch`, base);
  if (switched.status !== 200) throw new Error(`switch to ${profileId}: ${brief(switched)}`);
  return (switched.body as { accessToken: string }).accessToken;
}

/**
 * A fresh session of the admin user on a profile with no code at all, for each route of the scan: a route may end
 * its caller's session (logout) or the user's other sessions (revoke-others), so the base login is redone then.
 */
let noneBase: string | null = null;
async function freshNoneToken(): Promise<string> {
  try {
    noneBase ??= (await login(gateway.url, 'admin')).accessToken;
    return await switchTo(noneBase, 'p-drift-none');
  } catch {
    noneBase = (await login(gateway.url, 'admin')).accessToken;
    return switchTo(noneBase, 'p-drift-none');
  }
}

beforeAll(async () => {
  // The scan opens one session per route for the admin user: more than the default 50.
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES, IAM_TOKEN_MAX_SESSIONS_PER_USER: '1000' }, { keepDatabase: true });
  ({ gateway } = fixture);

  const served = await fetch(`${gateway.url}/iam/openapi.json`);
  expect(served.status).toBe(200);
  document = (await served.json()) as OpenApiDocument;
  validator = createResponseValidator(document);
  guarded = [];
  for (const [pathTemplate, item] of Object.entries(document.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (operation?.['x-permission'] !== undefined) guarded.push({ method: method.toUpperCase(), pathTemplate, operation });
    }
  }
  codes = [...new Set([...Object.values(ADMIN_PERMISSIONS), ...guarded.map((op) => op.operation['x-permission']!)])].sort();

  // Per code: a profile of alice's holding every other code, and one of bob's holding only it (both WEB,
  // unscoped); alice also holds every code, admin none; the target user is what the writes act on.
  const profile = (profileId: string, templateVersionId: string) => ({ profileId, profileName: profileId, templateVersionId, clientTypes: ['WEB'] });
  const provisioning: ProvisioningDocument = {
    templates: [
      { versionId: 't-drift-all', name: 'every code', permissions: codes },
      { versionId: 't-drift-none', name: 'no code', permissions: [] },
      { versionId: TARGET.versionId!, name: 'drift target', permissions: [] },
      ...codes.flatMap((code) => [
        { versionId: `t-drift-not-${idOf(code)}`, name: `all but ${code}`, permissions: codes.filter((c) => c !== code) },
        { versionId: `t-drift-only-${idOf(code)}`, name: `only ${code}`, permissions: [code] },
      ]),
    ],
    users: [
      { userId: 'u-alice', profiles: [profile('p-drift-all', 't-drift-all'), ...codes.map((code) => profile(`p-drift-not-${idOf(code)}`, `t-drift-not-${idOf(code)}`))] },
      { userId: 'u-bob', profiles: codes.map((code) => profile(`p-drift-only-${idOf(code)}`, `t-drift-only-${idOf(code)}`)) },
      { userId: 'u-admin', profiles: [profile('p-drift-none', 't-drift-none')] },
      {
        userId: TARGET.userId!,
        identities: [{ identityId: TARGET.identityId!, identityDomain: 'example.com' }],
        profiles: [profile(TARGET.profileId!, TARGET.versionId!)],
      },
    ],
  };
  await fixture.db!.repository.applyProvisioning(provisioning);

  const alice = (await login(gateway.url, 'alice')).accessToken;
  const bob = (await login(gateway.url, 'bob')).accessToken;
  tokens.set('all', await switchTo(alice, 'p-drift-all'));
  for (const code of codes) {
    tokens.set(`not:${code}`, await switchTo(alice, `p-drift-not-${idOf(code)}`));
    tokens.set(`only:${code}`, await switchTo(bob, `p-drift-only-${idOf(code)}`));
  }
});

afterAll(() => fixture?.close());

describe('the published permission is the enforced one', () => {
  it('the served document publishes an x-permission on every admin operation, as its bearer and session-cookie role', () => {
    expect(guarded.length).toBeGreaterThanOrEqual(19);
    const admin = validator.operations().filter((o) => o.pathTemplate.startsWith('/iam/admin/'));
    expect(guarded.map((o) => keyOf(o.method, o.pathTemplate)).sort()).toEqual(admin.map((o) => keyOf(o.method, o.pathTemplate)).sort());
    for (const { operation } of guarded) expect({ id: operation.operationId, security: operation.security }).toEqual({ id: operation.operationId, security: [{ bearer: [operation['x-permission']] }, { sessionCookie: [operation['x-permission']] }] });
    // The bodies of the table are valid for the operations, as the document describes them.
    for (const op of guarded) {
      if (op.operation.operationId in BODIES) expect({ id: op.operation.operationId, errors: validator.requestBodyErrors(op.method, op.pathTemplate, BODIES[op.operation.operationId]) }).toEqual({ id: op.operation.operationId, errors: [] });
    }
  });

  it('every operation refuses a profile holding every code but its x-permission: 403 IAM_ACCESS_DENIED from the guard', async () => {
    const drifts: string[] = [];
    for (const op of guarded) {
      const permission = op.operation['x-permission']!;
      const answer = await call(op, tokens.get(`not:${permission}`)!);
      if (!isGuardDenial(answer)) drifts.push(`${keyOf(op.method, op.pathTemplate)} documents ${permission}, yet a profile holding every code but it got ${brief(answer)}`);
      else validator.assertMatches(op.method, op.pathTemplate, answer.status, answer.contentType, answer.body, answer.headers);
    }
    expect(drifts).toEqual([]);
  });

  it('every operation lets through a profile holding only its x-permission (no 401, no 403)', async () => {
    const drifts: string[] = [];
    for (const op of guarded) {
      const permission = op.operation['x-permission']!;
      const answer = await call(op, tokens.get(`only:${permission}`)!);
      if (!passed(answer)) drifts.push(`${keyOf(op.method, op.pathTemplate)} documents ${permission}, yet a profile holding only it got ${brief(answer)}`);
    }
    expect(drifts).toEqual([]);
  });

  it('every operation lets through a profile holding every code, with an answer its operation documents', async () => {
    for (const op of guarded) {
      const answer = await call(op, tokens.get('all')!);
      expect({ at: keyOf(op.method, op.pathTemplate), passed: passed(answer) }).toEqual({ at: keyOf(op.method, op.pathTemplate), passed: true });
      validator.assertMatches(op.method, op.pathTemplate, answer.status, answer.contentType, answer.body, answer.headers);
    }
  });

  it('every route the router guards is documented with the one code that opens it, and only those routes publish one', async () => {
    const documented = new Map(guarded.map((op) => [keyOf(op.method, op.pathTemplate), op]));
    const drifts: string[] = [];
    const enforcing = new Set<string>();
    for (const route of registeredIamRoutes()) {
      const method = route.method === 'ALL' ? 'GET' : route.method;
      const key = keyOf(method, route.path);
      const op: Operation = documented.get(key) ?? { method, pathTemplate: route.path, operation: validator.operationFor(method, route.path)?.operation ?? ({ operationId: key } as OperationObject) };
      // A profile with no code at all: only a permission guard refuses it.
      const bare = await call(op, await freshNoneToken());
      if (!isGuardDenial(bare)) {
        if (documented.has(key)) drifts.push(`${key} documents ${op.operation['x-permission']}, yet a profile with no code got ${brief(bare)}`);
        continue;
      }
      enforcing.add(key);
      // Which single code opens it.
      const opening: string[] = [];
      for (const code of codes) if (passed(await call(op, tokens.get(`only:${code}`)!))) opening.push(code);
      const published = op.operation['x-permission'];
      if (opening.length !== 1 || opening[0] !== published) drifts.push(`${key}: the guard is opened by [${opening.join(', ')}], the document publishes ${published ?? 'no x-permission'}`);
    }
    expect(drifts).toEqual([]);
    expect([...enforcing].sort()).toEqual([...documented.keys()].sort());
  });
});
