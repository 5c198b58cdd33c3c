import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { ProblemError } from '../domain/problem';

/** Writes a problem as `application/problem+json` on a plain Node response (the proxy path). */
export function sendProblem(res: ServerResponse, problem: ProblemError, instance: string, requestId: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(problem.toBody(instance, requestId));
  const headers: Record<string, string | number> = {
    'content-type': 'application/problem+json',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-request-id': requestId,
    ...problem.headers,
  };
  res.writeHead(problem.status, headers);
  res.end(body);
}

/** Writes a problem on a raw socket (refused WebSocket upgrades and parse errors) and closes it. */
export function sendProblemOnSocket(socket: Socket, problem: ProblemError, instance: string, requestId: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(problem.toBody(instance, requestId));
  const lines = [
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? 'Error'}`,
    'Content-Type: application/problem+json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Cache-Control: no-store',
    `X-Request-Id: ${requestId}`,
    ...Object.entries(problem.headers).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
  ];
  socket.end(lines.join('\r\n') + '\r\n\r\n' + body);
}
