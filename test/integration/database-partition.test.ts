/**
 * docs/threat-model.md #11.37: a silent database partition (a TCP relay in front of the test database, frozen: no byte
 * passes, nothing tells the client) must not hang /iam calls. Pooled connections whose statement gets no
 * answer and new connections that cannot be opened both end in 503 IAM_DATABASE_UNAVAILABLE with
 * Retry-After within the configured timeouts (the defaults here), never 500 and never the whole partition.
 */
import { join } from 'node:path';
import { isConnectionFailure } from '../../src/adapters/postgres/connection-failure';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testDatabaseUrl } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';
import { timed, type Answer } from '../support/timed-fetch';
import { until } from '../support/wait';

const POLICIES = join(ROOT, 'test/fixtures/e2e-policies');
/**
 * `database.connect-timeout` and `database.query-timeout` of the gateway under test (3 s and 5 s by default): shorter,
 * so that the bound below can be 5x them, yet still ample for a statement on a loaded machine outside the partition.
 */
const DATABASE_TIMEOUT_MS = 2000;
/**
 * "Answered, not hung": a call through the partition waits at most a connect and a query timeout (4 s here); 5x that
 * leaves a loaded machine room and still turns a call that waits on the partition itself (minutes) into a failure.
 */
const BOUND_MS = 5 * 2 * DATABASE_TIMEOUT_MS;

let upstream: RecordingUpstream;
let relay: TcpRelay;
let gateway: RunningGateway;
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  const url = testDatabaseUrl();
  const target = targetOf(url);
  relay = await startTcpRelay(target.host, target.port);
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, {
    IAM_POLICIES_DIR: POLICIES,
    DATABASE_URL: relayedUrl(url, relay),
    DATABASE_CONNECT_TIMEOUT: `${DATABASE_TIMEOUT_MS}ms`,
    DATABASE_QUERY_TIMEOUT: `${DATABASE_TIMEOUT_MS}ms`,
  });
}, 30_000);

afterAll(async () => {
  await gateway?.close();
  await relay?.close();
  await upstream?.close();
  await db?.close();
});

function expectUnavailable(answer: Answer, what: string): void {
  expect({ what, status: answer.status, code: (JSON.parse(answer.body) as { code?: string }).code }).toEqual({ what, status: 503, code: 'IAM_DATABASE_UNAVAILABLE' });
  expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(answer.elapsedMs).toBeLessThan(BOUND_MS);
}

describe('#11.37 silent database partition', () => {
  it('#11.37: pg timeouts ("timeout expired", "Query read timeout") are classified as unavailable', () => {
    expect(isConnectionFailure(new Error('timeout expired'))).toBe(true);
    expect(isConnectionFailure(new Error('Query read timeout'))).toBe(true);
    expect(isConnectionFailure(new Error('duplicate key value violates unique constraint'))).toBe(false);
  });

  it('#11.37: /iam calls on pooled and on new connections answer 503 with Retry-After within the timeouts, then recover', async () => {
    const alice = await login(gateway.url, 'alice');
    const sessions = `${gateway.url}/iam/sessions`;
    expect((await timed(sessions, { headers: bearer(alice.accessToken) })).status).toBe(200);

    relay.freeze();
    try {
      // Several calls in a row: the first ones wait on pooled connections whose statements get no answer,
      // the later ones must open new connections through the partition.
      for (let i = 0; i < 3; i++) {
        expectUnavailable(await timed(sessions, { headers: bearer(alice.accessToken) }, 60_000), `GET /iam/sessions #${i + 1}`);
      }
      // Concurrent calls do not queue behind each other for the whole partition either.
      const logins = await Promise.all(
        [1, 2, 3].map(() =>
          timed(`${gateway.url}/iam/auth/login`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ username: 'bob', password: 'bob-password', clientType: 'WEB' }),
          }, 60_000),
        ),
      );
      for (const [i, answer] of logins.entries()) expectUnavailable(answer, `login #${i + 1}`);
    } finally {
      await relay.restore();
    }

    await until('the gateway to answer from the database again', async () => (await timed(sessions, { headers: bearer(alice.accessToken) }, 60_000)).status === 200, { every: 200 });
  }, 90_000);
});
