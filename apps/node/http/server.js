// Node's own http module with the same endpoints as every other stack; /db uses mysql2
// (package.json), the only dependency.
//
//   node server.js --host 127.0.0.1 --port 8080
//   node server.js --host 127.0.0.1 --port 8443 --http 2 --cert cert.pem --key key.pem
//   node server.js --host 127.0.0.1 --port 8080 --http h2c
//
// --http 2: node:http2's secure server (h2 by ALPN, HTTP/1.1 too: allowHTTP1);
// --http h2c: node:http2's cleartext server, h2 with prior knowledge only (Node has no
// h1 on that server). Both use http2's compatibility API, so `handle` is the same code.
//
// One process, one event loop: /io waits with setTimeout, the way Node waits for a backend;
// /db and /dbjson await a mysql2 pool.
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

// /db?queries=N: a missing or non-numeric N is 1, and N is clamped to 1..500 (TechEmpower)
const DB_QUERIES_MAX = 500;
const DB_QUERY = 'SELECT value FROM test WHERE id >= ? LIMIT 10';
const DB_UNAVAILABLE = Buffer.from('database unavailable');
// ids are 1..ROWS and a range of 10 must fit: starts are 1..ROWS-9
const DB_MAX_START = Math.max(1, Number(process.env.STACKRACE_DB_ROWS || 1000000) - 9);

function dbQueries(query) {
  const value = new URLSearchParams(query).get('queries');
  return value !== null && /^\d+$/.test(value) ? Math.max(1, Math.min(Number(value), DB_QUERIES_MAX)) : 1;
}

// One mysql2 pool per process, made on the first /db request (the server starts and serves
// /hello without a database): up to STACKRACE_DB_POOL connections (default 16), all kept
// idle between requests. pool.query sends plain queries (the start escaped into the SQL
// text by mysql2). A connection that fails is destroyed by the pool, not handed out again:
// that request answers 503 and the next one connects anew, so a restarted database is
// picked up by itself.
let pool = null;
let lastDbError = '';

function dbPool() {
  if (pool === null) {
    const mysql = require('mysql2/promise');
    const env = process.env;
    const size = Math.max(1, Number(env.STACKRACE_DB_POOL) || 16);
    pool = mysql.createPool({
      host: env.STACKRACE_DB_HOST || '127.0.0.1', // an IP: loopback TCP, as every stack uses
      port: Number(env.STACKRACE_DB_PORT || 3306),
      user: env.STACKRACE_DB_USER || 'stackrace',
      password: env.STACKRACE_DB_PASSWORD || '',
      database: env.STACKRACE_DB_NAME || 'stackrace',
      connectionLimit: size,
      maxIdle: size, // keep them all: closing idle ones would reconnect under load
      connectTimeout: 5000,
    });
    // errors of idle connections (the server went away) surface here, not in a request
    pool.on('error', () => {});
  }
  return pool;
}

async function dbSum(queries) {
  const db = dbPool();
  let total = 0;
  for (let i = 0; i < queries; i++) {
    const start = 1 + Math.floor(Math.random() * DB_MAX_START);
    const [rows] = await db.query({ sql: DB_QUERY, rowsAsArray: true }, [start]);
    for (const row of rows) total += row[0];
  }
  return total;
}

// /dbjson: one row by a random id (1..ROWS), answered as a JSON object {"id", "value"}
const DB_ROW_QUERY = 'SELECT id, value FROM test WHERE id = ?';
const DB_ROWS = Math.max(1, Number(process.env.STACKRACE_DB_ROWS || 1000000));

async function dbRow() {
  const id = 1 + Math.floor(Math.random() * DB_ROWS);
  const [rows] = await dbPool().query({ sql: DB_ROW_QUERY, rowsAsArray: true }, [id]);
  return Buffer.from(JSON.stringify({ id: rows[0][0], value: rows[0][1] }));
}

function dbFailed(res, err) {
  const text = `/db: ${err.code || err.name}: ${err.message}`;
  if (text !== lastDbError) {
    // one line per new kind of failure, not one per request
    lastDbError = text;
    console.error(text);
  }
  reply(res, 503, 'text/plain', DB_UNAVAILABLE);
}

function dbHandler(res, query) {
  dbSum(dbQueries(query)).then(
    (total) => reply(res, 200, 'text/plain', Buffer.from(total.toFixed(6))),
    (err) => dbFailed(res, err),
  );
}

function dbJsonHandler(res) {
  dbRow().then(
    (body) => reply(res, 200, 'application/json', body),
    (err) => dbFailed(res, err),
  );
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
  } else if (path === '/db') {
    dbHandler(res, q === -1 ? '' : req.url.slice(q + 1));
  } else if (path === '/dbjson') {
    dbJsonHandler(res);
  } else {
    reply(res, 404, 'text/plain', NOT_FOUND);
  }
}

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '8080' },
    http: { type: 'string', default: '1.1' },
    cert: { type: 'string' },
    key: { type: 'string' },
  },
});

function makeServer() {
  if (values.http === '1.1') return http.createServer(handle);
  const http2 = require('node:http2');
  if (values.http === 'h2c') return http2.createServer(handle);
  if (values.http === '2') {
    const fs = require('node:fs');
    const tls = { cert: fs.readFileSync(values.cert), key: fs.readFileSync(values.key), allowHTTP1: true };
    return http2.createSecureServer(tls, handle);
  }
  throw new Error(`--http ${values.http}: not one of 1.1, 2, h2c`);
}

const server = makeServer();
// Node closes an idle keep-alive connection after 5 s by default; load tools pause longer
server.keepAliveTimeout = 65000;
server.listen(Number(values.port), values.host);
// no SIGTERM handler: Node's default is to exit at once, which is what stop expects
