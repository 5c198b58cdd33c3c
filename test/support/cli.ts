/**
 * The CLI (`main(args)`) in process, against the test database and without Redis, as `iam-gateway …` would
 * run with config/default.yaml: its exit code and what it wrote to stdout and stderr.
 */
import { join } from 'node:path';
import { main } from '../../src/cli/main';
import { testDatabaseKind, testDatabaseUrl } from './env';
import { ROOT } from './gateway';

export async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const saved = { ...process.env };
  Object.assign(process.env, {
    DATABASE_URL: testDatabaseUrl(),
    DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '2',
    REDIS_URL: '',
    IAM_CONFIG: join(ROOT, 'config/default.yaml'),
  });
  let out = '';
  let err = '';
  const outSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => ((out += String(chunk)), true));
  const errSpy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => ((err += String(chunk)), true));
  try {
    return { code: await main(args), out, err };
  } finally {
    outSpy.mockRestore();
    errSpy.mockRestore();
    process.env = saved;
  }
}
