#!/usr/bin/env node
'use strict';
/**
 * Micro-benchmark of each step of the gateway's per-request path (warm session and grant caches), with the
 * real dist/ modules on the benchmarked request (GET /bench/projects/1 as alice, 1,000-route policy): ns per
 * call, so a fix can be checked step by step without the noise of a loaded machine. Each step runs twice:
 * plain, and with three AsyncLocalStorage instances enabled, as MikroORM left them in the gateway process before
 * src/adapters/postgres/async-context-gate.ts and the database thread
 * (on Node 20 an enabled AsyncLocalStorage installs async_hooks: every promise and tick then pays a hook).
 *
 * Usage: node bench/lib/hot-path.js [--quick]   (also: npm run bench -- --hot-path)
 */
const { runMain } = require('./children');
const { AsyncLocalStorage } = require('node:async_hooks');
const { randomUUID } = require('node:crypto');
const { requireDist } = require('./dist');
const { BENCH_PATH, generatePolicy } = require('./policy');
const { fmt, table } = require('./report');

const log = (message) => process.stdout.write(`${message}\n`);

/** Fastest of `batches` batches of `iterations` calls, in ns per call; `fn` may return a promise. */
async function timeStep(fn, iterations, batches) {
  let sink = 0;
  const probe = fn();
  const isAsync = probe && typeof probe.then === 'function';
  if (isAsync) await probe;
  const run = isAsync
    ? async () => {
        for (let i = 0; i < iterations; i++) if (await fn()) sink++;
      }
    : async () => {
        for (let i = 0; i < iterations; i++) if (fn()) sink++;
      };
  await run();
  let best = Number.POSITIVE_INFINITY;
  for (let b = 0; b < batches; b++) {
    const t0 = process.hrtime.bigint();
    await run();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / iterations);
  }
  if (sink < 0) log('unreachable');
  return best;
}

/** The per-request steps, built from dist/ exactly as src/app/ wires them (caches warm). */
async function buildSteps() {
  const { compilePolicyFiles } = requireDist('policy/load-policy-directory');
  const { prepareRequest } = requireDist('http/prepare-request');
  const { parseBearerToken } = requireDist('http/inbound-headers');
  const { buildUpstreamHeaders } = requireDist('http/upstream-headers');
  const { identityHeaders } = requireDist('gateway/identity-headers');
  const { generateToken, hashToken, isWellFormedToken } = requireDist('domain/token-hash');
  const { SessionCache } = requireDist('sessions/session-cache');
  const { GrantProvider } = requireDist('authz/grant-provider');
  const { DecisionEngine } = requireDist('authz/decision-engine');
  const { createMetrics, ProxyRequestMetrics } = requireDist('observability/metrics');

  const policy = compilePolicyFiles([{ file: 'bench.yaml', text: generatePolicy(1000).text }]).policy;
  const principal = { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com', activeProfileId: 'p-alice-editor', displayName: 'Alice', authorizationVersion: 0 };
  const token = generateToken();
  const tokenHash = hashToken(token);
  const now = Date.now();
  const record = { sessionId: randomUUID(), principal, clientType: 'WEB', createdAt: new Date(now).toISOString(), expiresAt: new Date(now + 8 * 3600e3).toISOString(), idleTimeoutMs: 0 };
  const cache = new SessionCache(10_000, () => true);
  cache.set(tokenHash, record, cache.snapshot());
  const repository = {
    getProfile: async () => ({ profileId: 'p-alice-editor', userId: 'u-alice', profileName: 'Editor on project 1', templateVersionId: 'editor-v1', clientTypes: ['WEB', 'API'], enabled: true, revoked: false, scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }], version: 1 }),
    getUser: async () => ({ userId: 'u-alice', displayName: 'Alice', enabled: true, authorizationVersion: 0, createdAt: new Date(), updatedAt: new Date() }),
    getTemplate: async () => ({ versionId: 'editor-v1', name: 'editor', description: null, permissions: ['project:list', 'project:read', 'project:create', 'project:update', 'task:read', 'task:delete'] }),
  };
  const grants = new GrantProvider({ repository, maxEntries: 10_000, trustCache: () => true });
  await grants.getGrant(principal);
  const engine = new DecisionEngine({ grants, resolvers: { resolve: async () => ({ kind: 'not-found' }) } });
  const metrics = createMetrics();
  const rawHeaders = ['Host', '127.0.0.1:8080', 'Authorization', `Bearer ${token}`, 'User-Agent', 'autocannon', 'Accept', '*/*'];
  const req = { url: BENCH_PATH, method: 'GET', rawHeaders, headers: { host: '127.0.0.1:8080', authorization: `Bearer ${token}` }, socket: { remoteAddress: '127.0.0.1' } };
  const prepareOptions = { allowPathParameters: false, maxUrlLength: 8192 };
  const subject = { principal, clientType: 'WEB' };
  const decision = await engine.decideRequest({ method: 'GET', path: BENCH_PATH, policy, subject });
  if (!decision.allowed) throw new Error(`the benchmarked request is not allowed: ${JSON.stringify(decision.steps)}`);

  return [
    ['prepareRequest (requestId, header checks, normalize)', () => prepareRequest(req, prepareOptions).ok],
    ['policy.match (1,000 routes)', () => policy.match('GET', BENCH_PATH) !== null],
    ['parseBearerToken', () => parseBearerToken(`Bearer ${token}`).kind === 'bearer'],
    ['isWellFormedToken + hashToken (sha256)', () => isWellFormedToken(token) && hashToken(token).length === 64],
    ['SessionCache.get (hit, LRU re-insert)', () => cache.get(tokenHash, Date.now()) !== null],
    ['GrantProvider.getGrant (hit, async)', () => grants.getGrant(principal)],
    ['DecisionEngine.decideRequest (whole decision, async)', () => engine.decideRequest({ method: 'GET', path: BENCH_PATH, policy, subject })],
    ['DecisionEngine.decideRequestFast (whole decision, the proxy\'s sync path)', () => engine.decideRequestFast({ method: 'GET', path: BENCH_PATH, policy, subject }).allowed],
    ['  of which: randomUUID (decisionId)', () => randomUUID().length],
    ['  of which: new Date().toISOString() (evaluatedAt)', () => new Date().toISOString().length],
    ['identityHeaders + buildUpstreamHeaders', () =>
      buildUpstreamHeaders({
        rawHeaders,
        remoteAddress: '127.0.0.1',
        trustedProxy: false,
        protocol: 'http',
        host: '127.0.0.1:8080',
        requestId: decision.decisionId,
        stripAuthorization: true,
        identity: identityHeaders(principal, record.sessionId, 'project:read', null),
      }).length],
    ['metrics: decided + forwardedResponse + answered (ProxyRequestMetrics)', (() => {
      const requestMetrics = new ProxyRequestMetrics(metrics);
      return () => {
        requestMetrics.decided(true, 0.00002);
        requestMetrics.forwardedResponse(200, 0.001);
        requestMetrics.answered('/bench/projects/:projectId', 'GET', 200, 0.001);
        return true;
      };
    })()],
  ];
}

async function main(argv = []) {
  const quick = argv.includes('--quick');
  const iterations = quick ? 10_000 : 20_000;
  const batches = quick ? 7 : 15;
  const steps = await buildSteps();
  const plain = [];
  for (const [, fn] of steps) plain.push(await timeStep(fn, iterations, batches));
  // As the gateway process had them before the gate: MikroORM's TransactionContext, RequestContext and RawQueryFragment storages.
  const storages = [new AsyncLocalStorage(), new AsyncLocalStorage(), new AsyncLocalStorage()];
  for (const storage of storages) storage.run({}, () => undefined);
  const withHooks = [];
  for (const [, fn] of steps) withHooks.push(await timeStep(fn, iterations, batches));
  for (const storage of storages) storage.disable();
  log(`per-request steps of the gateway, warm caches, ns per call (fastest of ${batches} batches × ${iterations.toLocaleString('en-US')}), node ${process.version}\n`);
  log(table(
    ['step', 'ns', 'ns with 3 ALS enabled'],
    steps.map(([name], i) => [name, fmt(plain[i], 0), fmt(withHooks[i], 0)]),
  ));
  return 0;
}

if (require.main === module) runMain('bench hot-path', main);

module.exports = { main };
