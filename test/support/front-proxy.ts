/**
 * Real nginx and Caddy in front of a test gateway, for the forward-auth recipes of examples/forward-auth/.
 * Each runs as a child process (no daemon) with its configuration, pid and logs in a private temp dir,
 * on a free loopback port. `available()` tells whether the binary is installed (Debian: nginx-light, caddy).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FrontProxy {
  url: string;
  /** What the process wrote to its log files and stderr so far (for failure messages). */
  log(): string;
  close(): Promise<void>;
}

export interface FrontProxyKind {
  name: 'nginx' | 'caddy';
  binary: string;
  /** The recipe file, as shipped and shown in the README. */
  recipe: string;
  start(recipe: string, gatewayPort: number, hostPort: number): Promise<FrontProxy>;
}

/** True when `binary` can be run (found on PATH or as an absolute path). */
export function binaryAvailable(binary: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${binary}`], { stdio: 'ignore' }).status === 0;
}

/** A loopback port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once something accepts connections on the port, or rejects when the process exits first. */
async function waitForPort(port: number, child: ChildProcess, log: () => string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  for (;;) {
    if (exited) throw new Error(`process exited before listening:\n${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port} after ${timeoutMs} ms:\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Replaces the recipe's example addresses with the test's ports. */
function placeAddresses(recipe: string, gatewayPort: number, hostPort: number): string {
  return recipe.replace(/127\.0\.0\.1:8080/g, `127.0.0.1:${gatewayPort}`).replace(/127\.0\.0\.1:3000/g, `127.0.0.1:${hostPort}`);
}

async function run(binary: string, args: string[], dir: string, port: number, env: NodeJS.ProcessEnv, logFiles: string[]): Promise<FrontProxy> {
  let stderr = '';
  const child = spawn(binary, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const log = (): string => stderr + logFiles.map((file) => { try { return readFileSync(file, 'utf8'); } catch { return ''; } }).join('\n');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPort(port, child, log);
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    async close() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const RECIPES = join(__dirname, '..', '..', 'examples', 'forward-auth');

export const nginx: FrontProxyKind = {
  name: 'nginx',
  binary: 'nginx',
  recipe: readFileSync(join(RECIPES, 'nginx.conf'), 'utf8'),
  async start(recipe, gatewayPort, hostPort) {
    const dir = mkdtempSync(join(tmpdir(), 'iam-nginx-'));
    const port = await freePort();
    for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, sub));
    const http = placeAddresses(recipe, gatewayPort, hostPort).replace(/listen 80;/, `listen 127.0.0.1:${port};`);
    const conf = [
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log warn;`,
      'worker_processes 1;',
      'events { worker_connections 64; }',
      'http {',
      `  access_log off;`,
      `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;`,
      `  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
      http,
      '}',
    ].join('\n');
    writeFileSync(join(dir, 'nginx.conf'), conf);
    return run('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'], dir, port, process.env, [join(dir, 'error.log')]);
  },
};

export const caddy: FrontProxyKind = {
  name: 'caddy',
  binary: 'caddy',
  recipe: readFileSync(join(RECIPES, 'Caddyfile'), 'utf8'),
  async start(recipe, gatewayPort, hostPort) {
    const dir = mkdtempSync(join(tmpdir(), 'iam-caddy-'));
    const port = await freePort();
    const site = placeAddresses(recipe, gatewayPort, hostPort).replace(/^:80 \{/m, `http://127.0.0.1:${port} {`);
    const global = ['{', '\tadmin off', '\tauto_https off', `\tstorage file_system ${dir}/data`, '}', ''].join('\n');
    writeFileSync(join(dir, 'Caddyfile'), global + site);
    const env = { ...process.env, HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_DATA_HOME: join(dir, 'data') };
    return run('caddy', ['run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], dir, port, env, []);
  },
};

/**
 * A real nginx balancing over several gateway instances (the scale-out deployment of issue #17): one `upstream`
 * with the gateways' ports (round robin, pooled keep-alive connections), the client address in X-Forwarded-For
 * (the gateways trust it from 127.0.0.1: `IAM_FORWARD_TRUSTED_PROXIES`). A refused or reset connection to one
 * gateway is retried on the next for idempotent requests; an HTTP answer, 503 included, is passed through as it is.
 */
export async function startNginxBalancer(gatewayPorts: number[]): Promise<FrontProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'iam-nginx-lb-'));
  const port = await freePort();
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, sub));
  const conf = [
    `pid ${dir}/nginx.pid;`,
    `error_log ${dir}/error.log warn;`,
    'worker_processes 1;',
    'events { worker_connections 512; }',
    'http {',
    '  access_log off;',
    `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
    '  upstream iam_gateways {',
    ...gatewayPorts.map((gatewayPort) => `    server 127.0.0.1:${gatewayPort} max_fails=0;`),
    '    keepalive 32;',
    // Shorter than the gateway's server.keep-alive-timeout (5 s): otherwise nginx may send a request on a pooled
    // connection the gateway is closing at that moment, and answer 502 (a POST is not retried on another gateway).
    '    keepalive_timeout 4s;',
    '  }',
    '  server {',
    `    listen 127.0.0.1:${port};`,
    '    location / {',
    '      proxy_pass http://iam_gateways;',
    '      proxy_http_version 1.1;',
    '      proxy_set_header Connection "";',
    '      proxy_set_header Host $http_host;',
    '      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
    '      proxy_set_header X-Forwarded-Proto $scheme;',
    '      proxy_next_upstream error timeout;',
    '      proxy_connect_timeout 2s;',
    '      proxy_read_timeout 30s;',
    '    }',
    '  }',
    '}',
  ].join('\n');
  writeFileSync(join(dir, 'nginx.conf'), conf);
  return run('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'], dir, port, process.env, [join(dir, 'error.log')]);
}
