'use strict';
/**
 * The users of the login-under-load phase. Logging in as alice again and again would hit the gateway's own
 * `iam.token.max-sessions-per-user` (50 by default): past it every login lists and revokes her oldest
 * session, and the oldest is the session the load itself uses, so the proxied requests turn into 401s
 * (which the latency percentiles, 2xx only, then leave out). Real logins come from many users, each with a
 * few sessions: the phase logs in as `count` users of their own, in turn. They are written to a users file
 * beside the example users (same argon2id parameters: each has alice's hash, so the same password and the
 * same cost per verification), and each is logged in once before anything is measured, so the measured
 * logins are returning users (no first-login user creation) that stay well under the session cap.
 */
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { parse, stringify } = require('yaml');
const { EXAMPLE_IDENTITIES_ENV } = require('./gateway');
const { login } = require('./http');

const PASSWORD = 'alice-password';

/**
 * Writes `users.yaml` into `dir`: the example users plus `count` login users (bench-login-1…). Returns
 * `{ path, usernames, password, env }`; `env` points a gateway's users-file authenticator at the file.
 */
function writeLoginUsers(dir, count = 20) {
  const example = parse(readFileSync(EXAMPLE_IDENTITIES_ENV.IAM_AUTHENTICATOR_PATH, 'utf8'));
  const alice = example.users.find((user) => user.username === 'alice');
  if (!alice) throw new Error(`${EXAMPLE_IDENTITIES_ENV.IAM_AUTHENTICATOR_PATH} has no user alice`);
  const extra = Array.from({ length: count }, (_, i) => ({
    username: `bench-login-${i + 1}`,
    passwordHash: alice.passwordHash,
    userId: `u-bench-login-${i + 1}`,
    identityId: `id-bench-login-${i + 1}`,
    identityDomain: alice.identityDomain,
    displayName: `Bench login ${i + 1}`,
    enabled: true,
  }));
  const path = join(dir, 'users.yaml');
  writeFileSync(path, stringify({ users: [...example.users, ...extra] }));
  return { path, usernames: extra.map((user) => user.username), password: PASSWORD, env: { IAM_AUTHENTICATOR_PATH: path } };
}

/** Logs every login user in once (a few at a time), so that the measured logins are not first logins. */
async function loginEachOnce(gatewayUrl, users, concurrency = 4) {
  let next = 0;
  const worker = async () => {
    while (next < users.usernames.length) await login(gatewayUrl, users.usernames[next++], users.password);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

module.exports = { writeLoginUsers, loginEachOnce };
