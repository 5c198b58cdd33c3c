/**
 * `policy test` (docs/policy-format.md): YAML cases from `<policies>/tests/*.yaml` decided by the gateway's own DecisionEngine,
 * with the request path normalized exactly as the proxy does. Grants come from the case (compiled by the
 * same `compileGrant`) or from a provisioning file; resolvers are stubs answering from the case, so a run
 * needs no database, no token store and no network.
 */
import { join } from 'node:path';
import type { IamPrincipal } from '../domain/principal';
import { compileGrant, type CompiledGrant } from '../authz/ability-compiler';
import type { AuthorizationDecision } from '../authz/decision';
import { DecisionEngine, type DecisionSubject } from '../authz/decision-engine';
import { scopesOfAnswer } from '../authz/answer-scopes';
import type { ResolveResult } from '../authz/resource-resolver';
import { decodeResourceId } from '../authz/resource-url';
import { normalizeRequestTarget } from '../http/normalize-target';
import type { ProvisioningDocument } from '../domain/records';
import type { CompiledPolicy, PolicyIssue, ResourceResolverConfig } from '../policy/compiled-policy';
import { parsePolicyTestCases, readPolicyTestFiles, type PolicyTestCase, type ResolverAnswers } from './policy-test-cases';

export type { PermissionsPrincipal, PolicyTestCase, ResolverAnswers, UserPrincipal } from './policy-test-cases';

/** The outcome of one case. */
export interface PolicyTestResult {
  /** Test file relative to the policies directory, e.g. `tests/example.test.yaml`. */
  file: string;
  line: number;
  name: string;
  passed: boolean;
  expected: string;
  /** What happened, in the vocabulary of `expect`. */
  actual: string;
  /** The engine's decision; null when the path was refused or the case could not run. */
  decision: AuthorizationDecision | null;
  /** Why the case could not run (unknown user, unreadable provisioning file, …). */
  error?: string;
}

export interface PolicyTestReport {
  results: PolicyTestResult[];
  /** Problems of the test files themselves (YAML, schema), each with file and line; each counts as a failure. */
  problems: PolicyIssue[];
  passed: number;
  failed: number;
}

export interface PolicyTestOptions {
  policy: CompiledPolicy;
  /** The policies directory: cases are read from its `tests/` subdirectory. */
  dir: string;
  /** The provisioning document for `principal: { user }` cases; called at most once, only when needed. */
  provisioning?: () => ProvisioningDocument;
  /** Where the provisioning document comes from, for messages. */
  provisioningOrigin?: string;
  /** `iam.gateway.allow-path-parameters`, as the proxy normalizes with it. */
  allowPathParameters?: boolean;
}


/** Runs every case of `<dir>/tests/*.yaml` against `policy`. Never throws on bad input: it becomes a problem. */
export async function runPolicyTests(options: PolicyTestOptions): Promise<PolicyTestReport> {
  const problems: PolicyIssue[] = [];
  const results: PolicyTestResult[] = [];
  const files = await readPolicyTestFiles(join(options.dir, 'tests'), problems);
  const provisioning = memoize(options.provisioning);
  for (const { file, text } of files) {
    for (const { testCase, line, problem } of parsePolicyTestCases(`tests/${file}`, text, problems)) {
      if (problem) {
        problems.push(problem);
        continue;
      }
      results.push(await runCase(`tests/${file}`, line, testCase, options, provisioning));
    }
  }
  if (files.length > 0 && results.length === 0 && problems.length === 0) {
    problems.push({ severity: 'error', kind: 'test', message: 'no test cases found', source: null });
  }
  const passed = results.filter((result) => result.passed).length;
  return { results, problems, passed, failed: results.length - passed + problems.length };
}

/**
 * The report as lines: a `FAIL file:line: name: expected …, got …` line per failed case (with the route
 * and the decision's steps), each test-file problem, and `N passed, N failed`. `verbose` adds PASS lines.
 */
export function formatPolicyTestReport(report: PolicyTestReport, options: { verbose?: boolean; fileLabel?: (file: string) => string; where?: string } = {}): string[] {
  const label = options.fileLabel ?? ((file: string) => file);
  const lines: string[] = [];
  for (const problem of report.problems) {
    const at = problem.source ? `${label(problem.source.file)}:${problem.source.line}` : (options.where ?? 'tests');
    lines.push(`${at}: error ${problem.kind}: ${problem.message}`);
  }
  for (const result of report.results) {
    const at = `${label(result.file)}:${result.line}`;
    if (result.passed) {
      if (options.verbose) lines.push(`PASS ${at}: ${result.name}`);
      continue;
    }
    if (result.error) {
      lines.push(`FAIL ${at}: ${result.name}: ${result.error}`);
      continue;
    }
    lines.push(`FAIL ${at}: ${result.name}: expected ${result.expected}, got ${result.actual}${describeDecision(result.decision)}`);
  }
  lines.push(`${report.passed} passed, ${report.failed} failed`);
  return lines;
}

// ---------------------------------------------------------------- running one case

async function runCase(
  file: string,
  line: number,
  testCase: PolicyTestCase,
  options: PolicyTestOptions,
  provisioning: () => ProvisioningDocument | Error,
): Promise<PolicyTestResult> {
  const expected = String(testCase.expect);
  const base = { file, line, name: testCase.name, expected };
  const target = normalizeRequestTarget(testCase.request.path, { allowPathParameters: options.allowPathParameters ?? false, host: undefined });
  if (!target.ok) {
    // The proxy answers 400 before any policy is consulted.
    const passed = testCase.expect === 'deny' || testCase.expect === 400;
    return { ...base, passed, actual: `400 (path refused: ${target.reason})`, decision: null };
  }
  let setup: { subject: DecisionSubject | null; grant: CompiledGrant | null };
  try {
    setup = subjectOf(testCase.principal, provisioning, () => options.provisioningOrigin ?? 'the provisioning file');
  } catch (error) {
    return { ...base, passed: false, actual: 'not run', decision: null, error: (error as Error).message };
  }
  const engine = new DecisionEngine({
    grants: { getGrant: async (principal) => (setup.grant !== null && principal.activeProfileId === setup.grant.profileId ? setup.grant : null) },
    resolvers: { resolve: async (config, type, id) => resolverAnswer(testCase.resolvers, config, type, id) },
  });
  const decision = await engine.decideRequest({ method: testCase.request.method.toUpperCase(), path: target.path, policy: options.policy, subject: setup.subject });
  const status = decision.allowed ? 200 : decision.status;
  let passed: boolean;
  if (testCase.expect === 'allow') passed = decision.allowed;
  else if (testCase.expect === 'deny') passed = !decision.allowed;
  else if (typeof testCase.expect === 'number') passed = status === testCase.expect;
  else passed = decision.failedStep === testCase.expect;
  return { ...base, passed, actual: describeOutcome(decision), decision };
}

function describeOutcome(decision: AuthorizationDecision): string {
  if (decision.shadowed) return `allow (shadow mode; would deny: ${decision.failedStep} ${decision.status})`;
  if (decision.allowed) return 'allow';
  return `deny ${decision.failedStep} (${decision.status})`;
}

function describeDecision(decision: AuthorizationDecision | null): string {
  if (decision === null) return '';
  const route = decision.route ? `route ${decision.route.id} ${decision.route.pattern}` : 'no route (default)';
  const steps = decision.steps.map((step) => (step.passed ? step.code : `${step.code} ✗ "${step.reason}"`));
  return `; ${route}; steps [${steps.join(', ')}]`;
}

/**
 * The stub resolver: the case's answer, or, when the case gives none, the resource as its own scope. A `{body}` answer
 * is read as the gateway reads the host's 200 answer, through the policy's resolver (`self`, `scopes` pointers).
 */
function resolverAnswer(answers: ResolverAnswers | undefined, config: ResourceResolverConfig, type: string, id: string): ResolveResult {
  const decodedId = decodeResourceId(id);
  const answer = answers?.[type]?.[decodedId];
  if (answer === undefined) return { kind: 'found', scopeRefs: [{ type, id: decodedId }] };
  if (answer === 'down') return { kind: 'unavailable', reason: `resolver for ${type} unreachable (test case)` };
  if (typeof answer === 'number') {
    return answer === 404 ? { kind: 'not-found' } : { kind: 'unavailable', reason: `resolver for ${type} answered HTTP ${answer}` };
  }
  if (!Array.isArray(answer)) {
    const scopeRefs = scopesOfAnswer(JSON.stringify(answer.body), config.answer, type, decodedId);
    return typeof scopeRefs === 'string' ? { kind: 'unavailable', reason: `resolver for ${type} answered ${scopeRefs}` } : { kind: 'found', scopeRefs };
  }
  return { kind: 'found', scopeRefs: answer.map((ref) => ({ type: ref.type, id: String(ref.id) })) };
}

/** The session subject and the grant of its active profile, as the gateway would have them. */
function subjectOf(
  principal: PolicyTestCase['principal'],
  provisioning: () => ProvisioningDocument | Error,
  originOf: () => string,
): { subject: DecisionSubject | null; grant: CompiledGrant | null } {
  if (principal === null) return { subject: null, grant: null };
  if ('permissions' in principal) {
    const clientType = principal.clientType ?? 'WEB';
    const identity: IamPrincipal = {
      userId: 'test-user',
      identityId: 'test-identity',
      identityDomain: principal.domain ?? 'example.com',
      activeProfileId: 'test-profile',
      authorizationVersion: 1,
    };
    const grant = compileGrant({
      userId: identity.userId,
      authorizationVersion: 1,
      profile: {
        profileId: 'test-profile',
        userId: identity.userId,
        profileName: 'test profile',
        templateVersionId: 'test-template',
        clientTypes: [clientType],
        enabled: true,
        revoked: false,
        unscoped: (principal.scopes ?? []).length === 0,
        scopes: principal.scopes ?? [],
        version: 1,
      },
      template: { versionId: 'test-template', name: 'test template', description: null, permissions: principal.permissions },
    });
    return { subject: { principal: identity, clientType }, grant };
  }

  const document = provisioning();
  if (document instanceof Error) throw document;
  const origin = originOf();
  const user = document.users?.find((candidate) => candidate.userId === principal.user);
  if (!user) throw new Error(`user ${principal.user} is not in ${origin}`);
  // A disabled user has no session: the gateway revokes them, so requests arrive unauthenticated.
  if (user.enabled === false) return { subject: null, grant: null };
  const clientType = principal.clientType ?? 'WEB';
  const profiles = [...(user.profiles ?? [])].sort((a, b) => (a.profileId < b.profileId ? -1 : a.profileId > b.profileId ? 1 : 0));
  let profile = profiles.find((candidate) => candidate.profileId === principal.profile);
  if (principal.profile !== undefined && !profile) throw new Error(`user ${principal.user} has no profile ${principal.profile} in ${origin}`);
  // Without `profile`, the one a login picks: the first enabled profile (by id) for the client type.
  profile ??= profiles.find((candidate) => candidate.enabled !== false && candidate.revoked !== true && candidate.clientTypes.includes(clientType));
  const identity = user.identities?.find((candidate) => candidate.enabled !== false) ?? user.identities?.[0];
  const subject: DecisionSubject = {
    principal: {
      userId: user.userId,
      identityId: identity?.identityId ?? user.userId,
      identityDomain: identity?.identityDomain ?? 'example.com',
      activeProfileId: profile?.profileId ?? null,
      authorizationVersion: 1,
    },
    clientType,
  };
  if (!profile || profile.enabled === false || profile.revoked === true) return { subject, grant: null };
  const template = document.templates?.find((candidate) => candidate.versionId === profile.templateVersionId);
  const grant = compileGrant({
    userId: user.userId,
    authorizationVersion: 1,
    profile: {
      profileId: profile.profileId,
      userId: user.userId,
      profileName: profile.profileName,
      templateVersionId: profile.templateVersionId,
      clientTypes: profile.clientTypes,
      enabled: true,
      revoked: false,
      unscoped: profile.unscoped ?? (profile.scopes ?? []).length === 0,
      scopes: profile.scopes ?? [],
      version: 1,
    },
    // A profile whose template is missing grants nothing (as GrantProvider does).
    template: { versionId: profile.templateVersionId, name: template?.name ?? '', description: null, permissions: template?.permissions ?? [] },
  });
  return { subject, grant };
}

function memoize(load: (() => ProvisioningDocument) | undefined): () => ProvisioningDocument | Error {
  let cached: ProvisioningDocument | Error | undefined;
  return () => {
    if (cached === undefined) {
      try {
        cached = load ? load() : new Error('principal.user needs a provisioning file (--provision FILE or iam.provision.file)');
      } catch (error) {
        cached = error instanceof Error ? error : new Error(String(error));
      }
    }
    return cached;
  };
}
