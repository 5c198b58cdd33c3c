/**
 * Lists filtered by the gateway (policy `filter`): the JSON Pointers, the filter of one answer (envelope, number and
 * string ids, ids missing or of another type removed, not an array → failure), what the headers say about an answer,
 * the size bound, and the policy's checks of a route's `filter`.
 */
import type { RouteFilter } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { parseJsonPointer, resolveJsonPointer } from '../../src/domain/json-pointer';
import { BoundedBody, elementId, filterList, isFilteredStatus, listFilterPlan, unfilterableAnswer, type ListFilterPlan } from '../../src/gateway/list-filter';

function routeFilter(id: string, items = ''): RouteFilter {
  return { type: 'PROJECT', access: 'READ', id, idTokens: parseJsonPointer(id)!, items, itemsTokens: parseJsonPointer(items)! };
}
const keep = (filter: RouteFilter, ...ids: string[]): ListFilterPlan => ({ filter, keep: new Set(ids) });
const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const parsed = (outcome: ReturnType<typeof filterList>): unknown => {
  if (!outcome.ok) throw new Error(outcome.reason);
  return JSON.parse(outcome.body.toString());
};

describe('JSON Pointers (RFC 6901)', () => {
  it('parses tokens with ~0 and ~1, and refuses what is not a pointer', () => {
    expect(parseJsonPointer('')).toEqual([]);
    expect(parseJsonPointer('/id')).toEqual(['id']);
    expect(parseJsonPointer('/a~1b/~0c/0/')).toEqual(['a/b', '~c', '0', '']);
    for (const bad of ['id', '/a~2', '/a~', '#/id']) expect(parseJsonPointer(bad)).toBeNull();
  });

  it('resolves own members and array positions only', () => {
    const value = JSON.parse('{"data":[{"id":1},{"id":"x"}],"a/b":{"~c":true},"__proto__":{"id":7}}') as unknown;
    expect(resolveJsonPointer(value, ['data', '1', 'id'])).toBe('x');
    expect(resolveJsonPointer(value, ['a/b', '~c'])).toBe(true);
    expect(resolveJsonPointer(value, ['__proto__', 'id'])).toBe(7);
    expect(resolveJsonPointer(value, ['data', '01'])).toBeUndefined();
    expect(resolveJsonPointer(value, ['data', '-'])).toBeUndefined();
    expect(resolveJsonPointer(value, ['data', '2'])).toBeUndefined();
    expect(resolveJsonPointer(value, ['data', 'length'])).toBeUndefined();
    expect(resolveJsonPointer({}, ['toString'])).toBeUndefined();
    expect(resolveJsonPointer('text', ['0'])).toBeUndefined();
  });
});

describe('filterList', () => {
  const projects = [
    { id: 1, name: 'Apollo' },
    { id: 2, name: 'Gemini' },
    { id: '3', name: 'Mercury' },
  ];

  it('keeps the top-level array elements whose id the plan has; a number and its decimal string are the same id', () => {
    const outcome = filterList(json(projects), keep(routeFilter('/id'), '1', '3'));
    expect(parsed(outcome)).toEqual([projects[0], projects[2]]);
    expect(outcome).toMatchObject({ kept: 2, removed: 1 });
  });

  it('NONE keeps nothing', () => {
    const outcome = filterList(json(projects), keep(routeFilter('/id')));
    expect(parsed(outcome)).toEqual([]);
    expect(outcome).toMatchObject({ kept: 0, removed: 3 });
  });

  it('filters the array an envelope holds (items pointer) and leaves the rest of the envelope', () => {
    const body = { data: { rows: projects }, page: 1 };
    expect(parsed(filterList(json(body), keep(routeFilter('/id', '/data/rows'), '2')))).toEqual({ data: { rows: [projects[1]] }, page: 1 });
  });

  it('reads the id through a nested pointer (a task by its project)', () => {
    const tasks = [
      { id: 1, project: { id: 1 } },
      { id: 3, project: { id: 2 } },
    ];
    expect(parsed(filterList(json(tasks), keep(routeFilter('/project/id'), '1')))).toEqual([tasks[0]]);
  });

  it('removes an element whose id is missing, null, an object, a boolean, a fraction or an integer JSON cannot keep exactly', () => {
    const body = Buffer.from('[{"id":1},{"name":"no id"},{"id":null},{"id":{"v":1}},{"id":true},{"id":1.5},{"id":9007199254740993},{"id":[1]},7,null]');
    const plan = keep(routeFilter('/id'), '1', '1.5', '9007199254740992', '9007199254740993', 'true');
    const outcome = filterList(body, plan);
    expect(parsed(outcome)).toEqual([{ id: 1 }]);
    expect(outcome).toMatchObject({ kept: 1, removed: 9 });
  });

  it('writes what it checked: a duplicated id member is read and sent as one value', () => {
    // JSON.parse keeps the last member; the body sent is the parsed value, so no client reads the other one.
    const outcome = filterList(Buffer.from('[{"id":2,"id":1}]'), keep(routeFilter('/id'), '1'));
    expect(outcome.ok && outcome.body.toString()).toBe('[{"id":1}]');
  });

  it('fails when the items pointer is not an array, or missing', () => {
    expect(filterList(json({ data: projects }), keep(routeFilter('/id'), '1'))).toMatchObject({ ok: false });
    expect(filterList(json({ data: { a: 1 } }), keep(routeFilter('/id', '/data'), '1'))).toMatchObject({ ok: false });
    expect(filterList(json({ other: [] }), keep(routeFilter('/id', '/data'), '1'))).toMatchObject({ ok: false });
  });

  it('fails on a body that is not JSON or not UTF-8', () => {
    expect(filterList(Buffer.from('<html>'), keep(routeFilter('/id'), '1'))).toMatchObject({ ok: false });
    expect(filterList(Buffer.from('[{"id":1}'), keep(routeFilter('/id'), '1'))).toMatchObject({ ok: false });
    expect(filterList(Buffer.from([0x5b, 0x22, 0xff, 0x22, 0x5d]), keep(routeFilter(''), '1'))).toMatchObject({ ok: false });
  });

  it('keeps an envelope member named __proto__ a member', () => {
    const outcome = filterList(Buffer.from('{"__proto__":[{"id":1},{"id":2}]}'), keep(routeFilter('/id', '/__proto__'), '2'));
    expect(outcome.ok && outcome.body.toString()).toBe('{"__proto__":[{"id":2}]}');
  });

  it('an id pointer "" takes the element itself (a list of ids)', () => {
    expect(parsed(filterList(json([1, '2', 3]), keep(routeFilter(''), '2', '3')))).toEqual(['2', 3]);
  });
});

describe('elementId', () => {
  it('is the string, or the safe integer as its decimal string', () => {
    expect([elementId('a'), elementId(12), elementId(-3), elementId(0), elementId(1.25), elementId(2 ** 53), elementId(undefined)]).toEqual(['a', '12', '-3', '0', null, null, null]);
  });
});

describe('what the headers say', () => {
  const ok = { contentType: 'application/json; charset=utf-8', contentEncoding: undefined, contentLength: '10' };
  it('reads JSON answers, identity or no encoding, within the bound', () => {
    expect(unfilterableAnswer(ok, 10)).toBeNull();
    expect(unfilterableAnswer({ ...ok, contentType: 'application/vnd.api+json', contentEncoding: 'identity', contentLength: undefined }, 10)).toBeNull();
    expect(unfilterableAnswer({ ...ok, contentType: 'Application/JSON;charset="UTF-8"' }, 10)).toBeNull();
  });
  it('refuses an encoded answer, another media type, another charset, or one announced above the bound', () => {
    expect(unfilterableAnswer({ ...ok, contentEncoding: 'gzip' }, 10)).toMatch(/gzip/);
    expect(unfilterableAnswer({ ...ok, contentType: 'text/html' }, 10)).toMatch(/not JSON/);
    expect(unfilterableAnswer({ ...ok, contentType: undefined }, 10)).toMatch(/not JSON/);
    expect(unfilterableAnswer({ ...ok, contentType: 'application/json; charset=iso-8859-1' }, 10)).toMatch(/UTF-8/);
    expect(unfilterableAnswer({ ...ok, contentLength: '11' }, 10)).toMatch(/filter-max-bytes/);
  });
  it('filters 2xx answers with a body; any other status passes', () => {
    expect([200, 201, 203, 206].every(isFilteredStatus)).toBe(true);
    expect([204, 205, 304, 404, 500].some(isFilteredStatus)).toBe(false);
  });
});

describe('BoundedBody', () => {
  it('keeps chunks up to the bound, and refuses the chunk that crosses it', () => {
    const body = new BoundedBody(8);
    expect(body.add(Buffer.from('[1,'))).toBe(true);
    expect(body.add(Buffer.from('2,3]'))).toBe(true);
    expect(body.body().toString()).toBe('[1,2,3]');
    expect(body.add(Buffer.from('45'))).toBe(false);
    expect(body.bytes).toBe(9);
  });
});

describe('listFilterPlan', () => {
  it('is null for ALL (forwarded as sent), an empty set for NONE, the ids for SOME', () => {
    const filter = routeFilter('/id');
    expect(listFilterPlan(filter, { kind: 'ALL' })).toBeNull();
    expect([...listFilterPlan(filter, { kind: 'NONE' })!.keep]).toEqual([]);
    expect([...listFilterPlan(filter, { kind: 'SOME', ids: ['1', '2'] })!.keep]).toEqual(['1', '2']);
  });
});

describe('a route filter in a policy', () => {
  const compile = (route: string, head = '') => compilePolicyFiles([{ file: 'p.yaml', text: `version: 1\n${head}routes:\n${route}` }]);
  const kinds = (route: string, head = '') => compile(route, head).issues.filter((issue) => issue.severity === 'error').map((issue) => issue.kind);

  it('compiles on a GET route with a permission: pointers parsed, items and access defaulted', () => {
    const result = compile('  - { path: /projects, methods: [GET], permission: project:list, filter: { type: PROJECT, id: /id } }\n');
    expect(result.issues).toEqual([]);
    expect(result.policy!.routes[0]!.filter).toEqual({ type: 'PROJECT', access: 'READ', id: '/id', idTokens: ['id'], items: '', itemsTokens: [] });
    const envelope = compile('  - { path: /p, methods: [GET, HEAD], permission: p:l, filter: { type: P, id: /a~1b, items: /data, access: WRITE } }\n');
    expect(envelope.policy!.routes[0]!.filter).toMatchObject({ access: 'WRITE', idTokens: ['a/b'], itemsTokens: ['data'] });
  });

  it('refuses a filter on another method, without a permission, on a public, shadow or group entry, or with a pointer that is not one', () => {
    expect(kinds('  - { path: /p, methods: [POST], permission: p:l, filter: { type: P, id: /id } }\n')).toEqual(['filter-method']);
    expect(kinds('  - { path: /p, methods: [GET, DELETE], permission: p:l, filter: { type: P, id: /id } }\n')).toEqual(['filter-method']);
    expect(kinds('  - { path: /p, permission: p:l, filter: { type: P, id: /id } }\n')).toEqual(['filter-method']);
    expect(kinds('  - { path: /p, methods: [GET], filter: { type: P, id: /id } }\n')).toEqual(['filter-without-permission']);
    expect(kinds('  - { path: /p, methods: [GET], public: true, filter: { type: P, id: /id } }\n')).toEqual(['filter-without-permission']);
    expect(kinds('  - { path: /p, methods: [GET], permission: p:l, mode: shadow, filter: { type: P, id: /id } }\n')).toEqual(['filter-shadow']);
    expect(kinds('  - { path: /p, permission: p:l, filter: { type: P, id: /id }, routes: [{ path: "", methods: [GET] }] }\n')).toEqual(['filter-on-group']);
    const bad = compile('  - { path: /p, methods: [GET], permission: p:l, filter: { type: P, id: "id" } }\n');
    expect(bad.issues.map((issue) => issue.kind)).toEqual(['schema']);
    expect(bad.issues[0]!.message).toMatch(/JSON Pointer/);
  });

  it('a permission inherited from the group is enough', () => {
    expect(kinds('  - { path: /p, permission: p:l, routes: [{ path: "", methods: [GET], filter: { type: P, id: /id } }] }\n')).toEqual([]);
  });
});
