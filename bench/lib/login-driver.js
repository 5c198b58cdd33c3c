'use strict';
/**
 * Logins at a fixed rate in the background (the "login under load" phase): one POST /iam/auth/login every
 * 1000/rate ms, at most `maxInFlight` outstanding (a slow gateway gets fewer attempts, never a pile-up), and
 * never more than `rate × maxSeconds` attempts in total. `username` may be a list: the users take turns
 * (lib/login-users.js: one user logging in 20 times a second would run into the per-user session cap).
 */
const http = require('node:http');
const { login } = require('./http');
const { summarize } = require('./stats');

function loginDriver({ gatewayUrl, username, password, clientType = 'WEB', rate, maxSeconds, maxInFlight = 20 }) {
  const maxAttempts = Math.ceil(rate * maxSeconds);
  const usernames = [].concat(username);
  let timer = null;
  let agent = null;
  let started = 0n;
  let seconds = 0;
  const inFlight = new Set();
  const latencies = [];
  const counts = { attempted: 0, ok: 0, failed: 0, skipped: 0 };
  let firstError = null;

  const attempt = () => {
    if (counts.attempted >= maxAttempts) return;
    if (inFlight.size >= maxInFlight) {
      counts.skipped++;
      return;
    }
    counts.attempted++;
    const t0 = process.hrtime.bigint();
    const pending = login(gatewayUrl, usernames[counts.attempted % usernames.length], password, clientType, agent).then(
      () => {
        counts.ok++;
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      },
      (error) => {
        counts.failed++;
        firstError ??= error.message;
      },
    );
    inFlight.add(pending);
    pending.finally(() => inFlight.delete(pending));
  };

  return {
    start() {
      agent = new http.Agent({ keepAlive: true, maxSockets: maxInFlight });
      started = process.hrtime.bigint();
      attempt();
      timer = setInterval(attempt, 1000 / rate);
      return true;
    },
    async stop() {
      clearInterval(timer);
      seconds = Number(process.hrtime.bigint() - started) / 1e9;
      await Promise.all([...inFlight]);
      agent.destroy();
      const latency = summarize(Float64Array.from(latencies));
      return { ...counts, ratePerSecond: counts.ok / seconds, loginP50Ms: latency.p50, loginP99Ms: latency.p99, firstError };
    },
  };
}

module.exports = { loginDriver };
