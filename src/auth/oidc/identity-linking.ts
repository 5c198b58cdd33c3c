import type { JWTPayload } from 'jose';
import type { IdentityAttach } from '../../domain/iam-repository';
import type { AuthenticatedIdentity } from '../authenticator';

/** `iam.oidc.link-by`: what, besides an admin, may join a new provider account to a user that already exists. */
export type LinkBy = 'none' | 'verified-email';

/**
 * Whether the provider account these claims describe may join a user that already exists, when the gateway has
 * not seen the account (`oidc:<sub>`) before.
 *
 * Only `iss` and `sub` together identify an account (OpenID Connect Core 1.0 §5.7): every other claim may be
 * chosen by the user, changed, or reassigned to someone else, so by default (`none`) a new account never joins an
 * existing user — an admin or provisioning links it (creates the identity `oidc:<sub>` for the user). With
 * `verified-email` it joins when the provider says it verified the address (`email_verified` is the boolean `true`,
 * not a string) and the userId the claims name *is* that address: then the user named is the mailbox the provider
 * proved. Even so, only as the user's first identity in this identity domain: a second provider account with the
 * same address (a reassigned or duplicated address) does not take over a user who already has one there.
 */
export function attachRule(claims: JWTPayload, identity: AuthenticatedIdentity, linkBy: LinkBy): IdentityAttach {
  if (linkBy !== 'verified-email') return 'new-user';
  const verified = claims.email_verified === true && typeof claims.email === 'string' && claims.email === identity.userId;
  return verified ? 'first-in-domain' : 'new-user';
}
