import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Answers what Node's HTTP parser refuses (malformed bytes, a header section over `max-header-size`, a
 * client too slow for `headers-timeout`/`request-timeout`) with a problem body (docs/http-contract.md) and closes
 * the connection.
 *
 * When a complete request on the same connection is still being answered (the bad bytes followed it), its
 * answer goes out first and the refusal after it: responses keep the order of requests (RFC 9112 §9.3.2).
 * Writing the refusal at once would make the client take it for its request, which the host did run.
 * Nothing is tracked per request: Node keeps the response in progress on the socket (`_httpMessage`).
 */
export function answerClientErrors(server: Server): void {
  const refused = new WeakSet<Socket>();
  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => {
    // The parser reports again for every further chunk; the first report decides.
    if (refused.has(socket)) return;
    refused.add(socket);
    if (!socket.writable) return void socket.destroy();
    const refusal = refusalFor(error.code);
    const current = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    // A timeout is about the request in flight itself: its own answer is not coming.
    if (!current || current.writableFinished || error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return void socket.end(refusal);
    current.once('close', () => {
      if (socket.writable) socket.end(refusal);
      else socket.destroy();
    });
  });
}

function refusalFor(code: string | undefined): string {
  const [status, reason, problemCode] =
    code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'IAM_HEADERS_TOO_LARGE']
      : code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'IAM_BAD_REQUEST']
        : [400, 'Bad Request', 'IAM_BAD_REQUEST'];
  const body = JSON.stringify({
    type: `https://iam-gateway.dev/problems/${problemCode.toLowerCase().replace(/_/g, '-')}`,
    title: reason,
    status,
    detail: status === 408 ? 'The request was not received in time.' : 'The request could not be parsed.',
    instance: '/',
    code: problemCode,
    requestId: '',
  });
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`;
}
