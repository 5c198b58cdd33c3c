#!/usr/bin/env node
'use strict';
/**
 * Decisions for the host (docs/host-integration.md), three rows:
 * - `POST /iam/authorization/check` with 100 checks, warm caches, no resolver: the call's p50 on loopback (an upper
 *   bound of the server time) and the gateway's CPU per check, beside the proxy's CPU per request measured the same way.
 * - `POST /iam/authorization/plan`, warm: p50.
 * - `iam-gateway/host`: assertion verifications per second on one core with the gateway's key cached (every
 *   assertion a different token, so each is a real EdDSA verification), and with the verified assertion cached.
 *
 * In process, on the embedded defaults. Usage: node bench/host-decisions.js [--calls N]   (needs `npm run build`)
 */
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { numberFlag } = require('./lib/args');
const { requireDist } = require('./lib/dist');
const { inProcessEnv, percentile, recordServerTimes, ROOT } = require('./lib/in-process');

async function timeCalls(count, call) {
  const times = [];
  const cpuBefore = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await call(i);
    times.push(performance.now() - started);
  }
  const cpu = process.cpuUsage(cpuBefore);
  return { p50: percentile(times, 50), p99: percentile(times, 99), cpuUs: (cpu.user + cpu.system) / count };
}

async function main(argv = process.argv.slice(2)) {
  const calls = numberFlag(argv, '--calls', 500);
  const { loadConfig } = requireDist('config');
  const { startGateway } = requireDist('app/start-gateway');
  const { AssertionSigner } = requireDist('gateway/assertion-signer');
  const { createHostAuthorization } = requireDist('host');
  const dir = mkdtempSync(join(tmpdir(), 'iam-bench-host-'));
  const upstream = require('node:http').createServer((req, res) => res.end('{}')).listen(0, '127.0.0.1');
  await new Promise((resolve) => upstream.once('listening', resolve));
  const env = inProcessEnv(
    dir,
    `http://127.0.0.1:${upstream.address().port}`,
    'version: 1\ndefault: deny\nroutes:\n  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }\n',
  );
  // Server time of the decision calls, inside the gateway's HTTP server (bench/lib/in-process.js).
  const serverTimes = recordServerTimes('/iam/authorization/');
  const gateway = await startGateway(loadConfig({ file: join(ROOT, 'config', 'default.yaml'), env, cwd: ROOT }));
  try {
    const login = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }) });
    const { accessToken } = await login.json();
    const headers = { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' };
    const checks = Array.from({ length: 100 }, (_, i) => ({ permissionCode: 'project:read', resource: { type: 'PROJECT', id: String(i % 10), access: 'READ' } }));
    const body = JSON.stringify({ checks });
    const check = () => fetch(`${gateway.url}/iam/authorization/check`, { method: 'POST', headers, body }).then((answer) => answer.arrayBuffer());
    const planBody = JSON.stringify({ permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' });
    const plan = () => fetch(`${gateway.url}/iam/authorization/plan`, { method: 'POST', headers, body: planBody }).then((answer) => answer.arrayBuffer());
    const proxied = () => fetch(`${gateway.url}/api/projects/1`, { headers }).then((answer) => answer.arrayBuffer());
    for (let i = 0; i < 50; i++) await Promise.all([check(), plan(), proxied()]); // warm: grants cached, JIT
    serverTimes.clear();
    const checkRow = await timeCalls(calls, check);
    const planRow = await timeCalls(calls * 4, plan);
    const serverP50 = (path) => percentile(serverTimes.get(path) ?? [NaN], 50);
    const proxyRow = await timeCalls(calls * 4, proxied);
    console.log(`check, 100 checks per call: p50 ${checkRow.p50.toFixed(2)} ms (p99 ${checkRow.p99.toFixed(2)}), CPU ${(checkRow.cpuUs / 100).toFixed(1)} µs per check (${Math.round(checkRow.cpuUs)} µs per call)`);
    console.log(`  beside: a proxied request (same process, same client): CPU ${proxyRow.cpuUs.toFixed(1)} µs per request, p50 ${proxyRow.p50.toFixed(2)} ms`);
    console.log(`plan: p50 ${planRow.p50.toFixed(3)} ms (p99 ${planRow.p99.toFixed(3)}), CPU ${planRow.cpuUs.toFixed(1)} µs per call`);
    console.log('  (p50s are measured by the client on loopback: they include the client\'s own work, an upper bound of the server time)');
    console.log(`server time p50 (inside the gateway's HTTP server): check ${serverP50('/iam/authorization/check').toFixed(3)} ms (target ≤ 2 ms), plan ${serverP50('/iam/authorization/plan').toFixed(3)} ms (target ≤ 0.2 ms)`);

    // The host library: a gateway-signed assertion per request, verified against the gateway's JWKS.
    const signer = new AssertionSigner({ ttlMs: 600_000, issuer: 'iam-gateway', audience: null, keyFile: null });
    const jwks = require('node:http').createServer((req, res) => res.end(JSON.stringify({ keys: [signer.jwk] }))).listen(0, '127.0.0.1');
    await new Promise((resolve) => jwks.once('listening', resolve));
    const host = createHostAuthorization({ gatewayUrl: `http://127.0.0.1:${jwks.address().port}`, issuer: 'iam-gateway' });
    const session = { tokenHash: 'h', record: { sessionId: 's-1', principal: { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com', activeProfileId: 'p-1', authorizationVersion: 0 }, clientType: 'WEB' } };
    const decision = { decisionId: 'd', allowed: true, permissionCode: 'project:read', profileId: 'p-1', userId: 'u-alice', steps: [{ code: 'PROFILE_ACTIVE', passed: true, reason: '' }], shadowed: false, failedStep: null };
    const count = 20_000;
    const assertions = Array.from({ length: count }, (_, i) => signer.sign(decision, session, 'GET', '/x', `r-${i}`));
    await host.principal({ 'x-iam-assertion': assertions[0] }); // the key fetched once and cached
    let started = performance.now();
    for (let i = 1; i < count; i++) if ((await host.principal({ 'x-iam-assertion': assertions[i] })) === null) throw new Error('an assertion did not verify');
    const fresh = (count - 1) / ((performance.now() - started) / 1000);
    started = performance.now();
    for (let i = 0; i < count; i++) await host.principal({ 'x-iam-assertion': assertions[i % 100] });
    const cached = count / ((performance.now() - started) / 1000);
    console.log(`iam-gateway/host: ${Math.round(fresh)} verifications/s (a new assertion each, key cached), ${Math.round(cached)}/s for an assertion already verified`);
    // The ceiling on this machine: node:crypto's Ed25519 verification alone, on the same assertions' signed bytes.
    const { createPublicKey, verify } = require('node:crypto');
    const publicKey = createPublicKey({ key: signer.jwk, format: 'jwk' });
    const signed = assertions.slice(0, 5000).map((token) => {
      const [header, payload, signature] = token.split('.');
      return [Buffer.from(`${header}.${payload}`), Buffer.from(signature, 'base64url')];
    });
    started = performance.now();
    for (const [data, signature] of signed) if (!verify(null, data, publicKey, signature)) throw new Error('a signature did not verify');
    const raw = signed.length / ((performance.now() - started) / 1000);
    console.log(`  ceiling: node:crypto Ed25519 verify alone ${Math.round(raw)}/s on this machine (the library reaches ${Math.round((fresh / raw) * 100)}% of it)`);
    jwks.close();
  } finally {
    await gateway.close();
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}

module.exports = { main };
