import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { sendProblem } from '../http/problem-response';
import { UpstreamForwarder, type ForwarderOptions } from './upstream-forwarder';
import { TunnelRegistry } from './tunnel-registry';
import { WebSocketForwarder } from './websocket-forwarder';
import { sendProblemOnSocket } from '../http/problem-response';
import type { Socket } from 'node:net';
import { problems } from '../domain/problem';

/** RFC 9110 §7.6.1 hop-by-hop request headers; a proxy never forwards them. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'expect']);

/**
 * `iam.enabled=false` (the rollback switch, docs/configuration.md): every request, `/iam/*` included, goes to the host
 * unchanged — no token checks, no policy checks, no header changes beyond the standard proxy headers.
 */
/** `upstream.*` (docs/configuration.md): the forwarder's settings and the tunnel timeouts. */
export type TransparentProxyOptions = ForwarderOptions & { websocketIdleTimeoutMs: number; websocketRecheckIntervalMs: number };

export function createTransparentProxy(upstream: TransparentProxyOptions): {
  handle: (req: IncomingMessage, res: ServerResponse) => void;
  handleUpgrade: (req: IncomingMessage, socket: Socket, head: Buffer) => void;
  /** Open WebSocket tunnels (closed at shutdown). */
  tunnels: TunnelRegistry;
  close: () => Promise<void>;
} {
  const forwarder = new UpstreamForwarder({ ...upstream });
  const tunnels = new TunnelRegistry({ recheckIntervalMs: upstream.websocketRecheckIntervalMs });
  const websockets = new WebSocketForwarder({ ...upstream, idleTimeoutMs: upstream.websocketIdleTimeoutMs }, tunnels);
  return {
    tunnels,
    // The same handshake rules as with iam enabled (only WebSocket, only after a 101), without the checks.
    handleUpgrade(req, socket, head) {
      const requestId = randomUUID();
      const target = req.url ?? '';
      if (!target.startsWith('/')) return sendProblemOnSocket(socket, problems.badRequest('Only origin-form request targets are forwarded.'), '/', requestId);
      const handshake = websockets.accept(req, socket, head, requestId, target.split('?')[0] ?? '/');
      if (!handshake) return;
      const headers: string[] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        if (req.rawHeaders[i]!.toLowerCase() !== 'host') headers.push(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
      }
      handshake.forward(target, headers, { session: null, recheck: async () => null });
    },
    handle(req, res) {
      const requestId = randomUUID();
      const target = req.url ?? '';
      if (!target.startsWith('/')) {
        sendProblem(res, problems.badRequest('Only origin-form request targets are forwarded.'), '/', requestId);
        return;
      }
      const connectionTokens = new Set((req.headers.connection ?? '').split(',').map((t) => t.trim().toLowerCase()));
      const headers: string[] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i]!;
        const lower = name.toLowerCase();
        if (HOP_BY_HOP.has(lower) || connectionTokens.has(lower) || lower.startsWith('x-forwarded-')) continue;
        headers.push(name, req.rawHeaders[i + 1]!);
      }
      const remote = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
      headers.push('X-Forwarded-For', remote, 'X-Forwarded-Proto', 'http');
      if (req.headers.host) headers.push('X-Forwarded-Host', req.headers.host);
      forwarder.forward(req, res, {
        method: req.method ?? 'GET',
        path: target,
        headers,
        requestId,
        onProblem: (problem) => sendProblem(res, problem, target.split('?')[0] ?? '/', requestId),
      });
    },
    close: () => forwarder.close(),
  };
}
