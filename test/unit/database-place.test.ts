/**
 * How an error names the database it could not reach: host, port and database name, never the URL's userinfo or
 * query (adapters/postgres/database-place.ts, connection-failure.ts). The CLI end of it, with real processes, is in
 * test/integration/database-unreachable.test.ts.
 */
import { namingTheDatabase } from '../../src/adapters/postgres/connection-failure';
import { databasePlace } from '../../src/adapters/postgres/database-place';
import { DatabaseUnavailableError } from '../../src/domain/iam-repository';

const URL_WITH_SECRETS = 'postgresql://operator:s3cret@db.internal:5999/iam?password=s3cret-too';

describe('databasePlace', () => {
  it.each([
    [URL_WITH_SECRETS, 'db.internal:5999/iam'],
    ['postgresql://127.0.0.1/iam', '127.0.0.1:5432/iam'],
    ['postgres://u@[::1]:6432/', '[::1]:6432'],
    ['postgresql://postgres@localhost/postgres?host=/tmp/pglite-1', '/tmp/pglite-1:5432/postgres'],
    ['not a url with s3cret', 'the configured database'],
  ])('%s → %s', (url, place) => {
    expect(databasePlace(url)).toBe(place);
  });
});

describe('namingTheDatabase', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5999'), { code: 'ECONNREFUSED' });

  it('a connection failure: names the place and the reason, keeps the cause, never the userinfo', () => {
    const named = namingTheDatabase(refused, URL_WITH_SECRETS) as DatabaseUnavailableError;
    expect(named).toBeInstanceOf(DatabaseUnavailableError);
    expect(named.message).toBe('cannot connect to the database at db.internal:5999/iam (ECONNREFUSED)');
    expect(named.cause).toBe(refused);
    expect(named.message).not.toMatch(/s3cret|operator/);
  });

  it('finds the reason inside causes and an AggregateError (a host with several addresses)', () => {
    const aggregate = Object.assign(new AggregateError([refused, refused], ''), { code: undefined });
    const wrapped = new Error('wrapped', { cause: aggregate });
    expect((namingTheDatabase(wrapped, URL_WITH_SECRETS) as Error).message).toBe('cannot connect to the database at db.internal:5999/iam (ECONNREFUSED)');
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND db.internal'), { code: 'ENOTFOUND' });
    expect((namingTheDatabase(notFound, URL_WITH_SECRETS) as Error).message).toBe('cannot connect to the database at db.internal:5999/iam (ENOTFOUND)');
  });

  it('a timeout, a refused login and a missing database are named too, without the server message (it names the user)', () => {
    const timeout = Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' });
    expect((namingTheDatabase(timeout, URL_WITH_SECRETS) as Error).message).toBe('cannot connect to the database at db.internal:5999/iam (timed out)');
    const login = Object.assign(new Error('password authentication failed for user "operator"'), { code: '28P01' });
    expect((namingTheDatabase(login, URL_WITH_SECRETS) as Error).message).toBe('cannot connect to the database at db.internal:5999/iam (password authentication failed, 28P01)');
    const missing = Object.assign(new Error('database "iam" does not exist'), { code: '3D000' });
    expect((namingTheDatabase(missing, URL_WITH_SECRETS) as Error).message).toBe('cannot connect to the database at db.internal:5999/iam (no such database, 3D000)');
  });

  it('any other error passes unchanged, and a named one is not named twice', () => {
    const syntax = Object.assign(new Error('syntax error at or near "x"'), { code: '42601' });
    expect(namingTheDatabase(syntax, URL_WITH_SECRETS)).toBe(syntax);
    const named = namingTheDatabase(refused, URL_WITH_SECRETS);
    expect(namingTheDatabase(named, 'postgresql://elsewhere:1/y')).toBe(named);
  });
});
