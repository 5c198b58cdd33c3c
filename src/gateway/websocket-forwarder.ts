import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { ProblemError, problems, toProblem } from '../domain/problem';
import { sendProblemOnSocket } from '../http/problem-response';
import type { TunnelBinding, TunnelRegistry } from './tunnel-registry';

export interface WebSocketForwarderOptions {
  /** `upstream.url`. */
  url: string;
  connectTimeoutMs: number;
  /** Time to the host's answer to the handshake (`upstream.response-timeout`), 504 above. */
  responseTimeoutMs: number;
  /** `upstream.websocket-idle-timeout`: no bytes either way for this long closes the connection. */
  idleTimeoutMs: number;
}

/** RFC 9110 §7.6.1: connection-specific fields of a refused handshake's answer that are not relayed. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'x-request-id']);

/**
 * Why an upgrade request cannot be tunnelled, or null. Only a WebSocket handshake (RFC 6455 §4.1: `GET`,
 * HTTP/1.1, `Upgrade: websocket`, no body) is; any other protocol (`h2c`, `TLS/1.2`, a list) is refused
 * rather than tunnelled or silently downgraded: the gateway never relays bytes it cannot check.
 */
export function upgradeRefusal(req: IncomingMessage, head: Buffer): ProblemError | null {
  const upgrade = (req.headers.upgrade ?? '').trim().toLowerCase();
  if (upgrade !== 'websocket') return problems.badRequest('Only "Upgrade: websocket" is supported; other protocol upgrades are refused.');
  if (req.method !== 'GET' || req.httpVersion !== '1.1') return problems.badRequest('A WebSocket handshake is a GET request over HTTP/1.1 (RFC 6455 §4.1).');
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
    return problems.badRequest('A WebSocket handshake has no body (RFC 6455 §4.1).');
  }
  if (head.length > 0) return earlyData();
  return null;
}

function earlyData(): ProblemError {
  return problems.badRequest('The client sent data before the handshake was answered (RFC 6455 §4.1).');
}

/**
 * Proxies authorized WebSocket handshakes. The handshake goes to the host over a fresh connection with the
 * headers the gateway built; only a `101` answer with `Upgrade: websocket` turns the client connection into a
 * tunnel. Any other answer is relayed as an ordinary response and the connection is closed. Nothing the
 * client sends before the gateway relayed the 101 reaches the host: such bytes end the handshake with 400.
 * Open tunnels are registered in a {@link TunnelRegistry}, which closes them when their session ends.
 */
export class WebSocketForwarder {
  private readonly url: URL;

  constructor(
    private readonly options: WebSocketForwarderOptions,
    private readonly registry: TunnelRegistry,
  ) {
    this.url = new URL(options.url);
  }

  /**
   * Takes over the client socket of an upgrade request: refuses what cannot be tunnelled (null: answered
   * already), and from now on watches for bytes sent before the handshake is answered.
   */
  accept(req: IncomingMessage, client: Socket, head: Buffer, requestId: string, instance: string): Handshake | null {
    // A connection the gateway already closed for writing (shutdown): nothing is forwarded for it.
    if (!client.writable) {
      client.destroy();
      return null;
    }
    client.setTimeout(this.options.idleTimeoutMs, () => client.destroy());
    client.on('error', () => client.destroy());
    const refusal = upgradeRefusal(req, head);
    if (refusal) {
      sendProblemOnSocket(client, refusal, instance, requestId);
      return null;
    }
    return new Handshake(this, client, requestId, instance);
  }

  /** @internal Opens the connection to the host and sends the handshake. */
  open(path: string, headers: string[]): ClientRequest {
    const tls = this.url.protocol === 'https:';
    const host = this.url.hostname.replace(/^\[|\]$/g, '');
    const options = { host, port: this.url.port || (tls ? 443 : 80), method: 'GET', path, headers: ['Host', this.url.host, ...headers], agent: false as const };
    return tls ? httpsRequest({ ...options, servername: host }) : httpRequest(options);
  }

  /** @internal */
  get timeouts(): { connectMs: number; responseMs: number; connectEvent: 'connect' | 'secureConnect' } {
    const connectEvent = this.url.protocol === 'https:' ? 'secureConnect' : 'connect';
    return { connectMs: this.options.connectTimeoutMs, responseMs: this.options.responseTimeoutMs, connectEvent };
  }

  /** @internal */
  register(binding: TunnelBinding, close: (reason: string) => void): () => void {
    return this.registry.add(binding, close);
  }
}

type State = 'waiting' | 'forwarded' | 'answered' | 'tunnel' | 'closed';

/** One WebSocket handshake, from the client's request to a tunnel or a closed connection. */
export class Handshake {
  private state: State = 'waiting';
  private upstream: ClientRequest | null = null;

  constructor(
    private readonly forwarder: WebSocketForwarder,
    private readonly client: Socket,
    private readonly requestId: string,
    private readonly instance: string,
  ) {
    client.on('data', this.onEarlyData);
    client.once('end', this.onClientGone);
    client.once('close', this.onClientGone);
  }

  /** False once the client left or spoke too early (the handshake is over, answered or not). */
  get open(): boolean {
    return this.state === 'waiting';
  }

  /** Answers the client with a problem and closes the connection; nothing reaches the host. */
  refuse(problem: ProblemError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.upstream?.destroy();
    sendProblemOnSocket(this.client, problem, this.instance, this.requestId);
  }

  /** Sends the authorized handshake to the host; `binding` keeps the tunnel tied to its authorization. */
  forward(path: string, headers: string[], binding: TunnelBinding): void {
    if (this.state !== 'waiting') return;
    this.state = 'forwarded';
    const { connectMs, responseMs, connectEvent } = this.forwarder.timeouts;
    const upstream = this.forwarder.open(path, headers);
    this.upstream = upstream;
    let timedOut = false;
    let timer = setTimeout(() => upstream.destroy(new Error('connect timeout')), connectMs);
    upstream.once('socket', (socket: Socket) => {
      socket.once(connectEvent, () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          timedOut = true;
          upstream.destroy(new Error('response timeout'));
        }, responseMs);
      });
    });
    upstream.on('error', (error) => {
      clearTimeout(timer);
      if (this.state === 'forwarded') {
        const problem = timedOut
          ? new ProblemError('IAM_UPSTREAM_TIMEOUT', 'The host did not answer in time.', { cause: error })
          : new ProblemError('IAM_UPSTREAM_UNAVAILABLE', 'The host cannot be reached.', { cause: error });
        this.refuse(problem);
      } else {
        this.client.destroy();
      }
    });
    upstream.once('response', (res: IncomingMessage) => {
      clearTimeout(timer);
      this.relayRefusal(res);
    });
    upstream.once('upgrade', (res: IncomingMessage, socket: Socket, head: Buffer) => {
      clearTimeout(timer);
      void this.confirm(res, socket, head, binding);
    });
    upstream.end();
  }

  private readonly onEarlyData = (): void => {
    // Before the 101 the client must wait (RFC 6455 §4.1); after a refusal its bytes are dropped.
    if (this.state === 'waiting' || this.state === 'forwarded') this.refuse(earlyData());
  };

  private readonly onClientGone = (): void => {
    if (this.state === 'tunnel') return;
    this.state = 'closed';
    this.upstream?.destroy();
  };

  /** A non-101 answer: relayed as an ordinary response, then the connection closes. */
  private relayRefusal(res: IncomingMessage): void {
    if (this.state !== 'forwarded') return void res.destroy();
    this.state = 'answered';
    const connectionNamed = new Set((res.headers.connection ?? '').split(',').map((token) => token.trim().toLowerCase()));
    const lines = [`HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ''}`];
    for (let i = 0; i < res.rawHeaders.length; i += 2) {
      const name = res.rawHeaders[i]!;
      const lower = name.toLowerCase();
      if (!HOP_BY_HOP.has(lower) && !connectionNamed.has(lower)) lines.push(`${name}: ${res.rawHeaders[i + 1]!}`);
    }
    // Without a Content-Length the body is delimited by the close (RFC 9112 §6.3).
    lines.push(`X-Request-Id: ${this.requestId}`, 'Connection: close');
    this.client.write(lines.join('\r\n') + '\r\n\r\n');
    res.pipe(this.client);
    res.once('error', () => this.client.destroy());
    res.once('aborted', () => this.client.destroy());
  }

  /**
   * The host switched protocols. The session may have ended while it was answering (the tunnel was not
   * registered yet, so no event could reach it): the 101 is relayed only if the handshake is still allowed.
   */
  private async confirm(res: IncomingMessage, upstream: Socket, head: Buffer, binding: TunnelBinding): Promise<void> {
    upstream.on('error', () => upstream.destroy());
    const problem = binding.session ? await binding.recheck().catch((error: unknown) => toProblem(error)) : null;
    if (problem) {
      upstream.destroy();
      return this.refuse(problem);
    }
    this.tunnel(res, upstream, head, binding);
  }

  private tunnel(res: IncomingMessage, upstream: Socket, head: Buffer, binding: TunnelBinding): void {
    if (this.state !== 'forwarded') return void upstream.destroy();
    if ((res.headers.upgrade ?? '').trim().toLowerCase() !== 'websocket') {
      upstream.destroy();
      return this.refuse(new ProblemError('IAM_UPSTREAM_UNAVAILABLE', 'The host switched to a protocol other than WebSocket.'));
    }
    this.state = 'tunnel';
    const client = this.client;
    client.off('data', this.onEarlyData);
    const lines = [`HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}`];
    for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]!}: ${res.rawHeaders[i + 1]!}`);
    client.write(lines.join('\r\n') + '\r\n\r\n');
    if (head.length > 0) client.write(head);
    const unregister = this.forwarder.register(binding, () => {
      client.destroy();
      upstream.destroy();
    });
    upstream.pipe(client);
    client.pipe(upstream);
    upstream.once('close', () => client.destroy());
    client.once('close', () => {
      unregister();
      upstream.destroy();
    });
  }
}
