/**
 * Resolvers that read the host's own representation (docs/policy-format.md, "Resolvers"): `self: true`, or `scopes`
 * entries mapping JSON Pointers (RFC 6901) of the host's answer to scopes. The mapping, the policy schema that
 * declares it, and what a decision makes of a mapping that cannot be read (502, fail closed).
 */
import { DecisionEngine } from '../../src/authz/decision-engine';
import { GrantProvider } from '../../src/authz/grant-provider';
import { scopesOfAnswer } from '../../src/authz/answer-scopes';
import type { ResolveResult } from '../../src/authz/resource-resolver';
import type { ProfileRecord, TemplateRecord, UserRecord } from '../../src/domain/records';
import type { CompiledPolicy, ResolverAnswerMapping } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { sameResolution } from '../../src/policy/resolver-answer';
import { replayOne, replayResolvers, type RecordedDecision } from '../../src/policy-tools/policy-replay';

const load = (resources: string) => compilePolicyFiles([{ file: 'p.yaml', text: `version: 1\nresources:\n${resources}` }]);

function compiled(resources: string): CompiledPolicy {
  const result = load(resources);
  if (!result.policy) throw new Error(result.issues.map((issue) => issue.message).join('\n'));
  return result.policy;
}

/** The mapping a policy declares for type T. */
const mappingOf = (resolver: string): ResolverAnswerMapping | undefined => compiled(`  T:\n    resolver: ${resolver}\n`).resources.T!.resolver!.answer;

const pointers = (...entries: Array<[string, string]>): ResolverAnswerMapping => mappingOf(`{ url: "/t/{id}", scopes: [${entries.map(([type, id]) => `{ type: ${type}, id: ${JSON.stringify(id)} }`).join(', ')}] }`)!;

describe('scopes from the host’s own answer (JSON Pointers)', () => {
  it('reads one scope per entry; numbers and strings name the same id', () => {
    const byProject = pointers(['PROJECT', '/projectId']);
    expect(scopesOfAnswer('{"id":3,"projectId":2,"title":"Dock"}', byProject, 'TASK', '3')).toEqual([{ type: 'PROJECT', id: '2' }]);
    expect(scopesOfAnswer('{"id":3,"projectId":"2"}', byProject, 'TASK', '3')).toEqual([{ type: 'PROJECT', id: '2' }]);
    expect(scopesOfAnswer('{"projectId":-7}', byProject, 'TASK', '3')).toEqual([{ type: 'PROJECT', id: '-7' }]);
    const two = pointers(['PROJECT', '/projectId'], ['TEAM', '/owner/team']);
    expect(scopesOfAnswer('{"projectId":2,"owner":{"team":"blue"}}', two, 'TASK', '3')).toEqual([
      { type: 'PROJECT', id: '2' },
      { type: 'TEAM', id: 'blue' },
    ]);
  });

  it('unescapes ~1 as "/" and ~0 as "~" (RFC 6901), in that order', () => {
    const escaped = pointers(['A', '/a~1b'], ['B', '/m~0n'], ['C', '/~01']);
    expect(scopesOfAnswer('{"a/b":1,"m~n":2,"~1":3,"a":{"b":9}}', escaped, 'T', '1')).toEqual([
      { type: 'A', id: '1' },
      { type: 'B', id: '2' },
      { type: 'C', id: '3' },
    ]);
  });

  it('makes a scope of each element of an array, and reaches into arrays by index', () => {
    expect(scopesOfAnswer('{"projectIds":[1,"2",3]}', pointers(['PROJECT', '/projectIds']), 'T', '1')).toEqual([
      { type: 'PROJECT', id: '1' },
      { type: 'PROJECT', id: '2' },
      { type: 'PROJECT', id: '3' },
    ]);
    expect(scopesOfAnswer('{"members":[{"team":"x"},{"team":"y"}]}', pointers(['TEAM', '/members/1/team']), 'T', '1')).toEqual([{ type: 'TEAM', id: 'y' }]);
    // An empty array names no scope: only an unscoped profile covers such a resource.
    expect(scopesOfAnswer('{"projectIds":[]}', pointers(['PROJECT', '/projectIds']), 'T', '1')).toEqual([]);
  });

  it('"" is the whole answer', () => {
    expect(scopesOfAnswer('7', pointers(['PROJECT', '']), 'T', '1')).toEqual([{ type: 'PROJECT', id: '7' }]);
    expect(scopesOfAnswer('["a","b"]', pointers(['PROJECT', '']), 'T', '1')).toEqual([
      { type: 'PROJECT', id: 'a' },
      { type: 'PROJECT', id: 'b' },
    ]);
  });

  it.each([
    ['a missing member', '{"id":3}', '/projectId', /no value at "\/projectId"/],
    ['a member of a string', '{"projectId":"2"}', '/projectId/x', /no value/],
    ['an index past the end', '{"ids":[1]}', '/ids/1', /no value/],
    ['"-" (past the end)', '{"ids":[1]}', '/ids/-', /no value/],
    ['an index with a leading zero', '{"ids":[1,2]}', '/ids/01', /no value/],
    ['a prototype member', '{"id":3}', '/constructor', /no value/],
    ['null', '{"projectId":null}', '/projectId', /not a string or an integer/],
    ['an object', '{"projectId":{"id":2}}', '/projectId', /not a string or an integer/],
    ['a boolean', '{"projectId":true}', '/projectId', /not a string or an integer/],
    ['an array holding null', '{"projectIds":[1,null]}', '/projectIds', /not a string or an integer/],
    ['an array of arrays', '{"projectIds":[[1]]}', '/projectIds', /not a string or an integer/],
    ['a fraction', '{"projectId":1.5}', '/projectId', /not a string or an integer/],
    ['an integer JSON rounds (beyond 2^53)', '{"projectId":9007199254740993}', '/projectId', /not a string or an integer/],
    ['minus zero (would read as 0)', '{"projectId":-0}', '/projectId', /not a string or an integer/],
  ])('%s fails (a 502, never a guess)', (_name, body, pointer, reason) => {
    const result = scopesOfAnswer(body, pointers(['PROJECT', pointer]), 'TASK', '3');
    expect(typeof result).toBe('string');
    expect(result).toMatch(reason);
    // The reason reaches diagnostics: it names the pointer, never a value of the host's answer.
    expect(result).not.toMatch(/Dock|9007199254740993|1\.5/);
  });

  it("reads a member named __proto__ when the answer has one (an own member, not the prototype's)", () => {
    expect(scopesOfAnswer('{"__proto__":"p"}', pointers(['PROJECT', '/__proto__']), 'T', '1')).toEqual([{ type: 'PROJECT', id: 'p' }]);
  });

  it('one failing entry fails the whole answer', () => {
    expect(typeof scopesOfAnswer('{"projectId":2}', pointers(['PROJECT', '/projectId'], ['TEAM', '/teamId']), 'T', '1')).toBe('string');
  });

  it.each(['<html>login</html>', '', '{"id":'])('an answer that is not JSON (%j) fails, with pointers and with self', (body) => {
    expect(scopesOfAnswer(body, pointers(['PROJECT', '/projectId']), 'T', '1')).toBe('a body that is not JSON');
    expect(scopesOfAnswer(body, { kind: 'self' }, 'T', '1')).toBe('a body that is not JSON');
  });
});

describe('self: true', () => {
  it('a JSON 200 names the resource itself, whatever it holds', () => {
    const self = mappingOf('{ url: "/projects/{id}", self: true }');
    expect(self).toEqual({ kind: 'self' });
    expect(scopesOfAnswer('{"id":1,"name":"Apollo"}', self, 'PROJECT', '1')).toEqual([{ type: 'PROJECT', id: '1' }]);
    expect(scopesOfAnswer('{"scopes":[{"type":"OTHER","id":"9"}]}', self, 'PROJECT', 'a b')).toEqual([{ type: 'PROJECT', id: 'a b' }]);
  });
});

describe('without self or scopes: the {scopes} document, unchanged', () => {
  it('reads {scopes} and its absence as before', () => {
    expect(mappingOf('{ url: "/t/{id}" }')).toBeUndefined();
    expect(scopesOfAnswer('{"scopes":[{"type":"PROJECT","id":7}]}', undefined, 'TASK', '1')).toEqual([{ type: 'PROJECT', id: '7' }]);
    expect(scopesOfAnswer('', undefined, 'TASK', '1')).toEqual([{ type: 'TASK', id: '1' }]);
    // A host's own representation is not that document: `projectId` is not read.
    expect(scopesOfAnswer('{"id":1,"projectId":2}', undefined, 'TASK', '1')).toEqual([{ type: 'TASK', id: '1' }]);
    expect(scopesOfAnswer('{"scopes":[{"type":"PROJECT"}]}', undefined, 'TASK', '1')).toBe('a malformed body');
  });
});

describe('the policy schema for self and scopes', () => {
  const errors = (resolver: string): string[] => load(`  T:\n    resolver: ${resolver}\n`).issues.filter((issue) => issue.severity === 'error').map((issue) => `${issue.source?.line}: ${issue.message}`);

  it('refuses self beside scopes, naming both keys', () => {
    expect(errors('{ url: "/t/{id}", self: true, scopes: [{ type: P, id: /p }] }')).toEqual(['4: resources.T.resolver: "self" and "scopes" exclude each other: keep one']);
  });

  it.each([
    ['a pointer without a leading "/"', '{ url: "/t/{id}", scopes: [{ type: P, id: projectId }] }', /resources\.T\.resolver\.scopes\[0\]\.id: not a JSON Pointer/],
    ['"~" not followed by 0 or 1', '{ url: "/t/{id}", scopes: [{ type: P, id: "/a~2" }] }', /not a JSON Pointer/],
    ['a trailing "~"', '{ url: "/t/{id}", scopes: [{ type: P, id: "/a~" }] }', /not a JSON Pointer/],
    ['a type with a space', '{ url: "/t/{id}", scopes: [{ type: "P Q", id: /p }] }', /scopes\[0\]\.type: must match/],
    ['an entry without a type', '{ url: "/t/{id}", scopes: [{ id: /p }] }', /missing required key "type"/],
    ['an unknown key in an entry', '{ url: "/t/{id}", scopes: [{ type: P, id: /p, pointer: /q }] }', /unknown key "pointer"/],
    ['no entries', '{ url: "/t/{id}", scopes: [] }', /scopes: must NOT have fewer than 1 items/],
    ['self: false', '{ url: "/t/{id}", self: false }', /resolver\.self: must be one of true/],
  ])('refuses %s', (_name, resolver, message) => {
    const found = errors(resolver);
    expect(found).toEqual([expect.stringMatching(message)]);
  });

  it('accepts "" and escaped pointers and compiles their reference tokens', () => {
    const mapping = pointers(['P', ''], ['Q', '/a~1b/0/~0'], ['R', '/']);
    expect(mapping).toEqual({
      kind: 'pointers',
      scopes: [
        { type: 'P', pointer: '', tokens: [] },
        { type: 'Q', pointer: '/a~1b/0/~0', tokens: ['a/b', '0', '~'] },
        { type: 'R', pointer: '/', tokens: [''] },
      ],
    });
  });

  it('two resolvers resolve alike only with the same URL and the same reading of the answer', () => {
    const resolver = (text: string) => compiled(`  T:\n    resolver: ${text}\n`).resources.T!.resolver!;
    expect(sameResolution(resolver('{ url: "/t/{id}", scopes: [{ type: P, id: /p }] }'), resolver('{ url: "/t/{id}", timeout: 1s, scopes: [{ type: P, id: "/p" }] }'))).toBe(true);
    expect(sameResolution(resolver('{ url: "/t/{id}", scopes: [{ type: P, id: /p }] }'), resolver('{ url: "/t/{id}", scopes: [{ type: P, id: /q }] }'))).toBe(false);
    expect(sameResolution(resolver('{ url: "/t/{id}", self: true }'), resolver('{ url: "/t/{id}" }'))).toBe(false);
    expect(sameResolution(resolver('{ url: "/t/{id}", self: true }'), resolver('{ url: "/u/{id}", self: true }'))).toBe(false);
  });
});

/** Grants of u1's profile p-1: task:read on PROJECT 1. */
function grantsOfReader(): GrantProvider {
  const user: UserRecord = { userId: 'u1', displayName: null, enabled: true, authorizationVersion: 1, createdAt: new Date(0), updatedAt: new Date(0), version: 1 };
  const profile: ProfileRecord = {
    profileId: 'p-1',
    userId: 'u1',
    profileName: 'reader',
    templateVersionId: 't-1',
    clientTypes: ['WEB'],
    enabled: true,
    revoked: false,
    unscoped: false,
    scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }],
    version: 1,
  };
  const template: TemplateRecord = { versionId: 't-1', name: 'reader', description: null, permissions: ['task:read'], version: 1 };
  return new GrantProvider({ repository: { getUser: async () => user, getProfile: async () => profile, getTemplate: async () => template }, maxEntries: 10, trustCache: () => true });
}

/** A policy with GET /tasks/:id resolved by `resolver`. */
const tasksPolicy = (resolver: string): CompiledPolicy =>
  compiled(`  TASK: { resolver: ${resolver} }\nroutes:\n  - { path: /tasks/:id, methods: [GET], permission: task:read, resource: { type: TASK, id: id } }\n`);
const BY_PROJECT = '{ url: "/tasks/{id}", scopes: [{ type: PROJECT, id: /projectId }] }';
const subject = { principal: { userId: 'u1', identityId: 'i1', identityDomain: 'example.com', activeProfileId: 'p-1', authorizationVersion: 1 }, clientType: 'WEB' };

describe('a decision on a mapped answer', () => {
  /** A reader of PROJECT 1 deciding GET /tasks/3, the resolver answering `result`. */
  async function decide(result: ResolveResult) {
    const engine = new DecisionEngine({ grants: grantsOfReader(), resolvers: { resolve: async () => result } });
    return engine.decideRequest({ method: 'GET', path: '/tasks/3', policy: tasksPolicy(BY_PROJECT), subject });
  }

  it('an answer the mapping cannot read is 502 RESOURCE_RESOLUTION_UNAVAILABLE; 404 is not found; a mapped scope decides', async () => {
    const unreadable = scopesOfAnswer('{"projectId":null}', pointers(['PROJECT', '/projectId']), 'TASK', '3') as string;
    const failed = await decide({ kind: 'unavailable', reason: `resolver for TASK answered ${unreadable}` });
    expect(failed).toMatchObject({ allowed: false, failedStep: 'RESOURCE_RESOLUTION_UNAVAILABLE', status: 502, problemCode: 'IAM_UPSTREAM_UNAVAILABLE' });
    expect(await decide({ kind: 'not-found' })).toMatchObject({ allowed: false, failedStep: 'RESOURCE_NOT_FOUND', status: 404 });
    const inProject = scopesOfAnswer('{"projectId":1}', pointers(['PROJECT', '/projectId']), 'TASK', '3') as Array<{ type: string; id: string }>;
    expect(await decide({ kind: 'found', scopeRefs: inProject })).toMatchObject({ allowed: true });
    const elsewhere = scopesOfAnswer('{"projectId":2}', pointers(['PROJECT', '/projectId']), 'TASK', '3') as Array<{ type: string; id: string }>;
    expect(await decide({ kind: 'found', scopeRefs: elsewhere })).toMatchObject({ allowed: false, failedStep: 'SCOPE_DENIED' });
  });
});

describe('policy replay reuses a recorded resolution only for the same reading of the answer', () => {
  const record: RecordedDecision = { method: 'GET', path: '/tasks/3', route: '/tasks/:id', verdict: 'allow', step: null, userId: 'u1', profileId: 'p-1', clientType: 'WEB', origin: 'access-log:1' };
  const replay = (live: string, now: string) => replayOne(record, tasksPolicy(now), tasksPolicy(live), new DecisionEngine({ grants: grantsOfReader(), resolvers: replayResolvers }));

  it('the same URL and pointers: the recorded outcome stands', async () => {
    expect(await replay(BY_PROJECT, BY_PROJECT.replace('{ type', '{  type'))).toMatchObject({ verdict: 'allow', reused: true });
  });

  it.each([
    ['another pointer', BY_PROJECT.replace('/projectId', '/ownerId')],
    ['self', '{ url: "/tasks/{id}", self: true }'],
    ['the {scopes} document', '{ url: "/tasks/{id}" }'],
    ['another URL', BY_PROJECT.replace('/tasks/', '/v2/tasks/')],
  ])('%s: the request needs a resolver, the recorded outcome is not reused', async (_name, now) => {
    expect(await replay(BY_PROJECT, now)).toEqual({ verdict: 'needs-resolver', route: '/tasks/:id' });
  });
});
