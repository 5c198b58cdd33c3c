/**
 * docs/your-app.md, run as written: every `sh` block in order, in an empty directory, with this checkout's CLI as
 * `npx iam-gateway` and the example host (examples/host) as "your app". The gateway the guide starts is a real
 * `iam-gateway serve` process on the embedded database; the only changes to the text are the two addresses (the
 * app's and the gateway's port, free ports here instead of 3000 and 8080).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/gateway';
import { until } from '../support/wait';
import { alive, endGuideRun, type GuideRun, guideGatewayPid, prepareGuideRun } from '../support/guide-workspace';

const GUIDE = readFileSync(join(ROOT, 'docs', 'your-app.md'), 'utf8');

let work: string;
let host: GuideRun['host'];
let port: number;

function run(script: string): Promise<{ code: number; output: string }> {
  const child = spawn('bash', ['-e', '-c', script], {
    cwd: work,
    // A fresh shell: no DATABASE_URL or REDIS_URL (the guide runs on the embedded defaults), the gateway's ports free.
    env: { PATH: `${join(work, '.bin')}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? '', PORT: String(port), MANAGEMENT_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, output })));
}

const gatewayPid = (): number | null => guideGatewayPid(work);

beforeAll(async () => {
  ({ work, host, port } = await prepareGuideRun('iam-your-app-'));
}, 60_000);

// Stopped by the guide's last block; by its PID here if a block failed before.
afterAll(() => endGuideRun({ work, host }));

describe('docs/your-app.md as written', () => {
  it('each sh block runs in order: a policy, a user, the gateway in front of the app, 401/200/403, a clean stop', async () => {
    const blocks = [...GUIDE.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.replaceAll('http://127.0.0.1:3000', host.url).replaceAll('http://127.0.0.1:8080', `http://127.0.0.1:${port}`));
    expect(blocks).toHaveLength(5);
    const outcomes = [];
    let pid: number | null = null;
    for (const [index, block] of blocks.entries()) {
      // The gateway's pid file (serve --pid-file), read before the last block stops it and the file goes.
      if (index === blocks.length - 1) pid = gatewayPid();
      const outcome = await run(block);
      outcomes.push(outcome);
      if (outcome.code !== 0) break;
    }
    const log = existsSync(join(work, 'gateway.log')) ? readFileSync(join(work, 'gateway.log'), 'utf8') : '';
    // Every block exits 0 (the walk stops at the first that does not, showing its output and the gateway's log).
    const failed = outcomes.find((outcome) => outcome.code !== 0);
    expect(failed === undefined ? null : { code: failed.code, output: failed.output.slice(-2000), log: log.slice(-2000) }).toBeNull();
    expect(outcomes).toHaveLength(5);
    // The policy check, then the statuses of the walk: no session, carol's list, the admin area she may not use.
    expect(outcomes[0]!.output).toContain('0 errors, 0 warnings');
    const statuses = [...outcomes[3]!.output.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
    expect(statuses).toEqual([401, 200, 403]);
    expect(outcomes[3]!.output).toContain('PERMISSION_DENIED');
    expect(outcomes[3]!.output).toContain('"userId":"u-carol"');
    // The last block stopped the gateway (by the pid it wrote), which removed its pid file.
    expect(pid).toEqual(expect.any(Number));
    await until('the gateway to exit after the guide stops it', () => !alive(pid!));
    expect(gatewayPid()).toBeNull();
  }, 120_000);
});
