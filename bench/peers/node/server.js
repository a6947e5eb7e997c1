'use strict';
// The Node.js peer of Sluice's benchmark: what many teams would write instead of Sluice.
// rate-limiter-flexible's RateLimiterRedis (a fixed window kept in Redis by one Lua call per
// key) over ioredis with its default options, behind the same HTTP API as Sluice:
//   POST /shouldAllowRequest {"domain","clientId","descriptors":[{"entries":[{key,value}]}],"hits"}
//   -> 200 {"allowed":true} or 429 {"allowed":false}
// Each descriptor entry "key=value" selects a limiter from RULES below (the same limits as
// bench/rules/bench.yaml); the bucket is per clientId. Several descriptors are consumed together
// through RateLimiterUnion (all must allow), which, unlike Sluice, is not all-or-nothing.
//
// Usage: node server.js --port 8081 --redis redis://127.0.0.1:6379/0

const http = require('node:http');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterUnion } = require('rate-limiter-flexible');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(arg('port', '8081'));
const redisUrl = arg('redis', 'redis://127.0.0.1:6379/0');
const redis = new Redis(redisUrl);

// requests_per_unit and unit (seconds) of the bench rules that a fixed window can express.
const RULES = {
  'op=fixed_window_allow': { points: 1000000, duration: 1 },
  'op=fixed_window_deny': { points: 1, duration: 3600 },
  'op=fixed_window_hour': { points: 1000, duration: 3600 },
  'route=*': { points: 1000000, duration: 1 },
  'tier=*': { points: 1000000, duration: 1 },
};

const limiters = new Map();
function limiterFor(entry) {
  const exact = `${entry.key}=${entry.value}`;
  const name = RULES[exact] ? exact : `${entry.key}=*`;
  const rule = RULES[name];
  if (!rule) {
    return null;
  }
  let limiter = limiters.get(name);
  if (!limiter) {
    limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `rlflx:${name}`,
      points: rule.points,
      duration: rule.duration,
    });
    limiters.set(name, limiter);
  }
  return limiter;
}

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

async function decide(req) {
  const clientId = String(req.clientId || 'anonymous');
  const hits = req.hits === undefined ? 1 : Number(req.hits);
  const chosen = [];
  for (const d of req.descriptors || []) {
    const entries = Array.isArray(d) ? d : d.entries || [];
    for (const e of entries) {
      const l = limiterFor(e);
      if (l) {
        chosen.push(l);
      }
    }
  }
  if (chosen.length === 0) {
    return true;
  }
  try {
    if (chosen.length === 1) {
      await chosen[0].consume(clientId, hits);
    } else {
      await new RateLimiterUnion(...chosen).consume(clientId, hits);
    }
    return true;
  } catch (rejected) {
    if (rejected instanceof Error) {
      throw rejected;
    }
    return false;
  }
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') {
    return reply(res, 200, '{"status":"ok"}');
  }
  if (req.method !== 'POST' || req.url !== '/shouldAllowRequest') {
    return reply(res, 404, '{"error":"not found"}');
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (e) {
      return reply(res, 400, '{"error":"malformed JSON"}');
    }
    decide(body).then(
      (allowed) => reply(res, allowed ? 200 : 429, allowed ? '{"allowed":true}' : '{"allowed":false}'),
      (err) => reply(res, 503, JSON.stringify({ error: String(err && err.message) })));
  });
});
server.keepAliveTimeout = 60000;
server.listen(port, '127.0.0.1', () => {
  console.log(`node peer listening on 127.0.0.1:${port}, redis ${redisUrl}`);
});
function stop() {
  server.close();
  redis.disconnect();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
