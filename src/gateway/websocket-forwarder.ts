import type { IncomingMessage } from 'node:http';
import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { ProblemError } from '../problem';

/**
 * Proxies an authorized WebSocket handshake (design.md §4.3): the request head, with the headers the gateway
 * built, goes to the host over a fresh connection, and from then on bytes flow both ways untouched — the
 * host's 101 (or its refusal) included. Nothing reaches the host before authorization.
 */
export class WebSocketForwarder {
  private readonly url: URL;

  constructor(
    upstreamUrl: string,
    private readonly connectTimeoutMs: number,
  ) {
    this.url = new URL(upstreamUrl);
  }

  forward(req: IncomingMessage, client: Socket, head: Buffer, path: string, headers: string[], onProblem: (problem: ProblemError) => void): void {
    const port = Number(this.url.port || (this.url.protocol === 'https:' ? 443 : 80));
    const host = this.url.hostname.replace(/^\[|\]$/g, '');
    const upstream: Socket =
      this.url.protocol === 'https:' ? connectTls({ host, port, servername: host, ALPNProtocols: ['http/1.1'] }) : connectTcp({ host, port });
    let connected = false;
    const timer = setTimeout(() => upstream.destroy(new Error('connect timeout')), this.connectTimeoutMs);
    upstream.once(this.url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      connected = true;
      clearTimeout(timer);
      const lines = [`${req.method ?? 'GET'} ${path} HTTP/1.1`, `Host: ${this.url.host}`];
      for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
      upstream.write(lines.join('\r\n') + '\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', (error) => {
      clearTimeout(timer);
      if (!connected) onProblem(new ProblemError('IAM_UPSTREAM_UNAVAILABLE', 'The host cannot be reached.', { cause: error }));
      else client.destroy();
    });
    upstream.on('close', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
  }
}
