/** The authenticated user as the gateway sees it (docs/http-contract.md). */
export interface IamPrincipal {
  userId: string;
  identityId: string;
  identityDomain: string;
  /** The profile whose permissions this session carries; `null` when the user has none for the client type. */
  activeProfileId: string | null;
  displayName?: string;
  /** The user's authorization version when the session was issued or last refreshed. */
  authorizationVersion: number;
}
