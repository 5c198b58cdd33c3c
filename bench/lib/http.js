'use strict';
/** Plain HTTP helpers for the bench (loopback only): JSON login, one-off GETs, bounded request drivers. */
const http = require('node:http');

/** One request on a fresh or given agent; resolves {status, headers, body}. */
function request(url, { method = 'GET', headers = {}, body = null, agent = undefined, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms: ${method} ${url}`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Logs in through `/iam/auth/login`; resolves the AuthenticationResult or throws with the answer. */
async function login(gatewayUrl, username, password, clientType = 'WEB', agent = undefined) {
  const body = JSON.stringify({ username, password, clientType });
  const answer = await request(`${gatewayUrl}/iam/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    body,
    agent,
  });
  if (answer.status !== 200) throw new Error(`login of ${username} at ${gatewayUrl} failed: ${answer.status} ${answer.body}`);
  return JSON.parse(answer.body);
}

/**
 * Sends exactly `count` requests with at most `concurrency` in flight over a keep-alive agent;
 * `headersFor(i)` gives the i-th request's headers. Resolves status counts and the elapsed seconds.
 * `onProgress(done)` is called every `progressEvery` completions.
 */
async function drive({ url, count, concurrency, headersFor, onProgress = null, progressEvery = 10_000 }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses = {};
  let next = 0;
  let done = 0;
  const started = process.hrtime.bigint();
  const worker = async () => {
    while (next < count) {
      const i = next++;
      let status;
      try {
        status = (await request(url, { headers: headersFor(i), agent })).status;
      } catch (error) {
        status = `error: ${error.message}`;
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
      done++;
      if (onProgress && done % progressEvery === 0) onProgress(done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  agent.destroy();
  return { statuses, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

module.exports = { request, login, drive };
