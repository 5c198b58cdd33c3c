/**
 * A declared response is written from its schema: a property the schema does not declare never leaves the gateway,
 * and what it declares is written as JSON.stringify would (same order, a Date as its ISO string).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import Router from '@koa/router';
import { Type } from '@sinclair/typebox';
import Koa from 'koa';
import { compileResponseSerializer } from '../../src/api/response-serializer';
import { registerDeclaredRoutes, route } from '../../src/api/route-declaration';
import { AuditEvent, AuthenticationResult, AvailableProfile, CookieSwitchResult, Session } from '../../src/api/schemas/responses';

const principal = { userId: 'u1', identityId: 'i1', identityDomain: 'local', activeProfileId: 'p1', authorizationVersion: 3 };
const session = {
  sessionId: '00000000-0000-4000-8000-000000000001',
  clientType: 'web',
  activeProfileId: 'p1',
  createdAt: new Date('2026-12-01T00:00:00Z'),
  expiresAt: '2026-12-02T00:00:00.000Z',
  lastSeenAt: null,
  state: 'active',
  revokedAt: null,
  logoutAt: null,
  revokeReason: null,
  current: true,
};

describe('compileResponseSerializer', () => {
  it('writes a declared object as JSON.stringify does, Dates as ISO strings', () => {
    const serialize = compileResponseSerializer(Session, 'GET /iam/x');
    expect(serialize(session)).toBe(JSON.stringify(session));
  });

  it('writes a Date from another realm (a database driver\'s) as its ISO string, not as {}', () => {
    const foreign = runInNewContext('new Date("2026-12-01T00:00:00Z")') as Date;
    expect(foreign instanceof Date).toBe(false);
    expect(JSON.parse(compileResponseSerializer(Session, 'GET /iam/x')({ ...session, createdAt: foreign })).createdAt).toBe('2026-12-01T00:00:00.000Z');
  });

  it('leaves out what the schema does not declare, through $ref, arrays and allOf', () => {
    const serialize = compileResponseSerializer(Type.Array(Session), 'GET /iam/x');
    expect(JSON.parse(serialize([{ ...session, tokenHash: 'secret' }]))).toEqual([JSON.parse(JSON.stringify(session))]);
    const result = compileResponseSerializer(AuthenticationResult, 'POST /iam/x');
    const sent = JSON.parse(result({ accessToken: 'iamt_x', sessionId: session.sessionId, expiresAt: session.expiresAt, principal: { ...principal, passwordHash: '$argon2id$' } }));
    expect(sent.principal).toEqual(principal);
    const profile = { profileId: 'p1', userId: 'u1', profileName: 'P', templateVersionId: 't1', clientTypes: ['web'], enabled: true, revoked: false, unscoped: true, scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ', internal: 1 }], version: 1 };
    const available = JSON.parse(compileResponseSerializer(Type.Array(AvailableProfile), 'GET /iam/x')([{ ...profile, grantRows: [1] }]));
    expect(available).toEqual([{ ...profile, scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }] }]);
  });

  it('serializes a union by the member the value has the shape of', () => {
    const serialize = compileResponseSerializer(Type.Union([AuthenticationResult, CookieSwitchResult]), 'POST /iam/x');
    const cookie = { sessionId: session.sessionId, expiresAt: session.expiresAt, principal };
    expect(JSON.parse(serialize({ ...cookie, accessToken: undefined }))).toEqual(cookie);
    const bearer = { accessToken: 'iamt_x', ...cookie };
    expect(JSON.parse(serialize(bearer))).toEqual(bearer);
    expect(() => serialize({ something: 'else' })).toThrow(/matches none of its declared forms/);
  });

  it('keeps an open object as it is (an audit event\'s details)', () => {
    const details = { nested: { anything: [1, 'two'] } };
    const serialize = compileResponseSerializer(AuditEvent, 'GET /iam/x');
    const event = JSON.parse(serialize({ details, unknownTopLevel: true }));
    expect(event).toEqual({ details });
  });
});

describe('a declared route', () => {
  it('sends only its declared response, whatever its handler put in ctx.body', async () => {
    const router = new Router({ prefix: '/iam' });
    registerDeclaredRoutes(router, [
      route<null, never, typeof Session>({
        method: 'get',
        path: '/iam/things/{id}',
        access: 'public',
        operation: { operationId: 'getThing', tags: ['test'], summary: 'A thing', responses: {} },
        response: { schema: Session, description: 'The thing.' },
        handler: () => (ctx) => {
          ctx.body = { ...session, tokenHash: 'must-not-leave' } as never;
        },
      }),
      route<null>({
        method: 'get',
        path: '/iam/things/{id}/page',
        access: 'public',
        operation: { operationId: 'getThingPage', tags: ['test'], summary: 'A page', responses: {} },
        handler: () => (ctx) => {
          ctx.body = { free: 'form' } as never;
        },
      }),
    ], null);
    const app = new Koa().use(router.routes());
    const server = createServer((req, res) => void app.callback()(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const res = await fetch(`${origin}/iam/things/1`);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const text = await res.text();
      expect(text).not.toContain('must-not-leave');
      expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(session)));
      // A route without a declared response is left as its handler wrote it.
      expect(await (await fetch(`${origin}/iam/things/1/page`)).json()).toEqual({ free: 'form' });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
