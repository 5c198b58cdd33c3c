'use strict';
/**
 * Forward-auth in bench/run.js's own rounds, for issue #18's two forward-auth rows measured in the same run as the
 * inline gateway: gateway warm asked `GET /iam/authorization/forward-auth` with alice's bearer, `X-Original-Method:
 * GET` and `X-Original-URI: /bench/projects/1`, as nginx's `auth_request` subrequest carries them (the headers and
 * checks of bench/forward-auth.js, the scenario with its own gateway). Answered 200 with the identity headers and no
 * body: a decision, nothing forwarded.
 */
const { BENCH_PATH } = require('./policy');
const { RawClient } = require('./raw-client');
const { summarize } = require('./stats');

const FORWARD_AUTH_PATH = '/iam/authorization/forward-auth';

/** The forward-auth target of `gateway` (with `headers` = its bearer), its CPU read from `watched`. */
function forwardAuthTarget(gateway, watched) {
  return {
    key: 'forwardAuth',
    label: 'forward-auth decision (gateway warm)',
    url: `${gateway.url}${FORWARD_AUTH_PATH}`,
    headers: { ...gateway.headers, 'x-original-method': 'GET', 'x-original-uri': BENCH_PATH },
    pid: watched,
    gateway: true,
    // The sanity check: 200, no body (the identity headers are checked by forwardAuthSanity).
    expectedBody: '',
  };
}

/** The decision carries alice's identity headers. */
function checkIdentityHeaders(answer) {
  if (answer.headers['x-iam-user-id'] !== 'u-alice' || answer.headers['x-iam-permission'] !== 'project:read') {
    throw new Error(`forward-auth: expected X-IAM-User-Id u-alice and X-IAM-Permission project:read, got ${JSON.stringify(answer.headers)}`);
  }
}

/**
 * Unloaded: one request at a time on one keep-alive connection each (lib/raw-client.js, as bench/forward-auth.js
 * measures it, so the client adds little), alternating the upstream asked directly and the forward-auth decision.
 * Resolves `{ p50, p99, directP50, overDirectMs }` in ms.
 */
async function unloadedForwardAuth(direct, forwardAuth, { count, warmup }) {
  const clients = [new RawClient(direct.url, direct.headers), new RawClient(forwardAuth.url, forwardAuth.headers)];
  for (const client of clients) await client.connect();
  const times = [new Float64Array(count), new Float64Array(count)];
  try {
    for (let i = 0; i < warmup + count; i++) {
      for (const c of i % 2 === 0 ? [0, 1] : [1, 0]) {
        const { status, ms } = await clients[c].send();
        if (status !== 200) throw new Error(`unloaded forward-auth: ${c === 0 ? 'direct' : 'forward-auth'} answered ${status}`);
        if (i >= warmup) times[c][i - warmup] = ms;
      }
    }
  } finally {
    for (const client of clients) client.close();
  }
  const [directLatency, decision] = times.map((values) => summarize(values));
  return { p50: decision.p50, p99: decision.p99, directP50: directLatency.p50, overDirectMs: decision.p50 - directLatency.p50 };
}

module.exports = { FORWARD_AUTH_PATH, forwardAuthTarget, checkIdentityHeaders, unloadedForwardAuth };
