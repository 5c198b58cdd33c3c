/**
 * The deployment files (Dockerfile, deploy/kubernetes/, LICENSE, the release workflow) say what the gateway actually reads: checked here,
 * where no Docker daemon or cluster is available, against the configuration schema (`listConfigKeys()`) and the
 * configuration loader itself. Every deploy file the documentation mentions exists, and each Kubernetes file is
 * described in deploy/README.md.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { listConfigKeys, loadConfig, parseDuration } from '../../src/config';

const ROOT = join(__dirname, '..', '..');
const KEYS = listConfigKeys();
const ENV_NAMES = new Set(KEYS.flatMap(({ env, alias }) => (alias === undefined ? [env] : [env, alias])));
const defaultOf = (key: string): unknown => KEYS.find((entry) => entry.key === key)!.schema.default;

describe('Dockerfile', () => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const final = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const instructions = final.split('\n').filter((line) => /^[A-Z]+ /.test(line));

  it('builds and runs on node:24-bookworm-slim, a Node the package supports', () => {
    const bases = dockerfile.split('\n').filter((line) => line.startsWith('FROM '));
    expect(bases).toEqual(['FROM node:24-bookworm-slim AS build', 'FROM node:24-bookworm-slim']);
    const engines = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    const image = Number(/^FROM node:(\d+)-/.exec(bases[1]!)![1]);
    expect(image).toBeGreaterThanOrEqual(Number(/^>=(\d+)/.exec(engines)![1]));
  });

  it('ships the LICENSE', () => {
    expect(instructions.filter((line) => line.startsWith('COPY ') && /\bLICENSE\b/.test(line))).toHaveLength(1);
  });

  it('runs as a non-root user, with a data directory that user may write', () => {
    const user = instructions.filter((line) => line.startsWith('USER '));
    expect(user).toEqual(['USER node']);
    expect(final).toMatch(/mkdir -p \/app\/\.data && chown node:node \/app\/\.data/);
    // The defaults write under .data/ (relative to the working directory /app).
    expect(String(defaultOf('database.embedded-dir')).startsWith('.data/')).toBe(true);
    expect(String(defaultOf('iam.audit.spool-dir')).startsWith('.data/')).toBe(true);
    expect(final).toMatch(/^WORKDIR \/app$/m);
  });

  it('starts node directly (signals reach the gateway), never through npm', () => {
    expect(final).toMatch(/^ENTRYPOINT \["node", "bin\/iam-gateway\.js"\]$/m);
    expect(final).toMatch(/^CMD \["serve"\]$/m);
    expect(instructions.filter((line) => /^(CMD|ENTRYPOINT) /.test(line) && /npm/.test(line))).toEqual([]);
  });

  it('health-checks /health/live on the management port the gateway reads, and exposes both ports', () => {
    const healthcheck = instructions.find((line) => line.startsWith('HEALTHCHECK '))!;
    const management = KEYS.find(({ key }) => key === 'server.management-port')!;
    expect(healthcheck).toContain(`process.env.${management.env}||process.env.${management.alias}||${String(defaultOf('server.management-port'))}`);
    expect(healthcheck).toContain('/health/live');
    expect(final).toMatch(new RegExp(`^EXPOSE ${String(defaultOf('server.port'))} ${String(defaultOf('server.management-port'))}$`, 'm'));
  });

  it('ships no example credentials: only config/default.yaml of config/', () => {
    const copies = instructions.filter((line) => line.startsWith('COPY '));
    expect(copies.filter((line) => /\bconfig\b/.test(line))).toEqual(['COPY config/default.yaml ./config/default.yaml']);
    expect(final).not.toMatch(/users\.example|provision\.example|examples\/demo/);
  });
});

describe('LICENSE', () => {
  it('is the Apache License 2.0, verbatim, as package.json declares', () => {
    const text = readFileSync(join(ROOT, 'LICENSE'));
    // The SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt (the text many packages ship unmodified).
    expect(createHash('sha256').update(text).digest('hex')).toBe('c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4');
    expect((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { license: string }).license).toBe('Apache-2.0');
  });
});

type Manifest = Record<string, any>;
type EnvEntry = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } };

describe('deploy/kubernetes', () => {
  const dir = join(ROOT, 'deploy', 'kubernetes');
  const files = readdirSync(dir).filter((file) => file.endsWith('.yaml'));
  const documents = files.flatMap((file) =>
    parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((error) => error.message).join('; ')}`);
      return { file, manifest: doc.toJS() as Manifest };
    }),
  );
  const byKind = (kind: string): Manifest[] => documents.filter(({ manifest }) => manifest.kind === kind).map(({ manifest }) => manifest);
  const deployment = byKind('Deployment')[0]!;
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const env = new Map<string, any>(container.env.map((entry: { name: string }) => [entry.name, entry]));
  const podLabels = deployment.spec.template.metadata.labels as Record<string, string>;
  // Read in the tests (a missing one fails its test, not the whole file).
  const job = byKind('Job')[0] as Manifest;
  const jobContainer = job?.spec.template.spec.containers[0];
  const gate = (pod.initContainers ?? []).find((init: { name: string }) => init.name === 'wait-for-schema');
  /** The containers that run the gateway's code: the gateway, its init container, the migration Job. */
  const gatewayContainers = (): Array<{ env: EnvEntry[] }> => {
    expect({ gate: gate !== undefined, job: jobContainer !== undefined }).toEqual({ gate: true, job: true });
    return [container, gate, jobContainer];
  };
  const secrets = byKind('Secret');
  const containerPorts = new Map<string, number>(container.ports.map((port: { name: string; containerPort: number }) => [port.name, port.containerPort]));

  /** A container's environment as the kubelet gives it, the Secrets' values from secrets.example.yaml. */
  function resolvedEnv(entries: EnvEntry[]): Record<string, string> {
    return Object.fromEntries(
      entries.map(({ name, value, valueFrom }) => {
        if (value !== undefined) return [name, String(value)];
        const ref = valueFrom!.secretKeyRef!;
        const found = secrets.find((secret) => secret.metadata.name === ref.name)?.stringData?.[ref.key];
        if (typeof found !== 'string') throw new Error(`${name}: the Secret ${ref.name} has no key ${ref.key} in secrets.example.yaml`);
        return [name, found];
      }),
    );
  }
  /** Whether a selector's matchLabels select a pod with these labels. */
  const selects = (matchLabels: Record<string, string>, labels: Record<string, string>): boolean => Object.entries(matchLabels).every(([key, value]) => labels[key] === value);
  const portOf = (url: string): number => {
    const parsed = new URL(url);
    return parsed.port !== '' ? Number(parsed.port) : ({ 'https:': 443, 'http:': 80, 'postgresql:': 5432, 'postgres:': 5432, 'redis:': 6379, 'rediss:': 6379 } as Record<string, number>)[parsed.protocol]!;
  };

  it('every file parses; there are a Deployment, Service, PodDisruptionBudget, ConfigMap, Secrets, NetworkPolicies, a PodMonitor and a Job', () => {
    expect(documents.length).toBeGreaterThanOrEqual(11);
    for (const { file, manifest } of documents) {
      expect({ file, apiVersion: typeof manifest.apiVersion, kind: typeof manifest.kind, name: typeof manifest.metadata?.name }).toEqual({ file, apiVersion: 'string', kind: 'string', name: 'string' });
    }
    for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget', 'ConfigMap', 'Secret', 'NetworkPolicy', 'PodMonitor', 'Job']) expect({ kind, found: byKind(kind).length > 0 }).toEqual({ kind, found: true });
    expect(byKind('PodMonitor')[0]!.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(byKind('NetworkPolicy')[0]!.apiVersion).toBe('networking.k8s.io/v1');
    expect(job.apiVersion).toBe('batch/v1');
  });

  it('names only environment variables the gateway reads (the gateway, its init container, the migration Job)', () => {
    const names = gatewayContainers().flatMap((each) => each.env.map((entry) => entry.name));
    expect(names.filter((name) => !ENV_NAMES.has(name))).toEqual([]);
  });

  it("every Secret a container reads is in secrets.example.yaml with that key", () => {
    for (const each of gatewayContainers()) expect(() => resolvedEnv(each.env)).not.toThrow();
  });

  it("the Deployment's environment is a configuration the gateway accepts, with a login method", () => {
    const config = loadConfig({ env: resolvedEnv(container.env), cwd: ROOT });
    expect(config.iam.authenticator.type).not.toBe('none');
    expect(config.iam.authenticator.type).toBe('oidc');
    // The provider sends the browser back to the gateway's callback route (docs/oidc.md).
    expect(new URL(config.iam.oidc.redirectUri!).pathname).toBe('/iam/auth/oidc/callback');
    expect(env.get('IAM_OIDC_CLIENT_SECRET').valueFrom.secretKeyRef).toEqual({ name: 'iam-gateway-oidc', key: 'client-secret' });
    // The management port listens where the probes and the PodMonitor look.
    expect(config.server.managementPort).toBe(containerPorts.get('management'));
    expect(config.server.port).toBe(containerPorts.get('proxy'));
  });

  it('the migration Job runs `migrate up` once, with the image and the database of the Deployment, as a non-root read-only user', () => {
    expect(job).toBeDefined();
    expect(jobContainer.args).toEqual(['migrate', 'up']);
    expect(jobContainer.command).toBeUndefined(); // the image's ENTRYPOINT: node bin/iam-gateway.js
    expect(jobContainer.image).toBe(container.image);
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
    expect(job.spec.backoffLimit).toBeGreaterThanOrEqual(1);
    const jobEnv = new Map<string, EnvEntry>(jobContainer.env.map((entry: EnvEntry) => [entry.name, entry]));
    expect(jobEnv.get('DATABASE_URL')!.valueFrom).toEqual(env.get('DATABASE_URL').valueFrom);
    expect(jobEnv.get('IAM_SCHEMA_HISTORY_TABLE')?.value).toBe(env.get('IAM_SCHEMA_HISTORY_TABLE')?.value);
    expect(loadConfig({ env: resolvedEnv(jobContainer.env), cwd: ROOT }).database.url).toEqual(expect.stringMatching(/^postgresql:/));
    expect(job.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
    expect(jobContainer.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    // Its pod is not a gateway: the Service, the PodDisruptionBudget and the gateway's NetworkPolicy do not select it.
    const jobLabels = job.spec.template.metadata.labels as Record<string, string>;
    expect(selects(deployment.spec.selector.matchLabels, jobLabels)).toBe(false);
    expect(selects(byKind('Service')[0]!.spec.selector, jobLabels)).toBe(false);
  });

  it('the Deployment does not migrate beside the Job: its pods wait until `migrate status` lists nothing pending', () => {
    expect(gate).toBeDefined();
    expect(gate.image).toBe(container.image);
    const script = (gate.command as string[]).join(' ');
    expect(gate.command.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(script).toContain('node bin/iam-gateway.js migrate status');
    expect(script).toMatch(/\buntil\b/);
    expect(new Map<string, EnvEntry>(gate.env.map((entry: EnvEntry) => [entry.name, entry])).get('DATABASE_URL')!.valueFrom).toEqual(env.get('DATABASE_URL').valueFrom);
    expect(gate.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    // test/integration/deploy-schema-gate.test.ts runs this script against PostgreSQL.
  });

  it("the NetworkPolicy admits the proxy port from the ingress controller and the management port from monitoring only, and lets out what the URLs name", () => {
    const policy = byKind('NetworkPolicy').find((each) => selects(each.spec.podSelector.matchLabels, podLabels));
    expect(policy).toBeDefined();
    expect(policy!.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    const portNumber = (port: string | number): number => (typeof port === 'number' ? port : containerPorts.get(port)!);
    const ingress = policy!.spec.ingress as Array<{ from: Manifest[]; ports: Array<{ port: string | number }> }>;
    const admitting = (port: number): Array<{ from: Manifest[] }> => ingress.filter((rule) => rule.ports.some((each) => portNumber(each.port) === port));
    const management = admitting(containerPorts.get('management')!);
    expect(management).toHaveLength(1);
    expect(management[0]!.from).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }]);
    const proxy = admitting(containerPorts.get('proxy')!);
    expect(proxy).toHaveLength(1);
    expect(proxy[0]!.from.length).toBeGreaterThan(0);
    for (const rule of ingress) for (const port of rule.ports) expect(containerPorts.has(String(port.port)) || typeof port.port === 'number').toBe(true);

    const resolved = resolvedEnv(container.env);
    const egressPorts = new Set((policy!.spec.egress as Array<{ ports: Array<{ protocol: string; port: number }> }>).flatMap((rule) => rule.ports.map((port) => `${port.protocol}/${port.port}`)));
    const needed = ['UDP/53', 'TCP/53', ...['DATABASE_URL', 'REDIS_URL', 'UPSTREAM_URL', 'IAM_OIDC_ISSUER'].map((name) => `TCP/${portOf(resolved[name]!)}`)];
    expect(needed.filter((port) => !egressPorts.has(port))).toEqual([]);

    expect(job).toBeDefined();
    const migrate = byKind('NetworkPolicy').find((each) => selects(each.spec.podSelector.matchLabels, job.spec.template.metadata.labels))!;
    expect(migrate.spec.ingress).toEqual([]);
    const migratePorts = new Set((migrate.spec.egress as Array<{ ports: Array<{ protocol: string; port: number }> }>).flatMap((rule) => rule.ports.map((port) => `${port.protocol}/${port.port}`)));
    expect([...migratePorts].sort()).toEqual(['TCP/53', `TCP/${portOf(resolved.DATABASE_URL!)}`, 'UDP/53'].sort());
  });

  it('the PodMonitor scrapes /metrics on the management port of the gateway pods, often enough for a one-minute alert', () => {
    const monitor = byKind('PodMonitor')[0]!;
    expect(monitor).toBeDefined();
    expect(selects(monitor.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(monitor.spec.podMetricsEndpoints).toEqual([expect.objectContaining({ port: 'management', path: '/metrics' })]);
    expect(containerPorts.get('management')).toBe(Number(env.get('SERVER_MANAGEMENT_PORT').value));
    const rules = parse(readFileSync(join(ROOT, 'deploy', 'prometheus', 'iam-gateway-rules.yaml'), 'utf8')) as { groups: Array<{ interval?: string; rules: Array<{ alert?: string }> }> };
    const group = rules.groups.find((each) => each.rules.some((rule) => rule.alert === 'IamGatewayPolicyReloadFailing'))!;
    const seconds = (value: string): number => parseDuration(value, 'interval') / 1000;
    expect(seconds(monitor.spec.podMetricsEndpoints[0].interval) + seconds(group.interval!)).toBeLessThanOrEqual(60);
  });

  it('probes /health/live and /health/ready on the management port, which listens beyond loopback', () => {
    const ports = new Map<string, number>(container.ports.map((port: { name: string; containerPort: number }) => [port.name, port.containerPort]));
    expect(ports.get('management')).toBe(Number(env.get('SERVER_MANAGEMENT_PORT').value));
    expect(ports.get('proxy')).toBe(Number(env.get('SERVER_PORT').value));
    expect(container.livenessProbe.httpGet).toEqual({ path: '/health/live', port: 'management' });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/health/ready', port: 'management' });
    expect(env.get('SERVER_MANAGEMENT_HOST').value).toBe('0.0.0.0');
  });

  it('keeps the management port out of the Service', () => {
    const service = byKind('Service')[0]!;
    expect(service.spec.ports.map((port: { targetPort: string }) => port.targetPort)).toEqual(['proxy']);
  });

  it('gives the drain more time than server.shutdown-timeout (plus the cleanup grace) before SIGKILL', () => {
    const drainMs = parseDuration(String(env.get('SERVER_SHUTDOWN_TIMEOUT')?.value ?? defaultOf('server.shutdown-timeout')), 'server.shutdown-timeout');
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(drainMs + 3000);
  });

  it('runs non-root on a read-only root file system; what it writes is on emptyDir volumes', () => {
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    const mounts = new Map<string, string>(container.volumeMounts.map((mount: { name: string; mountPath: string }) => [mount.name, mount.mountPath]));
    for (const name of ['IAM_AUDIT_SPOOL_DIR', 'DATABASE_EMBEDDED_DIR']) expect(env.get(name).value.startsWith(`${mounts.get('data')}/`)).toBe(true);
    expect(pod.volumes.find((volume: { name: string }) => volume.name === 'data').emptyDir).toEqual({});
  });

  it('mounts the policies from a ConfigMap and the assertion key from a Secret where the config points', () => {
    const mounts = new Map<string, string>(container.volumeMounts.map((mount: { name: string; mountPath: string }) => [mount.name, mount.mountPath]));
    expect(env.get('IAM_POLICY_DIR').value).toBe(mounts.get('policies'));
    expect(env.get('IAM_FORWARD_ASSERTION_KEY_FILE').value.startsWith(`${mounts.get('assertion-key')}/`)).toBe(true);
    const volumes = new Map<string, any>(pod.volumes.map((volume: { name: string }) => [volume.name, volume]));
    expect(volumes.get('policies').configMap.name).toBe(byKind('ConfigMap')[0]!.metadata.name);
    expect(byKind('Secret').map((secret) => secret.metadata.name)).toContain(volumes.get('assertion-key').secret.secretName);
    const storeSecrets = ['DATABASE_URL', 'REDIS_URL'].map((name) => env.get(name).valueFrom.secretKeyRef);
    for (const ref of storeSecrets) expect(byKind('Secret').find((secret) => secret.metadata.name === ref.name)?.stringData[ref.key]).toEqual(expect.any(String));
  });

  it('keeps one gateway serving through voluntary disruptions', () => {
    const budget = byKind('PodDisruptionBudget')[0]!;
    expect(budget.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(budget.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
  });
});

describe('the documentation names only deploy files that exist', () => {
  const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
  const markdown = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`), 'deploy/README.md', 'deploy/many-instances/README.md'];
  const kubernetes = readdirSync(join(ROOT, 'deploy', 'kubernetes')).filter((file) => file.endsWith('.yaml'));

  it('every deploy/… path in the README, docs/, the deploy READMEs, the manifests and the Dockerfile exists', () => {
    const sources = [...markdown, 'Dockerfile', ...kubernetes.map((file) => `deploy/kubernetes/${file}`)];
    const mentioned = sources.flatMap((source) => [...read(source).matchAll(/\bdeploy\/[\w./-]*[\w/]/g)].map((match) => ({ source, path: match[0] })));
    expect(mentioned.length).toBeGreaterThan(10);
    expect(mentioned.filter(({ path }) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it('deploy/README.md describes each Kubernetes file, and each file it names there exists', () => {
    const readme = read('deploy/README.md');
    const section = readme.slice(readme.indexOf('## Kubernetes'), readme.indexOf('\n## ', readme.indexOf('## Kubernetes') + 1));
    const described = [...section.matchAll(/^\| `([\w.-]+\.yaml)` \|/gm)].map((match) => match[1]!);
    expect(described.sort()).toEqual([...kubernetes].sort());
    for (const name of ['networkpolicy.yaml', 'podmonitor.yaml', 'migration-job.yaml']) expect(kubernetes).toContain(name);
  });

  it('a file a manifest or a deploy README names by itself (`x.yaml`) is beside it', () => {
    const local = [
      ...kubernetes.map((file) => ({ source: `deploy/kubernetes/${file}`, dir: 'deploy/kubernetes' })),
      { source: 'deploy/README.md', dir: 'deploy' },
      { source: 'deploy/many-instances/README.md', dir: 'deploy/many-instances' },
    ];
    const missing = local.flatMap(({ source, dir }) =>
      [...read(source).matchAll(/(?<![\w/.-])([\w-]+(?:\.[\w-]+)*\.(?:yaml|json|conf))\b/g)]
        .map((match) => match[1]!)
        // Names of the configuration (config/default.yaml), of the policies directory and of the examples are not deploy files.
        .filter((name) => !/^(default|routes|users\.example|provision\.example|example|demo|package|package-lock|tsconfig)\.(yaml|json)$/.test(name))
        .filter((name) => ![dir, 'deploy/kubernetes', 'deploy', 'deploy/prometheus', 'deploy/grafana', 'deploy/many-instances'].some((where) => existsSync(join(ROOT, where, name))))
        .map((name) => `${source}: ${name}`),
    );
    expect(missing).toEqual([]);
  });
});

describe('the release workflow (.github/workflows/release.yml)', () => {
  interface Step {
    id?: string;
    name?: string;
    uses?: string;
    run?: string;
    with?: Record<string, unknown>;
  }
  const workflow = parse(readFileSync(join(ROOT, '.github', 'workflows', 'release.yml'), 'utf8')) as {
    on: { push: { tags: string[] } };
    permissions: Record<string, string>;
    jobs: Record<string, { steps: Step[] }>;
  };
  const steps = Object.values(workflow.jobs).flatMap((job) => job.steps);
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const index = (predicate: (step: Step) => boolean): number => steps.findIndex(predicate);
  const withId = (id: string): Step => steps.find((step) => step.id === id)!;

  /** A `run:` step as the runner runs it (bash -e), in a scratch GITHUB_OUTPUT; its exit code and outputs. */
  function runStep(step: Step, env: Record<string, string>): { code: number | null; outputs: Record<string, string> } {
    const dir = mkdtempSync(join(tmpdir(), 'iam-release-step-'));
    try {
      const output = join(dir, 'output');
      writeFileSync(output, '');
      const result = spawnSync('bash', ['-e', '-c', step.run!], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', GITHUB_OUTPUT: output, ...env }, encoding: 'utf8' });
      const outputs = Object.fromEntries(readFileSync(output, 'utf8').split('\n').filter(Boolean).map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
      return { code: result.status, outputs };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('runs on a v* tag, with the permissions to release and to push a package, and nothing more', () => {
    expect(workflow.on).toEqual({ push: { tags: ['v*'] } });
    expect(workflow.permissions).toEqual({ contents: 'write', packages: 'write' });
  });

  it('checks out, sets up Node 20, npm ci, builds, packs, then attaches the tarball to the release', () => {
    const order = [
      index((step) => step.uses === 'actions/checkout@v4'),
      index((step) => step.uses === 'actions/setup-node@v4' && step.with?.['node-version'] === 20),
      index((step) => step.run === 'npm ci'),
      index((step) => step.run === 'npm run build'),
      index((step) => step.id === 'pack' && /\bnpm pack\b/.test(step.run ?? '')),
      index((step) => step.uses === 'softprops/action-gh-release@v2'),
    ];
    expect(order.every((at) => at >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(steps[order[5]!]!.with).toEqual({ files: '${{ steps.pack.outputs.tarball }}' });
  });

  it('releases only a tag that names the package version, and records the version', () => {
    const check = withId('version');
    expect(index((step) => step === check)).toBeLessThan(index((step) => step.uses === 'softprops/action-gh-release@v2'));
    expect(runStep(check, { GITHUB_REF_NAME: `v${version}` })).toEqual({ code: 0, outputs: { version } });
    expect(runStep(check, { GITHUB_REF_NAME: 'v999.0.0' }).code).not.toBe(0);
    expect(runStep(check, { GITHUB_REF_NAME: version }).code).not.toBe(0);
  }, 60_000);

  it('builds the image from the Dockerfile and pushes it to ghcr.io as <owner>/<repository>:<version>, in lower case', () => {
    expect(existsSync(join(ROOT, 'Dockerfile'))).toBe(true);
    const login = steps.find((step) => step.uses === 'docker/login-action@v3')!;
    expect(login.with).toMatchObject({ registry: 'ghcr.io', password: '${{ secrets.GITHUB_TOKEN }}' });
    expect(runStep(withId('image'), { GITHUB_REPOSITORY: 'Acme-Corp/IAM-Gateway' }).outputs).toEqual({ name: 'ghcr.io/acme-corp/iam-gateway' });
    const push = steps.find((step) => step.uses === 'docker/build-push-action@v6')!;
    expect(push.with).toEqual({ context: '.', push: true, tags: '${{ steps.image.outputs.name }}:${{ steps.version.outputs.version }}' });
    expect(index((step) => step === login)).toBeLessThan(index((step) => step === push));
  });

  it('puts no ${{ }} expression into a shell script (the values reach run steps through the environment)', () => {
    for (const step of steps.filter((each) => each.run !== undefined)) expect(step.run).not.toContain('${{');
  });
});
