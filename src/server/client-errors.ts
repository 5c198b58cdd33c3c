import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** Per connection: answers not yet finished, and the refusal waiting for them. */
interface ConnectionState {
  inFlight: number;
  pendingRefusal: string | null;
}

/**
 * Answers what Node's HTTP parser refuses (malformed bytes, a header section over `max-header-size`, a
 * client too slow for `headers-timeout`/`request-timeout`) with a problem body (design.md §4.2) and closes
 * the connection.
 *
 * When a complete request on the same connection is still being answered (the bad bytes followed it), its
 * answer goes out first and the refusal after it: responses keep the order of requests (RFC 9112 §9.3.2).
 * Writing the refusal at once would make the client take it for its request, which the host did run.
 */
export function answerClientErrors(server: Server): void {
  const connections = new WeakMap<Socket, ConnectionState>();
  const stateOf = (socket: Socket): ConnectionState => {
    let state = connections.get(socket);
    if (!state) connections.set(socket, (state = { inFlight: 0, pendingRefusal: null }));
    return state;
  };
  const track = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket;
    const state = stateOf(socket);
    state.inFlight++;
    res.once('close', () => {
      state.inFlight--;
      if (state.inFlight > 0 || state.pendingRefusal === null) return;
      if (socket.writable) socket.end(state.pendingRefusal);
      else socket.destroy();
    });
  };
  // Before the gateway's own listeners, so every answer is counted from its start.
  for (const event of ['request', 'checkContinue', 'checkExpectation'] as const) server.prependListener(event, track);

  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => {
    const state = stateOf(socket);
    // The parser reports again for every further chunk; the first report decides.
    if (state.pendingRefusal !== null) return;
    if (!socket.writable) return void socket.destroy();
    const refusal = refusalFor(error.code);
    // A timeout is about the request in flight itself: its own answer is not coming.
    if (state.inFlight === 0 || error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return void socket.end(refusal);
    state.pendingRefusal = refusal;
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
