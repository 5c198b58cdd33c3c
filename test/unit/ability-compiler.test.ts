import { compileGrant } from '../../src/authz/ability-compiler';
import { ScopeIndex } from '../../src/authz/scope-index';
import { isValidPermissionCode, parsePermissionCode } from '../../src/domain/permission-code';
import type { ProfileRecord, ScopeRecord } from '../../src/domain/records';

function grantOf(permissions: string[], scopes: ScopeRecord[] = []) {
  const profile: ProfileRecord = {
    profileId: 'p-1',
    userId: 'u-1',
    profileName: 'test',
    templateVersionId: 't-1',
    clientTypes: ['WEB'],
    enabled: true,
    revoked: false,
    unscoped: scopes.length === 0,
    scopes,
    version: 1,
  };
  return compileGrant({ userId: 'u-1', authorizationVersion: 3, profile, template: { versionId: 't-1', name: 't', description: null, permissions } });
}

/** The scope step's question for a grant: the covering scope's description, or null. */
const covers = (grant: ReturnType<typeof grantOf>, refs: Array<[string, string]>, access: 'READ' | 'WRITE') =>
  grant.scopeIndex.covering(refs.map(([type, id]) => ({ type, id })), access);

describe('parsePermissionCode', () => {
  it.each([
    ['project:read', { resource: 'project', action: 'read' }],
    ['iam.admin.users:write', { resource: 'iam.admin.users', action: 'write' }],
    ['my_res-1:do.it', { resource: 'my_res-1', action: 'do.it' }],
    ['project:*', { resource: 'project', action: '*' }],
    ['*:*', { resource: '*', action: '*' }],
  ])('accepts %s', (code, parsed) => {
    expect(parsePermissionCode(code)).toEqual(parsed);
    expect(isValidPermissionCode(code)).toBe(true);
  });

  it.each(['', 'project', ':read', 'project:', 'a:b:c', '*:read', 'pro ject:read', 'project:re*d', 'proj*:*', 'project:read ', 'é:read', '**:*'])(
    'rejects %p',
    (code) => {
      expect(parsePermissionCode(code)).toBeNull();
      expect(isValidPermissionCode(code)).toBe(false);
    },
  );
});

describe('compileGrant', () => {
  it('copies the profile facts and keeps only valid, distinct permission codes', () => {
    const grant = grantOf(['project:read', 'bad code', 'project:read', 'task:*']);
    expect(grant).toMatchObject({
      userId: 'u-1',
      profileId: 'p-1',
      templateVersionId: 't-1',
      authorizationVersion: 3,
      clientTypes: ['WEB'],
      permissions: ['project:read', 'task:*'],
      scoped: false,
    });
  });

  it('grants exactly the action and resource of `res:act`', () => {
    const { ability } = grantOf(['project:read']);
    expect(ability.can('read', 'project')).toBe(true);
    expect(ability.can('update', 'project')).toBe(false);
    expect(ability.can('read', 'task')).toBe(false);
    expect(ability.can('*', 'project')).toBe(false);
  });

  it('grants every action of the resource for `res:*`, and nothing else', () => {
    const { ability } = grantOf(['project:*']);
    expect(ability.can('read', 'project')).toBe(true);
    expect(ability.can('delete', 'project')).toBe(true);
    expect(ability.can('*', 'project')).toBe(true);
    expect(ability.can('read', 'task')).toBe(false);
  });

  it('grants everything for `*:*`', () => {
    const { ability } = grantOf(['*:*']);
    expect(ability.can('read', 'project')).toBe(true);
    expect(ability.can('purge', 'anything.else')).toBe(true);
    expect(ability.can('*', '*')).toBe(true);
  });

  it('treats `manage` and `all` as ordinary names, not CASL wildcards', () => {
    const { ability } = grantOf(['project:manage', 'all:read']);
    expect(ability.can('manage', 'project')).toBe(true);
    expect(ability.can('delete', 'project')).toBe(false);
    expect(ability.can('read', 'all')).toBe(true);
    expect(ability.can('read', 'project')).toBe(false);
  });

  it('grants nothing for an empty or all-invalid template', () => {
    expect(grantOf([]).ability.can('read', 'project')).toBe(false);
    expect(grantOf(['nope']).ability.can('read', 'nope')).toBe(false);
  });

  it('covers every resource instance for an unscoped profile', () => {
    const grant = grantOf(['project:update']);
    expect(grant.scoped).toBe(false);
    expect(covers(grant, [['PROJECT', '42']], 'WRITE')).toBe('unscoped profile');
    expect(covers(grant, [], 'READ')).toBe('unscoped profile');
  });

  it('builds at most three CASL rules per resource type, however many scopes the profile lists', () => {
    const scopes: ScopeRecord[] = Array.from({ length: 50 }, (_, i) => ({ scopeType: i % 2 ? 'PROJECT' : 'TEAM', scopeRefId: String(i), accessMode: i % 3 ? 'READ' : 'WRITE' }));
    const grant = grantOf(['project:read', 'project:*', '*:*'], scopes);
    expect(grant.ability.can('read', 'project')).toBe(true);
    // `*:*`, `project:*` and the exact `project:read`.
    expect(grant.ability.builtRules).toBe(3);
  });

  describe('scoped profiles', () => {
    const reader = grantOf(['project:read', 'project:update'], [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }]);
    const writer = grantOf(['project:update'], [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }]);

    it('still answers the permission question on the bare subject type', () => {
      expect(reader.scoped).toBe(true);
      expect(reader.ability.can('read', 'project')).toBe(true);
      expect(reader.ability.can('delete', 'project')).toBe(false);
    });

    it('passes a READ on a covered resource and refuses a WRITE with a READ scope', () => {
      expect(covers(reader, [['PROJECT', '1']], 'READ')).toBe('scope PROJECT 1 (READ)');
      expect(covers(reader, [['PROJECT', '1']], 'WRITE')).toBeNull();
    });

    it('lets a WRITE scope cover READ and WRITE', () => {
      expect(covers(writer, [['PROJECT', '1']], 'READ')).toBe('scope PROJECT 1 (WRITE)');
      expect(covers(writer, [['PROJECT', '1']], 'WRITE')).toBe('scope PROJECT 1 (WRITE)');
    });

    it('refuses another id, another scope type, no ref at all, and ids that only look alike', () => {
      expect(covers(reader, [['PROJECT', '2']], 'READ')).toBeNull();
      expect(covers(reader, [['TEAM', '1']], 'READ')).toBeNull();
      expect(covers(reader, [], 'READ')).toBeNull();
      expect(covers(reader, [['PROJECT', '01']], 'READ')).toBeNull();
      expect(covers(reader, [['PROJECT', '1 ']], 'READ')).toBeNull();
      expect(covers(reader, [['project', '1']], 'READ')).toBeNull();
      expect(covers(reader, [['PROJECT', '*']], 'READ')).toBeNull();
    });

    it('passes when any of several scope refs is covered', () => {
      expect(covers(reader, [['TEAM', '9'], ['PROJECT', '1']], 'READ')).toBe('scope PROJECT 1 (READ)');
    });

    it('covers every id of a type with scopeRefId `*`', () => {
      const any = grantOf(['project:read'], [{ scopeType: 'PROJECT', scopeRefId: '*', accessMode: 'READ' }]);
      expect(covers(any, [['PROJECT', '777']], 'READ')).toBe('scope PROJECT * (READ)');
      expect(covers(any, [['TEAM', '777']], 'READ')).toBeNull();
      expect(covers(any, [['PROJECT', '777']], 'WRITE')).toBeNull();
    });

    it('ORs several scopes, each with its own access mode, and names the deciding scope (the last group that covers)', () => {
      const mixed = grantOf(['project:*'], [
        { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' },
        { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' },
        { scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'WRITE' },
        { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' },
      ]);
      expect(covers(mixed, [['PROJECT', '2']], 'READ')).toBe('scope PROJECT 1, 2 (READ)');
      expect(covers(mixed, [['PROJECT', '2']], 'WRITE')).toBeNull();
      expect(covers(mixed, [['PROJECT', '3']], 'WRITE')).toBe('scope PROJECT 3 (WRITE)');
      expect(covers(mixed, [['PROJECT', '3']], 'READ')).toBe('scope PROJECT 3 (WRITE)');
      expect(covers(mixed, [['PROJECT', '1'], ['PROJECT', '3']], 'READ')).toBe('scope PROJECT 3 (WRITE)');
    });

    it('covers nothing for a scoped profile whose scopes were all removed', () => {
      const profile: ProfileRecord = { profileId: 'p', userId: 'u', profileName: 'p', templateVersionId: 't', clientTypes: ['WEB'], enabled: true, revoked: false, unscoped: false, scopes: [], version: 1 };
      const grant = compileGrant({ userId: 'u', authorizationVersion: 1, profile, template: { versionId: 't', name: 't', description: null, permissions: ['project:read'] } });
      expect(grant.scoped).toBe(true);
      expect(grant.ability.can('read', 'project')).toBe(true);
      expect(covers(grant, [['PROJECT', '1']], 'READ')).toBeNull();
      expect(ScopeIndex.of([]).covering([{ type: 'PROJECT', id: '1' }], 'READ')).toBeNull();
    });

    it('keeps a scope next to `unscoped: true` scoped (fail closed)', () => {
      const profile: ProfileRecord = {
        profileId: 'p', userId: 'u', profileName: 'p', templateVersionId: 't', clientTypes: ['WEB'], enabled: true, revoked: false, unscoped: true,
        scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }], version: 1,
      };
      const grant = compileGrant({ userId: 'u', authorizationVersion: 1, profile, template: { versionId: 't', name: 't', description: null, permissions: ['project:read'] } });
      expect(grant.scoped).toBe(true);
      expect(covers(grant, [['PROJECT', '2']], 'READ')).toBeNull();
    });
  });
});
