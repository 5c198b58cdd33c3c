/**
 * The embedded default: with no `database.url`, the gateway starts PGlite in a child
 * process, migrates it, and uses it like any PostgreSQL; stopping the gateway stops it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/adapters/postgres/database';
import { testConfig } from '../support/gateway';

function embeddedConfig(dir: string): ReturnType<typeof testConfig> {
  return testConfig('http://127.0.0.1:9', { DATABASE_URL: '', DATABASE_EMBEDDED_DIR: dir, REDIS_URL: '' });
}

it('starts, migrates and serves the repository, and keeps data in its directory across restarts', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'iam-pglite-')), 'data');
  const first = await openDatabase(embeddedConfig(dir));
  expect(first.kind).toBe('embedded');
  await first.repository.ensurePrincipal({ userId: 'u-embedded', identityId: 'id-embedded', identityDomain: 'example.com' });
  await first.close();

  const second = await openDatabase(embeddedConfig(dir));
  try {
    expect(await second.repository.getUser('u-embedded')).toMatchObject({ userId: 'u-embedded', enabled: true });
  } finally {
    await second.close();
  }
}, 60_000);

it('keeps nothing with memory://', async () => {
  const first = await openDatabase(embeddedConfig('memory://'));
  await first.repository.ensurePrincipal({ userId: 'u-gone', identityId: 'id-gone', identityDomain: 'example.com' });
  await first.close();
  const second = await openDatabase(embeddedConfig('memory://'));
  try {
    expect(await second.repository.getUser('u-gone')).toBeNull();
  } finally {
    await second.close();
  }
}, 60_000);
