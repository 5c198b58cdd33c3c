import { caslSubject, compileGrant } from '../../src/authz/ability-compiler';
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

const on = (type: string, refs: Array<[string, string]>, access: 'READ' | 'WRITE') =>
  caslSubject(type, { scopeRefs: refs.map(([t, id]) => ({ type: t, id })), access });

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

  it('puts no conditions on an unscoped profile: any resource instance passes', () => {
    const { ability, scoped } = grantOf(['project:update']);
    expect(scoped).toBe(false);
    expect(ability.can('update', on('project', [['PROJECT', '42']], 'WRITE'))).toBe(true);
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
      expect(reader.ability.can('read', on('project', [['PROJECT', '1']], 'READ'))).toBe(true);
      expect(reader.ability.can('update', on('project', [['PROJECT', '1']], 'WRITE'))).toBe(false);
    });

    it('lets a WRITE scope cover READ and WRITE', () => {
      expect(writer.ability.can('update', on('project', [['PROJECT', '1']], 'READ'))).toBe(true);
      expect(writer.ability.can('update', on('project', [['PROJECT', '1']], 'WRITE'))).toBe(true);
    });

    it('refuses another id or another scope type', () => {
      expect(reader.ability.can('read', on('project', [['PROJECT', '2']], 'READ'))).toBe(false);
      expect(reader.ability.can('read', on('project', [['TEAM', '1']], 'READ'))).toBe(false);
      expect(reader.ability.can('read', on('project', [], 'READ'))).toBe(false);
    });

    it('passes when any of several scope refs is covered', () => {
      expect(reader.ability.can('read', on('project', [['TEAM', '9'], ['PROJECT', '1']], 'READ'))).toBe(true);
    });

    it('covers every id of a type with scopeRefId `*`', () => {
      const any = grantOf(['project:read'], [{ scopeType: 'PROJECT', scopeRefId: '*', accessMode: 'READ' }]);
      expect(any.ability.can('read', on('project', [['PROJECT', '777']], 'READ'))).toBe(true);
      expect(any.ability.can('read', on('project', [['TEAM', '777']], 'READ'))).toBe(false);
      expect(any.ability.can('read', on('project', [['PROJECT', '777']], 'WRITE'))).toBe(false);
    });

    it('ORs several scopes, each with its own access mode, and names the deciding scope', () => {
      const mixed = grantOf(['project:*'], [
        { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' },
        { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' },
        { scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'WRITE' },
      ]);
      expect(mixed.ability.can('read', on('project', [['PROJECT', '2']], 'READ'))).toBe(true);
      expect(mixed.ability.can('edit', on('project', [['PROJECT', '2']], 'WRITE'))).toBe(false);
      expect(mixed.ability.can('edit', on('project', [['PROJECT', '3']], 'WRITE'))).toBe(true);
      expect(mixed.ability.relevantRuleFor('edit', on('project', [['PROJECT', '3']], 'WRITE'))?.reason).toBe('scope PROJECT 3 (WRITE)');
      expect(mixed.ability.relevantRuleFor('read', on('project', [['PROJECT', '2']], 'READ'))?.reason).toBe('scope PROJECT 1, 2 (READ)');
    });
  });
});
