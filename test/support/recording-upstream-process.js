'use strict';
/**
 * The recording upstream's server process (plain JS: forked by recording-upstream.ts, runs without ts-jest).
 * A separate process, so the gateway under test talks to a real peer over real sockets, not to an in-process
 * handler sharing its event loop.
 *
 * Records every request as received (method, raw request-target, rawHeaders, body digest) and answers:
 *   /status/<code>  that status          /slow/<ms>  after <ms>          /hang  never
 *   /stream/<n>     n chunks, chunked    /ws         WebSocket upgrade, echoes every message
 *   any other upgrade request: 200 keep-alive (the Upgrade ignored), later bytes parsed as HTTP requests
 *   anything else   200 {ok: true, method, url, headers}
 * IPC: the parent sends {id, command: 'requests' | 'clear' | 'close'}, the child answers {id, result}.
 * On start the child sends {type: 'ready', port}.
 */
const { createServer } = require('node:http');
const { createHash } = require('node:crypto');

const BODY_TEXT_LIMIT = 4096;
// RFC 6455 §1.3: the fixed GUID appended to Sec-WebSocket-Key.
const WEBSOCKET_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

let recorded = [];
let sequence = 0;
const upgradedSockets = new Set();

function record(req, kind) {
  const entry = {
    seq: ++sequence,
    kind,
    receivedAt: Date.now(),
    method: req.method,
    url: req.url,
    httpVersion: req.httpVersion,
    rawHeaders: req.rawHeaders.slice(),
    bodyLength: 0,
    bodySha256: createHash('sha256').digest('hex'),
    bodyText: '',
    bodyComplete: false,
    wsMessages: kind === 'upgrade' ? [] : undefined,
  };
  recorded.push(entry);
  return entry;
}

/** Collects the body into the entry; resolves when it is complete (or the client went away). */
function collectBody(req, entry) {
  return new Promise((resolve) => {
    const hash = createHash('sha256');
    const head = [];
    let headLength = 0;
    req.on('data', (chunk) => {
      hash.update(chunk);
      entry.bodyLength += chunk.length;
      if (headLength < BODY_TEXT_LIMIT) {
        head.push(chunk.subarray(0, BODY_TEXT_LIMIT - headLength));
        headLength += Math.min(chunk.length, BODY_TEXT_LIMIT - headLength);
      }
    });
    let finished = false;
    const finish = (complete) => {
      if (finished) return;
      finished = true;
      entry.bodySha256 = hash.digest('hex');
      entry.bodyText = Buffer.concat(head).toString('utf8');
      entry.bodyComplete = complete;
      resolve(complete);
    };
    req.once('end', () => finish(true));
    // 'close' before 'end': the client (the gateway) went away mid-body.
    req.once('close', () => finish(false));
  });
}

function sendJson(res, status, value) {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
}

function answer(req, res) {
  const path = req.url.split('?', 1)[0];
  const [, first, second] = path.split('/');
  const echo = { ok: true, method: req.method, url: req.url, headers: req.headers };
  if (first === 'status' && /^[1-5]\d\d$/.test(second) && Number(second) >= 200) {
    const status = Number(second);
    if (status === 204 || status === 304) {
      res.writeHead(status);
      res.end();
    } else {
      sendJson(res, status, { ...echo, ok: status < 400, status });
    }
  } else if (first === 'slow' && /^\d+$/.test(second)) {
    const timer = setTimeout(() => sendJson(res, 200, echo), Number(second));
    res.once('close', () => clearTimeout(timer));
  } else if (first === 'hang') {
    // Never answer: the gateway's upstream timeout must fire.
  } else if (first === 'stream' && /^\d+$/.test(second)) {
    const count = Number(second);
    res.writeHead(200, { 'content-type': 'application/x-ndjson' }); // no length: chunked
    let sent = 0;
    const timer = setInterval(() => {
      if (sent === count) {
        clearInterval(timer);
        res.end();
        return;
      }
      res.write(`${JSON.stringify({ chunk: sent })}\n`);
      sent += 1;
    }, 5);
    res.once('close', () => clearInterval(timer));
  } else {
    sendJson(res, 200, echo);
  }
}

const server = createServer((req, res) => {
  const entry = record(req, 'http');
  collectBody(req, entry).then((complete) => {
    if (complete) answer(req, res);
  });
});

// WebSocket (RFC 6455): accept /ws, echo every text or binary message, answer ping and close.
server.on('upgrade', (req, socket, head) => {
  const entry = record(req, 'upgrade');
  entry.bodyComplete = true;
  upgradedSockets.add(socket);
  socket.once('close', () => upgradedSockets.delete(socket));
  socket.on('error', () => socket.destroy());
  const key = req.headers['sec-websocket-key'];
  const isWebSocket = String(req.headers.upgrade).toLowerCase() === 'websocket';
  if (req.url.split('?', 1)[0] !== '/ws' || !isWebSocket || typeof key !== 'string') {
    // Like a host without WebSocket support here (an Express app): it ignores the Upgrade, answers 200 and
    // keeps the connection alive, reading whatever comes next as more HTTP requests (recorded as 'http').
    upgradedSockets.delete(socket);
    const body = Buffer.from(JSON.stringify({ ok: true, method: req.method, url: req.url, headers: req.headers }));
    socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n`);
    socket.write(body);
    if (head && head.length > 0) socket.unshift(head);
    server.emit('connection', socket);
    return;
  }
  const accept = createHash('sha1').update(key + WEBSOCKET_GUID).digest('base64');
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  let pending = head && head.length > 0 ? Buffer.from(head) : Buffer.alloc(0);
  const onData = (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    let frame;
    while ((frame = readFrame(pending)) !== null) {
      pending = pending.subarray(frame.size);
      handleFrame(socket, entry, frame);
    }
  };
  socket.on('data', onData);
  if (pending.length > 0) onData(Buffer.alloc(0));
});

/** Decodes one client frame (RFC 6455 §5.2) from the start of `buffer`, or null if incomplete. */
function readFrame(buffer) {
  if (buffer.length < 2) return null;
  const opcode = buffer[0] & 0x0f;
  const masked = (buffer[1] & 0x80) !== 0;
  let length = buffer[1] & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return null;
    length = buffer.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return null;
    length = Number(buffer.readBigUInt64BE(2));
    offset = 10;
  }
  const maskOffset = offset;
  if (masked) offset += 4;
  if (buffer.length < offset + length) return null;
  const payload = Buffer.from(buffer.subarray(offset, offset + length));
  if (masked) {
    for (let i = 0; i < payload.length; i += 1) payload[i] ^= buffer[maskOffset + (i % 4)];
  }
  return { opcode, payload, size: offset + length };
}

/** Encodes one unmasked server frame (servers never mask, RFC 6455 §5.1). */
function writeFrame(socket, opcode, payload) {
  let header;
  if (payload.length < 126) {
    header = Buffer.from([0x80 | opcode, payload.length]);
  } else if (payload.length < 65536) {
    header = Buffer.alloc(4);
    header[0] = 0x80 | opcode;
    header[1] = 126;
    header.writeUInt16BE(payload.length, 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = 0x80 | opcode;
    header[1] = 127;
    header.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  socket.write(Buffer.concat([header, payload]));
}

function handleFrame(socket, entry, frame) {
  if (frame.opcode === 0x8) {
    writeFrame(socket, 0x8, frame.payload.subarray(0, 2));
    socket.end();
  } else if (frame.opcode === 0x9) {
    writeFrame(socket, 0xa, frame.payload);
  } else if (frame.opcode === 0x1 || frame.opcode === 0x2) {
    entry.wsMessages.push({
      binary: frame.opcode === 0x2,
      length: frame.payload.length,
      text: frame.payload.subarray(0, BODY_TEXT_LIMIT).toString('utf8'),
    });
    writeFrame(socket, frame.opcode, frame.payload);
  }
}

function closeEverything() {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
    for (const socket of upgradedSockets) socket.destroy();
  });
}

process.on('message', (message) => {
  const { id, command } = message;
  const reply = (result) => process.send({ id, result });
  if (command === 'requests') {
    reply(recorded);
  } else if (command === 'clear') {
    recorded = [];
    reply(null);
  } else if (command === 'close') {
    closeEverything().then(() => process.send({ id, result: null }, () => process.exit(0)));
  } else {
    process.send({ id, error: `unknown command ${String(command)}` });
  }
});

// The test process went away without closing us: do not linger.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.send({ type: 'ready', port: server.address().port });
});
