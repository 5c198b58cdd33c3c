import type { IdentityEntity } from './entities/identity-entity';
import type { PermissionTemplateEntity } from './entities/permission-template-entity';
import type { ProfileEntity } from './entities/profile-entity';
import type { ProvisioningDocument } from '../../domain/records';

/** What the database holds for the ids a provisioning document mentions (read before anything is written). */
export interface StoredProvisioningState {
  templates: Map<string, PermissionTemplateEntity>;
  identities: Map<string, IdentityEntity>;
  profiles: Map<string, ProfileEntity>;
}

export type ProvisioningProblem = { pointer: string; message: string };

const isId = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/** Records the first pointer of each id and reports later duplicates against it. */
class FirstSeen {
  private readonly pointers = new Map<string, string>();
  constructor(
    private readonly label: string,
    private readonly problems: ProvisioningProblem[],
  ) {}

  /** `shown`: how the message names it, when `id` is a key built from parts. */
  check(id: string, pointer: string, shown = id): void {
    const first = this.pointers.get(id);
    if (first === undefined) this.pointers.set(id, pointer);
    else this.problems.push({ pointer, message: `duplicate ${this.label} "${shown}" (first at ${first})` });
  }
}

/**
 * Referential checks of a provisioning document against itself and the stored state; every problem is
 * reported at once, each with an RFC 6901 JSON pointer. Shape checks (types, unknown keys) belong to the
 * schema at the edge; only what a schema cannot see is checked here: duplicates, unknown templates, and
 * identities or profiles that already belong to another user.
 */
export function validateProvisioning(document: ProvisioningDocument, stored: StoredProvisioningState): ProvisioningProblem[] {
  const problems: ProvisioningProblem[] = [];
  const templateIds = new FirstSeen('template versionId', problems);
  const userIds = new FirstSeen('userId', problems);
  const identityIds = new FirstSeen('identityId', problems);
  const profileIds = new FirstSeen('profileId', problems);
  const documentTemplates = new Set<string>();

  (document.templates ?? []).forEach((template, t) => {
    const pointer = `/templates/${t}`;
    if (!isId(template.versionId)) problems.push({ pointer: `${pointer}/versionId`, message: 'must be a non-empty string' });
    else {
      templateIds.check(template.versionId, `${pointer}/versionId`);
      documentTemplates.add(template.versionId);
    }
    if (!Array.isArray(template.permissions) || !template.permissions.every(isId)) {
      problems.push({ pointer: `${pointer}/permissions`, message: 'must be a list of permission codes' });
    }
  });

  (document.users ?? []).forEach((user, u) => {
    const pointer = `/users/${u}`;
    if (!isId(user.userId)) {
      problems.push({ pointer: `${pointer}/userId`, message: 'must be a non-empty string' });
      return;
    }
    userIds.check(user.userId, `${pointer}/userId`);

    (user.identities ?? []).forEach((identity, i) => {
      const at = `${pointer}/identities/${i}/identityId`;
      if (!isId(identity.identityId)) {
        problems.push({ pointer: at, message: 'must be a non-empty string' });
        return;
      }
      identityIds.check(identity.identityId, at);
      const owner = stored.identities.get(identity.identityId)?.user.userId;
      if (owner !== undefined && owner !== user.userId) {
        problems.push({ pointer: at, message: `identity "${identity.identityId}" belongs to user "${owner}"` });
      }
    });

    (user.profiles ?? []).forEach((profile, p) => {
      const at = `${pointer}/profiles/${p}`;
      if (!isId(profile.profileId)) {
        problems.push({ pointer: `${at}/profileId`, message: 'must be a non-empty string' });
      } else {
        profileIds.check(profile.profileId, `${at}/profileId`);
        const owner = stored.profiles.get(profile.profileId)?.user.userId;
        if (owner !== undefined && owner !== user.userId) {
          problems.push({ pointer: `${at}/profileId`, message: `profile "${profile.profileId}" belongs to user "${owner}"` });
        }
      }
      if (!documentTemplates.has(profile.templateVersionId) && !stored.templates.has(profile.templateVersionId)) {
        problems.push({
          pointer: `${at}/templateVersionId`,
          message: `unknown template version "${String(profile.templateVersionId)}" (neither in the document nor stored)`,
        });
      }
      const scopeKeys = new FirstSeen('scope', problems);
      (profile.scopes ?? []).forEach((scope, s) => {
        // Scope types and ids may hold `/` (any visible ASCII), never NUL: type A/B + id C is not type A + id B/C.
        scopeKeys.check(`${scope.scopeType}\u0000${scope.scopeRefId}`, `${at}/scopes/${s}`, `${scope.scopeType} ${scope.scopeRefId}`);
        if (scope.accessMode !== 'READ' && scope.accessMode !== 'WRITE') {
          problems.push({ pointer: `${at}/scopes/${s}/accessMode`, message: 'must be READ or WRITE' });
        }
      });
    });
  });
  return problems;
}
