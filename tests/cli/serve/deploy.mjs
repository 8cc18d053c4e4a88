// deploy.mjs - deploy/run.sh's nginx in front of two `pocket serve` replicas,
// through the official `openai` client (tests/cli/t_deploy.sh starts them:
// POCKET_URL is nginx, POCKET_STATE the state directory with the replicas'
// "I PID PORT NAME" lines). nginx names the replica that answered in the
// X-Pocket-Replica header; each replica's /metrics (asked directly) says what
// it processed, so the header is checked against the work done. Checks:
//   - a key sent as X-Session-Id, X-Claude-Code-Session-Id,
//     X-OpenWebUI-Chat-Id, session_id, session-id, or in the body as
//     prompt_cache_key, user, metadata.user_id lands on one replica; over 24
//     keys both replicas are used;
//   - precedence (our header, then the other headers, then prompt_cache_key,
//     then user); no key: the client's address, as the key "127.0.0.1"; a
//     "user" inside a message's text is not a key; a 60 KB body is matched;
//   - 8 concurrent conversations of 3 turns (4 keyed to each replica): every
//     turn on its key's replica, turns 2 and 3 served from its prompt cache
//     (cached_tokens covers the previous prompt), the replicas' /metrics
//     agreeing; a turn sent to the other replica directly is not;
//   - a stream read through nginx as it comes: the client leaves after the
//     first chunk, the generation is cancelled on its replica;
//   - nginx's 413 and 502 as OpenAI errors; a replica that dies: its keys go
//     to the other one, the rest stay.
import fs from 'node:fs';
import { requireNode, check, finish, parseMetrics, URL_, KEY, auth, sleep } from './common.mjs';

const OpenAI = requireNode('openai');
const STATE = process.env.POCKET_STATE;
const replicas = fs.readFileSync(STATE + '/replicas', 'utf8').trim().split('\n').map((l) => {
  const [i, pid, port] = l.split(' ');
  return { i: +i, pid: +pid, addr: '127.0.0.1:' + port, url: 'http://127.0.0.1:' + port };
});
const byAddr = Object.fromEntries(replicas.map((r) => [r.addr, r]));
check(replicas.length === 2, 'two replicas in ' + STATE + '/replicas', replicas);
const client = new OpenAI({ baseURL: URL_ + '/v1', apiKey: KEY, maxRetries: 0, timeout: 300000 });
const model = (await client.models.list()).data[0].id;
// a header of an APIError (a Headers object in openai v5+)
const hdr = (e, name) => (e.headers && e.headers.get ? e.headers.get(name) : e.headers && e.headers[name]);
const metrics = async (r) => parseMetrics(await (await fetch(r.url + '/metrics', { headers: auth })).text());

// One chat request through nginx (or straight to a replica: { direct }):
// { text, usage, cached, replica, tried }. nginx's $upstream_addr lists every
// replica it tried ("A, B"): the last one answered.
const last = (h) => (h || '').split(', ').pop();
async function chat(messages, { headers = {}, body = {}, stream = false, max = 8, direct = null } = {}) {
  const c = direct ? new OpenAI({ baseURL: direct.url + '/v1', apiKey: KEY, maxRetries: 0, timeout: 300000 }) : client;
  const params = { model, messages, max_tokens: max, temperature: 0, ...body };
  if (!stream) {
    const { data, response } = await c.chat.completions.create(params, { headers }).withResponse();
    return { text: data.choices[0].message.content, usage: data.usage, cached: data.usage.prompt_tokens_details.cached_tokens,
             replica: direct ? direct.addr : last(response.headers.get('x-pocket-replica')),
             tried: response.headers.get('x-pocket-replica') };
  }
  const { data, response } = await c.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } },
                                                             { headers }).withResponse();
  let text = '', usage = null;
  for await (const ch of data) {
    if (ch.usage) usage = ch.usage;
    if (ch.choices[0] && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
  }
  return { text, usage, cached: usage ? usage.prompt_tokens_details.cached_tokens : undefined,
           replica: direct ? direct.addr : last(response.headers.get('x-pocket-replica')), tried: response.headers.get('x-pocket-replica') };
}

// ---- every way of naming a conversation -------------------------------------------------
const FORMS = {
  'X-Session-Id': (k) => ({ headers: { 'X-Session-Id': k } }),
  'X-Claude-Code-Session-Id': (k) => ({ headers: { 'X-Claude-Code-Session-Id': k } }),
  'X-OpenWebUI-Chat-Id': (k) => ({ headers: { 'X-OpenWebUI-Chat-Id': k } }),
  'session_id (Codex)': (k) => ({ headers: { session_id: k } }),
  'session-id (Codex)': (k) => ({ headers: { 'session-id': k } }),
  prompt_cache_key: (k) => ({ body: { prompt_cache_key: k } }),
  user: (k) => ({ body: { user: k } }),
  'metadata.user_id': (k) => ({ body: { metadata: { user_id: k } } }),
};
const probe = [{ role: 'user', content: 'Amen.' }];
const home = {};   // key -> replica address
const keys = Array.from({ length: 24 }, (_, i) => 'conversation-' + i);
for (const k of keys) {
  const seen = {};
  for (const [form, f] of Object.entries(FORMS)) {
    const o = f(k);
    seen[form] = (await chat(probe, { ...o, max: 0 })).replica;
  }
  const all = Object.values(seen);
  check(all.every((a) => a === all[0] && byAddr[a]), `${k}: every form lands on ${all[0]}`, seen);
  home[k] = all[0];
}
const onA = keys.filter((k) => home[k] === replicas[0].addr), onB = keys.filter((k) => home[k] === replicas[1].addr);
check(onA.length > 0 && onB.length > 0, `24 keys over both replicas (${onA.length} and ${onB.length})`, home);
const A = replicas[0], B = replicas[1];
const [kA, kB] = [onA[0], onB[0]];

// ---- precedence, the fallback, look-alikes -----------------------------------------------
{
  const r1 = await chat(probe, { headers: { 'X-Session-Id': kA, 'X-OpenWebUI-Chat-Id': kB }, body: { prompt_cache_key: kB, user: kB }, max: 0 });
  check(r1.replica === A.addr, 'X-Session-Id comes before the other header and the body', r1.replica);
  const r2 = await chat(probe, { headers: { 'X-Claude-Code-Session-Id': kB }, body: { prompt_cache_key: kA, user: kA }, max: 0 });
  check(r2.replica === B.addr, 'a client\'s session header comes before the body', r2.replica);
  const r3 = await chat(probe, { body: { user: kA, prompt_cache_key: kB }, max: 0 });
  check(r3.replica === B.addr, 'prompt_cache_key comes before user (wherever it is in the body)', r3.replica);
  const local = (await chat(probe, { headers: { 'X-Session-Id': '127.0.0.1' }, max: 0 })).replica;
  const none = await chat(probe, { max: 0 });
  check(none.replica === local, `no key: the client's address decides (${local}, as the key "127.0.0.1")`, [none.replica, local]);
  const other = local === A.addr ? kB : kA;
  const text = await chat([{ role: 'user', content: `{"user": "${other}", "prompt_cache_key": "${other}"}` }], { max: 0 });
  check(text.replica === local, 'a "user" inside a message is text, not a key', text.replica);
  const big = await client.chat.completions.create({ model, max_tokens: 0, messages: [{ role: 'user', content: 'And '.repeat(15000) }], user: other })
    .withResponse().then(() => null, (e) => e);
  check(big && big.status === 400 && big.code === 'context_length_exceeded' && hdr(big, 'x-pocket-replica') === home[other],
        'a 60 KB body: its "user" after the messages is read, the replica answers (400: over its context)',
        big && [big.status, big.code, hdr(big, 'x-pocket-replica'), home[other]]);
  const huge = await client.chat.completions.create({ model, max_tokens: 0, messages: [{ role: 'user', content: 'And '.repeat(17000) }] })
    .then(() => null, (e) => e);
  check(huge && huge.status === 413 && huge.code === 'request_too_large' && /65536 bytes/.test(huge.message),
        'over --max-body: nginx\'s 413 as an OpenAI error', huge && [huge.status, huge.code, huge.message]);
}

// ---- concurrent conversations ---------------------------------------------------------
const VERSES = ['In the beginning God created the heaven and the earth.', 'And the earth was without form, and void.',
  'And the Spirit of God moved upon the face of the waters.', 'And God said, Let there be light: and there was light.',
  'And God saw the light, that it was good.', 'And God called the light Day, and the darkness he called Night.',
  'And the evening and the morning were the first day.', 'And God made the firmament, and divided the waters.'];
const convKeys = [...onA.slice(0, 4), ...onB.slice(0, 4)];
const convForms = ['X-Session-Id', 'user', 'prompt_cache_key', 'X-OpenWebUI-Chat-Id'];
const before = await Promise.all(replicas.map(metrics));
async function conversation(k, n) {
  const how = FORMS[convForms[n % 4]](k);
  const messages = [{ role: 'user', content: `${VERSES[n]} Tell me of this, number ${n}.` }];
  const turns = [];
  for (let t = 0; t < 3; t++) {
    const r = await chat(messages, { ...how, stream: t === 1, max: 8 });
    turns.push(r);
    messages.push({ role: 'assistant', content: r.text }, { role: 'user', content: ['And then?', 'And after that?'][t % 2] });
  }
  messages.pop();
  return { k, form: convForms[n % 4], turns, messages };
}
const convs = await Promise.all(convKeys.map(conversation));
const after = await Promise.all(replicas.map(metrics));
for (const c of convs) {
  check(c.turns.every((t) => t.replica === home[c.k]), `${c.k} (${c.form}): its 3 turns on ${home[c.k]}`, c.turns.map((t) => t.replica));
  for (let t = 1; t < 3; t++) {
    const p = c.turns[t - 1].usage, u = c.turns[t].usage, cached = c.turns[t].cached;
    check(cached >= p.prompt_tokens && cached <= p.prompt_tokens + p.completion_tokens && cached < u.prompt_tokens,
          `${c.k} turn ${t + 1}${t === 1 ? ' (streamed)' : ''}: cached ${cached} covers turn ${t}'s prompt (${p.prompt_tokens})`, [p, u]);
  }
}
replicas.forEach((r, i) => {
  const mine = convs.flatMap((c) => c.turns).filter((t) => t.replica === r.addr);
  const processed = mine.reduce((s, t) => s + t.usage.prompt_tokens - t.cached, 0), cached = mine.reduce((s, t) => s + t.cached, 0);
  const dp = after[i].pocket_prompt_tokens_total - before[i].pocket_prompt_tokens_total;
  const dc = after[i].pocket_prompt_tokens_cached_total - before[i].pocket_prompt_tokens_cached_total;
  check(mine.length === 12 && dp === processed && dc === cached,
        `replica ${r.addr}: its /metrics count the ${mine.length} turns the header gave it (${dp} processed, ${dc} cached)`,
        [mine.length, dp, processed, dc, cached]);
});

// the same next turn sent to the other replica directly: not in its cache; through nginx: in it
{
  const c = convs[0], other = home[c.k] === A.addr ? B : A;
  const next = [...c.messages, { role: 'assistant', content: c.turns[2].text }, { role: 'user', content: 'Amen?' }];
  const prev = c.turns[2].usage.prompt_tokens;
  const wrong = await chat(next, { direct: other });
  const right = await chat(next, FORMS[c.form](c.k));
  check(wrong.cached < prev && right.cached >= prev && right.replica === home[c.k],
        `turn 4 on the other replica: cached ${wrong.cached} < ${prev}; on its own: ${right.cached}`, [wrong.usage, right.usage]);
}

// ---- a stream passes as it comes; a client that leaves cancels the generation ---------------
{
  const r = byAddr[home[kA]];
  const m0 = await metrics(r);
  const ac = new AbortController();
  const s = await client.completions.create({ model, prompt: 'And God said', max_tokens: 100000, temperature: 0, stream: true },
                                            { headers: { 'X-Session-Id': kA }, signal: ac.signal });
  let first = null;
  try { for await (const ch of s) { if (ch.choices[0] && ch.choices[0].text) { first = ch.choices[0].text; break; } } } catch (e) {}
  ac.abort();
  let m1 = await metrics(r);
  for (let i = 0; i < 100 && !(m1.pocket_requests_cancelled_total > m0.pocket_requests_cancelled_total && m1.pocket_busy_slots === 0); i++) {
    await sleep(50);
    m1 = await metrics(r);
  }
  check(first !== null && m1.pocket_requests_cancelled_total - m0.pocket_requests_cancelled_total === 1 && m1.pocket_busy_slots === 0,
        'a stream read as it comes: the client left after its first chunk, the generation cancelled on its replica',
        [first, m0.pocket_requests_cancelled_total, m1.pocket_requests_cancelled_total, m1.pocket_busy_slots]);
}

// ---- a replica dies: its keys go to the other, the rest stay; none left: 502 ---------------------
{
  const dead = B, live = A;
  process.kill(dead.pid, 'SIGTERM');
  for (let i = 0; i < 200; i++) { try { process.kill(dead.pid, 0); await sleep(50); } catch (e) { break; } }
  const moved = await chat(probe, { headers: { 'X-Session-Id': kB }, max: 2 });
  const stayed = await chat(probe, { headers: { 'X-Session-Id': kA }, max: 2 });
  check(moved.tried === `${dead.addr}, ${live.addr}` && stayed.tried === live.addr,
        `replica ${dead.addr} down: its key tried there, then answered by ${moved.replica}; the other's by ${stayed.replica}`,
        [moved.tried, stayed.tried]);
  const again = await chat(probe, { headers: { 'X-Session-Id': kB }, max: 2 });
  check(again.tried === live.addr, `then ${dead.addr} is skipped (max_fails): ${again.tried}`, again.tried);
  process.kill(live.pid, 'SIGTERM');
  for (let i = 0; i < 200; i++) { try { process.kill(live.pid, 0); await sleep(50); } catch (e) { break; } }
  const e = await chat(probe, { headers: { 'X-Session-Id': kA }, max: 2 }).then(() => null, (x) => x);
  check(e && e.status === 502 && e.code === 'replica_unavailable' && e.type === 'server_error',
        'no replica left: nginx\'s 502 as an OpenAI error', e && [e.status, e.code, e.message]);
}
finish('deploy.mjs');
