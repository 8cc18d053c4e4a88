// bench/http_tap.mjs - a recording HTTP proxy for the client benchmarks
// (bench/qwen_code.sh): every request to it goes on unchanged to --target,
// the answer comes back unchanged (streams as they flow), and one JSON line
// per request is appended to --log: its size, model, stream flag, tools and
// messages counts, max_tokens; the answer's status, size, time to the
// response headers and to the last byte; from the answer (a JSON body or
// server-sent chunks): prompt, cached and completion tokens, finish reasons,
// tool calls, and a refusal's error message. --bodies DIR keeps each request
// body as DIR/req-N.json (N from 1). Node's built-ins only.
//
//   node bench/http_tap.mjs --target http://127.0.0.1:8080 --log requests.jsonl \
//       [--bodies DIR] [--port 0]
// prints "tap: listening on http://127.0.0.1:PORT/" once it listens; stops on
// SIGTERM / SIGINT.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = { port: '0' };
for (let i = 0; i < args.length; i += 2) {
  const k = args[i].replace(/^--/, '');
  if (!['target', 'log', 'bodies', 'port'].includes(k) || i + 1 >= args.length) {
    console.error(`http_tap: bad argument '${args[i]}' (--target URL --log FILE [--bodies DIR] [--port N])`);
    process.exit(2);
  }
  opt[k] = args[i + 1];
}
if (!opt.target || !opt.log) {
  console.error('http_tap: --target URL and --log FILE are needed');
  process.exit(2);
}
const target = new URL(opt.target);
if (opt.bodies) fs.mkdirSync(opt.bodies, { recursive: true });
const KEEP = 8 << 20;          // the most of an answer kept for reading usage
let count = 0;

// What a request body says, whatever it is (JSON or not).
function describeRequest(buf) {
  const d = { req_bytes: buf.length };
  try {
    const j = JSON.parse(buf.toString('utf8'));
    d.model = j.model;
    d.stream = !!j.stream;
    d.tools = Array.isArray(j.tools) ? j.tools.length : 0;
    d.messages = Array.isArray(j.messages) ? j.messages.length : undefined;
    d.max_tokens = j.max_tokens ?? j.max_completion_tokens;
    if (j.tool_choice !== undefined) d.tool_choice = j.tool_choice;
  } catch { /* not JSON: size only */ }
  return d;
}

// Usage, finish reasons, tool calls and errors from a JSON body or an SSE stream.
function describeAnswer(text, d) {
  const objs = [];
  if (/^\s*data:/m.test(text)) {
    for (const line of text.split('\n')) {
      const m = /^data:\s*(.*)$/.exec(line.trim());
      if (!m || m[1] === '[DONE]') continue;
      try { objs.push(JSON.parse(m[1])); } catch { /* a partial line */ }
    }
  } else {
    try { objs.push(JSON.parse(text)); } catch { if (text) d.answer_text = text.slice(0, 200); }
  }
  const finish = new Set();
  let toolCalls = 0, content = 0, reasoning = 0;
  for (const o of objs) {
    if (o.error) d.error = String(o.error.message ?? JSON.stringify(o.error)).slice(0, 300);
    if (o.usage) {
      d.prompt_tokens = o.usage.prompt_tokens;
      d.cached_tokens = o.usage.prompt_tokens_details?.cached_tokens;
      d.completion_tokens = o.usage.completion_tokens;
    }
    for (const c of o.choices ?? []) {
      if (c.finish_reason) finish.add(c.finish_reason);
      const m = c.message ?? c.delta ?? {};
      if (typeof m.content === 'string') content += m.content.length;
      if (typeof m.reasoning_content === 'string') reasoning += m.reasoning_content.length;
      for (const t of m.tool_calls ?? []) if (t.id || t.function?.name) toolCalls++;
    }
  }
  if (finish.size) d.finish = [...finish].join(',');
  d.tool_calls = toolCalls;
  d.content_chars = content;
  if (reasoning) d.reasoning_chars = reasoning;
}

const server = http.createServer((req, res) => {
  const n = ++count;
  const t0 = performance.now();
  const parts = [];
  req.on('data', (b) => parts.push(b));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    const rec = { n, method: req.method, path: req.url, ...describeRequest(body) };
    if (opt.bodies && body.length) fs.writeFileSync(path.join(opt.bodies, `req-${n}.json`), body);
    const headers = { ...req.headers, host: target.host };
    const up = http.request({ hostname: target.hostname, port: target.port, path: req.url,
                              method: req.method, headers }, (ur) => {
      rec.status = ur.statusCode;
      rec.headers_ms = Math.round(performance.now() - t0);
      res.writeHead(ur.statusCode, ur.headers);
      const kept = [];
      let size = 0;
      ur.on('data', (b) => {
        if (size === 0) rec.first_byte_ms = Math.round(performance.now() - t0);
        if (size < KEEP) kept.push(b);
        size += b.length;
        res.write(b);
      });
      ur.on('end', () => {
        res.end();
        rec.resp_bytes = size;
        rec.total_ms = Math.round(performance.now() - t0);
        describeAnswer(Buffer.concat(kept).toString('utf8'), rec);
        fs.appendFileSync(opt.log, JSON.stringify(rec) + '\n');
      });
      ur.on('error', (e) => { rec.error = `upstream: ${e.message}`; res.destroy(); });
    });
    up.on('error', (e) => {
      rec.status = 502;
      rec.error = `upstream: ${e.message}`;
      rec.total_ms = Math.round(performance.now() - t0);
      fs.appendFileSync(opt.log, JSON.stringify(rec) + '\n');
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: rec.error, type: 'proxy_error' } }));
    });
    res.on('close', () => { if (!res.writableFinished) up.destroy(); });
    up.end(body);
  });
});
server.requestTimeout = 0;
server.listen(Number(opt.port), '127.0.0.1', () => {
  console.log(`tap: listening on http://127.0.0.1:${server.address().port}/`);
});
for (const s of ['SIGTERM', 'SIGINT']) {
  process.on(s, () => { server.closeAllConnections(); server.close(() => process.exit(0)); });
}
