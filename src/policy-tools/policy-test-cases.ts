/**
 * The case files of `policy test` (docs/policy-format.md): `<policies>/tests/*.yaml`, parsed with line numbers and
 * validated case by case (ajv, unknown keys refused), so one broken case does not keep the others from
 * running and every problem points at its file and line.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import { LineCounter, parseDocument } from 'yaml';
import { yamlErrorReports } from '../policy/yaml-errors';
import { isValidPermissionCode } from '../domain/permission-code';
import type { ScopeRecord } from '../domain/records';
import { displayPath, pointerSegments } from '../domain/schema-errors';
import type { PolicyIssue } from '../policy/compiled-policy';
import { locateNode } from '../policy/policy-parser';

/** A principal described by its permissions: one unscoped or scoped profile made up for the case. */
export interface PermissionsPrincipal {
  permissions: string[];
  scopes?: ScopeRecord[];
  /** The session's client type; default `WEB`. */
  clientType?: string;
  /** The identity domain; default `example.com`. */
  domain?: string;
}

/** A principal taken from a provisioning file: the user's `profile`, or the one a login would pick. */
export interface UserPrincipal {
  user: string;
  profile?: string;
  clientType?: string;
}

/**
 * Resolver answers: type → id → scope refs, an HTTP status (404 = not found), `down`, or `{body}`: the 200 answer's
 * JSON, read as the policy's resolver reads it (its `self` or `scopes` pointers, else the `{scopes}` document).
 */
export type ResolverAnswers = Record<string, Record<string, Array<{ type: string; id: string | number }> | number | 'down' | { body: unknown }>>;

/** One case of a `tests/*.yaml` file. */
export interface PolicyTestCase {
  name: string;
  request: { method: string; path: string };
  /** null = no session (anonymous). */
  principal: PermissionsPrincipal | UserPrincipal | null;
  resolvers?: ResolverAnswers;
  /** `allow`, `deny`, a step code (`SCOPE_DENIED`, `ROUTE_NOT_DECLARED`, …) or the status the gateway answers. */
  expect: string | number;
}

/** The failed-step codes an `expect` may name. */
export const STEP_CODES = [
  'UNAUTHENTICATED', 'NO_ACTIVE_PROFILE', 'DOMAIN_MISMATCH', 'CLIENT_TYPE_MISMATCH', 'PERMISSION_DENIED',
  'RESOURCE_NOT_FOUND', 'RESOURCE_RESOLUTION_UNAVAILABLE', 'SCOPE_DENIED', 'ROUTE_NOT_DECLARED',
];
const TEST_EXTENSIONS = ['.yaml', '.yml'];

const scopeSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['scopeType', 'scopeRefId', 'accessMode'],
  properties: { scopeType: { type: 'string', minLength: 1 }, scopeRefId: { type: 'string', minLength: 1 }, accessMode: { enum: ['READ', 'WRITE'] } },
};
const caseSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'request', 'principal', 'expect'],
  properties: {
    name: { type: 'string', minLength: 1 },
    request: {
      type: 'object',
      additionalProperties: false,
      required: ['method', 'path'],
      properties: { method: { type: 'string', pattern: '^[A-Za-z]{1,20}$' }, path: { type: 'string', minLength: 1, maxLength: 8192 } },
    },
    principal: { type: ['object', 'null'] },
    resolvers: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        additionalProperties: {
          anyOf: [
            {
              type: 'array',
              items: {
                type: 'object',
                additionalProperties: false,
                required: ['type', 'id'],
                properties: { type: { type: 'string', minLength: 1 }, id: { type: ['string', 'integer'] } },
              },
            },
            { type: 'integer', minimum: 100, maximum: 599 },
            { const: 'down' },
            { type: 'object', additionalProperties: false, required: ['body'], properties: { body: {} } },
          ],
        },
      },
    },
    expect: { anyOf: [{ enum: ['allow', 'deny', ...STEP_CODES] }, { type: 'integer', minimum: 100, maximum: 599 }] },
  },
};
const caseFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['cases'],
  properties: { cases: { type: 'array', minItems: 1, items: { type: 'object' } } },
};
const permissionsPrincipalSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['permissions'],
  properties: {
    permissions: { type: 'array', items: { type: 'string' } },
    scopes: { type: 'array', items: scopeSchema },
    clientType: { type: 'string', minLength: 1 },
    domain: { type: 'string', minLength: 1 },
  },
};
const userPrincipalSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['user'],
  properties: { user: { type: 'string', minLength: 1 }, profile: { type: 'string', minLength: 1 }, clientType: { type: 'string', minLength: 1 } },
};

/** Compiled once, on first use (pure functions, not connections). */
let validators: { file: ValidateFunction; testCase: ValidateFunction; permissions: ValidateFunction; user: ValidateFunction } | null = null;
function compiledValidators(): NonNullable<typeof validators> {
  if (validators === null) {
    const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
    validators = { file: ajv.compile(caseFileSchema), testCase: ajv.compile(caseSchema), permissions: ajv.compile(permissionsPrincipalSchema), user: ajv.compile(userPrincipalSchema) };
  }
  return validators;
}

// ---------------------------------------------------------------- reading and validating case files

/** Reads the case files of `testsDir` (sorted; dot files skipped); unreadable ones become problems. */
export async function readPolicyTestFiles(testsDir: string, problems: PolicyIssue[]): Promise<Array<{ file: string; text: string }>> {
  let names: string[];
  try {
    names = await readdir(testsDir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    problems.push({ severity: 'error', kind: 'test', message: code === 'ENOENT' ? `no test directory ${testsDir}` : `cannot read ${testsDir}: ${code}`, source: null });
    return [];
  }
  const files: Array<{ file: string; text: string }> = [];
  for (const name of names.sort()) {
    if (name.startsWith('.') || !TEST_EXTENSIONS.some((extension) => name.endsWith(extension))) continue;
    const path = join(testsDir, name);
    try {
      if (!(await stat(path)).isFile()) continue;
      files.push({ file: name, text: await readFile(path, 'utf8') });
    } catch (error) {
      problems.push({ severity: 'error', kind: 'test', message: `cannot read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, source: { file: `tests/${name}`, line: 1 } });
    }
  }
  if (files.length === 0 && problems.length === 0) {
    problems.push({ severity: 'error', kind: 'test', message: `no test files (*.yaml) in ${testsDir}`, source: null });
  }
  return files;
}

/** One case, or why it cannot run; `line` is the line of the case entry. */
export type ParsedCase = { testCase: PolicyTestCase; line: number; problem?: undefined } | { testCase?: undefined; line: number; problem: PolicyIssue };

/** Parses and validates one case file; file-level problems go to `problems`, case-level ones come back per case. */
export function parsePolicyTestCases(file: string, text: string, problems: PolicyIssue[]): ParsedCase[] {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: true });
  const lineOf = (path: ReadonlyArray<string | number>): number => {
    const node = locateNode(doc, path);
    const offset = node?.range?.[0];
    return offset === undefined ? 1 : lineCounter.linePos(offset).line;
  };
  const issue = (message: string, line: number): PolicyIssue => ({ severity: 'error', kind: 'test', message, source: { file, line } });
  if (doc.errors.length > 0) {
    for (const error of yamlErrorReports(text, doc.errors)) problems.push(issue(error.message, error.line));
    return [];
  }
  const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
  const { file: validateFile, testCase: validateCase, permissions: validatePermissions, user: validateUser } = compiledValidators();
  if (!validateFile(value)) {
    problems.push(schemaIssue(validateFile.errors![0], [], lineOf, issue));
    return [];
  }
  const cases = (value as { cases: unknown[] }).cases;
  // Case by case: one broken case does not keep the others from running.
  return cases.map((raw, index): ParsedCase => {
    const at: Array<string | number> = ['cases', index];
    const line = lineOf(at);
    if (!validateCase(raw)) return { line, problem: schemaIssue(preferred(validateCase.errors!), at, lineOf, issue) };
    const testCase = raw as PolicyTestCase;
    const principal = testCase.principal;
    if (principal !== null) {
      const validate = 'user' in principal ? validateUser : validatePermissions;
      if (!validate(principal)) return { line, problem: schemaIssue(preferred(validate.errors!), [...at, 'principal'], lineOf, issue) };
      const bad = 'permissions' in principal ? principal.permissions.find((code) => !isValidPermissionCode(code)) : undefined;
      if (bad !== undefined) return { line, problem: issue(`cases[${index}].principal.permissions: "${bad}" is not a permission code <resource>:<action>`, lineOf([...at, 'principal', 'permissions'])) };
    }
    return { testCase, line };
  });
}

/**
 * The error worth showing: an `anyOf` says more than its first failed branch, and an unknown key (a typo)
 * explains the "missing required key" that usually comes with it.
 */
function preferred(errors: ErrorObject[]): ErrorObject {
  return errors.find((error) => error.keyword === 'anyOf') ?? errors.find((error) => error.keyword === 'additionalProperties') ?? errors[0];
}

function schemaIssue(
  error: ErrorObject,
  base: ReadonlyArray<string | number>,
  lineOf: (path: ReadonlyArray<string | number>) => number,
  issue: (message: string, line: number) => PolicyIssue,
): PolicyIssue {
  const path = [...base, ...pointerSegments(error.instancePath)];
  const shown = displayPath(path);
  if (error.keyword === 'additionalProperties') {
    const key = String(error.params.additionalProperty);
    return issue(`${shown}: unknown key "${key}"`, lineOf([...path, key]));
  }
  if (error.keyword === 'required') return issue(`${shown}: missing required key "${String(error.params.missingProperty)}"`, lineOf(path));
  if (path.includes('resolvers') && path.length === base.length + 3) {
    return issue(`${shown}: must be a list of {type, id}, an HTTP status (404 = not found), "down" or {body: <the host's 200 answer>}`, lineOf(path));
  }
  if (path[path.length - 1] === 'expect') return issue(`${shown}: must be allow, deny, a step code (${STEP_CODES.join(', ')}) or an HTTP status`, lineOf(path));
  return issue(`${shown}: ${error.message ?? 'is invalid'}`, lineOf(path));
}

