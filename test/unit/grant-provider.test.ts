import type { IamPrincipal } from '../../src/domain/principal';
import { GrantCache, grantKey } from '../../src/authz/grant-cache';
import { GrantProvider } from '../../src/authz/grant-provider';
import { DatabaseUnavailableError } from '../../src/domain/iam-repository';
import type { ProfileRecord, TemplateRecord, UserRecord } from '../../src/domain/records';

/** An in-memory repository whose reads can be held open to interleave events with loads. */
class FakeRepository {
  users = new Map<string, UserRecord>();
  profiles = new Map<string, ProfileRecord>();
  templates = new Map<string, TemplateRecord>();
  profileReads = 0;
  failWith: Error | null = null;
  private gate: Promise<void> | null = null;
  private openGate: (() => void) | null = null;

  /** Holds every following getProfile until `release()`. */
  hold(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }
  release(): void {
    this.openGate?.();
    this.gate = null;
  }

  async getProfile(profileId: string): Promise<ProfileRecord | null> {
    this.profileReads++;
    const gate = this.gate;
    if (gate) await gate;
    if (this.failWith) throw this.failWith;
    const profile = this.profiles.get(profileId);
    return profile ? structuredClone(profile) : null;
  }
  async getUser(userId: string): Promise<UserRecord | null> {
    return this.users.get(userId) ?? null;
  }
  async getTemplate(versionId: string): Promise<TemplateRecord | null> {
    return this.templates.get(versionId) ?? null;
  }

  addUser(userId: string, profileId: string, templateVersionId = 'reader-v1', overrides: Partial<ProfileRecord> = {}): void {
    this.users.set(userId, { userId, displayName: null, enabled: true, authorizationVersion: 1, createdAt: new Date(0), updatedAt: new Date(0), version: 1 });
    this.profiles.set(profileId, {
      profileId,
      userId,
      profileName: profileId,
      templateVersionId,
      clientTypes: ['WEB'],
      enabled: true,
      revoked: false,
      unscoped: (overrides.scopes ?? []).length === 0,
      scopes: [],
      version: 1,
      ...overrides,
    });
  }
}

const principal = (userId: string, activeProfileId: string | null): IamPrincipal => ({
  userId,
  identityId: `id-${userId}`,
  identityDomain: 'example.com',
  activeProfileId,
  authorizationVersion: 1,
});

function setup(options: { maxEntries?: number; trust?: () => boolean } = {}) {
  const repository = new FakeRepository();
  repository.templates.set('reader-v1', { versionId: 'reader-v1', name: 'reader', description: null, permissions: ['project:read'], version: 1 });
  repository.templates.set('writer-v1', { versionId: 'writer-v1', name: 'writer', description: null, permissions: ['project:update'], version: 1 });
  repository.addUser('u-alice', 'p-alice');
  repository.addUser('u-bob', 'p-bob', 'writer-v1');
  const provider = new GrantProvider({ repository, maxEntries: options.maxEntries ?? 100, trustCache: options.trust ?? (() => true) });
  return { repository, provider };
}

describe('GrantCache', () => {
  it('evicts the least recently used entry beyond max', () => {
    const cache = new GrantCache<number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1); // a is now the most recent
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
    expect(cache.size).toBe(2);
  });

  it('deletes matching entries and reports how many', () => {
    const cache = new GrantCache<number>(10);
    for (let i = 0; i < 6; i++) cache.set(`k${i}`, i);
    expect(cache.deleteWhere((value) => value % 2 === 0)).toBe(3);
    expect(cache.size).toBe(3);
    expect(cache.get('k1')).toBe(1);
    expect(cache.get('k2')).toBeUndefined();
  });

  it('refuses a non-positive bound', () => {
    expect(() => new GrantCache(0)).toThrow(RangeError);
  });
});

describe('GrantProvider', () => {
  it('loads once, then answers from the cache', async () => {
    const { repository, provider } = setup();
    const first = await provider.getGrant(principal('u-alice', 'p-alice'));
    const second = await provider.getGrant(principal('u-alice', 'p-alice'));
    expect(first?.permissions).toEqual(['project:read']);
    expect(second).toBe(first);
    expect(repository.profileReads).toBe(1);
    expect(provider.stats()).toEqual({ size: 1, hits: 1, misses: 1 });
  });

  it('returns null without a database read when there is no active profile', async () => {
    const { repository, provider } = setup();
    expect(await provider.getGrant(principal('u-alice', null))).toBeNull();
    expect(repository.profileReads).toBe(0);
  });

  it.each([
    ['missing', (r: FakeRepository) => r.profiles.delete('p-alice')],
    ['disabled', (r: FakeRepository) => (r.profiles.get('p-alice')!.enabled = false)],
    ['revoked', (r: FakeRepository) => (r.profiles.get('p-alice')!.revoked = true)],
    ['not the user’s', (r: FakeRepository) => (r.profiles.get('p-alice')!.userId = 'u-bob')],
    ['of a disabled user', (r: FakeRepository) => (r.users.get('u-alice')!.enabled = false)],
  ])('returns null for a profile that is %s', async (_label, change) => {
    const { repository, provider } = setup();
    change(repository);
    expect(await provider.getGrant(principal('u-alice', 'p-alice'))).toBeNull();
  });

  it('compiles a profile whose template is gone as granting nothing', async () => {
    const { repository, provider } = setup();
    repository.templates.delete('reader-v1');
    const grant = await provider.getGrant(principal('u-alice', 'p-alice'));
    expect(grant?.permissions).toEqual([]);
    expect(grant?.ability.can('read', 'project')).toBe(false);
  });

  it('never holds more than max entries (5,000 users, max 100)', async () => {
    const { repository, provider } = setup({ maxEntries: 100 });
    for (let i = 0; i < 5000; i++) {
      repository.addUser(`u-${i}`, `p-${i}`);
      await provider.getGrant(principal(`u-${i}`, `p-${i}`));
      expect(provider.stats().size).toBeLessThanOrEqual(100);
    }
    expect(provider.stats().size).toBe(100);
    // The most recent stay, the oldest were evicted.
    const reads = repository.profileReads;
    await provider.getGrant(principal('u-4999', 'p-4999'));
    expect(repository.profileReads).toBe(reads);
    await provider.getGrant(principal('u-0', 'p-0'));
    expect(repository.profileReads).toBe(reads + 1);
  });

  describe('invalidation', () => {
    async function warm(provider: GrantProvider) {
      await provider.getGrant(principal('u-alice', 'p-alice'));
      await provider.getGrant(principal('u-bob', 'p-bob'));
    }

    it('authorization-changed drops that user’s entries only', async () => {
      const { repository, provider } = setup();
      await warm(provider);
      repository.templates.get('reader-v1')!.permissions = ['project:read', 'project:update'];
      provider.handleEvent({ type: 'authorization-changed', userId: 'u-alice', authorizationVersion: 2 });
      expect(provider.stats().size).toBe(1);
      expect((await provider.getGrant(principal('u-alice', 'p-alice')))?.permissions).toEqual(['project:read', 'project:update']);
      const reads = repository.profileReads;
      await provider.getGrant(principal('u-bob', 'p-bob'));
      expect(repository.profileReads).toBe(reads);
    });

    it('profile-changed drops that profile', async () => {
      const { repository, provider } = setup();
      await warm(provider);
      repository.profiles.get('p-bob')!.revoked = true;
      provider.handleEvent({ type: 'profile-changed', profileId: 'p-bob', userId: 'u-bob' });
      expect(provider.stats().size).toBe(1);
      expect(await provider.getGrant(principal('u-bob', 'p-bob'))).toBeNull();
    });

    it('profile-changed also drops a cached refusal (a re-enabled profile works at once)', async () => {
      const { repository, provider } = setup();
      repository.profiles.get('p-alice')!.enabled = false;
      expect(await provider.getGrant(principal('u-alice', 'p-alice'))).toBeNull();
      repository.profiles.get('p-alice')!.enabled = true;
      expect(await provider.getGrant(principal('u-alice', 'p-alice'))).toBeNull(); // cached refusal
      provider.handleEvent({ type: 'profile-changed', profileId: 'p-alice', userId: 'u-alice' });
      expect(await provider.getGrant(principal('u-alice', 'p-alice'))).not.toBeNull();
    });

    it('template-changed drops entries compiled from that template', async () => {
      const { repository, provider } = setup();
      await warm(provider);
      repository.templates.get('writer-v1')!.permissions = ['project:delete'];
      provider.handleEvent({ type: 'template-changed', versionId: 'writer-v1' });
      expect(provider.stats().size).toBe(1);
      expect((await provider.getGrant(principal('u-bob', 'p-bob')))?.permissions).toEqual(['project:delete']);
    });

    it.each([
      { type: 'session-ended' as const, sessionId: 's', tokenHash: 'h', userId: 'u-alice', reason: 'logout' },
      { type: 'user-sessions-ended' as const, userId: 'u-alice', reason: 'admin' },
    ])('$type changes nothing', async (event) => {
      const { provider } = setup();
      await warm(provider);
      provider.handleEvent(event);
      expect(provider.stats().size).toBe(2);
    });

    it('discards a load that was in flight when an event affecting it landed', async () => {
      const { repository, provider } = setup();
      repository.hold();
      const pending = provider.getGrant(principal('u-alice', 'p-alice'));
      // The load has read nothing yet; the admin changes the template and the event arrives mid-load.
      await Promise.resolve();
      provider.handleEvent({ type: 'template-changed', versionId: 'reader-v1' });
      repository.release();
      await pending;
      expect(provider.stats().size).toBe(0);
      repository.templates.get('reader-v1')!.permissions = ['project:read', 'project:delete'];
      expect((await provider.getGrant(principal('u-alice', 'p-alice')))?.permissions).toEqual(['project:read', 'project:delete']);
    });

    it('does not let a caller join a load that started before an invalidation', async () => {
      const { repository, provider } = setup();
      repository.hold();
      const stale = provider.getGrant(principal('u-alice', 'p-alice'));
      provider.handleEvent({ type: 'profile-changed', profileId: 'p-alice', userId: 'u-alice' });
      const fresh = provider.getGrant(principal('u-alice', 'p-alice'));
      repository.release();
      await Promise.all([stale, fresh]);
      expect(repository.profileReads).toBe(2);
    });
  });

  it('bypasses and empties the cache while trustCache() is false', async () => {
    let trusted = true;
    const { repository, provider } = setup({ trust: () => trusted });
    await provider.getGrant(principal('u-alice', 'p-alice'));
    trusted = false;
    await provider.getGrant(principal('u-alice', 'p-alice'));
    await provider.getGrant(principal('u-alice', 'p-alice'));
    expect(repository.profileReads).toBe(3);
    expect(provider.stats().size).toBe(0);
    trusted = true;
    await provider.getGrant(principal('u-alice', 'p-alice'));
    await provider.getGrant(principal('u-alice', 'p-alice'));
    expect(repository.profileReads).toBe(4);
  });

  it('shares one load between concurrent misses for the same key (single-flight)', async () => {
    const { repository, provider } = setup();
    repository.hold();
    const all = Array.from({ length: 20 }, () => provider.getGrant(principal('u-alice', 'p-alice')));
    repository.release();
    const grants = await Promise.all(all);
    expect(repository.profileReads).toBe(1);
    expect(new Set(grants).size).toBe(1);
    expect(grants[0]?.profileId).toBe('p-alice');
  });

  it('propagates repository errors and caches nothing', async () => {
    const { repository, provider } = setup();
    repository.failWith = new DatabaseUnavailableError('down');
    await expect(provider.getGrant(principal('u-alice', 'p-alice'))).rejects.toBeInstanceOf(DatabaseUnavailableError);
    repository.failWith = null;
    expect(await provider.getGrant(principal('u-alice', 'p-alice'))).not.toBeNull();
    expect(provider.stats().size).toBe(1);
  });
});

describe('#11.24 grant cache keys cannot collide', () => {
  /** `auth0|victim` holds `admin` (writer); `auth0` points at `victim|admin`, which is not his. */
  function collidingSetup() {
    const setupResult = setup();
    setupResult.repository.addUser('auth0|victim', 'admin', 'writer-v1');
    setupResult.repository.users.set('auth0', { userId: 'auth0', displayName: null, enabled: true, authorizationVersion: 1, createdAt: new Date(0), updatedAt: new Date(0), version: 1 });
    return setupResult;
  }

  it('#11.24: user auth0 on profile victim|admin is not served auth0|victim\'s admin grant (cached, peek and load)', async () => {
    const { provider } = collidingSetup();
    const victim = await provider.getGrant(principal('auth0|victim', 'admin'));
    expect(victim).toMatchObject({ userId: 'auth0|victim', profileId: 'admin' });
    expect(provider.peek(principal('auth0|victim', 'admin'))).toBe(victim);

    const attacker = principal('auth0', 'victim|admin');
    expect(provider.peek(attacker)).toBeUndefined();
    expect(await provider.getGrant(attacker)).toBeNull();
    // Now both are cached: each still gets its own.
    expect(provider.peek(attacker)).toBeNull();
    expect(provider.peek(principal('auth0|victim', 'admin'))).toBe(victim);
  });

  it('#11.24: the reverse order, and a concurrent load of the other pair, never share an entry', async () => {
    const { repository, provider } = collidingSetup();
    repository.addUser('auth0', 'victim|admin', 'reader-v1');
    repository.hold();
    const loads = [provider.getGrant(principal('auth0', 'victim|admin')), provider.getGrant(principal('auth0|victim', 'admin'))];
    repository.release();
    const [mine, theirs] = await Promise.all(loads);
    expect(mine).toMatchObject({ userId: 'auth0', profileId: 'victim|admin', permissions: ['project:read'] });
    expect(theirs).toMatchObject({ userId: 'auth0|victim', profileId: 'admin', permissions: ['project:update'] });
    expect(provider.stats().size).toBe(2);
  });

  it('#11.24: separators inside ids (| : and digits) give distinct keys', () => {
    const pairs: Array<[string, string]> = [
      ['auth0', 'victim|admin'], ['auth0|victim', 'admin'], ['1:a', 'b'], ['1', 'a|b'], ['a|', '|b'], ['a', '||b'], ['', '1:|x'],
    ];
    const keys = new Set(pairs.map(([user, profile]) => grantKey(user, profile)));
    expect(keys.size).toBe(pairs.length);
  });
});
