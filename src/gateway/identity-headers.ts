import type { IamPrincipal } from '../domain/principal';
import type { AuthorizationDecision, FailedStepCode } from '../authz/decision';

/** What a decision lets the gateway tell the host: only what it verified. */
export interface ForwardedAuthorization {
  /** The active profile, only when the decision checked it (a passed PROFILE_ACTIVE step). */
  profileId: string | null;
  /** The permission, only when the decision granted it (allowed, not a shadow denial). */
  permission: string | null;
  /** The step a shadow route would have denied at (the request went through unenforced), else null. */
  shadowDenied: FailedStepCode | null;
}

/** The host-facing header naming a shadow denial (its value is the failed step code). */
export const SHADOW_DENIED_HEADER = 'X-IAM-Shadow-Denied';

/**
 * Reads {@link ForwardedAuthorization} from a decision. A shadow denial forwards no permission (the user
 * lacks it, or lacks it on this resource) and no unverified profile; it names the failed step instead.
 */
export function forwardedAuthorization(decision: AuthorizationDecision | null): ForwardedAuthorization {
  if (decision === null) return { profileId: null, permission: null, shadowDenied: null };
  let profileVerified = false;
  for (const step of decision.steps) {
    if (step.code === 'PROFILE_ACTIVE' && step.passed) {
      profileVerified = true;
      break;
    }
  }
  const denied = decision.shadowed || !decision.allowed;
  return {
    profileId: profileVerified ? decision.profileId : null,
    permission: denied ? null : decision.permissionCode,
    shadowDenied: decision.shadowed ? decision.failedStep : null,
  };
}

/**
 * The headers that tell the host who is calling (docs/http-contract.md). Values come from validated identifiers
 * (visible ASCII only, see auth/identity-validation.ts), so no value can break a header line. Without a
 * session (anonymous request) only a shadow denial is reported.
 */
export function identityHeaders(
  principal: IamPrincipal | null,
  sessionId: string | null,
  forwarded: ForwardedAuthorization,
  assertion: string | null,
): Array<readonly [string, string]> {
  const headers: Array<readonly [string, string]> = [];
  if (principal !== null && sessionId !== null) {
    headers.push(
      ['X-IAM-User-Id', principal.userId],
      ['X-IAM-Identity-Id', principal.identityId],
      ['X-IAM-Identity-Domain', principal.identityDomain],
      ['X-IAM-Session-Id', sessionId],
    );
    if (forwarded.profileId !== null) headers.push(['X-IAM-Profile-Id', forwarded.profileId]);
    if (forwarded.permission !== null) headers.push(['X-IAM-Permission', forwarded.permission]);
  }
  if (forwarded.shadowDenied !== null) headers.push([SHADOW_DENIED_HEADER, forwarded.shadowDenied]);
  if (assertion !== null) headers.push(['X-IAM-Assertion', assertion]);
  return headers;
}
