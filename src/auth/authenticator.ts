import type { ProvisioningDocument } from '../domain/records';

/** The login body. */
export interface LoginRequest {
  username: string;
  password: string;
  clientType: string;
}

/** Profiles a host may project at login (the `profiles` of an `http` authenticator's answer). */
export type ProjectedProfiles = NonNullable<NonNullable<ProvisioningDocument['users']>[number]['profiles']>;

/** Who the host says the user is. */
export interface AuthenticatedIdentity {
  userId: string;
  identityId: string;
  identityDomain: string;
  displayName?: string;
  profiles?: ProjectedProfiles;
}

/** What the gateway knows about a login besides its body (not sent to a host's authenticator). */
export interface LoginContext {
  /** The client's address (trusted-proxy rule): the password queue serves addresses in turn. */
  clientAddress: string | null;
}

export type AuthenticationOutcome =
  | { kind: 'accepted'; identity: AuthenticatedIdentity }
  | { kind: 'rejected'; reason: 'invalid-credentials' | 'disabled' };

/**
 * The authenticator seam: maps the host's existing login to a principal. `Type` is the `iam.authenticator.type` it is
 * registered under (authenticators/registry.ts; `IdentityAuthenticator` there is this with the registered types).
 * Implementations must take about the same time for unknown users, wrong passwords and disabled users.
 * They throw a ProblemError `IAM_AUTHENTICATOR_UNAVAILABLE` when the host cannot answer.
 */
export interface Authenticator<Type extends string = string> {
  readonly type: Type;
  authenticate(request: LoginRequest, context?: LoginContext): Promise<AuthenticationOutcome>;
  close?(): Promise<void>;
  /**
   * Password verifications so far that found no idle CPU on their SCHED_IDLE thread in time and were moved to the
   * thread's nice value (auth/password-verifier-pool.ts); absent where the gateway verifies no passwords itself.
   */
  starvedVerifications?(): number;
}
