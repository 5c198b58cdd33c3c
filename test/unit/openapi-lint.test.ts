/**
 * docs/http-contract.md: the `/iam` OpenAPI document (src/api/openapi-document.ts, the object `GET /iam/openapi.json`
 * serializes) passes `redocly lint` with the `recommended` ruleset, without an error or a warning.
 *
 * The installed @redocly/cli is run on the document written to a temporary directory, the way a person would run it
 * (`npx redocly lint --extends recommended`), fully offline: telemetry and the update check are off, and a preload
 * makes any attempt to open a connection or resolve a name fail the test. The rules are the recommended ones, not
 * disabled; the only exceptions are the problems listed in {@link EXCEPTIONS}, each for one operation, with the
 * reason, and each must still be needed (a stale one fails the test).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApiDocument } from '../../src/api/openapi-document';

const CLI = join(__dirname, '../../node_modules/@redocly/cli/bin/cli.js');

/** JSON Pointer of an operation's `responses` (RFC 6901: `/` in a path is `~1`). */
const responsesOf = (path: string, method: string): string => `#/paths/${path.replace(/~/g, '~0').replace(/\//g, '~1')}/${method}/responses`;

/**
 * Problems the contract makes unavoidable, ignored for exactly these places (redocly's `.redocly.lint-ignore.yaml`).
 * operation-2xx-response: these browser endpoints answer success with a redirect (302/303), never a 2xx — the
 * redirect is the contract (a login ends on the page it came from; OpenID Connect login and logout are round trips
 * through the provider). Inventing a 2xx would describe an answer the gateway never gives.
 */
const EXCEPTIONS: Array<{ rule: string; pointer: string }> = [
  { rule: 'operation-2xx-response', pointer: responsesOf('/iam/login', 'post') },
  { rule: 'operation-2xx-response', pointer: responsesOf('/iam/auth/oidc/login', 'get') },
  { rule: 'operation-2xx-response', pointer: responsesOf('/iam/auth/oidc/callback', 'get') },
  { rule: 'operation-2xx-response', pointer: responsesOf('/iam/auth/oidc/logout', 'get') },
];

/**
 * Loaded before the CLI: opening a socket, a TLS connection, a fetch or a DNS lookup is written to `network.log` and
 * throws, so a CLI that tries the network (telemetry, an update check, a remote ruleset) fails the test.
 */
const OFFLINE_PRELOAD = `
import { appendFileSync } from 'node:fs';
import dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
const refuse = (what) => function () {
  appendFileSync(${JSON.stringify('LOG')}, what + '\\n');
  throw new Error('offline: ' + what);
};
net.Socket.prototype.connect = refuse('net.connect');
tls.connect = refuse('tls.connect');
dns.lookup = refuse('dns.lookup');
dns.promises.lookup = refuse('dns.promises.lookup');
globalThis.fetch = refuse('fetch');
`;

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; severity: string; message: string; ignored?: boolean; location: Array<{ pointer: string }> }>;
}

let dir: string;
let report: LintReport;
let stderr: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iam-openapi-lint-'));
  // Exactly what the gateway serves (src/api/meta-routes.ts).
  writeFileSync(join(dir, 'openapi.json'), JSON.stringify(openApiDocument, null, 2));
  writeFileSync(join(dir, 'redocly.yaml'), 'extends:\n  - recommended\ntelemetry: off\n');
  const ignored: Record<string, string[]> = {};
  for (const { rule, pointer } of EXCEPTIONS) (ignored[rule] ??= []).push(pointer);
  writeFileSync(join(dir, '.redocly.lint-ignore.yaml'), JSON.stringify({ 'openapi.json': ignored }, null, 2)); // JSON is YAML
  const preload = `data:text/javascript,${encodeURIComponent(OFFLINE_PRELOAD.replace('"LOG"', JSON.stringify(join(dir, 'network.log'))))}`;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: dir,
    REDOCLY_TELEMETRY: 'off',
    REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
    REDOCLY_SUPPRESS_NOTIFICATIONS: 'true',
    CI: 'true',
    NO_COLOR: '1',
  };
  ({ report, stderr } = await new Promise<{ report: LintReport; stderr: string }>((resolve, reject) => {
    // Exits non-zero on an error; the JSON report on stdout says why either way.
    execFile(process.execPath, ['--import', preload, CLI, 'lint', '--format', 'json', '--max-problems', '1000', 'openapi.json'], { cwd: dir, env, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      try {
        resolve({ report: JSON.parse(stdout) as LintReport, stderr });
      } catch {
        reject(new Error(`redocly lint gave no JSON report (${error?.message ?? 'no error'}): ${stdout}\n${stderr}`));
      }
    });
  }));
}, 60_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the /iam OpenAPI document under redocly lint (recommended)', () => {
  it('never tried to reach the network', () => {
    expect(existsSync(join(dir, 'network.log')) ? readFileSync(join(dir, 'network.log'), 'utf8') : '').toBe('');
  });

  it('used the recommended ruleset', () => {
    expect(stderr).not.toMatch(/config.*(error|invalid)/i);
  });

  it('has no error and no warning', () => {
    const problems = report.problems.filter((p) => !p.ignored).map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });

  it('still needs every documented exception (none is stale)', () => {
    // The report counts the ignored problems without listing them; an entry ignores at most one problem (one rule at
    // one place), so the count equals the entries only when each is still used.
    expect(new Set(EXCEPTIONS.map(({ rule, pointer }) => `${rule} ${pointer}`)).size).toBe(EXCEPTIONS.length);
    expect(report.totals.ignored).toBe(EXCEPTIONS.length);
  });

  it('says where it is served and how a caller authenticates', () => {
    expect(openApiDocument.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    expect(openApiDocument.components.securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      sessionCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: '__Host-iam-session' }),
    });
  });
});
