import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { IDENTIFIER_PATTERN, projectedProfileSchema } from '../auth/identity-validation';
import { MAX_TEMPLATE_PERMISSIONS } from '../domain/grant-limits';
import { isValidPermissionCode } from '../domain/permission-code';
import type { ProvisioningDocument } from '../domain/records';
import { toPointerErrors } from './validate-body';

/** JSON Schema of the provisioning file; the admin API bodies are its pieces. */
export const provisioningSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    templates: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['versionId', 'name', 'permissions'],
        properties: {
          versionId: { type: 'string', pattern: IDENTIFIER_PATTERN },
          name: { type: 'string', minLength: 1, maxLength: 200 },
          description: { type: 'string', maxLength: 2000 },
          permissions: { type: 'array', items: { type: 'string', minLength: 3, maxLength: 200 }, uniqueItems: true, maxItems: MAX_TEMPLATE_PERMISSIONS },
        },
      },
    },
    users: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['userId'],
        properties: {
          userId: { type: 'string', pattern: IDENTIFIER_PATTERN },
          displayName: { type: 'string', maxLength: 200 },
          enabled: { type: 'boolean' },
          identities: {
            type: 'array',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['identityId', 'identityDomain'],
              properties: {
                identityId: { type: 'string', pattern: IDENTIFIER_PATTERN },
                identityDomain: { type: 'string', pattern: IDENTIFIER_PATTERN },
                enabled: { type: 'boolean' },
              },
            },
          },
          profiles: { type: 'array', items: projectedProfileSchema },
        },
      },
    },
  },
} as const;

export class ProvisioningFileError extends Error {
  constructor(
    message: string,
    readonly problems: Array<{ pointer: string; message: string }>,
  ) {
    super(message);
    this.name = 'ProvisioningFileError';
  }
}

/** Checks a provisioning document's shape and permission codes; throws ProvisioningFileError listing every problem. */
export function validateProvisioningDocument(document: unknown, origin: string): ProvisioningDocument {
  const validate = new Ajv({ allErrors: true }).compile(provisioningSchema);
  if (!validate(document ?? {})) {
    const found = toPointerErrors(validate.errors ?? []);
    throw new ProvisioningFileError(`${origin}: ${found.map((p) => `${p.pointer} ${p.message}`).join('; ')}`, found);
  }
  const doc = (document ?? {}) as ProvisioningDocument;
  const problems: Array<{ pointer: string; message: string }> = [];
  doc.templates?.forEach((template, t) =>
    template.permissions.forEach((code, p) => {
      if (!isValidPermissionCode(code)) problems.push({ pointer: `/templates/${t}/permissions/${p}`, message: `"${code}" is not a permission code <resource>:<action>` });
    }),
  );
  if (problems.length > 0) throw new ProvisioningFileError(`${origin}: ${problems.map((p) => `${p.pointer} ${p.message}`).join('; ')}`, problems);
  return doc;
}

/** Reads a provisioning YAML file; parse errors name the line. */
export function readProvisioningFile(path: string): ProvisioningDocument {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ProvisioningFileError(`provisioning file ${path}: ${(error as Error).message}`, []);
  }
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length > 0) {
    const found = document.errors.map((e) => ({ pointer: `line ${e.linePos?.[0]?.line ?? '?'}`, message: e.message.split('\n')[0] ?? e.message }));
    throw new ProvisioningFileError(`provisioning file ${path}: ${found.map((p) => `${p.pointer}: ${p.message}`).join('; ')}`, found);
  }
  return validateProvisioningDocument(document.toJS(), `provisioning file ${path}`);
}
