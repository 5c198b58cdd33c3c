/**
 * docs/debugging-a-denial.md, run as written: every `sh` block in order, in one bash shell (the guide says to run them
 * so: later blocks use the variables of earlier ones) in a fresh folder holding the package as your-app.md's step 0
 * installs it (this checkout's tarball, packed and installed once per test run: test/support/installed-package.ts),
 * so `npx --no-install iam-gateway` runs its real binary; the example host (examples/host) is the app. The gateway the guide starts is a real
 * `iam-gateway serve` process on the embedded database; the only changes to the text are the two addresses (free
 * ports here instead of 3000 and 8080).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/gateway';
import { until } from '../support/wait';
import { alive, endGuideRun, type GuideRun, guideGatewayPid, guidePath, prepareGuideRun } from '../support/guide-workspace';

const GUIDE = readFileSync(join(ROOT, 'docs', 'debugging-a-denial.md'), 'utf8');

let work: string;
let host: GuideRun['host'];
let port: number;

/**
 * One shell for the whole guide, as a reader runs it: each block is written to its standard input followed by a
 * marker line, and its output is what the shell printed before that marker. `set -e`: a failing command ends the
 * shell, and the walk with it.
 */
class Shell {
  private readonly child: ChildProcessWithoutNullStreams;
  private output = '';
  private taken = 0;
  private exitCode: number | null = null;

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['-e', '-s'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (chunk: Buffer) => void (this.output += chunk.toString()));
    this.child.stderr.on('data', (chunk: Buffer) => void (this.output += chunk.toString()));
    this.child.on('close', (code) => void (this.exitCode = code ?? -1));
    this.child.stdin.write('exec 2>&1\n');
  }

  /** Runs `block`; its output, or null when the shell exited before finishing it (its output then in `failure`). */
  async run(block: string, index: number): Promise<string | null> {
    const marker = `@@ block ${index} done @@`;
    this.child.stdin.write(`${block}\necho '${marker}'\n`);
    try {
      await until(`block ${index} to finish`, () => this.output.includes(`${marker}\n`) || this.exitCode !== null, { within: 90_000 });
    } catch {
      return null; // still running: the walk stops here, `failure()` shows how far it got
    }
    const end = this.output.indexOf(`${marker}\n`);
    if (end < 0) return null;
    const shown = this.output.slice(this.taken, end);
    this.taken = end + marker.length + 1;
    return shown;
  }

  failure(): { code: number | null; output: string } {
    return { code: this.exitCode, output: this.output.slice(this.taken).slice(-3000) };
  }

  /** Ends the shell: `exit` when it waits for input, a kill when a block still runs (one that hangs). */
  async close(): Promise<void> {
    if (this.exitCode !== null) return;
    this.child.stdin.end('exit 0\n');
    try {
      await until('the guide shell to exit', () => this.exitCode !== null);
    } catch {
      this.child.kill('SIGKILL');
      await until('the guide shell to exit once killed', () => this.exitCode !== null);
    }
  }
}

const gatewayPid = (): number | null => guideGatewayPid(work);
const statusesOf = (output: string): number[] => [...output.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
/** The JSON documents a block printed, one a line (the lines that are not JSON, such as headers, are skipped). */
const documentsOf = (output: string): Array<Record<string, unknown>> =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
const failedStep = (decision: Record<string, unknown>): string | undefined =>
  (decision.steps as Array<{ code: string; passed: boolean }>).find((step) => !step.passed)?.code;

beforeAll(async () => {
  ({ work, host, port } = await prepareGuideRun('debugging-'));
}, 600_000);

// Stopped by the guide's last block; by its PID here if a block failed before.
afterAll(() => endGuideRun({ work, host }));

describe('docs/debugging-a-denial.md as written', () => {
  it('each sh block runs in order: a denial, its log line, audit event and explanations, its fix, the other causes, a clean stop', async () => {
    const blocks = [...GUIDE.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.replaceAll('http://127.0.0.1:3000', host.url).replaceAll('http://127.0.0.1:8080', `http://127.0.0.1:${port}`));
    expect(blocks).toHaveLength(10);
    // A fresh shell: no DATABASE_URL or REDIS_URL (the guide runs on the embedded defaults), the gateway's ports free.
    const shell = new Shell(work, { PATH: guidePath(), HOME: process.env.HOME ?? '', PORT: String(port), MANAGEMENT_PORT: '0' });
    const outputs: string[] = [];
    let pid: number | null = null;
    try {
      for (const [index, block] of blocks.entries()) {
        // The gateway's pid file (serve --pid-file), read before the last block stops it and the file goes.
        if (index === blocks.length - 1) pid = gatewayPid();
        const output = await shell.run(block, index);
        if (output === null) break;
        outputs.push(output);
      }
      // Every block finishes (the walk stops at the first that does not, showing its output and the gateway's log).
      const log = existsSync(join(work, 'gateway.log')) ? readFileSync(join(work, 'gateway.log'), 'utf8') : '';
      expect(outputs.length === blocks.length ? null : { block: outputs.length, ...shell.failure(), log: log.slice(-2000) }).toBeNull();
    } finally {
      await shell.close();
    }
    const [, answer, accessLog, audit, explainAsUser, explainAsAdmin, policyExplain, fix, causes] = outputs as [string, string, string, string, string, string, string, string, string];

    // 1. The answer: 403, its request id header, the problem's code, step and decision id.
    expect(statusesOf(answer)).toEqual([403]);
    const requestId = /^x-request-id: (\S+)\r?$/im.exec(answer)?.[1];
    const problem = documentsOf(answer)[0]!;
    expect(problem).toMatchObject({ status: 403, code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED', instance: '/api/projects/1', requestId });
    const decisionId = problem.decisionId as string;
    expect(decisionId).toEqual(expect.any(String));

    // 2. The access-log line of that request, and its audit event.
    const line = documentsOf(accessLog)[0]!;
    expect(line).toMatchObject({ msg: 'access', requestId, status: 403, decision: 'deny', step: 'PERMISSION_DENIED', route: '/api/projects/:projectId', userId: 'u-carol', profileId: 'p-carol', decisionId });
    const events = documentsOf(audit)[0]!.items as Array<Record<string, unknown>>;
    expect(events[0]).toMatchObject({ action: 'authz.deny', targetId: 'GET /api/projects/1', requestId, decisionId });

    // 3. The explanations name the failed step: the user's lookup and diagnostics, the admin's for carol, the policy's.
    const [ownDecision, ownDiagnostics] = documentsOf(explainAsUser) as [Record<string, unknown>, Record<string, unknown>];
    const [adminDiagnostics, auditorDecision] = documentsOf(explainAsAdmin) as [Record<string, unknown>, Record<string, unknown>];
    for (const decision of [ownDecision, ownDiagnostics, adminDiagnostics, auditorDecision]) {
      expect(decision).toMatchObject({ allowed: false, permissionCode: 'project:read', profileId: 'p-carol' });
      expect(failedStep(decision)).toBe('PERMISSION_DENIED');
    }
    expect(ownDecision.decisionId).toBe(decisionId);
    expect(auditorDecision.decisionId).toBe(decisionId);
    expect(ownDiagnostics.route).toMatchObject({ file: 'app.yaml' });
    expect(policyExplain).toContain('/api/projects/:projectId');
    expect(policyExplain).toContain('project:read');

    // 4. The fix: the template holds the code, and the same request is allowed.
    expect(documentsOf(fix)[0]).toMatchObject({ versionId: 'viewer-v1', permissions: ['project:list', 'project:read'] });
    expect(statusesOf(fix)).toEqual([200]);

    // 5. The other causes this setup shows: another project's scope, a route the policy does not name (and the policy
    // says so), a cross-site post with the session cookie (no decision made), a token after its logout.
    expect(documentsOf(causes).map((document) => [document.status, document.code, document.step])).toEqual([
      [403, 'IAM_ACCESS_DENIED', 'SCOPE_DENIED'],
      [403, 'IAM_ACCESS_DENIED', 'ROUTE_NOT_DECLARED'],
      [403, 'IAM_CSRF_REJECTED', undefined],
      [401, 'IAM_UNAUTHENTICATED', undefined],
    ]);
    expect(documentsOf(causes)[2]).not.toHaveProperty('decisionId');
    expect(causes).toContain('default     deny: 403 IAM_ACCESS_DENIED, step ROUTE_NOT_DECLARED');
    expect(statusesOf(causes)).toEqual([401]);
    expect(causes).toMatch(/^www-authenticate: Bearer .*error="invalid_token"/im);

    // 6. The last block stopped the gateway (by the pid it wrote), which removed its pid file.
    expect(pid).toEqual(expect.any(Number));
    await until('the gateway to exit after the guide stops it', () => !alive(pid!));
    expect(gatewayPid()).toBeNull();
  }, 240_000);
});
