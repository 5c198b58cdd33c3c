import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { isNode, LineCounter, parseDocument } from 'yaml';
import { yamlErrorReports } from '../policy/yaml-errors';
import { HEADER_SAFE_PATTERN, IDENTIFIER_PATTERN, projectedProfileSchema } from './identity-validation';
import { MAX_TEMPLATE_PERMISSIONS } from '../domain/grant-limits';
import { isValidPermissionCode } from '../domain/permission-code';
import type { ProvisioningDocument } from '../domain/records';
import { pointerErrors } from '../domain/schema-errors';

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
                identityDomain: { type: 'string', pattern: HEADER_SAFE_PATTERN },
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

/** One problem of a provisioning file: where (JSON pointer, and the line when the file is known) and what. */
export interface ProvisioningFileProblem {
  pointer: string;
  message: string;
  /** 1-based line in the file (of the value, or of its parent when the value is missing). */
  line?: number;
}

/** A provisioning file that cannot be applied; the message lists every problem, one per line (`file:line: …`). */
export class ProvisioningFileError extends Error {
  constructor(
    message: string,
    readonly problems: ProvisioningFileProblem[],
  ) {
    super(message);
    this.name = 'ProvisioningFileError';
  }
}

export interface ProvisioningCheckOptions {
  /** `iam.client-types`: a profile naming another client type is refused (it could never be active). */
  clientTypes?: readonly string[];
}

/**
 * Checks a provisioning document's shape, permission codes and client types; throws ProvisioningFileError
 * listing every problem at once (`locate` turns a pointer into a line of the file it came from).
 */
export function validateProvisioningDocument(
  document: unknown,
  origin: string,
  options: ProvisioningCheckOptions = {},
  locate: (pointer: string) => number | undefined = () => undefined,
): ProvisioningDocument {
  const validate = new Ajv({ allErrors: true }).compile(provisioningSchema);
  const doc = document ?? {};
  const problems: ProvisioningFileProblem[] = validate(doc) ? [] : pointerErrors(validate.errors ?? []);
  // What the schema cannot say, checked wherever the shape allows it, so one run reports everything.
  const { templates, users } = doc as { templates?: unknown; users?: unknown };
  if (Array.isArray(templates)) {
    templates.forEach((template: unknown, t) => {
      const codes = (template as { permissions?: unknown } | null)?.permissions;
      if (!Array.isArray(codes)) return;
      codes.forEach((code: unknown, p) => {
        if (typeof code === 'string' && !isValidPermissionCode(code)) problems.push({ pointer: `/templates/${t}/permissions/${p}`, message: `"${code}" is not a permission code <resource>:<action>` });
      });
    });
  }
  const allowed = options.clientTypes ? new Set(options.clientTypes) : null;
  if (allowed && Array.isArray(users)) {
    users.forEach((user: unknown, u) => {
      const profiles = (user as { profiles?: unknown } | null)?.profiles;
      if (!Array.isArray(profiles)) return;
      profiles.forEach((profile: unknown, p) => {
        const types = (profile as { clientTypes?: unknown } | null)?.clientTypes;
        if (!Array.isArray(types)) return;
        types.forEach((type: unknown, c) => {
          if (typeof type === 'string' && !allowed.has(type)) {
            problems.push({ pointer: `/users/${u}/profiles/${p}/clientTypes/${c}`, message: `"${type}" is not one of iam.client-types (${[...allowed].join(', ')})` });
          }
        });
      });
    });
  }
  if (problems.length > 0) throw provisioningFileError(origin, problems.map((problem) => ({ ...problem, line: locate(problem.pointer) })));
  return doc as ProvisioningDocument;
}

/** The error listing `problems` of `origin`, one per line, each `origin:line: pointer message` when the line is known. */
export function provisioningFileError(origin: string, found: ProvisioningFileProblem[]): ProvisioningFileError {
  // In file order (the sort is stable; problems without a line come last).
  const problems = [...found].sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
  const lines = problems.map((p) => `  ${origin}${p.line !== undefined ? `:${p.line}` : ''}: ${p.pointer} ${p.message}`);
  return new ProvisioningFileError(`${origin}: ${problems.length} problem(s), nothing was applied:\n${lines.join('\n')}`, problems);
}

/** A provisioning file as read: the document, and where each JSON pointer of it sits in the file. */
export interface ProvisioningFile {
  path: string;
  document: ProvisioningDocument;
  /** The 1-based line of the value at `pointer` (or of its nearest parent that exists). */
  lineOf(pointer: string): number | undefined;
}

/** Reads and checks a provisioning YAML file; every problem is reported at once with its line. */
export function loadProvisioningFile(path: string, options: ProvisioningCheckOptions = {}): ProvisioningFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ProvisioningFileError(`provisioning file ${path}: ${(error as Error).message}`, []);
  }
  const lineCounter = new LineCounter();
  const parsed = parseDocument(text, { prettyErrors: true, lineCounter });
  if (parsed.errors.length > 0) {
    // The first error and a few after it: one slip makes the library report every line below it.
    const found = yamlErrorReports(text, parsed.errors).map((error) => ({ pointer: '', message: error.message, line: error.line }));
    throw provisioningFileError(path, found);
  }
  const lineOf = (pointer: string): number | undefined => {
    const segments = pointer.split('/').slice(1).map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
    for (let length = segments.length; length >= 0; length--) {
      const path = segments.slice(0, length).map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
      const node = length === 0 ? parsed.contents : parsed.getIn(path, true);
      if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
    }
    return undefined;
  };
  const document = validateProvisioningDocument(parsed.toJS(), path, options, lineOf);
  return { path, document, lineOf };
}

/** Reads a provisioning YAML file and returns its document (see {@link loadProvisioningFile}). */
export function readProvisioningFile(path: string, options: ProvisioningCheckOptions = {}): ProvisioningDocument {
  return loadProvisioningFile(path, options).document;
}
