'use strict';
/**
 * A fresh PostgreSQL database for one bench run, on the server DATABASE_URL names (created and dropped with
 * `psql`, connected to the server's `postgres` database with the same credentials): several gateway
 * processes share it, as several instances share one PostgreSQL in production.
 */
const { execFile } = require('node:child_process');

function psql(url, sql) {
  return new Promise((resolve, reject) => {
    execFile('psql', ['-d', url, '-v', 'ON_ERROR_STOP=1', '-q', '-X', '-c', sql], { timeout: 30_000, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`psql: ${(stderr || error.message).trim()}`));
      else resolve(stdout);
    });
  });
}

/** `url` with its database name replaced. */
function withDatabase(url, name) {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/** Creates `<prefix>_<unix seconds>_<pid>` on DATABASE_URL's server; resolves `{ name, url, drop() }`. */
async function freshDatabase(baseUrl, prefix) {
  const name = `${prefix}_${Math.floor(Date.now() / 1000)}_${process.pid}`;
  const admin = withDatabase(baseUrl, 'postgres');
  await psql(admin, `CREATE DATABASE ${name}`);
  return {
    name,
    url: withDatabase(baseUrl, name),
    drop: () => psql(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

module.exports = { freshDatabase, withDatabase };
