/**
 * Create-missing versus overwrite for provisioning documents (docs/threat-model.md #11.22): start-time
 * provisioning and a plain `iam-gateway provision FILE` only create what is missing; `--overwrite` syncs.
 */

export interface ProvisioningOptions {
  /** True: existing objects are updated to match the document. False: only missing objects are created. */
  overwrite: boolean;
  /** Audit each change with this actor; null writes no audit rows (an authenticator's login projection). */
  audit: { actorUserId: string; source: string } | null;
}

/** The login projection's mode: the authenticator is the authority for the profiles it projects. */
export const OVERWRITE_UNAUDITED: ProvisioningOptions = Object.freeze({ overwrite: true, audit: null });

/** One object a provisioning run created or updated (fields: what changed). */
export interface ProvisioningChange {
  kind: string;
  id: string;
  action: 'create' | 'update';
  fields: string[];
}
