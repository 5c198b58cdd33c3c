/**
 * docs/identity-providers.md tells the truth: every YAML block of the guide is a configuration the gateway's loader
 * accepts (a block labelled `<!-- config: <label> -->`, or `<!-- config: <label> + -->` for keys added to that
 * label's configuration), and every sample of a provider's ID token (`<!-- claims: <label> -->`, a JSON block) gets,
 * through the claim rules a login applies (`iam.oidc.allowed`, the userId claim, `iam.oidc.profiles`), exactly the
 * result written on the `→` line after it: refused by a named claim, or the userId and each profile with its
 * template version and scopes.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError, loadConfig, type GatewayConfig } from '../../src/config';
import { evaluateRules, projectProfiles, unmetCondition, type Claims } from '../../src/auth/oidc/claim-rules';
import { identityFromClaims } from '../../src/auth/oidc/oidc-login';

const GUIDE = path.resolve(__dirname, '../../docs/identity-providers.md');
/** The gateway's callback route (src/api/oidc-routes.ts, under /iam): the redirect URI registered at every provider. */
const CALLBACK_PATH = '/iam/auth/oidc/callback';
const SECRET = 'secret-from-the-environment';
/** Each provider the guide covers: the heading of its section and the config label its samples use. */
const VENDORS = [
  { heading: 'Keycloak', label: 'keycloak' },
  { heading: 'Microsoft Entra ID', label: 'entra' },
  { heading: 'Okta', label: 'okta' },
  { heading: 'Auth0', label: 'auth0' },
  { heading: 'Google', label: 'google' },
] as const;

interface ConfigBlock { label: string; addition: boolean; yaml: string; section: string }
type Expected = { refusedBy: string } | { userId: string; profiles: Array<{ profileId: string; template: string; scopes: string[] | 'every resource' }> };
interface ClaimsBlock { label: string; claims: Claims; expected: Expected; line: string; section: string }
interface Guide { yamlBlocks: number; configs: ConfigBlock[]; samples: ClaimsBlock[] }

/** The `→` line: `→ refused: its `hd` claim (…)` or `→ `userId` gets `id` (template; scope; scope) and … .` */
function parseResult(line: string): Expected {
  const refused = /^→ refused: its `([^`]+)` claim/.exec(line);
  if (refused) return { refusedBy: refused[1]! };
  const gets = /^→ `([^`]+)` gets (.+)\.$/.exec(line);
  if (!gets) throw new Error(`unreadable result line: ${line}`);
  if (gets[2] === 'no profile') return { userId: gets[1]!, profiles: [] };
  const profiles = [...gets[2]!.matchAll(/`([^`]+)` \(([^)]+)\)/g)].map((match) => {
    const [template, ...scopes] = match[2]!.split('; ');
    return { profileId: match[1]!, template: template!, scopes: scopes.length === 1 && scopes[0] === 'every resource' ? ('every resource' as const) : scopes };
  });
  if (profiles.length === 0) throw new Error(`no profile named in: ${line}`);
  return { userId: gets[1]!, profiles };
}

function parseGuide(text: string): Guide {
  const configs: ConfigBlock[] = [];
  const samples: ClaimsBlock[] = [];
  let section = '';
  let yamlBlocks = 0;
  const lines = text.split('\n');
  for (let at = 0; at < lines.length; at++) {
    const heading = /^## (.+)$/.exec(lines[at]!);
    if (heading) section = heading[1]!;
    const fence = /^```(\w*)$/.exec(lines[at]!);
    if (!fence) continue;
    const end = lines.indexOf('```', at + 1);
    const body = lines.slice(at + 1, end).join('\n');
    const label = /^<!-- (config|claims): ([a-z0-9-]+)( \+)? -->$/.exec(lines[at - 1] ?? '');
    if (fence[1] === 'yaml') yamlBlocks++;
    if (label?.[1] === 'config' && fence[1] === 'yaml') configs.push({ label: label[2]!, addition: label[3] !== undefined, yaml: body, section });
    if (label?.[1] === 'claims' && fence[1] === 'json') {
      const line = lines.slice(end + 1).find((next) => next.trim() !== '') ?? '';
      samples.push({ label: label[2]!, claims: JSON.parse(body) as Claims, expected: parseResult(line), line, section });
    }
    at = end;
  }
  return { yamlBlocks, configs, samples };
}

let workDir: string;
let fileCount = 0;
beforeAll(() => {
  workDir = mkdtempSync(path.join(tmpdir(), 'iam-idp-guide-'));
});
afterAll(() => rmSync(workDir, { recursive: true, force: true }));

/** Loads a YAML text as the gateway does at start, the client secret in the environment. */
function load(yaml: string): GatewayConfig {
  const file = path.join(workDir, `config-${++fileCount}.yaml`);
  writeFileSync(file, yaml);
  return loadConfig({ file, env: { IAM_OIDC_CLIENT_SECRET: SECRET }, cwd: workDir });
}

/** An addition on top of a configuration: mappings merged key by key, anything else replaced. */
function merge(base: unknown, addition: unknown): unknown {
  const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isMap(base) || !isMap(addition)) return addition;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(addition)) merged[key] = merge(base[key], value);
  return merged;
}

/** The text of each block as the loader must read it: a main block alone, an addition merged onto its main block. */
function configText(guide: Guide, block: ConfigBlock): string {
  if (!block.addition) return block.yaml;
  const main = guide.configs.find((candidate) => candidate.label === block.label && !candidate.addition);
  if (!main) throw new Error(`no configuration "${block.label}" before its addition`);
  return JSON.stringify(merge(parseYaml(main.yaml), parseYaml(block.yaml)));
}

const text = readFileSync(GUIDE, 'utf8');
const guide = parseGuide(text);
const mains = new Map(guide.configs.filter((block) => !block.addition).map((block) => [block.label, block]));

describe('the guide covers every provider', () => {
  it('every yaml block is a labelled configuration, one main configuration per label', () => {
    expect(guide.configs.length).toBe(guide.yamlBlocks);
    expect(mains.size).toBe(guide.configs.filter((block) => !block.addition).length);
  });

  it.each(VENDORS)('$heading: a section with a configuration and ID token samples, one refused', ({ heading, label }) => {
    expect(text).toMatch(new RegExp(`^## ${heading}$`, 'm'));
    expect(mains.get(label)?.section).toBe(heading);
    const samples = guide.samples.filter((sample) => sample.section === heading);
    expect(samples.length).toBeGreaterThan(0);
    expect(samples.every((sample) => mains.has(sample.label))).toBe(true);
    expect(samples.some((sample) => 'refusedBy' in sample.expected)).toBe(true);
    expect(samples.some((sample) => 'profiles' in sample.expected && sample.expected.profiles.length > 0)).toBe(true);
  });

  it('a Google account of another domain is refused by its hd claim', () => {
    const google = guide.samples.filter((sample) => sample.label === 'google');
    expect(google.map((sample) => [sample.claims.hd ?? null, 'refusedBy' in sample.expected ? sample.expected.refusedBy : 'signs in'])).toEqual([
      ['example.com', 'signs in'],
      [null, 'hd'],
    ]);
  });
});

describe('every configuration of the guide loads', () => {
  it.each(guide.configs.map((block, index) => [`${block.label}${block.addition ? ' +' : ''} #${index}`, block] as const))('%s', (_name, block) => {
    const config = load(configText(guide, block));
    const { oidc } = config.iam;
    expect(config.iam.authenticator.type).toBe('oidc');
    // The secret comes from the environment, never from the file.
    expect(block.yaml).not.toMatch(/client-secret/);
    expect(oidc.clientSecret).toBe(SECRET);
    expect(new URL(oidc.redirectUri!).pathname).toBe(CALLBACK_PATH);
    if (block.addition) expect(oidc.acceptAccessTokens).toBe(true);
  });
});

describe('every ID token sample gets what the guide says', () => {
  const configOf = (label: string): GatewayConfig['iam']['oidc'] => load(mains.get(label)!.yaml).iam.oidc;

  it.each(guide.samples.map((sample) => [`${sample.label}: ${sample.line}`, sample] as const))('%s', (_name, sample) => {
    const oidc = configOf(sample.label);
    // The sample is a token of that configuration: its issuer, for its client.
    expect(sample.claims.iss).toBe(oidc.issuer);
    expect([sample.claims.aud].flat()).toContain(oidc.clientId);

    const unmet = unmetCondition(sample.claims, oidc.allowed);
    if ('refusedBy' in sample.expected) {
      expect(unmet?.claim).toBe(sample.expected.refusedBy);
      return;
    }
    expect(unmet).toBeNull();
    const identity = identityFromClaims(sample.claims, oidc.claims, oidc.issuer!);
    expect(identity.userId).toBe(sample.expected.userId);
    const { profiles } = projectProfiles(evaluateRules(sample.claims, oidc.profiles), identity.userId);
    expect(profiles.map((profile) => ({
      profileId: profile.profileId,
      template: profile.templateVersionId,
      scopes: profile.unscoped === true ? 'every resource' : (profile.scopes ?? []).map((scope) => `${scope.scopeType} ${scope.scopeRefId} ${scope.accessMode}`),
    }))).toEqual(sample.expected.profiles);
  });
});

describe('the checks are not vacuous', () => {
  it('a misspelled key in a copy of the guide is refused by the loader', () => {
    const broken = parseGuide(text.replace('    claims: { user-id: preferred_username }', '    claims: { userid: preferred_username }'));
    const keycloak = broken.configs.find((block) => block.label === 'keycloak' && !block.addition)!;
    let error: unknown;
    try {
      load(keycloak.yaml);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map(({ key }) => key)).toEqual(['iam.oidc.claims.userid']);
  });

  it('a misspelled key in an addition is refused too', () => {
    const broken = parseGuide(text.replace('    access-token-types: [JWT]', '    access-token-type: [JWT]'));
    const addition = broken.configs.find((block) => block.addition)!;
    expect(() => load(configText(broken, addition))).toThrow(ConfigError);
  });

  it('a sample whose group is taken away no longer gets what the guide says', () => {
    const alice = guide.samples.find((sample) => sample.label === 'keycloak' && 'profiles' in sample.expected && sample.expected.profiles.length === 2)!;
    const oidc = load(mains.get('keycloak')!.yaml).iam.oidc;
    const claims = { ...alice.claims, groups: ['staff'] };
    const { profiles, retract } = projectProfiles(evaluateRules(claims, oidc.profiles), 'alice');
    expect(profiles.map((profile) => profile.profileId)).toEqual(['oidc:staff:alice']);
    expect(retract).toEqual(['oidc:engineering:alice', 'oidc-engineering-alice', 'oidc-staff-alice']);
    expect(parseResult('→ refused: its `groups` claim (iam.oidc.allowed).')).toEqual({ refusedBy: 'groups' });
    expect(unmetCondition({ ...alice.claims, groups: ['contractors'] }, oidc.allowed)?.claim).toBe('groups');
  });
});
