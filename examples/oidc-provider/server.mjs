/**
 * A real OpenID Provider on 127.0.0.1 for the end-to-end tests and `npm run demo:oidc`: oidc-provider 9 (a
 * certified OP; a devDependency, never part of the gateway), ESM-only, so it runs in its own plain `node` process,
 * started by test/support/oidc-op.ts or scripts/demo-oidc.js. Never for production: it keeps everything in memory
 * and signs users in from a list of passwords.
 *
 *   node examples/oidc-provider/server.mjs <config.json> [port]
 *
 * The port is argv[3], else OIDC_OP_PORT, else the config's `port`, else 0 (a free port). Once listening it
 * prints one line of JSON to stdout, `{"issuer":"http://127.0.0.1:PORT"}`, and nothing else there.
 *
 * Configuration (JSON): `jwks` (private signing keys), `clients` (client metadata), `accounts` (login name →
 * `{ sub, password, claims }`), `idTokenTtlSeconds`, optionally `resourceIndicators: { audience, scope? }`
 * (JWT access tokens for that one resource) and `conformIdTokenClaims` (default false: the scope's claims are
 * in the ID token too, not only at the userinfo endpoint).
 *
 * What a test meets:
 * - Login: GET /interaction/:uid is a plain HTML form (inputs `login` and `password`, one submit button, no
 *   script) that POSTs to the same URL; a wrong password shows the form again with "Invalid login or
 *   password." and status 200. There is no consent page: the consent prompt is granted on the spot (every
 *   requested scope, claim and resource scope) and answered with a redirect.
 * - Logout (RP-initiated): GET /session/end shows a confirm page; its form `op.logoutForm` (hidden `xsrf`)
 *   is submitted by the button `logout=yes` ("Yes, sign me out") — a plain form POST, no script. The
 *   confirm POST sends the back-channel logout tokens (awaited) before it redirects to the
 *   post_logout_redirect_uri. Without a login session oidc-provider answers with its own self-submitting form
 *   (inline script, noscript button) instead.
 * - Back-channel logout POSTs reach loopback receivers: oidc-provider's SSRF guard (a dispatcher that refuses
 *   special-use addresses) is dropped by the `fetch` option below.
 * - PKCE (S256) is required from every client, confidential ones too.
 * - The process exits on SIGTERM, SIGINT and when its stdin ends (the test process went away).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';

const configPath = process.argv[2];
if (!configPath) {
  process.stderr.write('usage: node server.mjs <config.json> [port]\n');
  process.exit(2);
}
const config = JSON.parse(readFileSync(configPath, 'utf8'));
const port = Number(process.argv[3] ?? process.env.OIDC_OP_PORT ?? config.port ?? 0);
const accounts = config.accounts ?? {};
const resource = config.resourceIndicators; // { audience, scope? } or undefined

/** Escapes text for HTML element content and double-quoted attribute values. */
const html = (value) =>
  String(value).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

const page = (title, body) => `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>${html(title)}</title></head>
<body>
<h1>${html(title)}</h1>
${body}
</body>
</html>`;

/** The login form of interaction `uid`; `login` and `error` are shown again after a failed attempt. */
const loginPage = (uid, { login = '', error } = {}) =>
  page(
    'Sign in',
    `${error ? `<p id="error" role="alert">${html(error)}</p>\n` : ''}<form id="login-form" method="post" action="/interaction/${html(uid)}">
<label>Login <input type="text" name="login" autocomplete="username" value="${html(login)}" required autofocus></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<button type="submit" id="sign-in">Sign in</button>
</form>`,
  );

/** The account whose `sub` is `sub` (findAccount is asked by subject, the login form by login name). */
const accountBySub = (sub) => Object.values(accounts).find((account) => account.sub === sub);

const server = createServer();
// Answers 503 for the moment between listen() and the provider's construction (the issuer needs the port).
let handle = (_req, res) => {
  res.statusCode = 503;
  res.end();
};
// Every request is logged to stderr as `request: METHOD /path` (tests count the JWKS fetches in TestOp.output()).
server.on('request', (req, res) => {
  process.stderr.write(`request: ${req.method} ${(req.url ?? '').split('?')[0]}\n`);
  handle(req, res);
});

server.listen(port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks: config.jwks,
    clients: config.clients ?? [],
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
    scopes: ['openid', 'profile', 'email', 'groups', 'offline_access'],
    conformIdTokenClaims: config.conformIdTokenClaims ?? false,
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      backchannelLogout: { enabled: true },
      rpInitiatedLogout: {
        enabled: true,
        // `form` is oidc-provider's `<form id="op.logoutForm">` with the hidden xsrf input; the buttons submit it.
        logoutSource: async (ctx, form) => {
          ctx.body = page(
            'Sign out',
            `${form}
<p>Do you want to sign out from ${html(ctx.host)}?</p>
<button type="submit" form="op.logoutForm" id="logout-yes" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm" id="logout-no">No, stay signed in</button>`,
          );
        },
        postLogoutSuccessSource: async (ctx) => {
          ctx.body = page('Signed out', '<p>You are signed out.</p>');
        },
      },
      clientCredentials: { enabled: true },
      resourceIndicators: resource
        ? {
            enabled: true,
            // The authorization's resource also applies at the token endpoint when the token request names
            // none, so an authorization code grant with `resource=` yields a JWT access token for it.
            useGrantedResource: async () => true,
            getResourceServerInfo: async (_ctx, indicator) => {
              if (indicator !== resource.audience) throw new errors.InvalidTarget();
              return {
                scope: resource.scope ?? 'api:read api:write',
                audience: resource.audience,
                accessTokenFormat: 'jwt',
                accessTokenTTL: 300,
                jwt: { sign: { alg: 'RS256' } },
              };
            },
          }
        : { enabled: false },
    },
    findAccount: async (_ctx, sub) => {
      const account = accountBySub(sub);
      if (!account) return undefined;
      return { accountId: sub, claims: async () => ({ ...(account.claims ?? {}), sub }) };
    },
    ttl: {
      AccessToken: 300,
      AuthorizationCode: 60,
      ClientCredentials: 300,
      Grant: 3600,
      IdToken: config.idTokenTtlSeconds ?? 300,
      Interaction: 600,
      Session: 3600,
    },
    // oidc-provider's fetch wrapper sets an SSRF-guarding undici dispatcher that refuses loopback and
    // private addresses; the back-channel logout receivers in tests are on 127.0.0.1, so drop it.
    fetch: (url, options) => {
      delete options.dispatcher;
      return globalThis.fetch(url, options);
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = page('Error', Object.entries(out).map(([key, value]) => `<p><b>${html(key)}</b>: ${html(value)}</p>`).join('\n'));
    },
  });
  // Why a back-channel logout did not arrive is otherwise invisible; the test helper shows stderr on failure.
  provider.on('backchannel.error', (_ctx, error, client) =>
    process.stderr.write(`backchannel logout to ${client.clientId} failed: ${error.message}\n`),
  );
  provider.on('server_error', (_ctx, error) => process.stderr.write(`server_error: ${error.stack}\n`));

  const callback = provider.callback();
  handle = (req, res) => {
    const path = new URL(req.url, issuer).pathname;
    if (/^\/interaction\/[^/]+$/.test(path)) {
      interaction(provider, req, res).catch((error) => {
        process.stderr.write(`interaction failed: ${error.stack}\n`);
        if (res.headersSent) return res.destroy();
        res.statusCode = error instanceof errors.SessionNotFound ? 400 : 500;
        res.setHeader('content-type', 'text/html; charset=utf-8');
        res.end(page('Error', `<p>${html(error.message)}</p>`));
      });
      return;
    }
    callback(req, res);
  };
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

/** GET /interaction/:uid shows the login form (or grants consent); POST checks the password. */
async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt } = details;

  if (prompt.name === 'consent') {
    await provider.interactionFinished(req, res, { consent: { grantId: await grantAll(provider, details) } }, { mergeWithLastSubmission: true });
    return;
  }
  if (prompt.name !== 'login') throw new Error(`unexpected prompt ${prompt.name}`);

  const send = (body) => {
    res.statusCode = 200;
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.setHeader('cache-control', 'no-store');
    res.end(body);
  };
  if (req.method === 'GET') return send(loginPage(uid));
  if (req.method !== 'POST') {
    res.statusCode = 405;
    res.end();
    return;
  }
  const form = new URLSearchParams(await readBody(req));
  const login = form.get('login') ?? '';
  const account = Object.hasOwn(accounts, login) ? accounts[login] : undefined;
  if (!account || account.password !== (form.get('password') ?? '')) {
    return send(loginPage(uid, { login, error: 'Invalid login or password.' }));
  }
  await provider.interactionFinished(req, res, { login: { accountId: account.sub } }, { mergeWithLastSubmission: false });
}

/** The interaction's grant (or a new one) extended by everything the consent prompt says is missing. */
async function grantAll(provider, { grantId, params, session, prompt: { details } }) {
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(details.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  return grant.save();
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
      if (body.length > 64 * 1024) req.destroy(new Error('form too large'));
    });
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}

let exiting = false;
function exit() {
  if (exiting) return;
  exiting = true;
  server.close(() => process.exit(0));
  server.closeAllConnections();
  // Keep-alive sockets of clients that are gone must not hold the exit up.
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', exit);
process.on('SIGINT', exit);
// The test process holds our stdin; when it ends (or dies), so do we.
process.stdin.on('end', exit);
process.stdin.on('error', exit);
process.stdin.resume();
