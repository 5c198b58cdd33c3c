/**
 * Loads, compiles and caches the grant of a principal's active profile (the "ability cache").
 * With a warm cache a decision touches no database. Correctness over multiple instances comes from the
 * events channel: every event that can change a grant drops the affected entries, and while the channel
 * is down (`trustCache()` false) the cache is bypassed, since events may be missed.
 */
import type { IamPrincipal } from '../domain/principal';
import type { GrantRepository, PrincipalRepository } from '../domain/iam-repository';
import type { StoreEvent } from '../domain/token-record';
import { approximateGrantBytes, compileGrant, type CompiledGrant } from './ability-compiler';
import { GrantCache, grantKey } from './grant-cache';

export interface GrantProviderOptions {
  repository: Pick<GrantRepository, 'getProfile' | 'getTemplate'> & Pick<PrincipalRepository, 'getUser'>;
  /** Bound of the LRU cache (`iam.authz.ability-cache-size`). */
  maxEntries: number;
  /** Memory bound of the LRU cache in approximate bytes (`iam.authz.ability-cache-memory`); none when omitted. */
  maxBytes?: number;
  /** False while the events channel is down: then every call loads from the repository. */
  trustCache: () => boolean;
}

/** A cache entry; `grant` null caches "this profile grants nothing" so refused sessions do not hit the database. */
interface CachedGrant {
  userId: string;
  profileId: string;
  templateVersionId: string | null;
  grant: CompiledGrant | null;
}

interface InFlightLoad {
  generation: number;
  promise: Promise<CachedGrant>;
}

/** Checked on every read: a cached grant is served only to the user and profile it was loaded for. */
function belongsTo(entry: CachedGrant, userId: string, profileId: string): boolean {
  return entry.userId === userId && entry.profileId === profileId && (entry.grant === null || (entry.grant.userId === userId && entry.grant.profileId === profileId));
}

export class GrantProvider {
  private readonly repository: GrantProviderOptions['repository'];
  private readonly trustCache: () => boolean;
  private readonly cache: GrantCache<CachedGrant>;
  private readonly inFlight = new Map<string, InFlightLoad>();
  /**
   * Raised by every invalidation. A load that started in an older generation may have read data the
   * invalidation replaced, so its result is neither cached nor shared with later callers.
   */
  private generation = 0;
  private hits = 0;
  private misses = 0;

  constructor(options: GrantProviderOptions) {
    this.repository = options.repository;
    this.trustCache = options.trustCache;
    this.cache = new GrantCache<CachedGrant>(
      options.maxEntries,
      options.maxBytes === undefined ? null : { maxBytes: options.maxBytes, weigh: (entry) => (entry.grant === null ? 256 : approximateGrantBytes(entry.grant)) },
    );
  }

  /**
   * The compiled grant of the principal's active profile, or null when there is no active profile or it is
   * missing, not the user's, disabled or revoked (or the user is missing or disabled). Repository errors
   * (`DatabaseUnavailableError`) propagate.
   */
  /**
   * The grant if it is cached and the cache is trusted, without a promise (the proxy's warm path);
   * `undefined` when only {@link getGrant} can tell.
   */
  peek(principal: IamPrincipal): CompiledGrant | null | undefined {
    const profileId = principal.activeProfileId;
    if (profileId === null) return null;
    if (!this.trustCache()) return undefined;
    const cached = this.cache.get(grantKey(principal.userId, profileId));
    if (cached === undefined || !belongsTo(cached, principal.userId, profileId)) return undefined;
    this.hits++;
    return cached.grant;
  }

  async getGrant(principal: IamPrincipal): Promise<CompiledGrant | null> {
    const profileId = principal.activeProfileId;
    if (profileId === null) return null;
    const key = grantKey(principal.userId, profileId);

    if (!this.trustCache()) {
      // Events may have been missed: whatever is cached now may be stale, also after the channel returns.
      this.clear();
      this.misses++;
      return (await this.load(principal.userId, profileId)).grant;
    }

    const cached = this.cache.get(key);
    if (cached !== undefined && belongsTo(cached, principal.userId, profileId)) {
      this.hits++;
      return cached.grant;
    }
    this.misses++;

    const current = this.inFlight.get(key);
    if (current !== undefined && current.generation === this.generation) {
      const shared = await current.promise;
      if (belongsTo(shared, principal.userId, profileId)) return shared.grant;
    }

    const generation = this.generation;
    const promise = this.load(principal.userId, profileId);
    const flight: InFlightLoad = { generation, promise };
    this.inFlight.set(key, flight);
    try {
      const loaded = await promise;
      if (generation === this.generation && this.trustCache()) this.cache.set(key, loaded);
      return loaded.grant;
    } finally {
      if (this.inFlight.get(key) === flight) this.inFlight.delete(key);
    }
  }

  /** Applies an event from the `{prefix}:events` channel. */
  handleEvent(event: StoreEvent): void {
    switch (event.type) {
      case 'authorization-changed':
        this.invalidate((entry) => entry.userId === event.userId);
        break;
      case 'profile-changed':
        this.invalidate((entry) => entry.profileId === event.profileId);
        break;
      case 'template-changed':
        this.invalidate((entry) => entry.templateVersionId === event.versionId);
        break;
      case 'session-ended':
      case 'user-sessions-ended':
      case 'tokens-flushed':
        // Sessions ending do not change what a profile grants.
        break;
    }
  }

  /** Drops everything; call when the events channel reconnects (events may have been missed meanwhile). */
  clear(): void {
    this.generation++;
    this.cache.clear();
  }

  stats(): { size: number; hits: number; misses: number } {
    return { size: this.cache.size, hits: this.hits, misses: this.misses };
  }

  /** Approximate bytes of the cached grants (bounded by `maxBytes`). */
  cachedBytes(): number {
    return this.cache.bytes;
  }

  private invalidate(predicate: (entry: CachedGrant) => boolean): void {
    this.generation++;
    this.cache.deleteWhere(predicate);
  }

  private async load(userId: string, profileId: string): Promise<CachedGrant> {
    const refused: CachedGrant = { userId, profileId, templateVersionId: null, grant: null };
    const [profile, user] = await Promise.all([this.repository.getProfile(profileId), this.repository.getUser(userId)]);
    if (!profile || !user || !user.enabled) return refused;
    if (profile.userId !== userId || !profile.enabled || profile.revoked) return refused;

    const template = await this.repository.getTemplate(profile.templateVersionId);
    // A profile whose template is gone grants nothing, but is still a profile: PERMISSION_DENIED, not NO_ACTIVE_PROFILE.
    const grant = compileGrant({
      userId,
      authorizationVersion: user.authorizationVersion,
      profile,
      template: template ?? { versionId: profile.templateVersionId, name: '', description: null, permissions: [] },
    });
    return { userId, profileId, templateVersionId: profile.templateVersionId, grant };
  }
}
