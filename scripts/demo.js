#!/usr/bin/env node
'use strict';
/**
 * `npm run demo`: the bundled example host on :3000 and the gateway in front of it on :8080 (other ports:
 * HOST_PORT, PORT, MANAGEMENT_PORT; 0 = any free port) with the embedded defaults (in-memory PGlite, in-process token store), the example policies, users and
 * provisioning file (examples/demo.yaml; never for production). Prints what to try. Ctrl-C stops both.
 */
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
if (!existsSync(join(root, 'dist', 'src', 'cli', 'main.js'))) {
  console.error('demo: the gateway is not built; run `npm install` (or `npm run build`) first');
  process.exit(1);
}
// As bin/iam-gateway.js does, before the gateway allocates anything (dist/src/app/gc-tuning.js).
require(join(root, 'dist', 'src', 'app', 'gc-tuning.js')).turnOffPretenuring();
const { startHost } = require(join(root, 'dist', 'examples', 'host', 'server.js'));
const { loadConfig } = require(join(root, 'dist', 'src', 'config'));
const { startGateway } = require(join(root, 'dist', 'src', 'app', 'start-gateway.js'));

async function run() {
  const hostPort = Number(process.env.HOST_PORT || 3000);
  const host = await startHost(hostPort);
  const env = {
    ...process.env,
    UPSTREAM_URL: host.url,
    // The demo always runs on the embedded defaults, whatever the shell has set.
    DATABASE_URL: '',
    REDIS_URL: '',
    DATABASE_EMBEDDED_DIR: 'memory://',
    LOG_LEVEL: process.env.LOG_LEVEL || 'warn',
  };
  // The demo's own configuration (examples/demo.yaml): config/default.yaml names no users and no provisioning.
  const config = loadConfig({ file: join(root, 'examples', 'demo.yaml'), env, cwd: root });
  const gateway = await startGateway(config);
  const gw = gateway.url;
  // The host asks this gateway for decisions (iam-gateway/host), with the assertion it receives on each request.
  host.connect({ gatewayUrl: gw, issuer: config.iam.forward.assertion.issuer });
  console.log(`
iam-gateway demo
  example host     ${host.url}   (what the team already runs)
  gateway          ${gw}   (proxy + /iam)
  management       ${gateway.managementUrl}   (/health/live, /health/ready, /metrics)
  config           examples/demo.yaml         (demo users: never for production)
  policy           policies/example.yaml      users: config/users.example.yaml
  provisioning     config/provision.example.yaml

Try it:
  # a public route, no token needed
  curl -i ${gw}/health

  # a protected route without a token: 401 IAM_UNAUTHENTICATED
  curl -i ${gw}/api/projects

  # log in as alice (editor on project 1) and keep the token
  TOKEN=$(curl -s ${gw}/iam/auth/login -H 'content-type: application/json' \\
    -d '{"username":"alice","password":"alice-password","clientType":"WEB"}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).accessToken')

  curl -s ${gw}/iam/auth/me -H "Authorization: Bearer $TOKEN"
  curl -s ${gw}/api/projects -H "Authorization: Bearer $TOKEN"            # allowed: project:list; only project 1 (the gateway's plan)
  curl -s ${gw}/api/whoami -H "Authorization: Bearer $TOKEN"              # the identity headers the host received
  curl -i ${gw}/api/admin/stats -H "Authorization: Bearer $TOKEN"         # 403 IAM_ACCESS_DENIED, with decisionId

  # explain a denial
  curl -s ${gw}/iam/authorization/diagnostics -H "Authorization: Bearer $TOKEN" \\
    -H 'content-type: application/json' -d '{"method":"GET","path":"/api/admin/stats"}'

  # sessions: list, then log out (the token answers 401 afterwards)
  curl -s ${gw}/iam/sessions -H "Authorization: Bearer $TOKEN"
  curl -i -X POST ${gw}/iam/auth/logout -H "Authorization: Bearer $TOKEN"

In a browser: open ${gw}/api/projects — you are sent to the login page (alice / alice-password)
and come back to the page signed in, with a session cookie; ${gw}/api/admin/stats then shows why it is denied.

Other demo users: bob/bob-password (editor, all projects), admin/admin-password (IAM administrator).
Press Ctrl-C to stop.
`);
  const stop = async () => {
    await gateway.close();
    await host.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

run().catch((error) => {
  console.error(`demo: ${error.message}`);
  process.exit(1);
});
