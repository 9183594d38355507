// Node's own http module with the same endpoints as every other stack; no dependencies.
//
//   node server.js --host 127.0.0.1 --port 8080
//
// One process, one event loop: /io waits with setTimeout, the way Node waits for a backend.
'use strict';

const http = require('node:http');
const { parseArgs } = require('node:util');

const IO_DEFAULT_MS = 10;
const IO_MAX_MS = 10000; // a typo in a URL must not hold a request for hours

const HELLO = Buffer.from('Hello, World!');
const OK = Buffer.from('ok');
const NOT_FOUND = Buffer.from('not found');

function reply(res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': body.length });
  res.end(body);
}

function ioMs(query) {
  const value = new URLSearchParams(query).get('ms');
  return value !== null && /^\d+$/.test(value) ? Math.min(Number(value), IO_MAX_MS) : IO_DEFAULT_MS;
}

function handle(req, res) {
  const q = req.url.indexOf('?');
  const path = q === -1 ? req.url : req.url.slice(0, q);
  if (path === '/hello') {
    reply(res, 200, 'text/plain', HELLO);
  } else if (path === '/json') {
    // JSON.stringify writes compact JSON; the object is put together around the encoded
    // value so every stack sends the contract's exact bytes: {"message": "Hello, World!"}
    reply(res, 200, 'application/json', Buffer.from(`{"message": ${JSON.stringify('Hello, World!')}}`));
  } else if (path === '/io') {
    setTimeout(() => reply(res, 200, 'text/plain', OK), ioMs(q === -1 ? '' : req.url.slice(q + 1)));
  } else {
    // /db: the database endpoint comes with its own issue; it will be routed here.
    reply(res, 404, 'text/plain', NOT_FOUND);
  }
}

const { values } = parseArgs({
  options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '8080' } },
});
const server = http.createServer(handle);
// Node closes an idle keep-alive connection after 5 s by default; load tools pause longer
server.keepAliveTimeout = 65000;
server.listen(Number(values.port), values.host);
// no SIGTERM handler: Node's default is to exit at once, which is what stop expects
