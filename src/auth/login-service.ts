import type { AuditTrail } from '../audit/audit-trail';
import { withSpan } from '../observability/tracing';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import {
  IdentityLinkError,
  type GrantRepository,
  type IdentityAttach,
  type IdentityLinkRefusal,
  type PrincipalRepository,
  type ProvisioningRepository,
} from '../domain/iam-repository';
import type { IdentityRecord, ProfileRecord, UserRecord } from '../domain/records';
import { ProblemError, problems } from '../domain/problem';
import { notASession, type AuthenticationResult, type RequestFacts, type SessionService, type VerifiedSession } from '../sessions/session-service';
import type { AuthenticatedIdentity, AuthenticationOutcome, Authenticator, LoginRequest, ProjectedProfiles } from './authenticator';
import { OVERWRITE_UNAUDITED, type ProvisioningOptions } from '../domain/provisioning';
import type { LoginRateLimiter } from './login-rate-limiter';
import type { IamPrincipal } from '../domain/principal';

export interface LoginServiceDeps {
  /** The configured login method (any registered type; its type labels the metrics and the audit). */
  authenticator: Authenticator;
  /** Users and identities (admitted at login), their profiles, and the profiles an authenticator projects. */
  repository: Pick<PrincipalRepository, 'getUser' | 'ensurePrincipal'> & Pick<GrantRepository, 'listProfiles' | 'getProfile'> & ProvisioningRepository;
  sessions: SessionService;
  rateLimiter: LoginRateLimiter;
  /** The change feed's deliverer: a projection's changes are recorded with it and published through it. */
  changes?: { deliver(): Promise<void> };
  audit: AuditTrail;
  logger: Logger;
  /** `iam_logins_total{result}`; absent in tools that log nobody in. */
  metrics?: Pick<GatewayMetrics, 'logins'>;
}

/** How {@link LoginService.establish} treats one login. */
export interface EstablishOptions {
  /** For the audit trail of a refusal (the password login's username, the provider's subject). */
  username: string;
  /** `auth.login`'s `details.authenticator`. */
  authenticator: string;
  /** Refuse a user the gateway does not know yet (`iam.oidc.users: existing`) instead of creating it. */
  mustExist?: boolean;
  /** Whether a new identity may join a user that already exists (default `any`: the authenticator vouches for the userId). */
  attach?: IdentityAttach;
  /** A profile to activate when the user has it (available, for this client type); else the usual choice. */
  preferredProfileId?: string | null;
  /** The provider's session id (`sid`), kept with the session for back-channel logout. */
  idpSessionId?: string | null;
  /** The provider's ID token, kept with the session (server side) for `id_token_hint` at sign-out. */
  idpIdToken?: string | null;
  /**
   * Profiles the login projects by rule (`iam.oidc.profiles`): `of` is given the ids of the profiles the user holds
   * (a rule's profile may be held under an earlier id) and names the profiles to create or update and the ids to
   * revoke where the user holds them; each change audited as `audit`.
   */
  projection?: { of(held: ReadonlySet<string>): { profiles: ProjectedProfiles; retract: readonly string[] }; audit: { actorUserId: string; source: string } };
}

/** The `result` label of `iam_logins_total` for a login that threw `error`. */
function loginResultOf(error: unknown): 'failure' | 'rate_limited' | 'not_configured' | 'error' {
  if (!(error instanceof ProblemError)) return 'error';
  if (error.code === 'IAM_INVALID_CREDENTIALS') return 'failure';
  if (error.code === 'IAM_RATE_LIMITED') return 'rate_limited';
  if (error.code === 'IAM_LOGIN_NOT_CONFIGURED') return 'not_configured';
  return 'error';
}

/**
 * `POST /iam/auth/login` and profile switch: the host's authenticator decides who the user is, the
 * gateway's own records decide which profile is active, and the session service issues the token.
 */
export class LoginService {
  constructor(private readonly deps: LoginServiceDeps) {}

  /** One login attempt; every outcome is counted in `iam_logins_total{result}`. */
  login(request: LoginRequest, facts: RequestFacts): Promise<AuthenticationResult> {
    return this.counted(this.deps.authenticator.type, request.clientType, () => this.attempt(request, facts));
  }

  /** A login whose identity an OpenID Provider proved; counted in `iam_logins_total{result}` like the others. */
  loginVerified(identity: AuthenticatedIdentity, clientType: string, facts: RequestFacts, options: EstablishOptions): Promise<AuthenticationResult> {
    return this.counted(options.authenticator, clientType, () => this.establish(identity, clientType, facts, options));
  }

  /** Every login: counted by result, and a `login` span when tracing is on (never the username or password). */
  private counted(authenticator: string, clientType: string, login: () => Promise<AuthenticationResult>): Promise<AuthenticationResult> {
    return withSpan('login', { 'iam.authenticator': authenticator, 'iam.client_type': clientType }, async (span) => {
      try {
        const result = await login();
        this.deps.metrics?.logins.inc({ result: 'success' });
        span.setAttributes({ 'iam.login.result': 'success', 'enduser.id': result.principal.userId });
        return result;
      } catch (error) {
        const result = loginResultOf(error);
        this.deps.metrics?.logins.inc({ result });
        span.setAttribute('iam.login.result', result);
        throw error;
      }
    });
  }

  private async attempt(request: LoginRequest, facts: RequestFacts): Promise<AuthenticationResult> {
    const attempt = await this.deps.rateLimiter.acquire(request.username, facts.clientAddress ?? 'unknown');
    let outcome: AuthenticationOutcome;
    try {
      outcome = await this.deps.authenticator.authenticate(request, { clientAddress: facts.clientAddress });
    } catch (error) {
      // A full password queue checked nothing: the attempt is given back.
      if (error instanceof ProblemError && error.code === 'IAM_BUSY') await attempt.notTried();
      throw error;
    }
    if (outcome.kind === 'rejected') return this.fail(request, facts, outcome.reason, null);

    const result = await this.establish(outcome.identity, request.clientType, facts, { username: request.username, authenticator: this.deps.authenticator.type });
    await attempt.succeeded();
    return result;
  }

  /**
   * What a login projects: the authenticator's profiles (as it sends them, unaudited: it is the authority), or the
   * profiles of `iam.oidc.profiles` rules, with a revocation for each rule profile the user holds but no longer
   * qualifies for (only a held one: a rule never creates a profile just to revoke it), audited.
   */
  private async projectedProfiles(identity: AuthenticatedIdentity, projection: EstablishOptions['projection']): Promise<{ profiles: ProjectedProfiles; options: ProvisioningOptions }> {
    if (!projection) return { profiles: identity.profiles ?? [], options: OVERWRITE_UNAUDITED };
    const held = await this.deps.repository.listProfiles(identity.userId);
    const projected = projection.of(new Set(held.map((profile) => profile.profileId)));
    const profiles: ProjectedProfiles = [...projected.profiles];
    for (const profile of held) {
      if (!profile.revoked && projected.retract.includes(profile.profileId)) {
        profiles.push({ profileId: profile.profileId, profileName: profile.profileName, templateVersionId: profile.templateVersionId, clientTypes: [...profile.clientTypes], revoked: true });
      }
    }
    return { profiles, options: { overwrite: true, audit: projection.audit } };
  }

  /**
   * The second half of every login, whoever proved the identity (a password authenticator, an OpenID Provider):
   * the gateway's own records decide whether the user may log in and which profile is active, then the session is
   * issued and the login audited. Refusals are audited and answered 401 IAM_INVALID_CREDENTIALS.
   */
  private async establish(identity: AuthenticatedIdentity, clientType: string, facts: RequestFacts, login: EstablishOptions): Promise<AuthenticationResult> {
    const admitted = await admitIdentity(this.deps.repository, identity, { mustExist: login.mustExist === true, attach: login.attach ?? 'any' });
    if ('refused' in admitted) return this.fail({ username: login.username, clientType }, facts, admitted.refused, admitted.userId);
    const { user } = admitted;

    let authorizationVersion = user.authorizationVersion;
    const projected = await this.projectedProfiles(identity, login.projection);
    if (projected.profiles.length > 0) {
      // The host (or the provider's claims, by rule) projects profiles and scopes into the gateway.
      // Same path as every principal change: recorded in the change feed with it, then delivered (#11.27).
      const summary = await this.deps.repository.applyProvisioning({ users: [{ userId: identity.userId, profiles: projected.profiles }] }, projected.options);
      if (summary.affectedUserIds.includes(identity.userId)) {
        authorizationVersion = (await this.deps.repository.getUser(identity.userId))?.authorizationVersion ?? authorizationVersion;
        await this.deps.changes?.deliver();
      }
    }

    const profiles = await this.deps.repository.listProfiles(identity.userId);
    const preferred = login.preferredProfileId ? profiles.find((profile) => profile.profileId === login.preferredProfileId && isAvailable(profile) && profile.clientTypes.includes(clientType)) : undefined;
    const principal = principalOf(identity, admitted, (preferred ?? selectActiveProfile(profiles, clientType))?.profileId ?? null, authorizationVersion);
    const result = await this.deps.sessions.issue(principal, clientType, facts, user.sessionEpoch ?? 0, undefined, login.idpSessionId ?? null, login.idpIdToken ?? null);
    this.deps.audit.record({
      action: 'auth.login',
      actorUserId: principal.userId,
      targetType: 'session',
      targetId: result.sessionId,
      outcome: 'success',
      requestId: facts.requestId,
      clientAddress: facts.clientAddress,
      details: { clientType, activeProfileId: principal.activeProfileId, authenticator: login.authenticator },
    });
    return result;
  }

  /** The caller's enabled, non-revoked profiles (docs/http-contract.md). */
  async availableProfiles(userId: string): Promise<ProfileRecord[]> {
    return (await this.deps.repository.listProfiles(userId)).filter(isAvailable);
  }

  /**
   * Issues a new token and session for another of the caller's profiles; the caller's own token keeps its
   * profile, unchanged.
   */
  async switchProfile(caller: VerifiedSession, profileId: string, facts: RequestFacts): Promise<AuthenticationResult> {
    if (caller.record.source === 'access-token') throw notASession();
    const current = caller.record.principal;
    const profile = await this.deps.repository.getProfile(profileId);
    if (!profile || profile.userId !== current.userId || !isAvailable(profile)) {
      throw new ProblemError('IAM_PROFILE_NOT_FOUND', `No profile "${profileId}" is available to you.`);
    }
    const user = await this.deps.repository.getUser(current.userId);
    // A disabled user mints no token, whichever way (#11.27); issue() rechecks after writing it (#11.28).
    if (!user || !user.enabled) throw problems.unauthenticated('The user is disabled.', true);
    const principal: IamPrincipal = {
      ...current,
      activeProfileId: profile.profileId,
      authorizationVersion: user?.authorizationVersion ?? current.authorizationVersion,
    };
    const result = await this.deps.sessions.issue(principal, caller.record.clientType, facts, caller.record.sessionEpoch ?? 0, caller);
    this.deps.audit.record({
      action: 'auth.profile.switch',
      actorUserId: current.userId,
      targetType: 'session',
      targetId: result.sessionId,
      outcome: 'success',
      requestId: facts.requestId,
      clientAddress: facts.clientAddress,
      details: { fromSessionId: caller.record.sessionId, fromProfileId: current.activeProfileId, toProfileId: profile.profileId },
    });
    return result;
  }

  /** The attempt already counted against the limits (taken before the check); it keeps its units. */
  private async fail(request: Pick<LoginRequest, 'username' | 'clientType'>, facts: RequestFacts, reason: string, userId: string | null): Promise<never> {
    this.deps.audit.record({
      action: 'auth.login.failed',
      actorUserId: userId,
      targetType: 'user',
      targetId: userId,
      outcome: 'failure',
      requestId: facts.requestId,
      clientAddress: facts.clientAddress,
      details: { reason, clientType: request.clientType, username: request.username.slice(0, 200) },
    });
    throw problems.invalidCredentials();
  }
}

function isAvailable(profile: ProfileRecord): boolean {
  return profile.enabled && !profile.revoked;
}

/** Why the gateway's records refuse an identity an authenticator or provider vouched for (audited as the reason). */
export type IdentityRefusal = 'unknown-user' | 'user-disabled' | 'identity-disabled' | 'identity-domain-mismatch' | IdentityLinkRefusal;

/** What {@link admitIdentity} applies besides the records: may the user be new, may a new identity join an existing user. */
export interface AdmissionRules {
  /** Refuse a user the gateway does not know yet instead of creating it. */
  mustExist: boolean;
  /** Whether a new identity may join a user that already exists (the repository decides it atomically). */
  attach: IdentityAttach;
}

/**
 * The gateway's own records decide whether an identity someone vouched for (a password authenticator, an OpenID
 * Provider's login or access token) may act: the user is created unless `mustExist`, and must be enabled; a stored
 * identity names its user (one naming another user is refused, never moved); a new identity joins an existing
 * user only as `attach` allows; the identity must be enabled; its stored domain is the truth (admins and
 * provisioning set it).
 */
export async function admitIdentity(
  repository: Pick<PrincipalRepository, 'getUser' | 'ensurePrincipal'>,
  identity: AuthenticatedIdentity,
  rules: AdmissionRules,
): Promise<{ user: UserRecord; storedIdentity: IdentityRecord } | { refused: IdentityRefusal; userId: string | null }> {
  if (rules.mustExist && !(await repository.getUser(identity.userId))) return { refused: 'unknown-user', userId: null };
  let ensured;
  try {
    ensured = await repository.ensurePrincipal({ ...identity, attach: rules.attach });
  } catch (error) {
    if (error instanceof IdentityLinkError) return { refused: error.reason, userId: identity.userId };
    throw error;
  }
  const { user, identity: storedIdentity } = ensured;
  if (!user.enabled) return { refused: 'user-disabled', userId: identity.userId };
  if (!storedIdentity.enabled || storedIdentity.userId !== identity.userId) return { refused: 'identity-disabled', userId: identity.userId };
  if (storedIdentity.identityDomain !== identity.identityDomain) return { refused: 'identity-domain-mismatch', userId: identity.userId };
  return { user, storedIdentity };
}

/** The principal of an admitted identity acting under `activeProfileId`. */
export function principalOf(
  identity: AuthenticatedIdentity,
  admitted: { user: UserRecord; storedIdentity: IdentityRecord },
  activeProfileId: string | null,
  authorizationVersion = admitted.user.authorizationVersion,
): IamPrincipal {
  const displayName = identity.displayName ?? admitted.user.displayName;
  return {
    userId: identity.userId,
    identityId: identity.identityId,
    identityDomain: admitted.storedIdentity.identityDomain,
    activeProfileId,
    ...(displayName ? { displayName } : {}),
    authorizationVersion,
  };
}

/**
 * The user's first enabled, non-revoked profile whose client types include the login's
 * client type, lowest profileId first (code-unit order, independent of database collation).
 */
export function selectActiveProfile(profiles: ProfileRecord[], clientType: string): ProfileRecord | null {
  let best: ProfileRecord | null = null;
  for (const profile of profiles) {
    if (!isAvailable(profile) || !profile.clientTypes.includes(clientType)) continue;
    if (best === null || profile.profileId < best.profileId) best = profile;
  }
  return best;
}
