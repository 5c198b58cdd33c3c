/**
 * docs/http-contract.md: the optional signed assertion (X-IAM-Assertion, keys at /iam/.well-known/jwks.json) and
 * docs/http-contract.md: CORS preflights answered by the gateway, never proxied.
 */
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, ROOT } from '../support/gateway';
import { startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
const keyFile = join(mkdtempSync(join(tmpdir(), 'iam-key-')), 'assertion.pem');

beforeAll(async () => {
  writeFileSync(keyFile, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
  fixture = await startGatewayWithUpstream({
    IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    IAM_FORWARD_ASSERTION_ENABLED: 'true',
    IAM_FORWARD_ASSERTION_TTL: '30s',
    IAM_FORWARD_ASSERTION_AUDIENCE: 'example-host',
    IAM_FORWARD_ASSERTION_KEY_FILE: keyFile,
    IAM_CORS_ENABLED: 'true',
    IAM_CORS_ORIGINS: 'https://app.example.com',
    IAM_CORS_CREDENTIALS: 'true',
  });
  ({ upstream, gateway } = fixture);
});
afterAll(() => fixture?.close());
beforeEach(() => upstream.clear());

describe('X-IAM-Assertion', () => {
  it('is a JWT the host can verify with the published key, stating what was authorized', async () => {
    const session = await login(gateway.url, 'alice');
    expect((await fetch(`${gateway.url}/api/projects?page=2`, { headers: bearer(session.accessToken) })).status).toBe(200);
    const [received] = await upstream.requests();
    const index = received!.rawHeaders.findIndex((name) => name.toLowerCase() === 'x-iam-assertion');
    expect(index).toBeGreaterThanOrEqual(0);
    const jwt = received!.rawHeaders[index + 1]!;
    const [header, payload, signature] = jwt.split('.');

    const jwks = (await (await fetch(`${gateway.url}/iam/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string; alg: string }> };
    const parsedHeader = JSON.parse(Buffer.from(header!, 'base64url').toString()) as { alg: string; kid: string };
    expect(parsedHeader.alg).toBe('EdDSA');
    const jwk = jwks.keys.find((k) => k.kid === parsedHeader.kid);
    expect(jwk).toBeDefined();
    const key = createPublicKey({ key: jwk as never, format: 'jwk' });
    expect(verify(null, Buffer.from(`${header}.${payload}`), key, Buffer.from(signature!, 'base64url'))).toBe(true);
    expect(verify(null, Buffer.from(`${header}.${payload}x`), key, Buffer.from(signature!, 'base64url'))).toBe(false);

    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
    expect(claims).toMatchObject({ iss: 'iam-gateway', aud: 'example-host', sub: 'u-alice', sid: session.sessionId, profile_id: 'p-alice-editor', permission: 'project:list', htm: 'GET', htu: '/api/projects' });
    expect(Number(claims.exp) - Number(claims.iat)).toBe(30);
  });

  it('a client cannot send its own assertion to the host', async () => {
    await fetch(`${gateway.url}/health`, { headers: { 'X-IAM-Assertion': 'forged.jwt.value' } });
    const [received] = await upstream.requests();
    expect(received!.rawHeaders.map((h) => h.toLowerCase())).not.toContain('x-iam-assertion');
  });
});

describe('CORS', () => {
  it('answers an allowed preflight itself; the host sees nothing', async () => {
    const response = await fetch(`${gateway.url}/api/projects`, {
      method: 'OPTIONS',
      headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(response.headers.get('access-control-allow-credentials')).toBe('true');
    expect(response.headers.get('access-control-allow-methods')).toContain('POST');
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('refuses a preflight from another origin and does not proxy it', async () => {
    const response = await fetch(`${gateway.url}/api/projects`, { method: 'OPTIONS', headers: { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'GET' } });
    expect(response.status).toBe(403);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('adds CORS headers to actual responses, proxied and problem alike', async () => {
    const session = await login(gateway.url, 'alice');
    const ok = await fetch(`${gateway.url}/api/projects`, { headers: { ...bearer(session.accessToken), Origin: 'https://app.example.com' } });
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    const denied = await fetch(`${gateway.url}/api/projects`, { headers: { Origin: 'https://app.example.com' } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    const other = await fetch(`${gateway.url}/health`, { headers: { Origin: 'https://evil.example' } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });
});
