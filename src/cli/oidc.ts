import { readFileSync } from 'node:fs';
import { evaluateRules, ruleProfileId, SKIP_WORDS, unmetCondition, type ClaimCondition, type Claims, type RuleOutcome } from '../auth/oidc/claim-rules';
import { identityFromClaims } from '../auth/oidc/oidc-login';
import { loadConfig } from '../config';
import { ProblemError } from '../domain/problem';
import { parseCommandLine, UsageError, type CliCommand } from './command-line';

const USAGE = `usage: iam-gateway oidc test-claims FILE [--config FILE]

Evaluates the configuration's iam.oidc.allowed and iam.oidc.profiles rules against the claims of one ID token, as a
sign-in would, and prints per rule whether it applies and the profile it gives (id, template, scopes), or why not.
Nothing is read from or written to a database or a provider; the token's signature is not checked.

  FILE           the ID token's claims: a JSON object ({"sub": "…", "groups": […]}), or a JWT (its payload is read)
  --config FILE  the configuration file (default IAM_CONFIG, else config/default.yaml; environment overrides apply)

Exit codes: 0 evaluated (whatever the rules say), 1 the configuration cannot be loaded, 2 a usage error or a FILE
that is neither a JSON object nor a JWT.`;

/** A claims file the command cannot read: its message is printed, exit 2. */
class ClaimsFileError extends Error {}

/** The claims in `text`: a JSON object, or the payload of a compact JWT (three base64url parts). */
export function parseClaims(text: string): Claims {
  const trimmed = text.trim();
  let value: unknown;
  if (trimmed.startsWith('{')) {
    try {
      value = JSON.parse(trimmed);
    } catch (error) {
      throw new ClaimsFileError(`not valid JSON (${(error as Error).message})`);
    }
  } else if (/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(trimmed)) {
    try {
      value = JSON.parse(Buffer.from(trimmed.split('.')[1]!, 'base64url').toString('utf8'));
    } catch {
      throw new ClaimsFileError('a JWT whose payload is not JSON');
    }
  } else throw new ClaimsFileError('neither a JSON object of claims nor a JWT');
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ClaimsFileError('the claims must be a JSON object');
  return value as Claims;
}

const wanted = (condition: ClaimCondition): string =>
  condition.values.length === 0 ? 'is missing, empty or false' : `holds none of ${condition.values.slice(0, 5).join(', ')}${condition.values.length > 5 ? ', …' : ''}`;

function describeOutcome(outcome: RuleOutcome, userId: string): string {
  const head = `rule ${outcome.rule.name}:`;
  if (outcome.status === 'unmet') return `${head} not met: its "${outcome.condition.claim}" claim ${wanted(outcome.condition)}`;
  if (outcome.status === 'skipped') return `${head} SKIPPED: its scope claim "${outcome.claim}" ${SKIP_WORDS[outcome.reason]} (reason ${outcome.reason})`;
  const { rule, scopes } = outcome;
  const access = rule.scopes.length > 0 ? scopes.map((scope) => `${scope.scopeType} ${scope.scopeRefId} ${scope.accessMode}`).join('; ') : rule.unscoped === false ? 'none' : 'every resource';
  return [`${head} applies`, `  profile ${ruleProfileId(rule.name, userId)} (${rule.profileName})`, `  template ${rule.templateVersionId}, client types ${rule.clientTypes.join(', ')}`, `  scopes ${access}`].join('\n');
}

/** `iam-gateway oidc test-claims FILE [--config FILE]`. */
export const oidcCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stdout, stderr }) {
    const [sub, ...rest] = args;
    if (sub !== 'test-claims') throw new UsageError(sub === undefined ? 'missing the subcommand (test-claims)' : `unknown subcommand "${sub}"`, USAGE);
    const { positionals, values } = parseCommandLine(rest, USAGE, { config: { type: 'string' } }, 1);
    const file = positionals[0];
    if (file === undefined) throw new UsageError('missing the claims FILE', USAGE);
    let claims: Claims;
    try {
      claims = parseClaims(readFileSync(file, 'utf8'));
    } catch (error) {
      const reason = error instanceof ClaimsFileError ? error.message : `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
      stderr.write(`iam-gateway oidc test-claims: ${file}: ${reason}\n`);
      return 2;
    }
    const oidc = loadConfig(values.config === undefined ? {} : { file: values.config }).iam.oidc;
    const out: string[] = [];
    let userId: string;
    try {
      // Without a configured issuer the token's own `iss` stands in: only the userId is shown.
      userId = identityFromClaims(claims, oidc.claims, oidc.issuer ?? (typeof claims.iss === 'string' ? claims.iss : 'issuer-not-configured')).userId;
      out.push(`user: ${userId} (claim ${oidc.claims.userId})`);
    } catch (error) {
      if (!(error instanceof ProblemError)) throw error;
      userId = '<userId>';
      out.push(`user: none, a sign-in is refused: ${error.message}`);
    }
    const unmet = unmetCondition(claims, oidc.allowed);
    out.push(unmet === null ? `allowed: yes${oidc.allowed.length === 0 ? ' (iam.oidc.allowed is empty)' : ''}` : `allowed: NO, a sign-in is refused: its "${unmet.claim}" claim ${wanted(unmet)} (iam.oidc.allowed)`);
    if (oidc.profiles.length === 0) out.push('rules: none (iam.oidc.profiles is empty)');
    for (const outcome of evaluateRules(claims, oidc.profiles)) out.push(describeOutcome(outcome, userId));
    stdout.write(`${out.join('\n')}\n`);
    return 0;
  },
};
