/**
 * The example host: a small web application standing for "your existing app" behind iam-gateway.
 *
 * It does no authentication of its own. It trusts the identity headers the gateway adds to every request it
 * authorized (docs/http-contract.md) — the gateway strips any X-IAM-* header a client sends — and echoes them in
 * its answers, so a user running `npm run demo` sees what the host received. Only run a host like this where
 * the gateway is its sole way in (bind it to 127.0.0.1 or a private network), or verify the optional signed
 * `X-IAM-Assertion` header.
 *
 * Besides its API, it offers the gateway three internal endpoints: two resource resolvers
 * (`/internal/resources/...`, declared in policies/example.yaml) and a credential check for the `http`
 * authenticator (`/internal/login`). The policy does not route `/internal/**`, so the gateway refuses them.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import Koa from 'koa';
import Router, { type RouterMiddleware } from '@koa/router';
import { createHostAuthorization, HostAuthorizationError, type HostAuthorization, type HostAuthorizationOptions, type RequestAuthorization } from '../../src/host';

interface Project {
  id: string;
  name: string;
  createdBy: string | null;
}

interface Task {
  id: string;
  projectId: string;
  title: string;
}

/** A user the host's own credential check knows (the `http` authenticator demo). */
interface HostAccount {
  password: string;
  enabled: boolean;
  principal: { userId: string; identityId: string; identityDomain: string; displayName: string };
}

/** The identity headers the gateway adds (docs/http-contract.md), lower-cased as Node delivers them. */
const IDENTITY_HEADERS = {
  userId: 'x-iam-user-id',
  identityId: 'x-iam-identity-id',
  identityDomain: 'x-iam-identity-domain',
  profileId: 'x-iam-profile-id',
  sessionId: 'x-iam-session-id',
  permission: 'x-iam-permission',
  requestId: 'x-request-id',
} as const;

type ReceivedIdentity = Record<keyof typeof IDENTITY_HEADERS, string | null>;

/** Larger bodies are refused: the host only ever receives small JSON documents. */
const MAX_JSON_BODY_BYTES = 64 * 1024;

/**
 * The gateway the host asks for decisions (`iam-gateway/host`): set once the gateway is known (the demo starts the
 * host first); until then, and without one, the host trusts the route's decision alone and lists every project.
 */
export interface GatewayLink {
  connect(options: HostAuthorizationOptions): void;
}

/** Creates the example host with fresh in-memory data (each call is independent: tests can run many). */
export function createHostApp(): Koa & GatewayLink {
  let authorization: HostAuthorization | null = null;
  /**
   * The decisions of this request: its assertion, checks and plans (null without a gateway to ask). The assertion
   * counts only on the request the gateway issued it for (its method and path), so one replayed here is refused.
   */
  const iamOf = (ctx: Koa.Context): RequestAuthorization | null =>
    authorization === null ? null : authorization.forRequest({ method: ctx.method, url: ctx.originalUrl, headers: ctx.headers });
  const projects = new Map<string, Project>([
    ['1', { id: '1', name: 'Apollo', createdBy: null }],
    ['2', { id: '2', name: 'Gemini', createdBy: null }],
    ['3', { id: '3', name: 'Mercury', createdBy: null }],
  ]);
  const tasks = new Map<string, Task>([
    ['10', { id: '10', projectId: '1', title: 'Design the launch checklist' }],
    ['11', { id: '11', projectId: '1', title: 'Book the test range' }],
    ['20', { id: '20', projectId: '2', title: 'Plan the rendezvous' }],
  ]);
  const accounts = new Map<string, HostAccount>([
    ['carol', {
      password: 'carol-password',
      enabled: true,
      principal: { userId: 'u-carol', identityId: 'id-carol', identityDomain: 'example.com', displayName: 'Carol' },
    }],
    ['dave', {
      password: 'dave-password',
      enabled: false,
      principal: { userId: 'u-dave', identityId: 'id-dave', identityDomain: 'example.com', displayName: 'Dave' },
    }],
  ]);
  let nextProjectId = 4;
  let reindexCount = 0;

  const router = new Router();

  router.get('/health', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/', (ctx) => {
    ctx.body = {
      name: 'iam-gateway example host',
      about: 'Call me through the gateway: every /api answer shows the identity the gateway forwarded.',
      endpoints: [
        'GET /health',
        'GET /api/projects', 'POST /api/projects',
        'GET /api/projects/:projectId', 'PUT|PATCH /api/projects/:projectId',
        'GET /api/projects/:projectId/tasks',
        'GET /api/tasks/:taskId', 'DELETE /api/tasks/:taskId',
        'GET /api/admin/stats', 'POST /api/admin/reindex',
        'GET /api/whoami',
      ],
    };
  });

  // --- Projects -------------------------------------------------------------------------------------------
  // The gateway checked project:list for the route; which projects this user may see is the gateway's `plan`
  // (ALL, NONE, or SOME ids), applied to the host's own query: a user scoped to project 1 sees project 1 only.
  router.get('/api/projects', async (ctx) => {
    const iam = iamOf(ctx);
    const plan = iam === null ? null : await iam.plan('project:read', 'PROJECT', 'READ');
    const visible = [...projects.values()].filter((project) => plan === null || plan.kind === 'ALL' || (plan.kind === 'SOME' && plan.ids.includes(project.id)));
    ctx.body = { projects: visible, ...(plan === null ? {} : { plan }), receivedIdentity: receivedIdentity(ctx) };
  });

  router.post('/api/projects', async (ctx) => {
    const name = requireName(ctx, await readJsonBody(ctx));
    const project: Project = { id: String(nextProjectId++), name, createdBy: receivedIdentity(ctx).userId };
    projects.set(project.id, project);
    ctx.status = 201;
    ctx.set('Location', `/api/projects/${project.id}`);
    ctx.body = { project, receivedIdentity: receivedIdentity(ctx) };
  });

  router.get('/api/projects/:projectId', (ctx) => {
    const project = findOr404(ctx, projects, ctx.params.projectId, 'project');
    ctx.body = { project, receivedIdentity: receivedIdentity(ctx) };
  });

  const renameProject: RouterMiddleware = async (ctx) => {
    const project = findOr404(ctx, projects, ctx.params.projectId, 'project');
    project.name = requireName(ctx, await readJsonBody(ctx));
    ctx.body = { project, receivedIdentity: receivedIdentity(ctx) };
  };
  router.put('/api/projects/:projectId', renameProject);
  router.patch('/api/projects/:projectId', renameProject);

  // --- Tasks ----------------------------------------------------------------------------------------------
  router.get('/api/projects/:projectId/tasks', (ctx) => {
    const project = findOr404(ctx, projects, ctx.params.projectId, 'project');
    const projectTasks = [...tasks.values()].filter((task) => task.projectId === project.id);
    ctx.body = { projectId: project.id, tasks: projectTasks, receivedIdentity: receivedIdentity(ctx) };
  });

  router.get('/api/tasks/:taskId', (ctx) => {
    const task = findOr404(ctx, tasks, ctx.params.taskId, 'task');
    ctx.body = { task, receivedIdentity: receivedIdentity(ctx) };
  });

  // Logic a route cannot express: moving a task needs WRITE on its project and on the one it moves to. The gateway
  // checked the first for the route; the host asks both in one call, and answers the gateway's 403 problem (with its
  // decisionId) when either is refused.
  router.post('/api/tasks/:taskId/move', async (ctx) => {
    const task = findOr404(ctx, tasks, ctx.params.taskId, 'task');
    const { projectId } = await readJsonBody(ctx);
    const target = findOr404(ctx, projects, typeof projectId === 'string' ? projectId : ctx.throw(400, 'projectId must be a string'), 'project');
    const iam = iamOf(ctx);
    if (iam !== null) {
      const write = (id: string) => ({ permissionCode: 'project:update', resource: { type: 'PROJECT', id, access: 'WRITE' as const } });
      await Promise.all([iam.require(write(task.projectId)), iam.require(write(target.id))]);
    }
    task.projectId = target.id;
    ctx.body = { task, receivedIdentity: receivedIdentity(ctx) };
  });

  router.delete('/api/tasks/:taskId', (ctx) => {
    const task = findOr404(ctx, tasks, ctx.params.taskId, 'task');
    tasks.delete(task.id);
    ctx.body = { deleted: task, receivedIdentity: receivedIdentity(ctx) };
  });

  // --- Admin area -----------------------------------------------------------------------------------------
  router.get('/api/admin/stats', (ctx) => {
    ctx.body = { projects: projects.size, tasks: tasks.size, reindexCount, receivedIdentity: receivedIdentity(ctx) };
  });

  router.post('/api/admin/reindex', (ctx) => {
    reindexCount += 1;
    ctx.body = { reindexed: true, reindexCount, receivedIdentity: receivedIdentity(ctx) };
  });

  // --- Who am I: every identity header as received, to see what the gateway forwards and strips ----------
  router.get('/api/whoami', (ctx) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(ctx.headers)) {
      if (value !== undefined && (name.startsWith('x-iam-') || name === 'x-request-id' || name.startsWith('x-forwarded-'))) {
        headers[name] = value;
      }
    }
    ctx.body = { identity: receivedIdentity(ctx), headers };
  });

  // --- Internal endpoints for the gateway (not routed by the policy) -------------------------------------
  // Resource resolvers (docs/policy-format.md): 200 {scopes} or 404 when the resource does not exist.
  router.get('/internal/resources/projects/:id', (ctx) => {
    const project = findOr404(ctx, projects, ctx.params.id, 'project');
    ctx.body = { scopes: [{ type: 'PROJECT', id: project.id }] };
  });

  router.get('/internal/resources/tasks/:id', (ctx) => {
    const task = findOr404(ctx, tasks, ctx.params.id, 'task');
    ctx.body = { scopes: [{ type: 'PROJECT', id: task.projectId }] };
  });

  // Credential check for the `http` authenticator: 200 principal = accepted, 401 = bad
  // credentials, 403 = known but disabled. The gateway maps both rejections to the same 401 for the client.
  router.post('/internal/login', async (ctx) => {
    const { username, password } = await readJsonBody(ctx);
    if (typeof username !== 'string' || typeof password !== 'string') {
      ctx.status = 400;
      ctx.body = { error: 'bad_request', message: 'username and password must be strings' };
      return;
    }
    const account = accounts.get(username);
    // Compare even for an unknown user, so the answer time does not reveal which usernames exist.
    const passwordMatches = sameSecret(password, account?.password ?? 'unknown-user-placeholder');
    if (!account || !passwordMatches) {
      ctx.status = 401;
      ctx.body = { error: 'invalid_credentials' };
      return;
    }
    if (!account.enabled) {
      ctx.status = 403;
      ctx.body = { error: 'disabled' };
      return;
    }
    ctx.body = account.principal;
  });

  const app = new Koa();
  app.use(async (ctx, next) => {
    try {
      await next();
      // Unknown path (404) or method (405, with Allow set by the router): answer JSON like everything else.
      if (ctx.status >= 400 && (ctx.body === undefined || typeof ctx.body === 'string')) {
        const status = ctx.status;
        ctx.body = { error: errorCode(status), message: `no ${ctx.method} ${ctx.path} here` };
        ctx.status = status;
      }
    } catch (error) {
      if (error instanceof HostAuthorizationError) {
        // The gateway's refusal, as the gateway would answer it: problem+json with the decisionId to explain it.
        ctx.status = error.status;
        ctx.type = 'application/problem+json';
        ctx.body = error.toJSON();
        ctx.set('X-Host-Received-User', ctx.get(IDENTITY_HEADERS.userId) || '-');
        return;
      }
      // Errors answered here (not by Koa's default handler) keep the X-Host-Received-User header below.
      const status = errorStatus(error);
      ctx.status = status;
      ctx.body = { error: errorCode(status), message: errorMessage(error, status) };
      if (status >= 500) ctx.app.emit('error', error, ctx);
    }
    ctx.set('X-Host-Received-User', ctx.get(IDENTITY_HEADERS.userId) || '-');
  });
  app.use(router.routes());
  app.use(router.allowedMethods());
  return Object.assign(app, {
    connect(options: HostAuthorizationOptions): void {
      authorization = createHostAuthorization(options);
    },
  });
}

/** The identity the gateway forwarded, one field per header (null when absent). */
function receivedIdentity(ctx: Koa.Context): ReceivedIdentity {
  const identity = {} as ReceivedIdentity;
  for (const [field, header] of Object.entries(IDENTITY_HEADERS) as Array<[keyof ReceivedIdentity, string]>) {
    identity[field] = ctx.get(header) || null;
  }
  return identity;
}

function findOr404<T>(ctx: Koa.Context, items: Map<string, T>, id: string | undefined, kind: string): T {
  const item = id === undefined ? undefined : items.get(id);
  if (item === undefined) {
    ctx.throw(404, `${kind} ${id ?? ''} not found`);
  }
  return item;
}

function requireName(ctx: Koa.Context, body: Record<string, unknown>): string {
  const { name } = body;
  if (typeof name !== 'string' || name.trim() === '') {
    ctx.throw(400, 'body must be JSON with a non-empty string "name"');
  }
  return name.trim();
}

/** Reads a small JSON object body (the host parses bodies itself; the gateway streams them through). */
async function readJsonBody(ctx: Koa.Context): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_JSON_BODY_BYTES) ctx.throw(413, 'body too large');
    chunks.push(chunk);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    ctx.throw(400, 'body must be JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    ctx.throw(400, 'body must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}

/** Constant-time comparison of two secrets (hashing first makes the lengths equal). */
function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

function errorStatus(error: unknown): number {
  const status = (error as { status?: unknown }).status;
  return typeof status === 'number' && status >= 400 && status < 600 ? status : 500;
}

/** `404` → `not_found`: a stable, readable code for the JSON error body. */
function errorCode(status: number): string {
  return (STATUS_CODES[status] ?? 'error').toLowerCase().replace(/[^a-z]+/g, '_');
}

function errorMessage(error: unknown, status: number): string {
  // Only errors raised on purpose (ctx.throw with a 4xx) are shown; anything else stays internal.
  return status < 500 && error instanceof Error ? error.message : 'internal error';
}
