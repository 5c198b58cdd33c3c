'use strict';
/**
 * A minimal keep-alive HTTP/1.1 client for unloaded latency: one socket, one request at a time, the request bytes
 * built once, the answer framed by its Content-Length (every answer in the bench has one). It costs the client far
 * less than `http.request` (no agent, no parser objects per request), so a sub-0.1 ms server shows as such:
 * the time is from the write to the last body byte (hrtime), loopback round trip included.
 */
const net = require('node:net');

class RawClient {
  /** `url`: the full URL (its path and query are requested); `headers`: extra request headers. */
  constructor(url, headers = {}) {
    const target = new URL(url);
    this.host = target.hostname;
    this.port = Number(target.port);
    const lines = [`GET ${target.pathname}${target.search} HTTP/1.1`, `Host: ${target.host}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
    this.request = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
    this.socket = null;
    this.buffer = '';
    this.pending = null;
  }

  connect() {
    return new Promise((resolve, reject) => {
      const socket = net.connect(this.port, this.host, () => {
        socket.setNoDelay(true);
        resolve();
      });
      socket.setEncoding('latin1');
      socket.on('data', (chunk) => this.onData(chunk));
      socket.on('error', (error) => {
        if (this.pending) this.pending.reject(error);
        else reject(error);
      });
      socket.on('close', () => {
        if (this.pending) this.pending.reject(new Error(`${this.host}:${this.port} closed the connection`));
      });
      this.socket = socket;
    });
  }

  /** Sends the request; resolves `{ status, ms }` once the whole answer arrived. */
  send() {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject, started: process.hrtime.bigint() };
      this.socket.write(this.request);
    });
  }

  onData(chunk) {
    this.buffer += chunk;
    const end = this.buffer.indexOf('\r\n\r\n');
    if (end < 0 || !this.pending) return;
    const head = this.buffer.slice(0, end);
    const match = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    const length = match ? Number(match[1]) : 0;
    if (this.buffer.length < end + 4 + length) return;
    const status = Number(head.slice(9, 12));
    this.buffer = this.buffer.slice(end + 4 + length);
    const { resolve, started } = this.pending;
    this.pending = null;
    resolve({ status, ms: Number(process.hrtime.bigint() - started) / 1e6 });
  }

  close() {
    this.socket?.destroy();
  }
}

module.exports = { RawClient };
