/**
 * A raw keep-alive HTTP/1.1 connection (node:net) for the tests of a stop: it reads responses one by one and
 * remembers how the connection ended, a clean FIN or a reset, which an HTTP client library would hide.
 */
import { connect, type Socket } from 'node:net';

export class RawConnection {
  readonly socket: Socket;
  private data = '';
  private readonly waiters: Array<() => void> = [];
  /** 'reset' if the connection ended with an error (ECONNRESET, EPIPE), 'closed' after a clean FIN. */
  ending: 'open' | 'closed' | 'reset' = 'open';
  readonly closed: Promise<void>;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (chunk: Buffer) => {
      this.data += chunk.toString('latin1');
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.socket.on('error', () => (this.ending = 'reset'));
    this.closed = new Promise((resolve) =>
      this.socket.once('close', () => {
        if (this.ending === 'open') this.ending = 'closed';
        for (const wake of this.waiters.splice(0)) wake();
        resolve();
      }),
    );
  }

  /** Sends one request; a POST carries an empty JSON object. */
  send(target: string, method: 'GET' | 'POST' = 'GET'): void {
    const body = method === 'POST' ? '{}' : '';
    this.socket.write(`${method} ${target} HTTP/1.1\r\nHost: gw.test\r\n${body ? `content-type: application/json\r\ncontent-length: ${body.length}\r\n` : ''}\r\n${body}`);
  }

  /** A connection that has made one request (`GET /health`) and been answered 200 with keep-alive. */
  static async open(port: number): Promise<RawConnection> {
    const connection = new RawConnection(port);
    connection.send('/health');
    const first = await connection.response();
    if (!first || !/^HTTP\/1\.1 200 /.test(first.head) || !/^connection: keep-alive$/im.test(first.head)) {
      throw new Error(`expected a 200 keep-alive answer to GET /health, got ${first?.head ?? 'the connection closed'}`);
    }
    return connection;
  }

  /** The next complete response (head and body), or null when the connection ended first. */
  async response(): Promise<{ head: string; body: string } | null> {
    for (;;) {
      const end = this.data.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.data.slice(0, end);
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (this.data.length >= end + 4 + length) {
          const body = this.data.slice(end + 4, end + 4 + length);
          this.data = this.data.slice(end + 4 + length);
          return { head, body };
        }
      }
      if (this.ending !== 'open') return null;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }
}
