// common.mjs - shared by the `pocket serve` tests (tests/cli/t_serve.sh and
// t_serve_cache.sh set the environment): the server's URL and API key, packages from $BUILD/tmp/node,
// a check() that counts failures, an SSE reader for plain fetch.
import { createRequire } from 'node:module';

export const URL_ = process.env.POCKET_URL;
export const KEY = process.env.POCKET_KEY;
// cache.mjs starts its own servers: it has no POCKET_URL
if (!process.env.POCKET_NODE_DIR || !((URL_ && KEY) || process.env.POCKET_BIN))
  throw new Error('run through tests/cli/t_serve.sh or t_serve_cache.sh (POCKET_URL / POCKET_NODE_DIR unset)');
export const requireNode = createRequire(process.env.POCKET_NODE_DIR + '/package.json');

let failures = 0;
export function check(cond, what, detail) {
  if (cond) console.log('  ok   ' + what);
  else { failures++; console.log('  FAIL ' + what + (detail !== undefined ? ': ' + JSON.stringify(detail).slice(0, 600) : '')); }
  return cond;
}
export function finish(name) {
  console.log(name + ': ' + (failures ? failures + ' failed' : 'all passed'));
  process.exit(failures ? 1 : 0);
}
export const auth = { Authorization: 'Bearer ' + KEY };
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// POST JSON (or a raw string body); returns { status, json, text }.
export async function post(path, body, { headers = {}, raw = false } = {}) {
  const r = await fetch(URL_ + path, {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...auth, ...headers },
    body: raw ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) {}
  return { status: r.status, json, text, headers: r.headers };
}

// Read a streamed response to the end: { events: [parsed JSON], done: saw [DONE] }.
export async function readSSE(response) {
  const reader = response.body.getReader(), dec = new TextDecoder();
  let buf = '', events = [], done = false, bad = [];
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ')) { bad.push(ev); continue; }
      const data = ev.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      try { events.push(JSON.parse(data)); } catch (e) { bad.push(ev); }
    }
  }
  return { events, done, bad, rest: buf };
}

// Prometheus text → { 'name{labels}': value }; throws on a malformed line.
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})?) (-?[0-9.eE+-]+|NaN|[+-]Inf)$/.exec(line);
    if (!m) throw new Error('malformed metrics line: ' + line);
    out[m[1]] = Number(m[2]);
  }
  return out;
}
export async function metrics() {
  const r = await fetch(URL_ + '/metrics', { headers: auth });
  return parseMetrics(await r.text());
}
