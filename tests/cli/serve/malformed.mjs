// malformed.mjs - `pocket serve` on bad and hostile input, over plain HTTP:
// each case gets its 4xx with an OpenAI-style error JSON, clients that
// disconnect cancel their generation, 32 concurrent streams against
// --parallel 2 --queue 8 are each answered in full or with 503, /metrics
// parses, and the server keeps answering throughout.
import net from 'node:net';
import { URL_, KEY, auth, check, finish, post, readSSE, metrics, sleep } from './common.mjs';

const chat = (extra = {}) => ({ messages: [{ role: 'user', content: 'And God said' }], max_tokens: 8, ...extra });

function isError(r, status, what) {
  const e = r.json && r.json.error;
  return check(r.status === status && e && typeof e.message === 'string' && e.message.length > 0 && 'type' in e && 'code' in e,
               what + ' -> ' + status, { status: r.status, body: r.text.slice(0, 300) });
}

// ---- bad bodies
isError(await post('/v1/chat/completions', '{"messages": [', { raw: true }), 400, 'truncated JSON');
isError(await post('/v1/chat/completions', 'not json at all', { raw: true }), 400, 'not JSON');
isError(await post('/v1/chat/completions', '', { raw: true }), 400, 'empty body');
isError(await post('/v1/chat/completions', '[1, 2, 3]', { raw: true }), 400, 'JSON array, not object');
isError(await post('/v1/chat/completions', '{"messages": [{"role": "user", "content": "a\\u0000b"}]}', { raw: true }), 400, 'NUL in a string');
isError(await post('/v1/chat/completions', '{"messages": [{"role": "user", "content": "a"}], "seed": 1\u0000}', { raw: true }), 400, 'a raw NUL after a number (jansson would take it)');
isError(await post('/v1/chat/completions', '{"a": 1, "a": 2, "messages": []}', { raw: true }), 400, 'duplicate keys');
isError(await post('/v1/chat/completions', '['.repeat(5000) + ']'.repeat(5000), { raw: true }), 400, 'deeply nested JSON');
isError(await post('/v1/chat/completions', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), { raw: true }), 400, 'invalid UTF-8');
isError(await post('/v1/chat/completions', {}), 400, 'missing messages');
isError(await post('/v1/chat/completions', { messages: [] }), 400, 'empty messages');
isError(await post('/v1/chat/completions', { messages: 'hello' }), 400, 'messages is a string');
isError(await post('/v1/chat/completions', { messages: [{ role: 'user' }] }), 400, 'message without content');
isError(await post('/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }), 400, 'unknown role');
isError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 42 }] }), 400, 'content is a number');
isError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }), 400, 'non-text content part');
isError(await post('/v1/chat/completions', chat({ max_tokens: 'ten' })), 400, 'max_tokens is a string');
isError(await post('/v1/chat/completions', chat({ max_tokens: 2.5 })), 400, 'max_tokens is fractional');
isError(await post('/v1/chat/completions', chat({ max_tokens: -1 })), 400, 'negative max_tokens');
isError(await post('/v1/chat/completions', chat({ max_tokens: 1e12 })), 400, 'absurd max_tokens');
isError(await post('/v1/chat/completions', chat({ max_completion_tokens: -3 })), 400, 'negative max_completion_tokens');
isError(await post('/v1/chat/completions', chat({ temperature: 'hot' })), 400, 'temperature is a string');
isError(await post('/v1/chat/completions', chat({ temperature: -1 })), 400, 'negative temperature');
isError(await post('/v1/chat/completions', chat({ top_p: 7 })), 400, 'top_p above 1');
isError(await post('/v1/chat/completions', chat({ seed: 'x' })), 400, 'seed is a string');
isError(await post('/v1/chat/completions', chat({ stream: 'yes' })), 400, 'stream is a string');
isError(await post('/v1/chat/completions', chat({ stop: 5 })), 400, 'stop is a number');
isError(await post('/v1/chat/completions', chat({ stop: ['a', 3] })), 400, 'stop array with a number');
isError(await post('/v1/chat/completions', chat({ stop: Array(17).fill('x') })), 400, 'too many stop strings');
isError(await post('/v1/chat/completions', chat({ n: 0 })), 400, 'n = 0');
isError(await post('/v1/chat/completions', chat({ n: 17 })), 400, 'n = 17');
isError(await post('/v1/chat/completions', chat({ model: 12 })), 400, 'model is a number');
isError(await post('/v1/completions', { prompt: 17 }), 400, 'completions: prompt is a number');
isError(await post('/v1/completions', { max_tokens: 3 }), 400, 'completions: missing prompt');
// one model is served: any name is taken for it, the answer names the served id
const other = await post('/v1/chat/completions', chat({ model: 'no-such-model' }));
check(other.status === 200 && other.json && other.json.model === 'kjv-moe-f16', 'another model name -> 200, answered as the served id',
      { status: other.status, model: other.json && other.json.model });

// ---- parameters of OpenAI's API that pocket does not implement: refused naming the parameter, never ignored
// (tools: this server formats with the built-in chatml, which cannot give tools to the model)
for (const [path, name, value] of [
  ['/v1/chat/completions', 'tools', [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }]],
  ['/v1/chat/completions', 'functions', [{ name: 'f' }]], ['/v1/chat/completions', 'function_call', { name: 'f' }],
  ['/v1/completions', 'echo', true], ['/v1/completions', 'suffix', ' amen'], ['/v1/completions', 'best_of', 3],
]) {
  const body = path === '/v1/completions' ? { prompt: 'And God said', max_tokens: 4, [name]: value } : chat({ [name]: value });
  const r = await post(path, body);
  isError(r, 400, path + ' ' + name + ' = ' + JSON.stringify(value));
  const e = r.json && r.json.error;
  check(e && e.param === name && e.code === 'unsupported_parameter' && e.message.includes("'" + name + "'"), name + ': error names the parameter', e);
}
// bad values of the parameters it has: 400 naming the parameter
for (const [path, name, value] of [
  ['/v1/chat/completions', 'tool_choice', 'required'], ['/v1/chat/completions', 'tool_choice', 'sometimes'],
  ['/v1/chat/completions', 'response_format', { type: 'xml' }], ['/v1/chat/completions', 'response_format', { type: 'json_schema' }],
  ['/v1/chat/completions', 'grammar', 'root ::= ('], ['/v1/chat/completions', 'grammar', 'root ::= nothing'], ['/v1/chat/completions', 'grammar', 5],
  ['/v1/chat/completions', 'logprobs', 3], ['/v1/chat/completions', 'top_logprobs', 21], ['/v1/chat/completions', 'top_logprobs', 2],
  ['/v1/chat/completions', 'logit_bias', { 99999: 5 }], ['/v1/chat/completions', 'logit_bias', { 5: 500 }], ['/v1/chat/completions', 'logit_bias', []],
  ['/v1/chat/completions', 'presence_penalty', 2.5], ['/v1/chat/completions', 'frequency_penalty', 'x'],
  ['/v1/chat/completions', 'n', 0], ['/v1/chat/completions', 'n', 1.5], ['/v1/chat/completions', 'chat_template_kwargs', 'x'],
  ['/v1/chat/completions', 'reasoning_effort', 'extreme'], ['/v1/chat/completions', 'thinking_budget_tokens', -1],
  ['/v1/completions', 'logprobs', 6], ['/v1/completions', 'tools', [{ type: 'function', function: { name: 'f' } }]],
]) {
  const body = path === '/v1/completions' ? { prompt: 'And God said', max_tokens: 4, [name]: value } : chat({ [name]: value });
  const r = await post(path, body);
  isError(r, 400, path + ' ' + name + ' = ' + JSON.stringify(value));
  const e = r.json && r.json.error;
  check(e && (e.param === name || e.param === 'grammar') && e.message.length > 10, name + ' = ' + JSON.stringify(value) + ': error names it', e);
}
{ // their neutral values are what the official clients may send: accepted
  const r = await post('/v1/chat/completions', chat({ max_tokens: 2, tools: [], tool_choice: 'none', response_format: { type: 'text' }, logprobs: false,
                                                   top_logprobs: 0, logit_bias: {}, presence_penalty: 0, frequency_penalty: 0, functions: null }));
  check(r.status === 200 && r.json.choices, 'neutral values of the unsupported parameters -> 200', { status: r.status, body: r.text.slice(0, 300) });
  const c = await post('/v1/completions', { prompt: 'And God said', max_tokens: 2, logprobs: null, echo: false, suffix: '', best_of: 1 });
  check(c.status === 200 && c.json.choices, 'completions: neutral logprobs/echo/suffix/best_of -> 200', { status: c.status, body: c.text.slice(0, 300) });
}

// ---- request line and headers beyond the server's 32 KiB, input quoted back
{
  const h = await fetch(URL_ + '/health', { headers: { 'X-Big': 'a'.repeat(40000) } });
  const t = await h.text();
  check(h.status === 431 && !t.includes('aaaa'), 'a 40 kB header -> 431, not quoted', h.status);
  const u = await fetch(URL_ + '/' + 'b'.repeat(40000));
  const ut = await u.text();
  check(u.status === 414 && !ut.includes('bbbb'), 'a 40 kB request line -> 414, not quoted', u.status);
  const x = await fetch(URL_ + '/<script>alert(1)</script>', { headers: auth });
  const xj = await x.json().catch(() => null);
  check(x.status === 404 && (x.headers.get('content-type') || '').startsWith('application/json') && x.headers.get('x-content-type-options') === 'nosniff' && xj && xj.error,
        'a path with markup -> 404 JSON, nosniff (never HTML)', [x.status, x.headers.get('content-type'), x.headers.get('x-content-type-options')]);
}

// ---- sizes
const huge = JSON.stringify(chat({ messages: [{ role: 'user', content: 'a'.repeat(200000) }] }));
isError(await post('/v1/chat/completions', huge, { raw: true }), 413, 'body over --max-body (Content-Length)');
{ // the same, chunked (no Content-Length): the server reads and drops it, then answers 413
  const body = new ReadableStream({ start(c) { for (let i = 0; i < 20; i++) c.enqueue(new TextEncoder().encode('x'.repeat(10000))); c.close(); } });
  const r = await fetch(URL_ + '/v1/chat/completions', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body, duplex: 'half' });
  const j = await r.json().catch(() => null);
  check(r.status === 413 && j && j.error, 'chunked body over --max-body -> 413', { status: r.status, j });
}
const long = await post('/v1/completions', { prompt: 'And God said unto Moses, I AM THAT I AM. '.repeat(150), max_tokens: 4 });
isError(long, 400, 'prompt longer than the context');
check(long.json && long.json.error.code === 'context_length_exceeded', 'long prompt: code context_length_exceeded', long.json);
const longChat = await post('/v1/chat/completions', { messages: Array(60).fill({ role: 'user', content: 'And the LORD spake unto Moses, saying, Speak unto the children of Israel' }) });
isError(longChat, 400, 'chat history longer than the context');

// ---- API key, routes
for (const [what, headers] of [['no key', {}], ['wrong key', { Authorization: 'Bearer nope' }], ['not Bearer', { Authorization: KEY }]]) {
  const r = await fetch(URL_ + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(chat()) });
  isError({ status: r.status, text: await r.text().then((t) => { r.t = t; return t; }), json: JSON.parse(r.t) }, 401, 'chat with ' + what);
}
{
  const r = await fetch(URL_ + '/v1/models');
  check(r.status === 401, '/v1/models without a key -> 401', r.status);
  const m = await fetch(URL_ + '/metrics');
  check(m.status === 401, '/metrics without a key -> 401', m.status);
  const h = await fetch(URL_ + '/health');
  check(h.status === 200 && (await h.json()).status === 'ok', '/health needs no key', h.status);
  const nf = await fetch(URL_ + '/v1/engines', { headers: auth });
  check(nf.status === 404 && (await nf.json()).error, 'unknown path -> 404 JSON', nf.status);
  const nul = await fetch(URL_ + '/%00', { headers: auth });   // decoded, it would end at the NUL: "/"
  check(nul.status === 404 && (await nul.json()).error, 'an encoded NUL in the path -> 404 JSON, not the page', nul.status);
  const ma = await fetch(URL_ + '/v1/chat/completions', { headers: auth });
  check(ma.status === 405 && (await ma.json()).error, 'GET on a POST endpoint -> 405 JSON', ma.status);
}
{ // garbage that is not HTTP at all, then a half-sent request left hanging
  const u = new URL(URL_);
  await new Promise((res) => { const s = net.connect(+u.port, '127.0.0.1', () => { s.write('\x00\x01garbage\r\n\r\n'); }); s.on('data', () => {}); s.on('close', res); s.on('error', res); setTimeout(() => { s.destroy(); res(); }, 2000); });
  const s2 = net.connect(+u.port, '127.0.0.1', () => s2.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mess'));
  s2.on('error', () => {});
  await sleep(100);
  s2.destroy();
  const r = await post('/v1/chat/completions', chat());
  check(r.status === 200, 'still answering after garbage and a half-sent request', r.status);
}

// ---- clients that disconnect: their generation is cancelled promptly
async function waitIdle(ms) {
  const t0 = Date.now();
  for (;;) {
    const m = await metrics();
    if (m['pocket_busy_slots'] === 0 && m['pocket_queue_depth'] === 0) return Date.now() - t0;
    if (Date.now() - t0 > ms) return -1;
    await sleep(20);
  }
}
check(await waitIdle(5000) >= 0, 'idle before the disconnect tests');
const m0 = await metrics();
{
  const ac = new AbortController();
  const r = await fetch(URL_ + '/v1/completions', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, signal: ac.signal,
    body: JSON.stringify({ prompt: 'And God said', max_tokens: 100000, stream: true, temperature: 0 }) });
  const reader = r.body.getReader();
  let got = 0;
  while (got < 400) { const { value, done } = await reader.read(); if (done) break; got += value.length; }
  ac.abort();
  const idle = await waitIdle(1500);
  check(idle >= 0, 'streaming client disconnects -> slot free again (' + idle + ' ms)', idle);
}
{
  const ac = new AbortController();
  const p = fetch(URL_ + '/v1/completions', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, signal: ac.signal,
    body: JSON.stringify({ prompt: 'And God said', max_tokens: 100000, temperature: 0 }) }).catch((e) => e);
  await sleep(150);
  ac.abort();
  await p;
  const idle = await waitIdle(1500);
  check(idle >= 0, 'waiting (non-streamed) client disconnects -> slot free again (' + idle + ' ms)', idle);
}
{ // both slots busy, a third request waits in the queue; its client leaves -> it leaves the queue at once
  const longReq = (ac) => fetch(URL_ + '/v1/completions', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, signal: ac.signal,
    body: JSON.stringify({ prompt: 'And God said', max_tokens: 100000, stream: true, temperature: 0 }) });
  const acs = [new AbortController(), new AbortController(), new AbortController()];
  const rs = [await longReq(acs[0]), await longReq(acs[1])];
  const queued = await longReq(acs[2]);
  await queued.body.getReader().read();    // the first (empty) chunk: headers and role sent while queued
  // a slot picks its next request up asynchronously: poll briefly for the settled state
  let m = await metrics();
  for (let i = 0; i < 40 && !(m['pocket_busy_slots'] === 2 && m['pocket_queue_depth'] === 1); i++) {
    await sleep(50);
    m = await metrics();
  }
  check(m['pocket_busy_slots'] === 2 && m['pocket_queue_depth'] === 1, 'two generating, one queued', [m['pocket_busy_slots'], m['pocket_queue_depth']]);
  acs[2].abort();
  let left = false;
  for (let i = 0; i < 50 && !left; i++) { m = await metrics(); left = m['pocket_queue_depth'] === 0; if (!left) await sleep(20); }
  check(left && m['pocket_busy_slots'] === 2, 'the queued request left the queue when its client went away', [m['pocket_busy_slots'], m['pocket_queue_depth']]);
  acs[0].abort(); acs[1].abort();
  rs.forEach((r) => r.body.cancel().catch(() => {}));
  check(await waitIdle(1500) >= 0, 'both running ones cancelled');
}
const m1 = await metrics();
check(m1['pocket_requests_cancelled_total'] - m0['pocket_requests_cancelled_total'] === 5, 'all five generations were cancelled', [m0['pocket_requests_cancelled_total'], m1['pocket_requests_cancelled_total']]);
{
  const r = await post('/v1/chat/completions', chat({ max_tokens: 5 }));
  check(r.status === 200 && r.json.choices[0].message.content.length > 0, 'answers after the disconnects', r.status);
}

// ---- 32 concurrent streams against --parallel 2 --queue 8
async function oneStream(i) {
  const r = await fetch(URL_ + '/v1/chat/completions', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Psalm ' + i }], max_tokens: 48, seed: i, stream: true, stream_options: { include_usage: true } }) });
  if (r.status === 503) {
    const j = await r.json().catch(() => null);
    return j && j.error && j.error.code === 'server_busy' ? { busy: true } : { bad: 'bad 503 body ' + JSON.stringify(j) };
  }
  if (r.status !== 200 || !(r.headers.get('content-type') || '').startsWith('text/event-stream')) return { bad: 'status ' + r.status };
  const { events, done, bad } = await readSSE(r);
  let text = '', finish = null, usage = null;
  for (const e of events) {
    if (e.usage) usage = e.usage;
    const c = e.choices && e.choices[0];
    if (c && c.delta && c.delta.content) text += c.delta.content;
    if (c && c.finish_reason) finish = c.finish_reason;
  }
  const ok = done && bad.length === 0 && finish && usage && text.length > 0 &&
             (finish === 'length' ? usage.completion_tokens === 48 : usage.completion_tokens <= 48);
  return ok ? { ok: true, text, i } : { bad: JSON.stringify({ done, bad, finish, usage, text }) };
}
const t0 = Date.now();
const results = await Promise.all(Array.from({ length: 32 }, (_, i) => oneStream(i)));
const nOk = results.filter((r) => r.ok).length, nBusy = results.filter((r) => r.busy).length;
const badOnes = results.filter((r) => r.bad).map((r) => r.bad);
check(badOnes.length === 0, '32 concurrent streams: each answered in full or 503 server_busy (' + nOk + ' answered, ' + nBusy + ' busy, ' + (Date.now() - t0) + ' ms)', badOnes.slice(0, 3));
check(nOk >= 10, 'at least parallel + queue = 10 answered', nOk);
check(nBusy >= 1, 'some were turned away with 503', nBusy);
{ // the answered ones are what a lone request with the same seed gets
  const one = results.find((r) => r.ok);
  const r = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'Psalm ' + one.i }], max_tokens: 48, seed: one.i });
  check(r.status === 200 && r.json.choices[0].message.content === one.text, 'a concurrent answer equals the same request alone', [one.text, r.json && r.json.choices[0].message.content]);
}

// ---- metrics
const m2 = await metrics();
for (const name of ['pocket_prompt_tokens_total', 'pocket_generated_tokens_total', 'pocket_tokens_per_second', 'pocket_weight_bytes_per_token',
                    'pocket_queue_depth', 'pocket_busy_slots', 'pocket_requests_total{status="200"}', 'pocket_requests_total{status="400"}',
                    'pocket_requests_total{status="503"}', 'pocket_requests_total{status="413"}', 'pocket_requests_total{status="401"}'])
  check(Number.isFinite(m2[name]), 'metrics: ' + name + ' = ' + m2[name]);
check(m2['pocket_requests_total{status="503"}'] >= nBusy, 'metrics: 503 count covers the busy answers', m2['pocket_requests_total{status="503"}']);
check(m2['pocket_generated_tokens_total'] >= nOk * 10 && m2['pocket_tokens_per_second'] > 0 && m2['pocket_weight_bytes_per_token'] > 1e6,
      'metrics: tokens, speed, weight bytes per token plausible', m2);
check(await waitIdle(5000) >= 0, 'idle at the end (no slot or queue entry leaked)');

finish('malformed.mjs');
