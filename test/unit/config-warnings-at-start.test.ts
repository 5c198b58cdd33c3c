/**
 * What loading the configuration noticed without refusing it (an IAM_… or SERVER_… variable that no key reads,
 * docs/configuration.md "Environment overrides") is in the application log of a started gateway, once per variable,
 * at warn level, without the variable's value. The transparent mode (iam.enabled false) starts without a database.
 */
import { join } from 'node:path';
import { loadConfig } from '../../src/config';
import { startGateway, type RunningGateway } from '../../src/app/start-gateway';
import { createLogger } from '../../src/observability/logger';

const ROOT = join(__dirname, '..', '..');

it('a started gateway warns once for each unknown IAM_…/SERVER_… variable (with a suggestion), never for known names', async () => {
  const config = loadConfig({
    file: join(ROOT, 'config', 'default.yaml'),
    cwd: ROOT,
    env: {
      IAM_ENABLED: 'false',
      PORT: '0',
      MANAGEMENT_PORT: '0',
      SERVER_HOST: '127.0.0.1',
      UPSTREAM_URL: 'http://127.0.0.1:9',
      IAM_TOKEN_TTL: '1h',
      IAM_POLICIES_DIR: ROOT,
      IAM_POLICY_DIRR: '/do-not-print-this-value',
      SERVER_NO_SUCH_THING_AT_ALL: 'do-not-print-this-either',
    },
  });
  let text = '';
  const logger = createLogger('info', { write: (chunk: string) => void (text += chunk) });
  let gateway: RunningGateway | undefined;
  try {
    gateway = await startGateway(config, { logger });
  } finally {
    await gateway?.close();
  }
  const lines = text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { level: number; msg: string });
  const unknown = lines.filter((line) => line.msg.startsWith('unknown environment variable'));
  expect(unknown).toEqual([
    expect.objectContaining({ level: 40, msg: 'unknown environment variable IAM_POLICY_DIRR (did you mean IAM_POLICY_DIR?)' }),
    expect.objectContaining({ level: 40, msg: 'unknown environment variable SERVER_NO_SUCH_THING_AT_ALL' }),
  ]);
  expect(text).not.toContain('do-not-print');
  for (const known of ['IAM_ENABLED', 'SERVER_HOST', 'IAM_TOKEN_TTL', 'IAM_POLICIES_DIR']) expect(text).not.toContain(known);
});
