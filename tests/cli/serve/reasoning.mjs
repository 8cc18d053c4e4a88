// reasoning.mjs - the answer / reasoning split of `pocket serve` on the chain
// model (tests/lib/mk_chain_model.py), whose greedy answer is known for each
// template family. POCKET_EXPECT (JSON) says what it is:
//   { "raw": the text as generated, "content": message.content,
//     "reasoning": message.reasoning_content ("" = absent), "markers": [...] }
// Checks: the non-streamed message; the streamed deltas (reasoning_content and
// content chunks add up to the same, no chunk carries any piece of a marker,
// although the model cuts them across tokens); "reasoning_format": "none"
// gives the raw text, "auto" / "deepseek" the split; unsupported values and
// types are a 400 naming the field; the openai client sees the same.
import { URL_, KEY, check, finish, post, readSSE, auth, requireNode } from './common.mjs';

const want = JSON.parse(process.env.POCKET_EXPECT);
const messages = [{ role: 'user', content: 'What is 1 + 1?' }];
const base = { messages, temperature: 0, max_tokens: 32 };

for (const rf of [undefined, 'auto', 'deepseek']) {
  const body = rf ? { ...base, reasoning_format: rf } : base;
  const r = await post('/v1/chat/completions', body);
  const m = r.json && r.json.choices && r.json.choices[0].message;
  check(r.status === 200 && m && m.content === want.content, `content (reasoning_format ${rf})`, r.json);
  if (want.reasoning) check(m && m.reasoning_content === want.reasoning, `reasoning_content (${rf})`, m);
  else check(m && !('reasoning_content' in m), `no reasoning_content (${rf})`, m);
  check(r.json && r.json.choices[0].finish_reason === 'stop', `finish_reason stop (${rf})`, r.json);
}

{
  const r = await post('/v1/chat/completions', { ...base, reasoning_format: 'none' });
  const m = r.json && r.json.choices && r.json.choices[0].message;
  check(r.status === 200 && m && m.content === want.raw && !('reasoning_content' in m), 'reasoning_format none: the raw text', m);
}

async function stream(extra) {
  const r = await fetch(URL_ + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...auth },
    body: JSON.stringify({ ...base, ...extra, stream: true }),
  });
  const s = await readSSE(r);
  let content = '', reasoning = '', leaks = [];
  for (const e of s.events) {
    const d = e.choices && e.choices[0] && e.choices[0].delta;
    if (!d) continue;
    for (const [k, v] of Object.entries(d)) {
      if (k === 'content') content += v;
      else if (k === 'reasoning_content') reasoning += v;
      else if (k !== 'role') leaks.push(k);
      if (k !== 'role' && !extra.reasoning_format)
        for (const mk of want.markers) for (let n = 2; n <= mk.length; n++)
          if (v.includes(mk) || v.endsWith(mk.slice(0, n)) || v.startsWith(mk.slice(-n))) leaks.push(v);
    }
  }
  return { status: r.status, done: s.done, content, reasoning, leaks, n: s.events.length };
}

{
  const s = await stream({});
  check(s.status === 200 && s.done, `stream: 200 and [DONE] (${s.n} chunks)`, s);
  check(s.content === want.content, 'stream: the content deltas add up', s);
  check(s.reasoning === want.reasoning, 'stream: the reasoning_content deltas add up', s);
  check(s.leaks.length === 0, 'stream: no chunk carries a piece of a marker', s.leaks);
  const raw = await stream({ reasoning_format: 'none' });
  check(raw.content === want.raw && raw.reasoning === '', 'stream, reasoning_format none: the raw text', raw);
}

for (const [v, what] of [['deepseek-legacy', 'deepseek-legacy'], ['bogus', 'an unknown name'], [3, 'a number']]) {
  const r = await post('/v1/chat/completions', { ...base, reasoning_format: v });
  const e = r.json && r.json.error;
  check(r.status === 400 && e && e.param === 'reasoning_format' && /reasoning_format/.test(e.message),
        `reasoning_format ${what}: 400 naming the field`, r.json);
}
{
  const r = await post('/v1/completions', { prompt: 'x', max_tokens: 1, reasoning_format: 'auto' });
  check(r.status === 400 && r.json && r.json.error.param === 'reasoning_format',
        'reasoning_format on a text completion: 400', r.json);
  const ok = await post('/v1/completions', { prompt: 'x', max_tokens: 1, reasoning_format: 'none' });
  check(ok.status === 200, 'reasoning_format none on a text completion: 200', ok.json);
}

// the official client passes the extra field through and sees the split
{
  const { default: OpenAI } = await import(requireNode.resolve('openai'));
  const client = new OpenAI({ baseURL: URL_ + '/v1', apiKey: KEY });
  const model = (await client.models.list()).data[0].id;
  const c = await client.chat.completions.create({ model, ...base });
  check(c.choices[0].message.content === want.content, 'openai client: content', c.choices[0].message);
  if (want.reasoning)
    check(c.choices[0].message.reasoning_content === want.reasoning, 'openai client: reasoning_content', c.choices[0].message);
}

finish('reasoning.mjs');
