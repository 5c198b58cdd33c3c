#!/usr/bin/env node
'use strict';
/**
 * `npm run demo:oidc`: `npm run demo` with a local OpenID Provider (examples/oidc-provider, oidc-provider 9 from the
 * devDependencies) in place of the users file: the example host on :3000, the provider on :8081, the gateway on
 * :8080 signing users in there (authorization code + PKCE) with back-channel logout registered. Other ports:
 * HOST_PORT, OIDC_PORT, PORT, MANAGEMENT_PORT (0 = any free port). Never for production.
 */
const { spawn } = require('node:child_process');
const { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { createServer } = require('node:net');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const root = join(__dirname, '..');
if (!existsSync(join(root, 'dist', 'src', 'cli', 'main.js'))) {
  console.error('demo:oidc: the gateway is not built; run `npm install` (or `npm run build`) first');
  process.exit(1);
}
const { startHost } = require(join(root, 'dist', 'examples', 'host', 'server.js'));
const { loadConfig } = require(join(root, 'dist', 'src', 'config'));
const { startGateway } = require(join(root, 'dist', 'src', 'app', 'start-gateway.js'));

/**
 * The demo users, as in config/users.example.yaml: the provider's `sub` is the gateway's userId. Those users exist
 * already (config/provision.example.yaml), so their provider accounts sign in only once linked to them: see
 * {@link linkedProvisioning}.
 */
const ACCOUNTS = {
  alice: { sub: 'u-alice', password: 'alice-password', claims: { name: 'Alice', email: 'alice@example.com' } },
  bob: { sub: 'u-bob', password: 'bob-password', claims: { name: 'Bob', email: 'bob@example.com' } },
  admin: { sub: 'u-admin', password: 'admin-password', claims: { name: 'Admin', email: 'admin@example.com' } },
};

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Starts the provider for `client`; resolves its issuer URL and the child process. */
async function startProvider(port, client) {
  const { exportJWK, generateKeyPair } = require('jose');
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const key = { ...(await exportJWK(privateKey)), kid: 'demo', alg: 'RS256', use: 'sig' };
  const dir = mkdtempSync(join(tmpdir(), 'iam-demo-oidc-'));
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ port, jwks: { keys: [key] }, clients: [client], accounts: ACCOUNTS, idTokenTtlSeconds: 300 }), { mode: 0o600 });
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, [join(root, 'examples', 'oidc-provider', 'server.mjs'), file], { cwd: root, env, stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const issuer = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (chunk) => {
        out += chunk;
        const newline = out.indexOf('\n');
        if (newline >= 0) resolve(JSON.parse(out.slice(0, newline)).issuer);
      });
      child.once('exit', (code) => reject(new Error(`the OpenID Provider exited (${code}); is oidc-provider installed (npm install)?`)));
    });
    return { issuer, child };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * config/provision.example.yaml plus, for each demo account, the identity `oidc:<sub>` in the provider's domain (its
 * issuer): what an administrator does so that a provider account signs in as a user the gateway already has (a new
 * account never joins an existing user by itself; docs/oidc.md). Written to a private directory; resolves the file
 * and that directory.
 */
function linkedProvisioning(issuer) {
  const { parse, stringify } = require('yaml');
  const document = parse(readFileSync(join(root, 'config', 'provision.example.yaml'), 'utf8'));
  const subjects = new Set(Object.values(ACCOUNTS).map((account) => account.sub));
  for (const user of document.users ?? []) {
    if (subjects.has(user.userId)) user.identities = [...(user.identities ?? []), { identityId: `oidc:${user.userId}`, identityDomain: issuer }];
  }
  const dir = mkdtempSync(join(tmpdir(), 'iam-demo-oidc-provision-'));
  const file = join(dir, 'provision.yaml');
  writeFileSync(file, stringify(document), { mode: 0o600 });
  return { file, dir };
}

async function run() {
  const host = await startHost(Number(process.env.HOST_PORT || 3000));
  const gatewayPort = Number(process.env.PORT || 8080) || (await freePort());
  const gw = `http://127.0.0.1:${gatewayPort}`;
  const client = {
    client_id: 'iam-gateway',
    client_secret: 'demo-client-secret',
    redirect_uris: [`${gw}/iam/auth/oidc/callback`],
    post_logout_redirect_uris: [`${gw}/`],
    backchannel_logout_uri: `${gw}/iam/auth/oidc/backchannel-logout`,
    backchannel_logout_session_required: true,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  };
  const provider = await startProvider(Number(process.env.OIDC_PORT || 8081), client);
  const env = {
    ...process.env,
    UPSTREAM_URL: host.url,
    PORT: String(gatewayPort),
    DATABASE_URL: '',
    REDIS_URL: '',
    DATABASE_EMBEDDED_DIR: 'memory://',
    LOG_LEVEL: process.env.LOG_LEVEL || 'warn',
    IAM_AUTHENTICATOR_TYPE: 'oidc',
    IAM_OIDC_ISSUER: provider.issuer,
    IAM_OIDC_CLIENT_ID: client.client_id,
    IAM_OIDC_CLIENT_SECRET: client.client_secret,
    IAM_OIDC_REDIRECT_URI: client.redirect_uris[0],
    IAM_OIDC_POST_LOGOUT_REDIRECT_URI: client.post_logout_redirect_uris[0],
  };
  const provisioning = linkedProvisioning(provider.issuer);
  let gateway;
  try {
    const config = loadConfig({ file: join(root, 'examples', 'demo.yaml'), env: { ...env, IAM_PROVISION_FILE: provisioning.file }, cwd: root });
    gateway = await startGateway(config);
  } finally {
    // Applied at start; not needed afterwards.
    rmSync(provisioning.dir, { recursive: true, force: true });
  }
  console.log(`
iam-gateway demo with an OpenID Provider
  example host     ${host.url}
  OpenID Provider  ${provider.issuer}   (examples/oidc-provider: users alice, bob, admin; password <name>-password;
                                        their accounts are linked to u-alice, u-bob, u-admin by provisioning)
  gateway          ${gateway.url}   (iam.authenticator.type: oidc)
  management       ${gateway.managementUrl}

Try it in a browser:
  ${gateway.url}/api/projects      → the provider's login page (alice / alice-password) → back on the page
  ${gateway.url}/api/whoami        → the X-IAM-* headers the host received for alice
  ${gateway.url}/api/admin/stats   → a 403 page with the step that failed and its decisionId
  ${gateway.url}/iam/auth/oidc/logout → ends the session here and at the provider
                                  (sign out at the provider instead, and its back-channel logout ends
                                  the gateway session too)

Press Ctrl-C to stop.
`);
  const stop = async () => {
    await gateway.close();
    await host.close();
    provider.child.kill('SIGTERM');
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

run().catch((error) => {
  console.error(`demo:oidc: ${error.message}`);
  process.exit(1);
});
