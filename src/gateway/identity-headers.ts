import type { IamPrincipal } from '../auth/principal';

/**
 * The headers that tell the host who is calling (design.md §4.3). Values come from validated identifiers
 * (visible ASCII only, see auth/identity-validation.ts), so no value can break a header line.
 */
export function identityHeaders(
  principal: IamPrincipal,
  sessionId: string,
  permissionCode: string | null,
  assertion: string | null,
): Array<readonly [string, string]> {
  const headers: Array<readonly [string, string]> = [
    ['X-IAM-User-Id', principal.userId],
    ['X-IAM-Identity-Id', principal.identityId],
    ['X-IAM-Identity-Domain', principal.identityDomain],
    ['X-IAM-Session-Id', sessionId],
  ];
  if (principal.activeProfileId !== null) headers.push(['X-IAM-Profile-Id', principal.activeProfileId]);
  if (permissionCode !== null) headers.push(['X-IAM-Permission', permissionCode]);
  if (assertion !== null) headers.push(['X-IAM-Assertion', assertion]);
  return headers;
}
