/**
 * The deployment files (Dockerfile, deploy/kubernetes/) say what the gateway actually reads: checked here,
 * where no Docker daemon or cluster is available, against the configuration schema (`listConfigKeys()`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { listConfigKeys, parseDuration } from '../../src/app/config';

const ROOT = join(__dirname, '..', '..');
const KEYS = listConfigKeys();
const ENV_NAMES = new Set(KEYS.flatMap(({ env, alias }) => (alias === undefined ? [env] : [env, alias])));
const defaultOf = (key: string): unknown => KEYS.find((entry) => entry.key === key)!.schema.default;

describe('Dockerfile', () => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const final = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const instructions = final.split('\n').filter((line) => /^[A-Z]+ /.test(line));

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

describe('deploy/kubernetes', () => {
  const dir = join(ROOT, 'deploy', 'kubernetes');
  const documents = readdirSync(dir)
    .filter((file) => file.endsWith('.yaml'))
    .flatMap((file) => parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => ({ file, manifest: doc.toJS() as Record<string, any> })));
  const byKind = (kind: string): Array<Record<string, any>> => documents.filter(({ manifest }) => manifest.kind === kind).map(({ manifest }) => manifest);
  const deployment = byKind('Deployment')[0]!;
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const env = new Map<string, any>(container.env.map((entry: { name: string }) => [entry.name, entry]));

  it('parses, and has a Deployment, Service, PodDisruptionBudget, ConfigMap and Secrets', () => {
    expect(documents.length).toBeGreaterThanOrEqual(6);
    for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget', 'ConfigMap', 'Secret']) expect(byKind(kind).length).toBeGreaterThan(0);
  });

  it('names only environment variables the gateway reads', () => {
    expect([...env.keys()].filter((name) => !ENV_NAMES.has(name))).toEqual([]);
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
