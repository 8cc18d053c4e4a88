// misc.mjs - pocket serve's small things (tests/cli/t_serve_misc.sh starts the
// servers): --alias and any model name, models.retrieve through the official
// `openai` client, x-api-key, /tokenize, /detokenize, /props, /slots, CORS
// (headers, preflights, a real cross-origin page in headless Chromium), and
// the access log lines, keep-alive bytes on a silent stream. Server A: --api-key, --alias pocket-test, --cors
// $POCKET_PAGE and https://app.example.org, --parallel 2, -c 512; B: --quiet,
// no --cors, no key; C: --cors '*'.
import fs from 'node:fs';
import { URL_, KEY, requireNode, check, finish, post, readSSE, auth, sleep } from './common.mjs';

const OpenAI = requireNode('openai');
const { Ollama } = requireNode('ollama');
const URL_B = process.env.POCKET_URL_B, URL_C = process.env.POCKET_URL_C, PAGE = process.env.POCKET_PAGE;
const ID = 'pocket-test';
const client = new OpenAI({ baseURL: URL_ + '/v1', apiKey: KEY, maxRetries: 0, timeout: 60000 });
const get = (base, path, headers = {}) => fetch(base + path, { headers });
async function json(r) { const t = await r.text(); try { return JSON.parse(t); } catch (e) { return { unparsed: t }; } }
function isError(status, body, want, what) {
  const e = body && body.error;
  return check(status === want && e && typeof e.message === 'string' && e.message.length > 0 && 'type' in e && 'code' in e,
               what + ' -> ' + want, { status, body });
}

// ---- --alias, any model name, models.retrieve
const list = await client.models.list();
check(list.data.length === 1 && list.data[0].id === ID, 'models.list: the alias is the id', list.data.map((m) => m.id));
const m = await client.models.retrieve(ID);
check(m.id === ID && m.object === 'model' && m.owned_by === 'pocket' && m.meta && m.meta.n_ctx === 512 && m.meta.n_vocab > 0,
      'models.retrieve(the served id)', m);
const n_vocab = m.meta.n_vocab;
try {
  await client.models.retrieve('gpt-4o');
  check(false, 'models.retrieve(another id): no error');
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found' && /gpt-4o/.test(e.message),
        'models.retrieve(another id) -> NotFoundError, model_not_found, naming it', { status: e.status, error: e.error });
}
const slashed = await get(URL_, '/v1/models/' + encodeURIComponent('org/' + ID), auth);
isError(slashed.status, await json(slashed), 404, 'GET /v1/models/org%2Fpocket-test');
const messages = [{ role: 'user', content: 'And God said' }];
const chat = await client.chat.completions.create({ model: 'gpt-4o', messages, max_tokens: 6, temperature: 0 });
check(chat.model === ID && chat.choices[0].message.content.length > 0, 'chat with model "gpt-4o": answered, model is the served id', chat.model);
const chatUsage = chat.usage;
// llama-server's timings beside usage: tokens processed / held / generated and their milliseconds
const timingsOk = (t, u) => t && t.prompt_n + t.cache_n === u.prompt_tokens && t.cache_n === u.prompt_tokens_details.cached_tokens &&
  t.predicted_n === u.completion_tokens && t.prompt_ms >= 0 && t.predicted_ms > 0 && t.predicted_per_second > 0;
check(timingsOk(chat.timings, chat.usage), 'chat: timings agree with usage', [chat.timings, chat.usage]);
let streamModel = null, streamUsage = null, streamId = null, streamTimings = null;
for await (const ch of await client.chat.completions.create({ model: 'anything/else:latest', messages, max_tokens: 5, temperature: 0,
                                                              stream: true, stream_options: { include_usage: true } })) {
  streamModel = ch.model; streamId = ch.id;
  if (ch.usage) { streamUsage = ch.usage; streamTimings = ch.timings; }
}
check(streamModel === ID && streamUsage, 'streamed chat with another name: chunks carry the served id', streamModel);
check(timingsOk(streamTimings, streamUsage), 'streamed chat: the usage chunk has timings', [streamTimings, streamUsage]);
const comp = await client.completions.create({ model: 'text-davinci-003', prompt: 'In the beginning', max_tokens: 3 });
check(comp.model === ID, 'completions with another name: the served id', comp.model);

// ---- x-api-key beside Authorization: Bearer
for (const [what, headers, want] of [['x-api-key', { 'x-api-key': KEY }, 200], ['X-Api-Key (case)', { 'X-Api-Key': KEY }, 200],
                                     ['wrong x-api-key', { 'x-api-key': KEY + 'x' }, 401], ['no key', {}, 401],
                                     ['wrong Bearer, right x-api-key', { Authorization: 'Bearer nope', 'x-api-key': KEY }, 200]]) {
  const r = await get(URL_, '/v1/models', headers);
  const b = await json(r);
  if (want === 200) check(r.status === 200 && b.data && b.data[0].id === ID, what + ' -> 200', r.status);
  else isError(r.status, b, 401, what);
}
const xk = await fetch(URL_ + '/v1/chat/completions', { method: 'POST', headers: { 'x-api-key': KEY, 'anthropic-version': '2023-06-01',
  'Content-Type': 'application/json' }, body: JSON.stringify({ messages, max_tokens: 2 }) });
check(xk.status === 200, 'a completion with x-api-key (as Anthropic clients send it) -> 200', xk.status);
const noKey401 = await json(await get(URL_, '/props'));
check(noKey401.error && /x-api-key/.test(noKey401.error.message), 'the 401 names both headers', noKey401);

// ---- /tokenize, /detokenize
const text = 'And God said, Let there be light: and there was light.';
const tk = await post('/tokenize', { content: text });
const ids = tk.json && tk.json.tokens;
check(tk.status === 200 && Array.isArray(ids) && ids.length > 0 && ids.every((t) => Number.isInteger(t) && t >= 0 && t < n_vocab),
      '/tokenize: token ids in the vocabulary', tk.json);
const wp = await post('/tokenize', { content: text, with_pieces: true });
check(wp.status === 200 && wp.json.tokens.length === ids.length && wp.json.tokens.every((t, i) => t.id === ids[i]) &&
      wp.json.tokens.map((t) => t.piece).join('') === text, '/tokenize with_pieces: the same ids, the pieces spell the text', wp.json);
const sp = await post('/tokenize', { content: text, add_special: true });
check(sp.status === 200 && sp.json.tokens.length >= ids.length, '/tokenize add_special: at least as many tokens', [sp.json.tokens.length, ids.length]);
// pieces that are not UTF-8 on their own come as byte arrays; all together they are the text's bytes
const uni = 'Ruth said: «é» 日本 🙂';
const up = await post('/tokenize', { content: uni, with_pieces: true });
const bytes = up.json ? up.json.tokens.flatMap((t) => (Array.isArray(t.piece) ? t.piece : [...Buffer.from(t.piece, 'utf8')])) : [];
check(up.status === 200 && Buffer.from(bytes).equals(Buffer.from(uni, 'utf8')) &&
      up.json.tokens.every((t) => typeof t.piece === 'string' || (Array.isArray(t.piece) && t.piece.every((b) => b >= 0 && b < 256))),
      '/tokenize with_pieces, non-ASCII: strings or byte arrays, the text\'s bytes in all', up.json);
const dt = await post('/detokenize', { tokens: ids });
check(dt.status === 200 && dt.json.content === text, '/detokenize(/tokenize(text)) = text', dt.json);
const dtu = await post('/detokenize', { tokens: up.json.tokens.map((t) => t.id) });
check(dtu.status === 200 && dtu.json.content === uni, '/detokenize round trip, non-ASCII', dtu.json);
const empty = await post('/detokenize', { tokens: [] });
check(empty.status === 200 && empty.json.content === '', '/detokenize [] -> ""', empty.json);
// a lone byte token that is not UTF-8 by itself: U+FFFD, still valid JSON
const lone = up.json.tokens.find((t) => Array.isArray(t.piece));
if (lone) {
  const l = await post('/detokenize', { tokens: [lone.id] });
  check(l.status === 200 && l.json.content.includes('\ufffd'), '/detokenize of a partial UTF-8 token -> U+FFFD', l.json);
}
for (const [what, path, body, param, re] of [
  ['/detokenize id = n_vocab', '/detokenize', { tokens: [1, n_vocab] }, 'tokens', new RegExp('tokens\\[1\\] is ' + n_vocab)],
  ['/detokenize id -1', '/detokenize', { tokens: [-1] }, 'tokens', /tokens\[0\] is -1/],
  ['/detokenize id 2^40', '/detokenize', { tokens: [2 ** 40] }, 'tokens', /tokens\[0\]/],
  ['/detokenize a string id', '/detokenize', { tokens: ['7'] }, 'tokens', /must be an integer/],
  ['/detokenize a float id', '/detokenize', { tokens: [1.5] }, 'tokens', /must be an integer/],
  ['/detokenize without tokens', '/detokenize', {}, 'tokens', /'tokens' is required/],
  ['/tokenize without content', '/tokenize', {}, 'content', /'content' is required/],
  ['/tokenize content a number', '/tokenize', { content: 5 }, 'content', /'content'/],
  ['/tokenize with_pieces "yes"', '/tokenize', { content: 'a', with_pieces: 'yes' }, 'with_pieces', /'with_pieces' must be a boolean/],
]) {
  const r = await post(path, body);
  isError(r.status, r.json, 400, what);
  check(r.json && r.json.error.param === param && re.test(r.json.error.message), what + ': names ' + param, r.json);
}
const badJson = await post('/tokenize', '{"content": ', { raw: true });
isError(badJson.status, badJson.json, 400, '/tokenize truncated JSON');
const getTok = await get(URL_, '/tokenize', auth);
isError(getTok.status, await json(getTok), 405, 'GET /tokenize');
const getDetok = await get(URL_, '/detokenize');
isError(getDetok.status, await json(getDetok), 405, 'GET /detokenize without the key (405 first)');

// ---- /props, /slots
const props = await json(await get(URL_, '/props', auth));
const dgs = props.default_generation_settings;
check(dgs && dgs.n_ctx === 512 && props.total_slots === 2 && props.model_alias === ID && /kjv-moe-f16\.gguf$/.test(props.model_path) &&
      typeof props.chat_template === 'string' && props.chat_format === 'chatml' && /^pocket /.test(props.build_info) &&
      props.modalities && props.modalities.vision === false && props.is_sleeping === false,
      '/props: n_ctx, total_slots, alias, model path, template, build', props);
check(dgs && dgs.params && typeof dgs.params.temperature === 'number' && typeof dgs.params.top_k === 'number' &&
      typeof dgs.params.top_p === 'number' && dgs.params.n_predict === -1, '/props: default sampling parameters', dgs && dgs.params);
isError((await get(URL_, '/props')).status, noKey401, 401, '/props without the key');
let slots = await json(await get(URL_, '/slots', auth));
check(Array.isArray(slots) && slots.length === 2 && slots.every((s, i) => s.id === i && s.n_ctx === 512 && s.is_processing === false &&
      Number.isInteger(s.n_tokens) && s.next_token && s.next_token.has_next_token === false),
      '/slots: two idle slots with their context', slots);
check(slots.some((s) => s.n_tokens >= chatUsage.prompt_tokens), '/slots: a slot holds the tokens of the last conversations', slots);
const idleOk = await get(URL_, '/slots?fail_on_no_slot=1', auth);
check(idleOk.status === 200, '/slots?fail_on_no_slot=1 with idle slots -> 200', idleOk.status);
isError((await get(URL_, '/slots')).status, noKey401, 401, '/slots without the key');
// a busy slot: a long generation, /slots read after each chunk until it shows a decoded token (or the stream ends)
{
  const r = await fetch(URL_ + '/v1/completions', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'In the beginning', max_tokens: 480, temperature: 1, stream: true }) });
  const reader = r.body.getReader(), dec = new TextDecoder();
  let buf = '', id = null, seen = null, ended = false;
  while (!ended && !seen) {
    const { value, done } = await reader.read();
    if (done) { ended = true; break; }
    buf += dec.decode(value, { stream: true });
    const mm = /"id":"(cmpl-[^"]+)"/.exec(buf);
    if (mm) id = mm[1];
    if (!id) continue;
    const s = await json(await get(URL_, '/slots', auth));
    // the stream opens with a chunk before any token: read on until one is decoded
    seen = s.find((x) => x.is_processing && x.request_id === id && x.next_token.n_decoded >= 1) || null;
  }
  check(seen && seen.n_prompt_tokens > 0 && seen.next_token.has_next_token && seen.next_token.n_decoded >= 1 &&
        seen.next_token.n_remain === 480 - seen.next_token.n_decoded, '/slots during a generation: its slot busy with its request id', seen);
  await reader.cancel();
}

// ---- CORS on A (--cors the page's origin, https://app.example.org)
const okO = 'https://app.example.org', badO = 'https://evil.example';
let r = await get(URL_, '/v1/models', { ...auth, Origin: okO });
check(r.status === 200 && r.headers.get('access-control-allow-origin') === okO && /Origin/.test(r.headers.get('vary') || ''),
      'allowed Origin: Access-Control-Allow-Origin = it, Vary: Origin', [...r.headers]);
r = await get(URL_, '/v1/models', { ...auth, Origin: 'HTTPS://APP.EXAMPLE.ORG' });
check(r.headers.get('access-control-allow-origin') === 'HTTPS://APP.EXAMPLE.ORG', 'origins compare without case', [...r.headers]);
r = await get(URL_, '/v1/models', { ...auth, Origin: badO });
check(r.status === 200 && r.headers.get('access-control-allow-origin') === null && /Origin/.test(r.headers.get('vary') || ''),
      'other Origin: no Access-Control-Allow-Origin (the browser refuses), Vary: Origin', [...r.headers]);
r = await get(URL_, '/v1/models', { Origin: okO });
check(r.status === 401 && r.headers.get('access-control-allow-origin') === okO, 'a 401 carries the CORS header (the page can read the error)', r.status);
r = await fetch(URL_ + '/v1/chat/completions', { method: 'POST', headers: { ...auth, Origin: okO, 'Content-Type': 'application/json' },
                                                  body: JSON.stringify({ messages, max_tokens: 3, stream: true }) });
const sse = await readSSE(r);
check(r.status === 200 && r.headers.get('access-control-allow-origin') === okO && sse.done, 'a stream carries the CORS header', [...r.headers]);
const pre = (base, origin, extra = {}) => fetch(base + '/v1/chat/completions', { method: 'OPTIONS', headers: { Origin: origin,
  'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization,content-type,x-stainless-os,x-stainless-retry-count', ...extra } });
r = await pre(URL_, okO);
const ah = (r.headers.get('access-control-allow-headers') || '').toLowerCase();
check(r.status === 204 && r.headers.get('access-control-allow-origin') === okO && /POST/.test(r.headers.get('access-control-allow-methods') || '') &&
      ['authorization', 'content-type', 'x-api-key', 'anthropic-version', 'x-stainless-os', 'x-stainless-retry-count'].every((h) => ah.includes(h)) &&
      r.headers.get('access-control-max-age') === '7200' && /POST/.test(r.headers.get('allow') || ''),
      'preflight from an allowed origin (no key needed): 204, methods, the asked headers, max-age', [...r.headers]);
r = await pre(URL_, okO, { 'Access-Control-Request-Headers': 'x-ok; x-bad' });
check(r.status === 204 && !(r.headers.get('access-control-allow-headers') || '').includes(';'), 'preflight: asked headers that are not names are not echoed', [...r.headers]);
r = await pre(URL_, okO, { 'Access-Control-Request-Private-Network': 'true' });
check(r.headers.get('access-control-allow-private-network') === 'true', 'preflight: private network access answered', [...r.headers]);
r = await pre(URL_, badO);
check(r.status === 204 && r.headers.get('access-control-allow-origin') === null && r.headers.get('access-control-allow-methods') === null,
      'preflight from another origin: 204 without permission', [...r.headers]);
r = await fetch(URL_ + '/v1/models/' + ID, { method: 'OPTIONS', headers: { Origin: okO, 'Access-Control-Request-Method': 'GET' } });
check(r.status === 204 && /GET/.test(r.headers.get('access-control-allow-methods') || '') && !/POST/.test(r.headers.get('allow') || ''),
      'preflight of GET /v1/models/{id}: GET allowed, not POST', [...r.headers]);
r = await fetch(URL_ + '/no/such/thing', { method: 'OPTIONS', headers: { Origin: okO } });
check(r.status === 404, 'OPTIONS on an unknown path -> 404', r.status);
// B: no --cors: OPTIONS is 204 with Allow and no CORS header at all; responses carry none either
r = await pre(URL_B, okO);
check(r.status === 204 && /POST/.test(r.headers.get('allow') || '') && r.headers.get('access-control-allow-origin') === null &&
      r.headers.get('access-control-allow-methods') === null && r.headers.get('vary') === null, 'without --cors: OPTIONS 204, Allow, no CORS headers', [...r.headers]);
r = await get(URL_B, '/v1/models', { Origin: okO });
check(r.status === 200 && r.headers.get('access-control-allow-origin') === null && r.headers.get('vary') === null, 'without --cors: no CORS headers', [...r.headers]);
// C: --cors '*'
r = await get(URL_C, '/health', { Origin: 'https://anything.example:9999' });
check(r.headers.get('access-control-allow-origin') === 'https://anything.example:9999', "--cors '*': any origin allowed", [...r.headers]);
r = await get(URL_C, '/health', { Origin: 'https://a.example\u00e9' });
check(r.status === 200 && r.headers.get('access-control-allow-origin') === null, "--cors '*': an Origin that is not visible ASCII is not echoed", [...r.headers]);

// ---- a real page on another origin, in headless Chromium: allowed by A, refused by B
{
  const { chromium } = requireNode('playwright-core');
  fs.rmSync(process.env.POCKET_PROFILE, { recursive: true, force: true });
  const context = await chromium.launchPersistentContext(process.env.POCKET_PROFILE, {
    executablePath: process.env.POCKET_CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'],
  });
  const page = context.pages()[0] || await context.newPage();
  await page.goto(PAGE + '/');
  const call = (base, key) => page.evaluate(async ([base, key]) => {
    try {
      const r = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'whatever', messages: [{ role: 'user', content: 'And God said' }], max_tokens: 3 }) });
      const j = await r.json();
      return { status: r.status, model: j.model, content: j.choices && j.choices[0].message.content };
    } catch (e) { return { failed: String(e) }; }
  }, [base, key]);
  const a = await call(URL_, KEY);
  check(a.status === 200 && a.model === ID && typeof a.content === 'string', 'Chromium, page on ' + PAGE + ': chat through --cors (preflight + POST)', a);
  const b = await call(URL_B, 'none');
  check(b.failed && /Failed to fetch|TypeError/.test(b.failed), 'Chromium: the same call to a server without --cors is refused by the browser', b);
  await context.close();
}

// ---- the access log (A): one line per request, errors with their message
const logA = process.env.POCKET_LOG_A, logB = process.env.POCKET_LOG_B;
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// waits for a line matching re (the line is written when the request completes, after its answer)
async function logLine(file, re) {
  for (let i = 0; i < 100; i++) {
    const l = fs.readFileSync(file, 'utf8').split('\n').find((x) => re.test(x));
    if (l) return l;
    await sleep(50);
  }
  return null;
}
const T = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z 127\\.0\\.0\\.1';
let l = await logLine(logA, new RegExp(`^pocket serve: access ${T} POST /v1/chat/completions 200 \\d+ ms prompt ${chatUsage.prompt_tokens} cached ` +
                                       `${chatUsage.prompt_tokens_details.cached_tokens} generated ${chatUsage.completion_tokens}$`));
check(l, 'access log: the 200 of a chat, with its prompt, cached and generated tokens', l);
l = await logLine(logA, new RegExp(`access ${T} POST /v1/chat/completions 200 \\d+ ms prompt ${streamUsage.prompt_tokens} cached ` +
                                   `${streamUsage.prompt_tokens_details.cached_tokens} generated ${streamUsage.completion_tokens}$`));
check(l, 'access log: a streamed 200 with its tokens', l);
const bad = await post('/v1/chat/completions', { messages: 'hello' });
isError(bad.status, bad.json, 400, 'a bad request');
l = await logLine(logA, new RegExp(`access ${T} POST /v1/chat/completions 400 \\d+ ms error: ${esc(bad.json.error.message)}$`));
check(l, 'access log: the 400 with its message', l);
const nf = await get(URL_, '/no/such/path-' + process.pid, auth);
const nfj = await json(nf);
l = await logLine(logA, new RegExp(`access ${T} GET /no/such/path-${process.pid} 404 \\d+ ms error: ${esc(nfj.error.message)}$`));
check(nf.status === 404 && l, 'access log: the 404 with its message', l);
l = await logLine(logA, new RegExp(`access ${T} GET /props 401 \\d+ ms error: missing or incorrect API key`));
check(l, 'access log: a 401', l);
l = await logLine(logA, new RegExp(`access ${T} POST /tokenize 200 \\d+ ms$`));
check(l, 'access log: a /tokenize 200 (no tokens part)', l);
const ctl = await get(URL_, '/a%0Ab%1B[31mc%20d', auth);
l = await logLine(logA, /access .* GET \/a\\x0Ab\\x1B\[31mc\\x20d 404 /);
check(ctl.status === 404 && l, 'access log: control bytes of a path escaped (one line, no terminal escapes)', l);
const lines = fs.readFileSync(logA, 'utf8').split('\n').filter((x) => / access /.test(x));
check(lines.every((x) => /^pocket serve: access \S+ \S+ [A-Z]+ \S+ \d{3} \d+ ms/.test(x)), 'access log: every line in the one format', lines.slice(0, 3));
// B (--quiet): refusals only
await get(URL_B, '/v1/models');
const nfB = await get(URL_B, '/quiet-404');
l = await logLine(logB, new RegExp(`access ${T} GET /quiet-404 404 \\d+ ms error: `));
const linesB = fs.readFileSync(logB, 'utf8').split('\n').filter((x) => / access /.test(x));
check(nfB.status === 404 && l && linesB.every((x) => / [45]\d\d \d+ ms/.test(x)), '--quiet: the 404 logged, no 200 line', linesB);

// ---- keep-alive on a silent stream (C runs with POCKET_SERVE_KEEPALIVE_MS=20 and
// one sequence): a streamed request queued behind a long generation is silent
// until its turn; it gets the API's keep-alive bytes meanwhile (an SSE comment
// for OpenAI, Anthropic's ping event, an Ollama line with empty content),
// which the official clients ignore
const cli = new OpenAI({ baseURL: URL_C + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
const postC = (path, body) => fetch(URL_C + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                   body: JSON.stringify(body) });
const long = () => cli.chat.completions.create({ messages, max_tokens: 300, temperature: 0 });
let busy = long();
await sleep(30);
const ka = await postC('/v1/chat/completions', { messages, max_tokens: 4, temperature: 0, stream: true });
const kaText = await ka.text();
await busy;
const kaData = kaText.split('\n').filter((x) => x.startsWith('data: ') && x !== 'data: [DONE]');
check(ka.status === 200 && /(^|\n): keep-alive\n\n/.test(kaText) && kaData.length >= 2 &&
      kaData.every((x) => { try { JSON.parse(x.slice(6)); return true; } catch (e) { return false; } }) && /data: \[DONE\]/.test(kaText),
      'keep-alive: a queued OpenAI stream gets ": keep-alive" comments, its chunks intact',
      kaText.slice(0, 600));
busy = long();
await sleep(30);
let sdkText = '', sdkChunks = 0;
const sdkStream = await cli.chat.completions.create({ messages, max_tokens: 4, temperature: 0, stream: true });
for await (const c of sdkStream) { sdkChunks++; sdkText += (c.choices[0] && c.choices[0].delta.content) || ''; }
await busy;
const plain = await cli.chat.completions.create({ messages, max_tokens: 4, temperature: 0 });
check(sdkChunks >= 2 && sdkText === plain.choices[0].message.content,
      'keep-alive: the openai client streams through the comments (the same text as unstreamed)', { sdkText, plain: plain.choices[0].message.content });
busy = long();
await sleep(30);
const an = await postC('/v1/messages', { model: 'x', max_tokens: 4, messages, stream: true });
const anText = await an.text();
await busy;
check(an.status === 200 && /event: ping\ndata: \{"type": "ping"\}\n\n/.test(anText) &&
      anText.indexOf('event: ping') > anText.indexOf('event: message_start') && /event: message_stop/.test(anText),
      'keep-alive: a queued Anthropic stream gets ping events after message_start', anText.slice(0, 600));

busy = long();
await sleep(30);
const ol = await postC('/api/chat', { model: 'x', messages, stream: true, options: { num_predict: 4, temperature: 0 } });
const olText = await ol.text();
await busy;
const olLines = olText.split('\n').filter((x) => x);
let olObjs = [];
try { olObjs = olLines.map((x) => JSON.parse(x)); } catch (e) { olObjs = []; }
const olEmpty = olObjs.filter((o) => !o.done && o.message && o.message.content === '' && !o.message.tool_calls);
check(ol.status === 200 && olObjs.length === olLines.length && olEmpty.length >= 2 && olObjs[olObjs.length - 1].done === true &&
      olObjs.some((o) => !o.done && o.message.content !== ''),
      'keep-alive: a queued Ollama chat stream gets lines with empty content, its pieces intact', olText.slice(0, 600));
const ollamaC = new Ollama({ host: URL_C });
busy = long();
await sleep(30);
let olSdk = '';
for await (const p of await ollamaC.generate({ model: 'x', prompt: 'And God said', stream: true, options: { num_predict: 4, temperature: 0 } }))
    olSdk += p.response;
await busy;
const olPlain = await ollamaC.generate({ model: 'x', prompt: 'And God said', stream: false, options: { num_predict: 4, temperature: 0 } });
check(olSdk !== '' && olSdk === olPlain.response,
      'keep-alive: the ollama client streams /api/generate through them (the same text as unstreamed)', { olSdk, plain: olPlain.response });

finish('misc.mjs');
