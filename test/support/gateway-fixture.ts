/**
 * The setup most end-to-end files share: an empty, migrated database, a recording upstream process and an
 * in-process gateway in front of it (test/support/gateway.ts), started in `beforeAll` and stopped together.
 */
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from './database';
import { ROOT, startTestGateway } from './gateway';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream';

/** The policies most end-to-end tests run against (test/fixtures/e2e-policies). */
export const E2E_POLICIES = join(ROOT, 'test/fixtures/e2e-policies');

export interface GatewayWithUpstream {
  /** The test database, open when `keepDatabase` was asked for (to seed or inspect rows), else null. */
  db: TestDatabase | null;
  upstream: RecordingUpstream;
  gateway: RunningGateway;
  /** Stops the gateway, the upstream and the database connection (each even if another fails). */
  close(): Promise<void>;
}

/**
 * Empties the database, starts a recording upstream and a gateway in front of it, configured by `overrides`
 * (environment variables, as users configure it; `{ IAM_POLICIES_DIR: E2E_POLICIES }` for the shared policies).
 * A failure part-way stops what had started.
 */
export async function startGatewayWithUpstream(overrides: Record<string, string> = {}, options: { keepDatabase?: boolean } = {}): Promise<GatewayWithUpstream> {
  const db = await createTestDatabase();
  let upstream: RecordingUpstream | null = null;
  try {
    upstream = await startRecordingUpstream();
    const gateway = await startTestGateway(upstream.url, overrides);
    const kept = options.keepDatabase ? db : null;
    if (!kept) await db.close();
    const started = upstream;
    return {
      db: kept,
      upstream: started,
      gateway,
      async close() {
        const results = await Promise.allSettled([gateway.close(), started.close()]);
        await kept?.close();
        const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
        if (failed) throw failed.reason;
      },
    };
  } catch (error) {
    await upstream?.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    throw error;
  }
}
