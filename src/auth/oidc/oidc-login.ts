import type { JWTPayload } from 'jose';
import type { AuditTrail } from '../../audit/audit-trail';
import { ProblemError } from '../../domain/problem';
import { hashToken } from '../../domain/token-hash';
import type { TokenCounters } from '../../domain/token-store';
import type { AuthenticationResult, RequestFacts } from '../../sessions/session-service';
import type { AuthenticatedIdentity } from '../authenticator';
import { checkAuthenticatedIdentity } from '../identity-validation';
import type { LoginRateLimiter } from '../login-rate-limiter';
import type { LoginService } from '../login-service';
import type { Logger } from '../../observability/logger';
import { evaluateRules, projectProfiles, SKIP_WORDS, unmetCondition, type ClaimCondition, type ProfileRule, type RuleOutcome } from './claim-rules';
import { attachRule, type LinkBy } from './identity-linking';
import { LOGIN_STATE_TTL_MS, type LoginState, type LoginStateSeal } from './login-state';
import type { RelyingParty } from './relying-party';

/** How the provider's claims become a principal (`iam.oidc.claims.*`, `iam.oidc.users`). */
export interface ClaimMapping {
  /** Claim that becomes the userId (default `sub`). */
  userId: string;
  /** Claim that becomes the identityDomain; null = the issuer. */
  identityDomain: string | null;
  /** Claim naming the profile to activate; null = the usual choice. */
  profile: string | null;
  /** `existing`: only users the gateway already knows may log in. */
  users: 'jit' | 'existing';
  /** What may join a new provider account to an existing user besides an admin (`iam.oidc.link-by`). */
  linkBy: LinkBy;
  /** `iam.oidc.allowed`: claims an account must have to sign in (none: every account). */
  allowed?: readonly ClaimCondition[];
  /** `iam.oidc.profiles`: profiles projected from the claims at every login. */
  profiles?: readonly ProfileRule[];
}

export interface OidcLoginDeps {
  rp: RelyingParty;
  /**
   * Failed callbacks are audited (`auth.login.failed`, authenticator `oidc`) within the budget of unauthenticated
   * events: anyone can send a callback (no state cookie, a stale one), so each is not a row of its own.
   */
  audit: Pick<AuditTrail, 'recordUnauthenticated' | 'record'>;
  /** Warns of each `iam.oidc.profiles` rule a sign-in's claims met but could not apply (rule and claim names only). */
  logger: Pick<Logger, 'warn'>;
  seal: LoginStateSeal;
  login: Pick<LoginService, 'loginVerified'>;
  /** Makes each `state` usable once, on every instance (an atomic counter with a limit of 1). */
  store: Pick<TokenCounters, 'takeCounters'>;
  /** A callback with a matching state is a login attempt of its client address (failures per address). */
  rateLimiter: Pick<LoginRateLimiter, 'acquireAddress'>;
  claims: ClaimMapping;
  /** The client type of a browser login (`WEB`). */
  clientType: string;
}

/** The identity an OpenID Connect login names: `oidc:` + the provider's subject (stable, never reassigned). */
export const oidcIdentityId = (subject: string): string => `oidc:${subject}`;

/**
 * The OpenID Connect login (authorization code flow with PKCE, `state` and `nonce`): {@link begin} seals what the
 * callback must check into a cookie and sends the browser to the provider; {@link complete} checks the callback
 * against it (once: a replayed `state` is refused on every instance), lets the provider's id token name the user,
 * and logs that user in like any other login — the gateway's own records decide enabled, identity and profile.
 */
export class OidcLogin {
  constructor(private readonly deps: OidcLoginDeps) {}

  async begin(returnTo: string): Promise<{ location: URL; stateCookie: string }> {
    const { url, pending } = await this.deps.rp.beginLogin();
    const stateCookie = this.deps.seal.seal({ ...pending, returnTo, expiresAtMs: Date.now() + LOGIN_STATE_TTL_MS });
    return { location: url, stateCookie };
  }

  /**
   * The callback (`query` as the provider sent it, the sealed cookie as the browser sent it back). Throws 400
   * IAM_OIDC_STATE_INVALID for a missing, tampered, expired, foreign or replayed state; 401 IAM_OIDC_LOGIN_FAILED
   * when the provider refused or its answer fails a check; 502/504 when it cannot be reached in time.
   */
  async complete(query: URLSearchParams, stateCookie: string | null, facts: RequestFacts): Promise<{ result: AuthenticationResult; returnTo: string }> {
    try {
      return await this.completeChecked(query, stateCookie, facts);
    } catch (error) {
      // The gateway's own refusals (unknown or disabled user) are audited by the login service; these are the
      // provider's and the callback's, from a request nobody authenticated.
      if (error instanceof ProblemError && error.code !== 'IAM_INVALID_CREDENTIALS') {
        this.deps.audit.recordUnauthenticated({
          action: 'auth.login.failed',
          actorUserId: null,
          targetType: 'user',
          targetId: null,
          outcome: 'failure',
          requestId: facts.requestId,
          clientAddress: facts.clientAddress,
          details: { reason: error.code, authenticator: 'oidc', detail: error.message.slice(0, 300) },
        });
      }
      throw error;
    }
  }

  private async completeChecked(query: URLSearchParams, stateCookie: string | null, facts: RequestFacts): Promise<{ result: AuthenticationResult; returnTo: string }> {
    const state = this.deps.seal.unseal(stateCookie);
    if (!state) throw new ProblemError('IAM_OIDC_STATE_INVALID', 'This login was not started in this browser, or took too long: start again.');
    if (query.get('state') !== state.state) throw new ProblemError('IAM_OIDC_STATE_INVALID', 'The state does not belong to the login this browser started: start again.');
    // Anyone can start a login and come back with its state: each such callback writes the single-use mark below, so
    // it is a login attempt of the client address (iam.login.rate-limit.max-failures-per-address), given back when
    // the login succeeds or the provider could not be asked.
    const attempt = await this.deps.rateLimiter.acquireAddress(facts.clientAddress ?? 'unknown');
    let result: AuthenticationResult;
    try {
      result = await this.redeem(query, state, facts);
    } catch (error) {
      if (error instanceof ProblemError && (error.code === 'IAM_IDP_UNAVAILABLE' || error.code === 'IAM_IDP_TIMEOUT')) await attempt.notTried();
      throw error;
    }
    await attempt.succeeded();
    return { result, returnTo: state.returnTo };
  }

  /** The checks and the login after the state matched (once, the provider's answer, the gateway's records). */
  private async redeem(query: URLSearchParams, state: LoginState, facts: RequestFacts): Promise<AuthenticationResult> {
    const once = await this.deps.store.takeCounters([`oidc-state:${hashToken(state.state)}`], [1], LOGIN_STATE_TTL_MS);
    if (!once.allowed) throw new ProblemError('IAM_OIDC_STATE_INVALID', 'This login response was already used: start again.');
    const error = query.get('error');
    if (error !== null) {
      const description = query.get('error_description');
      throw new ProblemError('IAM_OIDC_LOGIN_FAILED', `The identity provider refused the login: ${error}${description ? ` (${description.slice(0, 200)})` : ''}.`);
    }
    const { claims, idToken } = await this.deps.rp.completeLogin(query, state);
    const unmet = unmetCondition(claims, this.deps.claims.allowed ?? []);
    if (unmet !== null) {
      const wanted = unmet.values.length === 0 ? 'is missing' : `holds none of ${unmet.values.slice(0, 5).join(', ')}${unmet.values.length > 5 ? ', …' : ''}`;
      throw new ProblemError('IAM_OIDC_LOGIN_FAILED', `This account may not sign in here: its "${unmet.claim}" claim ${wanted} (iam.oidc.allowed).`);
    }
    const identity = this.identityOf(claims);
    const rules = this.deps.claims.profiles ?? [];
    const outcomes = evaluateRules(claims, rules);
    const profileClaim = this.deps.claims.profile;
    const preferred = profileClaim !== null && typeof claims[profileClaim] === 'string' ? (claims[profileClaim] as string) : null;
    const result = await this.deps.login.loginVerified(identity, this.deps.clientType, facts, {
      username: String(claims.sub).slice(0, 200),
      authenticator: 'oidc',
      mustExist: this.deps.claims.users === 'existing',
      attach: attachRule(claims, identity, this.deps.claims.linkBy),
      preferredProfileId: preferred,
      idpSessionId: typeof claims.sid === 'string' ? claims.sid : null,
      idpIdToken: idToken,
      ...(rules.length > 0 ? { projection: { of: (held: ReadonlySet<string>) => projectProfiles(outcomes, identity.userId, held), audit: { actorUserId: 'oidc', source: 'iam.oidc.profiles' } } } : {}),
    });
    this.reportSkipped(outcomes, result, facts);
    return result;
  }

  /**
   * A rule whose `when` the claims meet but which cannot apply leaves the user without the profile the operator
   * meant them to have, and a sign-in that succeeds without one is otherwise silent: each such rule is logged at warn
   * and audited (`oidc.claim-rule.skipped`), with the rule and the claim it missed, never a claim's value.
   */
  private reportSkipped(outcomes: readonly RuleOutcome[], result: AuthenticationResult, facts: RequestFacts): void {
    for (const outcome of outcomes) {
      if (outcome.status !== 'skipped') continue;
      const { rule, claim, reason } = outcome;
      this.deps.logger.warn(
        { rule: rule.name, claim, reason, userId: result.principal.userId, requestId: facts.requestId },
        `iam.oidc.profiles rule "${rule.name}" skipped at sign-in: its scope claim "${claim}" ${SKIP_WORDS[reason]}`,
      );
      this.deps.audit.record({
        action: 'oidc.claim-rule.skipped',
        actorUserId: result.principal.userId,
        targetType: 'user',
        targetId: result.principal.userId,
        outcome: 'failure',
        requestId: facts.requestId,
        clientAddress: facts.clientAddress,
        details: { rule: rule.name, claim, reason, sessionId: result.sessionId },
      });
    }
  }

  /** The principal's identity from the claims (`iam.oidc.claims.*`); a missing or unusable claim refuses the login. */
  identityOf(claims: JWTPayload): AuthenticatedIdentity {
    return identityFromClaims(claims, this.deps.claims, this.deps.rp.issuer);
  }
}

/** Shared by the login and the JWT access tokens: the same claims name the same principal. */
export function identityFromClaims(claims: JWTPayload, mapping: Pick<ClaimMapping, 'userId' | 'identityDomain'>, issuer: string): AuthenticatedIdentity {
  const subject = claims.sub;
  const userId = claims[mapping.userId];
  const domain = mapping.identityDomain === null ? issuer : claims[mapping.identityDomain];
  const displayName = [claims.name, claims.preferred_username, claims.email].find((value) => typeof value === 'string' && value.length > 0 && value.length <= 200);
  const checked = checkAuthenticatedIdentity({
    userId: typeof userId === 'number' ? String(userId) : userId,
    identityId: typeof subject === 'string' ? oidcIdentityId(subject) : undefined,
    identityDomain: domain,
    ...(displayName !== undefined ? { displayName } : {}),
  });
  if ('error' in checked) {
    throw new ProblemError('IAM_OIDC_LOGIN_FAILED', `The identity provider's claims do not name a usable user (claims ${mapping.userId}, sub${mapping.identityDomain ? `, ${mapping.identityDomain}` : ''}: ${checked.error.replace('authenticator answer ', '')}).`);
  }
  return checked.identity;
}
