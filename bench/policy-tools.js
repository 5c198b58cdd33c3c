#!/usr/bin/env node
'use strict';
/**
 * The policy-change tools' bench rows (docs/policy-changes.md):
 * - `policy diff` of two 10,000-route policies: the time to load both directories (YAML parse + compile, the same
 *   cost the gateway pays at a reload) and the diff itself, in process.
 * - `policy replay` of 1,000,000 access-log lines: lines per second and the peak RSS of the real CLI process
 *   (`node bin/iam-gateway.js policy replay`), deciding with the grants of a fresh PostgreSQL database on
 *   DATABASE_URL's server (migrated and provisioned with config/provision.example.yaml).
 *
 * Usage: DATABASE_URL=postgresql://… node bench/policy-tools.js [--lines N] [--routes N]   (needs `npm run build`)
 * Without DATABASE_URL only the diff row runs.
 */
const { execFile, spawn } = require('node:child_process');
const { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { numberFlag } = require('./lib/args');
const { requireDist } = require('./lib/dist');
const { freshDatabase } = require('./lib/postgres');

const ROOT = join(__dirname, '..');

function routesYaml(count, permissionOf) {
  let text = 'version: 1\ndefault: deny\nroutes:\n';
  for (let i = 0; i < count / 4; i++) {
    text += `  - { path: /api/r${i}/:id/**, methods: [GET], permission: r${i}:read, resource: { type: R${i}, id: id, access: READ } }\n`;
    text += `  - { path: /api/r${i}/:id/export, methods: [GET], permission: ${permissionOf(i)}, resource: { type: R${i}, id: id, access: READ } }\n`;
    text += `  - { path: /api/r${i}, methods: [GET], permission: r${i}:list }\n`;
    text += `  - { path: /api/r${i}/:id, methods: [PUT], permission: r${i}:update, resource: { type: R${i}, id: id, access: WRITE } }\n`;
  }
  return text;
}

async function diffRow(dir, routes) {
  const { loadPolicyDirectory } = requireDist('policy/load-policy-directory');
  const { diffPolicies } = requireDist('policy-tools/policy-diff');
  for (const [name, permissionOf] of [['old', (i) => `r${i}:export`], ['new', (i) => (i === 17 ? 'r17:other' : `r${i}:export`)]]) {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'routes.yaml'), routesYaml(routes, permissionOf));
  }
  let started = performance.now();
  const before = (await loadPolicyDirectory(join(dir, 'old'))).policy;
  const after = (await loadPolicyDirectory(join(dir, 'new'))).policy;
  const loadMs = performance.now() - started;
  started = performance.now();
  const diff = diffPolicies(before, after);
  const diffMs = performance.now() - started;
  console.log(`policy diff, ${routes} routes each, in process: load both ${Math.round(loadMs)} ms, diff ${Math.round(diffMs)} ms (${diff.changes.length} changes found, ${diff.wider ? 'wider' : 'not wider'})`);
  // What a CI step waits for: the real CLI, process start included (median of 5 runs; target < 2 s).
  const walls = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    await run(process.execPath, ['bin/iam-gateway.js', 'policy', 'diff', join(dir, 'old'), join(dir, 'new')], {});
    walls.push(performance.now() - started);
  }
  walls.sort((a, b) => a - b);
  console.log(`policy diff, ${routes} routes each, \`iam-gateway policy diff\` process: median ${Math.round(walls[2])} ms (min ${Math.round(walls[0])}, max ${Math.round(walls[4])}; target < 2000 ms)`);
}

function writeLog(path, lines) {
  return new Promise((resolve, reject) => {
    const out = createWriteStream(path);
    out.on('error', reject);
    const users = [['u-alice', 'p-alice-editor'], ['u-bob', 'p-bob-editor']];
    const requests = [['/api/projects', '/api/projects'], ['/api/projects/1', '/api/projects/:projectId'], ['/api/projects/2', '/api/projects/:projectId'], ['/api/admin/stats', '/api/admin/**']];
    let buffer = '';
    for (let i = 0; i < lines; i++) {
      const [userId, profileId] = users[i % 2];
      const [path, route] = requests[i % 4];
      const denied = i % 3 === 0;
      buffer += `${JSON.stringify({ level: 30, time: '2026-11-28T07:00:00.000Z', requestId: `r${i}`, traceId: null, clientAddress: '203.0.113.7', method: 'GET', path, route, status: denied ? 403 : 200, decision: denied ? 'deny' : 'allow', step: denied ? 'PERMISSION_DENIED' : null, userId, profileId, clientType: 'WEB', decisionId: null, durationMs: 0.3, upstreamMs: 0.1, bytes: 10, msg: 'access' })}\n`;
      if (buffer.length > 1 << 20) {
        out.write(buffer);
        buffer = '';
      }
    }
    out.end(buffer, resolve);
  });
}

function run(command, args, env) {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd: ROOT, env: { ...process.env, ...env }, maxBuffer: 64 << 20 }, (error, stdout, stderr) => (error && error.code !== 1 ? reject(new Error(`${args.join(' ')}: ${stderr || error.message}`)) : resolve(stdout)));
  });
}

/** Runs the CLI and samples its peak RSS from /proc (VmHWM) just before it exits. */
function replayProcess(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'iam-gateway.js'), ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let peakKb = 0;
    let stdout = '';
    let stderr = '';
    const sample = setInterval(() => {
      try {
        const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (match) peakKb = Math.max(peakKb, Number(match[1]));
      } catch {
        // exited
      }
    }, 50);
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearInterval(sample);
      if (code !== 0 && code !== 1) reject(new Error(`replay exited ${code}: ${stderr}`));
      else resolve({ stdout, peakKb });
    });
  });
}

async function replayRow(dir, lines) {
  const database = await freshDatabase(process.env.DATABASE_URL, 'iam_bench_replay');
  try {
    const env = { DATABASE_URL: database.url, IAM_POLICIES_DIR: join(dir, 'live') };
    await run(process.execPath, ['bin/iam-gateway.js', 'migrate', 'up'], env);
    await run(process.execPath, ['bin/iam-gateway.js', 'provision', 'config/provision.example.yaml'], env);
    const live = 'version: 1\ndefault: deny\nroutes:\n  - { path: /api/projects, methods: [GET], permission: project:list }\n  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }\n  - { path: /api/admin/**, methods: ["*"], permission: admin:write }\n';
    for (const [name, text] of [['live', live], ['changed', live.replace('admin:write', 'project:read')]]) {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'routes.yaml'), text);
    }
    const log = join(dir, 'access.log');
    await writeLog(log, lines);
    const started = performance.now();
    const { stdout, peakKb } = await replayProcess(['policy', 'replay', join(dir, 'changed'), '--access-log', log], env);
    const seconds = (performance.now() - started) / 1000;
    console.log(`policy replay, ${lines} access-log lines: ${Math.round(lines / seconds)} lines/s (${seconds.toFixed(2)} s, process start included), peak RSS ${Math.round(peakKb / 1024)} MB`);
    console.log(`  ${stdout.split('\n')[0]}`);
  } finally {
    await database.drop();
  }
}

async function main(argv = process.argv.slice(2)) {
  const lines = numberFlag(argv, '--lines', 1_000_000);
  const routes = numberFlag(argv, '--routes', 10_000);
  const dir = mkdtempSync(join(tmpdir(), 'iam-bench-policy-'));
  try {
    mkdirSync(join(dir, 'diff'));
    await diffRow(join(dir, 'diff'), routes);
    if (process.env.DATABASE_URL) await replayRow(dir, lines);
    else console.log('policy replay: skipped (needs DATABASE_URL: the replay decides with the database\'s grants)');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error.message);
    process.exit(1);
  });
}

module.exports = { main };
