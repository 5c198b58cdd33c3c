#!/usr/bin/env node
'use strict';
/**
 * Sends COUNT sequential keep-alive GETs to URL with HEADERS (JSON) and reports `{ready, bad}` over IPC:
 * the client side of bench/lib/work-count.js, in its own process so its work is not counted.
 * Usage: sequential-client.js URL HEADERS_JSON COUNT
 */
const http = require('node:http');

const [url, headersJson, countText] = process.argv.slice(2);
const headers = JSON.parse(headersJson);
const count = Number(countText);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
let bad = 0;

const one = () =>
  new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers }, (res) => {
      if (res.statusCode !== 200) bad++;
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
  });

(async () => {
  for (let i = 0; i < count; i++) await one();
  agent.destroy();
  process.send({ ready: true, bad }, () => process.exit(0));
})().catch((error) => {
  process.stderr.write(`sequential client: ${error.message}\n`);
  process.exit(1);
});
