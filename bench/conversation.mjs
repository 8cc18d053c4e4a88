// bench/conversation.mjs - replay a scripted conversation against running
// OpenAI-compatible servers (pocket serve, llama.cpp's llama-server) and
// print, per turn, the time to first token and how much of the prompt each
// server processed and took from its cache.
//
//   node bench/conversation.mjs --url http://127.0.0.1:8080 --label pocket \
//        [--url http://127.0.0.1:8081 --label llama-server] [options]
//
// The conversation: a system prompt of about S tokens, then T turns; each
// turn sends the whole history (as chat clients do) plus a user message of
// about U tokens and asks for R tokens (max_tokens R, temperature 0, a fixed
// seed, ignore_eos: llama-server honours it, pocket ignores the field,
// reasoning_format "none": the text as generated, so that no server holds
// text back while it decides whether a reasoning block opens: a random-weight
// gemma-4 file answers blank lines, which could still precede one),
// streamed. The reply goes back into the history: as received (--replies
// received, the default), or (--replies scripted) R tokens of corpus text
// in its place. Use scripted on bench/gen_bench_model.py's random-weight
// files: their replies are mostly filler tokens whose text ("<f123456>")
// takes 9 byte tokens when sent back, so each turn would add about 9 R
// tokens and the conversation would leave the context; either way the
// server's cache can match up to the reply's start only. With
// --agent the shape is an agent's: system prompt, one user task, then after
// every reply a tool result of about K tokens (role "tool", or a user
// message with --tool-role user) and the next request.
//
// Text is deterministic: the system prompt and tool results are cut from
// tests/data/text/calib.txt, user messages from tests/data/text/valid.txt,
// --cpt characters per token (1: the byte-level vocabulary of
// bench/gen_bench_model.py's files, one token per byte; about 4 for the
// English of a real model's vocabulary). The token counts printed are the
// servers' own (usage.prompt_tokens), not these estimates. Each conversation
// opens with a line naming the run and the round, so that no server can
// serve a first turn from an earlier run's cache.
//
// Two or more --url: the servers are alternated, --alternate turn (default:
// turn 1 on A, turn 1 on B, turn 2 on A, ...; each server keeps its own
// conversation, so each sees only its own history and the machine's noise
// falls on both) or --alternate conversation (all T turns on A, then on B).
// --rounds N repeats the whole, a new conversation each round.
//
// --save FILE writes each server's conversation (history, turns, turn-1 prompt
// speed) to FILE after the run; --resume FILE continues those conversations
// (matched by --label) from the next turn up to --T, taking the script's
// settings from FILE: bench/conversation.sh (RESTART=1) runs turns 1..T,
// restarts pocket serve with the same --cache-dir, and resumes with turn T+1.
//
// Output: one JSON line per turn on stdout as it ends, then a Markdown
// table. Per turn: ttft_s (request sent to the first streamed chunk with
// text), total_s, prompt (usage.prompt_tokens), cached
// (usage.prompt_tokens_details.cached_tokens, else llama-server's
// timings.cache_n; null when the server reports neither), processed
// (llama-server's timings.prompt_n, else prompt - cached), prev (the
// previous turn's prompt on this server: the history the current prompt
// extends, so a prefix cache gives cached >= prev - a few template tokens),
// gen (completion tokens), gen_tps, load1 (/proc/loadavg after the turn) and
// bound_s = 1.2 x processed / pp + 0.15 s, pp being this server's turn-1
// prompt speed in this conversation (prompt / ttft): issue 37's target for
// turns 2..T.
//
// The `openai` package is found as tests/cli/serve/*.mjs find it: in
// $POCKET_NODE_DIR (default build/tmp/node; bench/conversation.sh installs it).
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HELP = `usage: node bench/conversation.mjs --url URL [--label NAME] [--url URL [--label NAME] ...] [options]
  --url URL            server base URL (http://host:port); repeat to alternate servers
  --label NAME         name of the preceding --url in the output (default: its host:port)
  --S N                system prompt tokens (default 2000)
  --T N                turns (default 8)
  --R N                reply tokens per turn, max_tokens (default 64)
  --U N                user message tokens per turn (default 32)
  --agent              agent shape: one user task, then a tool result after every reply
  --K N                tool result tokens per step with --agent (default 200)
  --tool-role ROLE     "tool" (default) or "user" (the result as user text)
  --replies HOW        "received" (default: the reply goes back as it came) or "scripted"
                       (R tokens of corpus text stand in for it in the history)
  --alternate HOW      "turn" (default) or "conversation"
  --rounds N           conversations per server (default 1), each new
  --cpt X              characters per token of the server's vocabulary (default 1)
  --run-id ID          tag opening every conversation (default: the start time)
  --key KEY            API key (default $POCKET_KEY or none)
  --save FILE          write the conversations to FILE after the run (one round)
  --resume FILE        continue the conversations saved in FILE, up to turn --T
  --timeout S          seconds one request may take (default 3600)`;

function die(msg) { console.error('conversation.mjs: ' + msg); process.exit(2); }

function parseArgs(argv) {
  const o = { servers: [], S: 2000, T: 8, R: 64, U: 32, K: 200, agent: false, toolRole: 'tool',
              alternate: 'turn', replies: 'received', rounds: 1, cpt: 1, runId: String(Date.now()),
              key: process.env.POCKET_KEY || 'none', timeout: 3600 };
  const ints = { '--S': 'S', '--T': 'T', '--R': 'R', '--U': 'U', '--K': 'K', '--rounds': 'rounds', '--timeout': 'timeout' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => { if (i + 1 >= argv.length) die(a + ' needs a value'); return argv[++i]; };
    if (a === '-h' || a === '--help') { console.log(HELP); process.exit(0); }
    else if (a === '--url') {
      const u = val();
      let p;
      try { p = new URL(u); } catch (e) { die(`--url '${u}' is not a URL`); }
      if (p.protocol !== 'http:' && p.protocol !== 'https:') die(`--url '${u}' must be http or https`);
      o.servers.push({ url: u.replace(/\/+$/, ''), label: p.host });
    } else if (a === '--label') {
      if (!o.servers.length) die('--label must follow the --url it names');
      o.servers[o.servers.length - 1].label = val();
    } else if (ints[a]) {
      const v = val(), n = Number(v);
      if (!/^[0-9]+$/.test(v) || n < (a === '--S' || a === '--R' || a === '--K' || a === '--U' ? 0 : 1))
        die(`${a} is '${v}'; it must be an integer${a === '--T' || a === '--rounds' || a === '--timeout' ? ' >= 1' : ' >= 0'}`);
      o[ints[a]] = n;
    } else if (a === '--agent') o.agent = true;
    else if (a === '--tool-role') {
      o.toolRole = val();
      if (o.toolRole !== 'tool' && o.toolRole !== 'user') die(`--tool-role is '${o.toolRole}'; it must be tool or user`);
    } else if (a === '--alternate') {
      o.alternate = val();
      if (o.alternate !== 'turn' && o.alternate !== 'conversation')
        die(`--alternate is '${o.alternate}'; it must be turn or conversation`);
    } else if (a === '--replies') {
      o.replies = val();
      if (o.replies !== 'received' && o.replies !== 'scripted')
        die(`--replies is '${o.replies}'; it must be received or scripted`);
    } else if (a === '--cpt') {
      const v = val();
      o.cpt = Number(v);
      if (!(o.cpt > 0 && o.cpt <= 16)) die(`--cpt is '${v}'; it must be a number in (0, 16]`);
    } else if (a === '--run-id') o.runId = val();
    else if (a === '--key') o.key = val();
    else if (a === '--save') o.save = val();
    else if (a === '--resume') o.resume = val();
    else die(`unknown option '${a}' (see --help)`);
  }
  if (!o.servers.length) die('no --url given (see --help)');
  if ((o.save || o.resume) && o.rounds !== 1) die('--save and --resume take one round (--rounds 1)');
  return o;
}

// ---- the script: deterministic text ---------------------------------------------------

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
function corpus(name) {
  const path = join(ROOT, 'tests/data/text', name);
  if (!existsSync(path)) die(`${path} is missing (run from a pocket checkout)`);
  return readFileSync(path, 'utf8');
}

// n characters of text starting at offset off, wrapping around
function cut(text, off, n) {
  let s = '';
  off %= text.length;
  while (s.length < n) { s += text.slice(off, off + n - s.length); off = 0; }
  return s;
}

// The messages a client sends, built turn by turn; the same for every server
// apart from the replies, which are each server's own.
class Script {
  constructor(o, round) {
    this.o = o;
    const calib = corpus('calib.txt'), valid = corpus('valid.txt');
    const c = (tokens) => Math.round(tokens * o.cpt);
    const head = `Conversation ${round + 1} of run ${o.runId}.\n`;
    this.system = head + cut(calib, 0, Math.max(0, c(o.S) - head.length));
    this.user = (t) => cut(valid, t * c(o.U), c(o.U));
    this.tool = (t) => cut(calib, 60000 + t * c(o.K), c(o.K));
    this.reply = (t) => cut(valid, 20000 + t * c(o.R), c(o.R));
  }
  // the messages of turn t (0-based) given the history so far
  next(history, t) {
    if (t === 0) return [{ role: 'system', content: this.system }, { role: 'user', content: this.user(0) }];
    if (!this.o.agent) return [...history, { role: 'user', content: this.user(t) }];
    const result = this.tool(t - 1);
    const m = this.o.toolRole === 'tool'
      ? { role: 'tool', tool_call_id: `call_${t}`, content: result }
      : { role: 'user', content: 'Tool result:\n' + result };
    return [...history, m];
  }
}

// ---- one turn --------------------------------------------------------------------------

function load1() {
  try { return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]); } catch (e) { return null; }
}

async function turn(srv, messages, o) {
  const t0 = performance.now();
  let ttft = null, text = '', usage = null, timings = null, finish = null;
  const stream = await srv.client.chat.completions.create({
    model: srv.model, messages, max_tokens: o.R, temperature: 0, seed: 1, stream: true,
    stream_options: { include_usage: true }, ignore_eos: true, reasoning_format: 'none',
  });
  for await (const ch of stream) {
    const d = ch.choices && ch.choices[0] && ch.choices[0].delta;
    const piece = d ? (d.content || '') + (d.reasoning_content || '') : '';
    if (piece && ttft === null) ttft = performance.now() - t0;
    if (d && d.content) text += d.content;
    if (ch.choices && ch.choices[0] && ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    if (ch.usage) usage = ch.usage;
    if (ch.timings) timings = ch.timings;
  }
  const total = performance.now() - t0;
  if (!usage) throw new Error(`${srv.label}: the stream ended without usage (stream_options.include_usage)`);
  return { ttft, total, text, usage, timings, finish };
}

// ---- the run ----------------------------------------------------------------------------

const r3 = (x) => (x === null || x === undefined ? null : Math.round(x * 1000) / 1000);

async function main() {
  const o = parseArgs(process.argv.slice(2));
  let saved = null;
  if (o.resume) {
    try { saved = JSON.parse(readFileSync(o.resume, 'utf8')); }
    catch (e) { die(`--resume ${o.resume}: ${e.message}`); }
    if (!saved || !Array.isArray(saved.conv)) die(`--resume ${o.resume}: not a file written by --save`);
    for (const k of ['runId', 'S', 'R', 'U', 'K', 'cpt', 'agent', 'toolRole', 'replies']) o[k] = saved[k];
  }
  const nodeDir = resolve(process.env.POCKET_NODE_DIR || join(ROOT, 'build/tmp/node'));
  let OpenAI;
  try { OpenAI = createRequire(join(nodeDir, 'package.json'))('openai').default; }
  catch (e) { die(`the openai package is not in ${nodeDir} (npm install openai@7 there, or set POCKET_NODE_DIR): ${e.message}`); }
  for (const s of o.servers) {
    s.client = new OpenAI({ baseURL: s.url + '/v1', apiKey: o.key, maxRetries: 0, timeout: o.timeout * 1000 });
    let models;
    try { models = await s.client.models.list(); }
    catch (e) { die(`${s.label}: GET ${s.url}/v1/models failed: ${e.message}`); }
    if (!models.data || !models.data.length) die(`${s.label}: GET /v1/models lists no model`);
    s.model = models.data[0].id;
  }
  console.log(JSON.stringify({ run: o.runId, mode: o.agent ? 'agent' : 'chat', S: o.S, T: o.T, R: o.R, U: o.U,
    K: o.agent ? o.K : undefined, tool_role: o.agent ? o.toolRole : undefined, cpt: o.cpt,
    alternate: o.alternate, replies: o.replies, rounds: o.rounds, servers: o.servers.map((s) => ({ label: s.label, url: s.url, model: s.model })) }));

  const rows = [];
  for (let round = 0; round < o.rounds; round++) {
    const script = new Script(o, round);
    const conv = o.servers.map((s) => {
      const sv = saved && saved.conv.find((c) => c.label === s.label);
      if (saved && !sv) die(`--resume ${o.resume}: no conversation of '${s.label}' in it`);
      return sv ? { srv: s, history: sv.history, prev: sv.prev, pp: sv.pp, first: sv.turns }
                : { srv: s, history: [], prev: 0, pp: null, first: 0 };
    });
    const order = [];          // [server index, turn] in the order they run
    if (o.alternate === 'turn') { for (let t = 0; t < o.T; t++) for (let i = 0; i < conv.length; i++) if (t >= conv[i].first) order.push([i, t]); }
    else { for (let i = 0; i < conv.length; i++) for (let t = conv[i].first; t < o.T; t++) order.push([i, t]); }
    for (const [i, t] of order) {
      const c = conv[i], s = c.srv;
      const messages = script.next(c.history, t);
      let r;
      try { r = await turn(s, messages, o); }
      catch (e) {
        const hint = o.agent && o.toolRole === 'tool' && t > 0 && e.status === 400 ? ' (try --tool-role user)' : '';
        die(`${s.label} (${s.url}), round ${round + 1} turn ${t + 1}: ${e.status ? 'HTTP ' + e.status + ': ' : ''}${e.message}${hint}`);
      }
      const u = r.usage, tm = r.timings;
      const details = u.prompt_tokens_details;
      const cached = details && Number.isInteger(details.cached_tokens) ? details.cached_tokens
                   : tm && Number.isInteger(tm.cache_n) ? tm.cache_n : null;
      const processed = tm && Number.isInteger(tm.prompt_n) ? tm.prompt_n
                      : u.prompt_tokens - (cached === null ? 0 : cached);
      const ttft = r.ttft === null ? null : r.ttft / 1000;
      if (t === 0 && ttft) c.pp = u.prompt_tokens / ttft;
      const gen = u.completion_tokens;
      const row = {
        label: s.label, mode: o.agent ? 'agent' : 'chat', round: round + 1, turn: t + 1,
        ttft_s: r3(ttft), total_s: r3(r.total / 1000), prompt: u.prompt_tokens, cached, processed,
        prev: c.prev, gen, finish: r.finish,
        gen_tps: ttft !== null && gen > 1 ? r3((gen - 1) / (r.total / 1000 - ttft)) : null,
        bound_s: t > 0 && c.pp ? r3(1.2 * processed / c.pp + 0.15) : null,
        load1: load1(),
      };
      if (tm) row.timings = { cache_n: tm.cache_n, prompt_n: tm.prompt_n, prompt_ms: r3(tm.prompt_ms),
                              predicted_n: tm.predicted_n, predicted_ms: r3(tm.predicted_ms) };
      console.log(JSON.stringify(row));
      rows.push(row);
      c.prev = u.prompt_tokens;
      c.history = [...messages, { role: 'assistant', content: o.replies === 'scripted' ? script.reply(t) : r.text }];
    }
    if (o.save) {
      const keep = { runId: o.runId, S: o.S, R: o.R, U: o.U, K: o.K, cpt: o.cpt, agent: !!o.agent, toolRole: o.toolRole,
                     replies: o.replies, conv: conv.map((c) => ({ label: c.srv.label, history: c.history, prev: c.prev,
                                                               pp: c.pp, turns: o.T })) };
      writeFileSync(o.save, JSON.stringify(keep));
    }
  }

  const f = (x, d) => (x === null || x === undefined ? '-' : x.toFixed(d));
  console.log('\n| round | turn | server | prompt | cached | processed | prev | ttft s | bound s | total s | gen | gen tok/s | load |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of rows)
    console.log(`| ${w.round} | ${w.turn} | ${w.label} | ${w.prompt} | ${w.cached === null ? '-' : w.cached} | ${w.processed} | ` +
                `${w.prev} | ${f(w.ttft_s, 2)} | ${f(w.bound_s, 2)} | ${f(w.total_s, 2)} | ${w.gen} | ${f(w.gen_tps, 2)} | ${f(w.load1, 2)} |`);
}

main().catch((e) => die(e.stack || String(e)));
