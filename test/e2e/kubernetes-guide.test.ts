/**
 * docs/kubernetes.md: the "Prepare" part runs as written (every sh block, in order, in a copy of deploy/ and policies/,
 * in a folder holding the package as your-app.md's step 0 installs it: this checkout's tarball, packed and installed
 * once per test run by test/support/installed-package.ts, so `npx --no-install iam-gateway` runs its real binary; and
 * the real kubectl and openssl), and what it makes is what the
 * manifests read: every Secret name and key a Deployment or Job references, the ConfigMap the pods mount, the key file
 * IAM_FORWARD_ASSERTION_KEY_FILE names. The "Deploy" and "Day two" parts talk to a cluster, which this machine has
 * not: every manifest they apply exists, every object they name is one the manifests define.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { notRun } from '../support/env';
import { ROOT } from '../support/gateway';
import { guidePath, guideSection, installedAppFolder, shBlocks } from '../support/guide-workspace';

const GUIDE = readFileSync(join(ROOT, 'docs', 'kubernetes.md'), 'utf8');
const section = (heading: string): string => guideSection(GUIDE, heading);

const has = (binary: string): boolean => spawnSync('sh', ['-c', `command -v ${binary}`]).status === 0;
const runnable = (has('kubectl') && has('openssl')) || process.env.CI !== undefined;
if (!runnable) notRun('kubernetes-guide: the Prepare part (no kubectl or openssl here; CI always has them)');
const itRuns = runnable ? it : it.skip;

interface Manifest {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
  spec?: unknown;
}
const manifestsIn = (dir: string): Manifest[] =>
  readdirSync(dir)
    .filter((name) => name.endsWith('.yaml'))
    .flatMap((name) => parseAllDocuments(readFileSync(join(dir, name), 'utf8')).map((document) => document.toJS() as Manifest))
    .filter((manifest) => manifest !== null);

/** Every `{secretKeyRef: {name, key}}`, `{secret: {secretName}}` and `{configMap: {name}}` under a value. */
function references(value: unknown, found: { secretKeys: string[]; secrets: string[]; configMaps: string[] }): typeof found {
  if (Array.isArray(value)) for (const item of value) references(item, found);
  else if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    const ref = object.secretKeyRef as { name: string; key: string } | undefined;
    if (ref) found.secretKeys.push(`${ref.name}/${ref.key}`);
    const secret = object.secret as { secretName: string } | undefined;
    if (secret?.secretName) found.secrets.push(secret.secretName);
    const configMap = object.configMap as { name: string } | undefined;
    if (configMap?.name) found.configMaps.push(configMap.name);
    for (const item of Object.values(object)) references(item, found);
  }
  return found;
}

let work: string;
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('docs/kubernetes.md', () => {
  itRuns('the Prepare part runs as written and makes the Secrets, the key and the ConfigMap the manifests read', async () => {
    work = await installedAppFolder('kubernetes-');
    cpSync(join(ROOT, 'deploy'), join(work, 'deploy'), { recursive: true });
    cpSync(join(ROOT, 'policies'), join(work, 'policies'), { recursive: true });
    const path = guidePath();

    const blocks = shBlocks(section('1. Prepare'));
    expect(blocks).toHaveLength(3);
    for (const block of blocks) {
      const run = spawnSync('bash', ['-e', '-c', block], {
        cwd: work,
        encoding: 'utf8',
        // No cluster: kubectl must not need one for these commands (a KUBECONFIG that names none).
        env: { PATH: path, HOME: work, KUBECONFIG: join(work, 'no-kubeconfig') },
        timeout: 60_000,
      });
      expect({ block, code: run.status, output: `${run.stdout}${run.stderr}`.slice(-2000) }).toEqual({ block, code: 0, output: expect.any(String) });
    }

    // The key: an Ed25519 private key, as the gateway reads it.
    expect(readFileSync(join(work, 'k8s-secrets', 'key.pem'), 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const secrets = manifestsIn(join(work, 'k8s-secrets'));
    expect(secrets.map((secret) => secret.kind)).toEqual(['Secret', 'Secret', 'Secret']);
    const provided = new Set(secrets.flatMap((secret) => Object.keys(secret.data ?? {}).map((key) => `${secret.metadata.name}/${key}`)));
    const secretNames = new Set(secrets.map((secret) => secret.metadata.name));

    // What the Deployment and the Job read is exactly what the guide made (nothing missing, nothing extra).
    const workloads = manifestsIn(join(work, 'deploy', 'kubernetes')).filter((manifest) => manifest.kind === 'Deployment' || manifest.kind === 'Job');
    const read = references(workloads, { secretKeys: [], secrets: [], configMaps: [] });
    expect([...new Set(read.secretKeys)].sort()).toEqual([...provided].filter((ref) => !ref.startsWith('iam-gateway-assertion-key/')).sort());
    expect([...new Set(read.secrets)]).toEqual(['iam-gateway-assertion-key']);
    expect([...secretNames].sort()).toEqual([...new Set([...read.secretKeys.map((ref) => ref.split('/')[0]!), ...read.secrets])].sort());
    // The assertion key's file name is the one IAM_FORWARD_ASSERTION_KEY_FILE names in the mounted directory.
    expect(provided.has('iam-gateway-assertion-key/key.pem')).toBe(true);
    expect(readFileSync(join(work, 'deploy', 'kubernetes', 'deployment.yaml'), 'utf8')).toContain('value: /etc/iam-gateway/assertion/key.pem');
    const key = Buffer.from(secrets.find((secret) => secret.metadata.name === 'iam-gateway-assertion-key')!.data!['key.pem']!, 'base64').toString('utf8');
    expect(key).toBe(readFileSync(join(work, 'k8s-secrets', 'key.pem'), 'utf8'));

    // The ConfigMap the pods mount holds every policy file, as written.
    const configMap = manifestsIn(join(work, 'deploy', 'kubernetes')).find((manifest) => manifest.kind === 'ConfigMap')!;
    expect([...new Set(read.configMaps)]).toEqual([configMap.metadata.name]);
    const policyFiles = readdirSync(join(ROOT, 'policies')).filter((name) => name.endsWith('.yaml'));
    expect(Object.keys(configMap.data ?? {}).sort()).toEqual(policyFiles.sort());
    for (const name of policyFiles) expect(configMap.data![name]).toBe(readFileSync(join(ROOT, 'policies', name), 'utf8'));
  }, 600_000);

  it('the cluster steps apply manifests that exist and name objects the manifests define', () => {
    const clusterSteps = shBlocks(section('2. Deploy')).join('\n') + section('3. Day two');
    const files = [...clusterSteps.matchAll(/-f (\S+)/g)].map((match) => match[1]!).filter((file) => !file.startsWith('k8s-secrets/'));
    expect(files.length).toBeGreaterThan(3);
    for (const file of files) expect({ file, exists: existsSync(join(ROOT, file)) }).toEqual({ file, exists: true });
    const defined = new Set(manifestsIn(join(ROOT, 'deploy', 'kubernetes')).map((manifest) => `${manifest.kind.toLowerCase()}/${manifest.metadata.name}`));
    const named = [...clusterSteps.matchAll(/\b(job|deployment)[/ ](iam-gateway[a-z-]*)/g)].map((match) => `${match[1]}/${match[2]}`);
    expect(named.length).toBeGreaterThan(3);
    for (const object of named) expect({ object, defined: defined.has(object) }).toEqual({ object, defined: true });
    // The Prepare part made k8s-secrets/, which the first cluster step applies.
    expect(shBlocks(section('2. Deploy'))[0]).toContain('kubectl apply -f k8s-secrets/');
  });
});
