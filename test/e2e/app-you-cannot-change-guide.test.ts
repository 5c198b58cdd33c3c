/**
 * docs/app-you-cannot-change.md, run as written: a real third-party REST server (json-server, installed by the guide
 * into a folder of its own, started by its own binary) behind the gateway installed from this checkout's tarball
 * (installed-package.ts, once per run), scoped without a line of the app's code — resolvers that read the app's own
 * answers and lists the gateway filters. The only changes to the text are the two ports (free ports instead of 3000
 * and 8080).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../support/front-proxy';
import { ROOT } from '../support/gateway';
import { descendants, endGuideRun, guideGatewayPid, runShBlock, installedAppFolder, processesIn, shBlocks } from '../support/guide-workspace';
import { hasExited } from '../support/processes';
import { until } from '../support/wait';

const GUIDE = readFileSync(join(ROOT, 'docs', 'app-you-cannot-change.md'), 'utf8');

let work: string;
let appPort: number;
let gatewayPort: number;

/** A block in a fresh shell: the embedded defaults, the gateway's ports free; npm may answer from the machine's cache. */
const run = (script: string): ReturnType<typeof runShBlock> =>
  runShBlock(work, script, { PORT: String(gatewayPort), MANAGEMENT_PORT: '0', npm_config_prefer_offline: 'true' });

beforeAll(async () => {
  work = await installedAppFolder('app-you-cannot-change-');
  appPort = await freePort();
  gatewayPort = await freePort();
}, 600_000);

// The guide's last block stops both; whatever a failed block left running in the folder is stopped here.
afterAll(async () => {
  const app = existsSync(join(work, 'app.pid')) ? Number(readFileSync(join(work, 'app.pid'), 'utf8')) : null;
  for (const pid of app === null ? [] : [app, ...descendants(app)]) if (!hasExited(pid)) process.kill(pid, 'SIGKILL');
  await endGuideRun({ work });
});

describe('docs/app-you-cannot-change.md as written', () => {
  it('json-server behind the gateway: scoped lists, query-selected lists, tasks by their project, 404, an unscoped user untouched', async () => {
    const blocks = shBlocks(GUIDE).map((block) =>
      block
        .replaceAll('--port 3000', `--port ${appPort}`)
        .replaceAll('http://127.0.0.1:3000', `http://127.0.0.1:${appPort}`)
        .replaceAll('http://127.0.0.1:8080', `http://127.0.0.1:${gatewayPort}`),
    );
    expect(blocks).toHaveLength(7);
    const outcomes: Array<{ code: number; output: string }> = [];
    let running: number[] = [];
    for (const block of blocks) {
      const outcome = await run(block);
      outcomes.push(outcome);
      if (outcome.code !== 0) break;
      if (outcomes.length === 6) {
        const gateway = guideGatewayPid(work)!;
        running = [gateway, ...descendants(gateway), Number(readFileSync(join(work, 'app.pid'), 'utf8'))];
      }
    }
    const log = existsSync(join(work, 'gateway.log')) ? readFileSync(join(work, 'gateway.log'), 'utf8') : '';
    const failed = outcomes.find((outcome) => outcome.code !== 0);
    expect(failed === undefined ? null : { block: outcomes.length, code: failed.code, output: failed.output.slice(-3000), log: log.slice(-3000) }).toBeNull();
    expect(outcomes).toHaveLength(7);

    // After the last block the app no longer answers on its port.
    expect((await fetch(`http://127.0.0.1:${appPort}/projects/1`).catch(() => null))?.status ?? 'stopped').toBe('stopped');
    // The policy checks clean: both lists are filtered.
    expect(outcomes[2]!.output).toContain('0 errors, 0 warnings');
    const walk = outcomes[5]!.output;
    const lines = walk.split('\n');
    // carol (scoped to project 1): her list, the list a query selects, the tasks of her project.
    expect(lines[0]).toBe('[{"id":1,"name":"Apollo"}]');
    expect(lines[1]).toBe('[]');
    expect(lines[2]).toBe('[{"id":1,"projectId":1,"title":"Launch"},{"id":2,"projectId":1,"title":"Orbit"}]');
    // One project of another's, a task in another project (read from the app's own answer), an unknown task.
    expect(lines.slice(3, 6)).toEqual(['403', '403', '404']);
    // dave (unscoped): json-server's own answer, untouched (its indentation included).
    const dave = JSON.parse(lines.slice(6).join('\n')) as Array<{ id: number }>;
    expect(dave.map((project) => project.id)).toEqual([1, 2, 3]);
    expect(lines.slice(6).join('\n')).toContain('\n  {\n    "id": 1,');
    // The last block stopped the gateway (through its pid file) and the app; nothing is left in the folder.
    await until('the gateway and the app to exit after the guide stops them', () => running.every((pid) => hasExited(pid)));
    await until('no process left in the guide folder', () => processesIn(work).length === 0);
    // The access log (written at the latest when the gateway stops) says what the filter kept and removed.
    expect(readFileSync(join(work, 'gateway.log'), 'utf8')).toContain('"filtered":{"kept":1,"removed":2}');
  }, 300_000);
});
