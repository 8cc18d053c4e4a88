// cache.mjs - the prompt cache of `pocket serve`, through the official
// `openai` client, on one model (tests/cli/t_serve_cache.sh runs it for the
// bundled attention model and for a Gated DeltaNet one: POCKET_RECURRENT=1).
// It starts its own servers (--port 0) and checks:
//   - a conversation's turns report usage.prompt_tokens_details.cached_tokens
//     = the prefix the slot could keep (exact where the test knows it: the
//     start of an edited message, of a replaced assistant reply, of the
//     generation prompt; every 1024 tokens of a long prompt), and give the
//     greedy text a server processing the whole prompt gives (REF below);
//   - /metrics counts processed and cached prompt tokens, and checkpoints;
//   - with --ctx-checkpoints 0 a DeltaNet model cannot go back: cached 0;
//   - --parallel 2 with two interleaved conversations: each turn goes back to
//     its slot;
//   - --cache-ram: a third conversation takes a slot, its state goes to RAM,
//     and comes back from there;
//   - --cache-dir: states saved when their slot is reused and at shutdown,
//     a restarted server resumes from them; the directory's bound; corrupt,
//     truncated, foreign-model, other-cache-type and junk files are ignored
//     with a log line naming them and never used.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { requireNode, check, finish, parseMetrics, sleep } from './common.mjs';

const OpenAI = requireNode('openai');
const BIN = process.env.POCKET_BIN, MODEL = process.env.POCKET_MODEL, TMP = process.env.POCKET_TMP;
const CTX = process.env.POCKET_CTX || '2048', RECURRENT = process.env.POCKET_RECURRENT === '1';
const FOREIGN = process.env.POCKET_FOREIGN || '';   // a state file of another model (may be unset)
fs.mkdirSync(TMP, { recursive: true });

// ---- servers -------------------------------------------------------------------------
const servers = [];
async function start(name, args = []) {
  const out = fs.createWriteStream(`${TMP}/${name}.log`);
  const p = spawn(BIN, ['serve', '-m', MODEL, '--host', '127.0.0.1', '--port', '0', '-t', '1', '-c', CTX,
                        '--chat-template', 'chatml', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  p.stderr.on('data', (d) => { log += d; out.write(d); });
  const exited = new Promise((res) => p.on('close', (code, sig) => { out.end(); res(code ?? sig); }));   // stderr read to its end
  let port = null;
  for (let i = 0; i < 600 && !port; i++) {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(log);
    if (m) port = m[1];
    else if (p.exitCode !== null) break;
    else await sleep(50);
  }
  if (!port) throw new Error(`server ${name} did not start: ${log}`);
  const url = `http://127.0.0.1:${port}`;
  const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  const id = (await client.models.list()).data[0].id;
  const s = {
    name, client, id, log: () => log,
    metrics: async () => parseMetrics(await (await fetch(url + '/metrics')).text()),
    stop: async () => { p.kill('SIGTERM'); const rc = await exited; servers.splice(servers.indexOf(s), 1); return rc; },
  };
  servers.push(s);
  return s;
}

// A greedy chat turn: { text, usage, cached, id } (streamed: read to the end, with the usage chunk).
async function chat(srv, messages, { stream = false, max = 12 } = {}) {
  const params = { model: srv.id, messages, max_tokens: max, temperature: 0 };
  if (!stream) {
    const r = await srv.client.chat.completions.create(params);
    return { text: r.choices[0].message.content, usage: r.usage, cached: r.usage.prompt_tokens_details.cached_tokens, id: r.id };
  }
  let text = '', usage = null, id = null;
  for await (const ch of await srv.client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } })) {
    id = ch.id;
    if (ch.usage) usage = ch.usage;
    if (ch.choices[0] && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
  }
  return { text, usage, cached: usage && usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : undefined, id };
}
async function complete(srv, prompt, max = 4) {
  const r = await srv.client.completions.create({ model: srv.id, prompt, max_tokens: max, temperature: 0 });
  return { text: r.choices[0].text, usage: r.usage, cached: r.usage.prompt_tokens_details.cached_tokens, id: r.id };
}

// The reference: a server whose slot is emptied before each request (a
// request sharing nothing with the next), so that the whole prompt is
// processed; it also counts tokens (a completion of 0 tokens).
const REF = await start('ref');
async function flushRef() {
  await complete(REF, '\u00a7', 0);
}
async function ref(messages, max = 12) {
  await flushRef();
  const r = await chat(REF, messages, { max });
  check(r.cached <= 1, 'reference: processed whole (cached ' + r.cached + ')', r.usage);
  return r;
}
async function refComplete(prompt, max = 4) {
  await flushRef();
  return complete(REF, prompt, max);
}
const count = async (text) => (await complete(REF, text, 0)).usage.prompt_tokens;
// pocket's chatml (src/text/chat.c), to count where messages start
const render = (msgs, gen) => msgs.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('') + (gen ? '<|im_start|>assistant\n' : '');
const logLines = (srv, re) => srv.log().split('\n').filter((l) => re.test(l));
// a request's log line (stderr reaches node a little after the answer: wait for it)
async function requestLine(srv, id) {
  for (let i = 0; i < 100; i++) {
    const l = logLines(srv, new RegExp(id + ' slot \\d+: '));
    if (l.length) return l[0];
    await sleep(20);
  }
  return '';
}
const slotOf = async (srv, id) => { const m = / slot (\d+): /.exec(await requestLine(srv, id)); return m ? +m[1] : -1; };

const SYS_A = 'You answer in the words of the King James Bible, as a scribe who copies the law of Moses, the psalms and the prophets, line upon line.';
const SYS_B = 'Thou art a shepherd of Bethlehem who keepeth the flock by night; speak of the sheep, the fold, the fields and the stars above them.';
const SYS_C = 'Be a fisherman of Galilee mending nets by the sea, telling of boats and of the great draught of fishes that was taken at dawn.';
const conv = (sys, ...turns) => [{ role: 'system', content: sys }, ...turns.map((t, i) => ({ role: i % 2 ? 'assistant' : 'user', content: t }))];

// ---- one slot: a conversation, an edit, a replaced reply, a regenerate ------------------
{
  const C = await start('one');
  const conv1 = conv(SYS_A, 'Who made the heaven and the earth?');
  const t1 = await chat(C, conv1);
  const n1 = t1.usage.prompt_tokens;
  check(n1 === await count(render(conv1, true)), 'the test renders chatml as the server does', [n1]);
  check(t1.cached === 0, 'turn 1 on an empty slot: cached 0', t1.usage);
  const m0 = await C.metrics();

  // turn 2 continues the conversation (streamed: the usage chunk carries it)
  const conv2 = [...conv1, { role: 'assistant', content: t1.text }, { role: 'user', content: 'And what did he say on the first day?' }];
  const t2 = await chat(C, conv2, { stream: true });
  const r2 = await ref(conv2);
  check(t2.cached >= n1 && t2.cached <= n1 + t1.usage.completion_tokens && t2.cached < t2.usage.prompt_tokens,
        `turn 2 (streamed): cached ${t2.cached} covers turn 1's prompt (${n1}) and at most its reply`, t2.usage);
  check(t2.text === r2.text, 'turn 2: the same greedy text as the whole prompt processed', [t2.text, r2.text]);
  const m1 = await C.metrics();
  check(m1.pocket_prompt_tokens_total - m0.pocket_prompt_tokens_total === t2.usage.prompt_tokens - t2.cached &&
        m1.pocket_prompt_tokens_cached_total - m0.pocket_prompt_tokens_cached_total === t2.cached,
        '/metrics: processed and cached prompt tokens of turn 2', [m0.pocket_prompt_tokens_total, m1.pocket_prompt_tokens_total,
                                                                   m0.pocket_prompt_tokens_cached_total, m1.pocket_prompt_tokens_cached_total]);
  const line2 = await requestLine(C, t2.id);
  check(line2.includes(' slot 0: prompt ' + t2.usage.prompt_tokens + ' tokens (' + t2.cached + ' cached) '), 'the log line names the cached tokens', line2);

  // the last user message edited: back to where it starts
  const su2 = await count(render(conv2.slice(0, 3), false));
  const conv2e = [...conv2.slice(0, 3), { role: 'user', content: 'Nay, tell me of the waters.' }];
  const t2e = await chat(C, conv2e);
  const r2e = await ref(conv2e);
  check(RECURRENT ? t2e.cached === su2 : t2e.cached >= su2 && t2e.cached < t2e.usage.prompt_tokens,
        `edited last message: cached ${t2e.cached}, ${RECURRENT ? '=' : '>='} where it starts (${su2})`, t2e.usage);
  check(t2e.text === r2e.text, 'edited last message: the same greedy text', [t2e.text, r2e.text]);

  // the reply replaced (a reasoning client drops the reasoning): back to the end of turn 1's prompt
  check(!t1.text.startsWith('Zz'), 'precondition: the reply does not start like its replacement', t1.text);
  const conv2r = [...conv1, { role: 'assistant', content: 'Zzyzx quux.' }, conv2[3]];
  const t2r = await chat(C, conv2r);
  const r2r = await ref(conv2r);
  check(t2r.cached === n1, `replaced reply: cached ${t2r.cached} = turn 1's prompt (${n1})`, t2r.usage);
  check(t2r.text === r2r.text, 'replaced reply: the same greedy text', [t2r.text, r2r.text]);

  // the same request again (regenerate): all but the last token, or the generation prompt's start
  const t2g = await chat(C, conv2r);
  const gstart = await count(render(conv2r, false));
  check(t2g.cached === (RECURRENT ? gstart : t2g.usage.prompt_tokens - 1),
        `same request again: cached ${t2g.cached} = ${RECURRENT ? 'the generation prompt\'s start' : 'all but the last token'}`, [t2g.usage, gstart]);
  check(t2g.text === t2r.text, 'same request again: the same text', [t2g.text, t2r.text]);

  // a long prompt that diverges after 1100 tokens: a checkpoint every 1024
  let long = 'In the beginning God created the heaven and the earth.';
  const verses = ['And the earth was without form, and void; and darkness was upon the face of the deep.',
                  'And the Spirit of God moved upon the face of the waters.', 'And God said, Let there be light: and there was light.',
                  'And God saw the light, that it was good: and God divided the light from the darkness.'];
  for (let i = 0; (await count(long)) < 1150; i++) long += ' ' + verses[i % 4].repeat(8);
  let cut = long.length;
  while ((await count(long.slice(0, cut))) > 1100) cut = long.lastIndexOf(' ', cut - 40);
  const head = long.slice(0, cut), nHead = await count(head);
  const l1 = await complete(C, long);
  const l2 = await complete(C, head + ' Zzyzx quux');
  const rl2 = await refComplete(head + ' Zzyzx quux');
  check(nHead > 1024 && (RECURRENT ? l2.cached === 1024 : l2.cached === nHead),
        `long prompt diverging after ${nHead} tokens: cached ${l2.cached} (${RECURRENT ? 'the checkpoint at 1024' : 'the common prefix'})`, [l1.usage, l2.usage]);
  check(l2.text === rl2.text, 'long prompt: the same greedy text', [l2.text, rl2.text]);
  const m2 = await C.metrics();
  const ck = m2.pocket_context_checkpoints, ckb = m2.pocket_context_checkpoint_bytes;
  check(RECURRENT ? ck >= 1 && ck <= 4 && ckb > 0 && ckb % ck === 0 : ck === 0 && ckb === 0,
        `/metrics: ${ck} checkpoints of ${ckb} bytes`, [ck, ckb]);
  check(await C.stop() === 0, 'server: exit 0 on SIGTERM');
}

// ---- DeltaNet without checkpoints: no way back into the prompt ------------------------
if (RECURRENT) {
  const C = await start('nockpt', ['--ctx-checkpoints', '0']);
  const conv1 = conv(SYS_A, 'Who made the heaven and the earth?');
  const t1 = await chat(C, conv1);
  const conv2r = [...conv1, { role: 'assistant', content: 'Zzyzx quux.' }, { role: 'user', content: 'And then?' }];
  const t2 = await chat(C, conv2r);
  const r2 = await ref(conv2r);
  check(t1.cached === 0 && t2.cached === 0, '--ctx-checkpoints 0: a diverging turn is processed whole (cached 0)', t2.usage);
  check(t2.text === r2.text, '--ctx-checkpoints 0: the same greedy text', [t2.text, r2.text]);
  const m = await C.metrics();
  check(m.pocket_context_checkpoints === 0, '--ctx-checkpoints 0: no checkpoints held', m.pocket_context_checkpoints);
  await C.stop();
}

// Turns of conversations: each next turn appends the reply and a question.
const QUESTIONS = ['What is written in the law?', 'And what came after?', 'Say it once more, briefly.'];
function nextTurn(c, msgs, reply) {
  return [...msgs, { role: 'assistant', content: reply }, { role: 'user', content: QUESTIONS[c % 3] }];
}

// ---- two slots, two interleaved conversations: each goes back to its slot ---------------
{
  const P = await start('parallel', ['--parallel', '2']);
  const msgs = { A: conv(SYS_A, 'Who made the heaven and the earth?'), B: conv(SYS_B, 'Where do the sheep lie down?') };
  const slots = { A: [], B: [] }, prev = {};
  let ok = true, same = true;
  for (let turn = 0; turn < 3; turn++) {
    for (const k of ['A', 'B']) {
      const r = await chat(P, msgs[k]);
      slots[k].push(await slotOf(P, r.id));
      if (turn > 0) {
        ok = check(r.cached >= prev[k], `--parallel 2, conversation ${k} turn ${turn + 1}: cached ${r.cached} >= its last prompt (${prev[k]})`, r.usage) && ok;
        const rr = await ref(msgs[k]);
        same = check(r.text === rr.text, `--parallel 2, conversation ${k} turn ${turn + 1}: the same greedy text`, [r.text, rr.text]) && same;
      }
      prev[k] = r.usage.prompt_tokens;
      msgs[k] = nextTurn(turn, msgs[k], r.text);
    }
  }
  check(slots.A.every((s) => s === slots.A[0]) && slots.B.every((s) => s === slots.B[0]) && slots.A[0] !== slots.B[0] && slots.A[0] >= 0,
        '--parallel 2: each conversation stays on its slot', slots);
  await P.stop();
}

// ---- --cache-ram: a third conversation takes a slot; the one it displaced comes back from RAM
{
  const R = await start('ram', ['--parallel', '2', '--cache-ram', '64M']);
  const msgs = { A: conv(SYS_A, 'Who made the heaven and the earth?'), B: conv(SYS_B, 'Where do the sheep lie down?'),
                 C: conv(SYS_C, 'What did ye take in the net?') };
  const first = {}, slot = {};
  for (const k of ['A', 'B', 'C']) {
    const r = await chat(R, msgs[k]);
    first[k] = r;
    slot[k] = await slotOf(R, r.id);
    msgs[k] = nextTurn(0, msgs[k], r.text);
  }
  const displaced = slot.C === slot.A ? 'A' : slot.C === slot.B ? 'B' : null;
  check(displaced && slot.A !== slot.B && logLines(R, /slot \d: its \d+ tokens \(another conversation's\) kept in RAM/).length === 1,
        `--cache-ram: the conversation displaced by a third (${displaced}) kept in RAM`, [slot, logLines(R, /kept in/)]);
  for (const k of ['A', 'B']) {
    const r = await chat(R, msgs[k]);
    const rr = await ref(msgs[k]);
    const where = k === displaced ? 'from RAM' : 'from its slot';
    check(r.cached >= first[k].usage.prompt_tokens, `--cache-ram: conversation ${k} turn 2: cached ${r.cached} >= its turn 1 prompt (${first[k].usage.prompt_tokens})`, r.usage);
    const line = await requestLine(R, r.id);
    check(new RegExp(' prompt \\d+ tokens \\(\\d+ cached' + (k === displaced ? ' from RAM' : '') + '\\) ').test(line),
          `--cache-ram: conversation ${k} turn 2 came ${where}`, line);
    check(r.text === rr.text, `--cache-ram: conversation ${k} turn 2: the same greedy text`, [r.text, rr.text]);
  }
  const m = await R.metrics();
  check(m['pocket_cache_restores_total{store="ram"}'] === 1 && m.pocket_cache_saves_total >= 1 &&
        m['pocket_cache_bytes{store="ram"}'] > 0 && m['pocket_cache_bytes{store="ram"}'] <= 64 << 20,
        '/metrics: one state restored from RAM, its bytes within --cache-ram', m);
  await R.stop();
}

// ---- --cache-dir: saved on reuse and at shutdown; a restarted server resumes -------------
const DIR = `${TMP}/states`;
fs.rmSync(DIR, { recursive: true, force: true });
const files = (d) => fs.existsSync(d) ? fs.readdirSync(d).filter((f) => f.endsWith('.pkstate')).sort() : [];
const msgs = { A: conv(SYS_A, 'Who made the heaven and the earth?'), B: conv(SYS_B, 'Where do the sheep lie down?') };
const first = {};
let sizes1 = [];
{
  const D = await start('dir1', ['--cache-dir', DIR]);
  for (const k of ['A', 'B']) {
    const r = await chat(D, msgs[k]);
    await requestLine(D, r.id);
    first[k] = r;
    msgs[k] = nextTurn(0, msgs[k], r.text);
  }
  check(files(DIR).length === 1 && logLines(D, /slot 0: its \d+ tokens \(another conversation's\) kept in the directory/).length === 1,
        '--cache-dir: the displaced conversation saved as a file', [files(DIR), logLines(D, /kept in/)]);
  const rc = await D.stop();
  sizes1 = files(DIR).map((f) => fs.statSync(`${DIR}/${f}`).size);
  check(rc === 0 && files(DIR).length === 2 && logLines(D, /slot 0: its \d+ tokens saved in /).length === 1,
        '--cache-dir: the slot\'s state saved at shutdown', [rc, files(DIR), logLines(D, /saved in/)]);
}
{
  const D = await start('dir2', ['--cache-dir', DIR]);
  check(logLines(D, /cache: .*: 2 saved states/).length === 1, 'restart: both states indexed', logLines(D, /cache:/));
  for (const k of ['A', 'B']) {
    const r = await chat(D, msgs[k]);
    const rr = await ref(msgs[k]);
    check(r.cached >= first[k].usage.prompt_tokens, `restart: conversation ${k} turn 2: cached ${r.cached} >= its turn 1 prompt (${first[k].usage.prompt_tokens})`, r.usage);
    const line = await requestLine(D, r.id);
    check(/ slot 0: prompt \d+ tokens \(\d+ cached from [0-9a-f]{16}\.pkstate\) /.test(line), `restart: conversation ${k} turn 2 came from its file`, line);
    check(r.text === rr.text, `restart: conversation ${k} turn 2: the same greedy text`, [r.text, rr.text]);
  }
  const m = await D.metrics();
  check(m['pocket_cache_restores_total{store="dir"}'] === 2 && m['pocket_cache_states{store="dir"}'] >= 2, '/metrics: two states restored from files', m);
  await D.stop();
}

// ---- the directory's bound: the oldest file goes ----------------------------------------
{
  // the same turns as dir1's: its two states again, then a third conversation
  const bound = Math.max(...sizes1) + Math.min(...sizes1) - 1;     // room for one of them, not both
  const dir = `${TMP}/states-bound`;
  fs.rmSync(dir, { recursive: true, force: true });
  const D = await start('bound', ['--cache-dir', dir, '--cache-dir-size', String(bound)]);
  await chat(D, conv(SYS_A, 'Who made the heaven and the earth?'));
  await chat(D, conv(SYS_B, 'Where do the sheep lie down?'));
  await chat(D, conv(SYS_C, 'What did ye take in the net?'));
  const left = files(dir), total = left.reduce((a, f) => a + fs.statSync(`${dir}/${f}`).size, 0);
  check(left.length === 1 && total <= bound && logLines(D, /cache: deleting .*the directory holds more than its bound/).length >= 1,
        `--cache-dir-size ${bound}: one state file left (${total} bytes), the oldest deleted`, [left, logLines(D, /cache:/)]);
  await D.stop();
}

// ---- files that must not be used ---------------------------------------------------------
{
  const [fa, fb] = files(DIR);
  const bad = `${TMP}/states-bad`;
  fs.rmSync(bad, { recursive: true, force: true });
  fs.mkdirSync(bad);
  const a = fs.readFileSync(`${DIR}/${fa}`), b = fs.readFileSync(`${DIR}/${fb}`);
  const corrupt = Buffer.from(a);
  corrupt[Math.floor(corrupt.length * 2 / 3)] ^= 0x55;
  fs.writeFileSync(`${bad}/corrupt.pkstate`, corrupt);
  fs.writeFileSync(`${bad}/truncated.pkstate`, b.subarray(0, Math.floor(b.length * 0.6)));
  fs.writeFileSync(`${bad}/tiny.pkstate`, a.subarray(0, 50));
  fs.writeFileSync(`${bad}/junk.pkstate`, Buffer.alloc(4096, 'x'));
  const names = ['corrupt', 'truncated', 'tiny', 'junk'];
  if (FOREIGN) { fs.copyFileSync(FOREIGN, `${bad}/foreign.pkstate`); names.push('foreign'); }
  const X = await start('bad', ['--cache-dir', bad]);
  // the conversations whose states these were: their files are refused at start or at load
  for (const k of ['A', 'B']) {
    const r = await chat(X, msgs[k]);
    const rr = await ref(msgs[k]);
    check(r.cached < first[k].usage.prompt_tokens && r.text === rr.text, `bad files: conversation ${k} processed anew (cached ${r.cached}), same greedy text`, [r.usage, r.text, rr.text]);
  }
  for (const n of names)
    check(logLines(X, new RegExp(`cache: ignored: ${bad}/${n}\\.pkstate: `)).length === 1, `bad files: ${n}.pkstate ignored with one log line`,
          logLines(X, /cache:/));
  const m = await X.metrics();
  check(m['pocket_cache_restores_total{store="dir"}'] === 0, 'bad files: none restored', m);
  check(await X.stop() === 0 && names.every((n) => fs.existsSync(`${bad}/${n}.pkstate`)), 'bad files: the server stops cleanly, the files are left alone');

  // a state saved with other cache types: refused at load
  const other = `${TMP}/states-ctk`;
  fs.rmSync(other, { recursive: true, force: true });
  fs.mkdirSync(other);
  fs.copyFileSync(`${DIR}/${fa}`, `${other}/${fa}`);
  const K = await start('ctk', ['--cache-dir', other, '-ctk', 'f32', '-ctv', 'f32']);
  const rs = [await chat(K, msgs.A), await chat(K, msgs.B)];
  check(rs.every((r) => r.cached < r.usage.prompt_tokens / 2) && logLines(K, new RegExp(`cache: ignored: ${other}/${fa}: `)).length === 1,
        'a state of other cache types: ignored with one log line', [rs.map((r) => r.usage), logLines(K, /cache:/)]);
  await K.stop();
}

for (const s of [...servers]) await s.stop();
finish('cache.mjs');
