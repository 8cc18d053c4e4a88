// agents.mjs - what agents need of `pocket serve`, through the official
// `openai` npm client (tests/cli/t_serve_agents.sh starts the server with a
// Jinja chat template and sets the environment):
//   - /apply-template equals `pocket template` for the same conversation
//   - a template error is a 400 naming the template line
//   - tool calls (tools + tool_choice), non-streamed and streamed, then the
//     tool's result sent back and answered; the call forced by a `grammar`
//     written in the template's own call format (POCKET_FORMAT); tool_choice
//     "required" that the model does not follow: an error, never a silent answer
//   - structured output: json_schema (strict), json_object, grammar; every
//     output parsed and validated (POCKET_N_SCHEMA generations, n = 4 each)
//   - calls forced by tool_choice "required" or by name (the server's
//     grammar) with a schema of every kind: every call parsed and validated
//     (POCKET_N_TOOLS outputs); gemma4 with thinking on: its thought first
//   - logprobs (chat and legacy completions, streamed = not streamed), n = 2,
//     logit_bias, presence/frequency penalties, thinking_budget_tokens
import { readFileSync } from 'node:fs';
import { URL_, KEY, requireNode, check, finish, post } from './common.mjs';

const OpenAI = requireNode('openai').default || requireNode('openai');
const client = new OpenAI({ baseURL: URL_ + '/v1', apiKey: KEY, maxRetries: 0 });
const FORMAT = process.env.POCKET_FORMAT;               // hermes | qwen3coder | gemma4
const KWARGS = JSON.parse(process.env.POCKET_KWARGS || '{}');   // chat_template_kwargs for every request
const N_SCHEMA = parseInt(process.env.POCKET_N_SCHEMA || '40', 10);
const N_TOOLS = parseInt(process.env.POCKET_N_TOOLS || '8', 10);
const THINK_OPENS = process.env.POCKET_THINK === '1';    // the template opens <think> by default

async function expectError(p, status, what, test) {
  try { await p; check(false, what + ': an error', 'no error'); return null; } catch (e) {
    check(e.status === status && (!test || test(e)), what + ': ' + status, { status: e.status, message: e.message });
    return e;
  }
}

// ---- the template: /apply-template = pocket template ------------------------------------
{
  const models = await client.models.list();
  const meta = models.data[0].meta;
  check(meta && meta.quant === process.env.POCKET_QUANT, '/v1/models: meta.quant is the main weight type', meta);
  const conv = JSON.parse(readFileSync(process.env.POCKET_CONV, 'utf8'));
  const want = readFileSync(process.env.POCKET_EXPECTED, 'utf8');
  const r = await post('/apply-template', conv);
  check(r.status === 200 && r.json && r.json.prompt === want, '/apply-template = pocket template (' + want.length + ' bytes)',
        { status: r.status, got: r.json && r.json.prompt && r.json.prompt.slice(0, 200) });
}
if (process.env.POCKET_THINK === '1') { // Qwen3.5's template raises without a user message (Qwen3's does not)
  const bad = await post('/apply-template', { messages: [{ role: 'system', content: 'no user here' }] });
  check(bad.status === 400 && /template line \d+/.test(bad.json.error.message) && /No user query/.test(bad.json.error.message),
        'template error at /apply-template: 400 naming the line', bad.json);
  await expectError(client.chat.completions.create({ messages: [{ role: 'system', content: 'no user' }], max_tokens: 2 }),
                    400, 'template error in a chat request', (e) => /template line \d+/.test(e.message));
}

// ---- tool calls ------------------------------------------------------------------------
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
// the call, in the model's own format, forced by a grammar
const callRule = FORMAT === 'qwen3coder'
  ? 'call ::= "<tool_call>\\n<function=get_weather>\\n<parameter=city>\\n" [a-z]+ "\\n</parameter>\\n</function>\\n</tool_call>"'
  : FORMAT === 'gemma4'
  ? 'call ::= "<|tool_call>call:get_weather{city:<|\\"|>" [a-z]+ "<|\\"|>}<tool_call|>"'
  : 'call ::= "<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"" [a-z]+ "\\"}}\\n</tool_call>"';
const callMarker = FORMAT === 'gemma4' ? '<|tool_call>' : '<tool_call>';
const callGrammar = 'root ::= call\n' + callRule, twoCalls = 'root ::= call "\\n" call\n' + callRule;
const base = { temperature: 0, ...(Object.keys(KWARGS).length ? { chat_template_kwargs: KWARGS } : {}) };
const ask = [{ role: 'system', content: 'You can look up the weather.' }, { role: 'user', content: 'Weather in Paris?' }];
let call;
{
  const r = await client.chat.completions.create({ ...base, messages: ask, tools, tool_choice: 'required', grammar: callGrammar,
                                                   max_tokens: 160, seed: 7 });
  const c = r.choices[0];
  call = c.message.tool_calls && c.message.tool_calls[0];
  check(c.finish_reason === 'tool_calls' && c.message.content === null && c.message.tool_calls.length === 1,
        'tool call: finish_reason tool_calls, content null, one call', c);
  let args = null;
  try { args = JSON.parse(call.function.arguments); } catch (e) {}
  check(call && call.type === 'function' && /^call_[A-Za-z0-9]{24}$/.test(call.id) && call.function.name === 'get_weather' &&
        args && typeof args.city === 'string' && /^[a-z]+$/.test(args.city), 'tool call: id, name, JSON arguments', call);
  // streamed: a first delta with id/type/name and arguments "", then pieces of the same arguments
  const s = await client.chat.completions.create({ ...base, messages: ask, tools, tool_choice: 'required', grammar: callGrammar,
                                                   max_tokens: 160, seed: 7, stream: true });
  let first = null, argsText = '', finish = null, content = '', n = 0;
  for await (const ch of s) {
    for (const choice of ch.choices) {
      const d = choice.delta || {};
      if (d.content) content += d.content;
      for (const tc of d.tool_calls || []) {
        n++;
        if (!first) first = tc;
        else check(!tc.id && !tc.function.name && tc.index === 0, 'streamed tool call: later deltas carry arguments only', tc);
        argsText += tc.function.arguments || '';
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  check(first && first.index === 0 && /^call_/.test(first.id) && first.type === 'function' && first.function.name === 'get_weather' &&
        first.function.arguments === '', 'streamed tool call: first delta has id, type, name, arguments ""', first);
  check(argsText === call.function.arguments && finish === 'tool_calls' && content === '',
        'streamed tool call: arguments equal the non-streamed, finish tool_calls, no content', { argsText, finish, content, n });
  // tool_choice by name: the same call
  const named = await client.chat.completions.create({ ...base, messages: ask, tools, grammar: callGrammar, max_tokens: 160, seed: 7,
                                                       tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  check(named.choices[0].message.tool_calls && named.choices[0].message.tool_calls[0].function.name === 'get_weather',
        'tool_choice by name', named.choices[0]);
  // required, but the model (not forced) writes no call: an error, not an answer
  await expectError(client.chat.completions.create({ ...base, messages: ask, tools, tool_choice: 'required', max_tokens: 6,
                                                     grammar: 'root ::= "no call"' }),
                    500, 'tool_choice required, no call made', (e) => /tool_choice/.test(e.message));
  // required without a grammar of the request's: the server's grammar forces the call
  // (docs/tool-calls.md); a JSON response_format beside it is refused
  const forced = await client.chat.completions.create({ ...base, messages: ask, tools, tool_choice: 'required',
                                                        max_tokens: 200, seed: 7 });
  check(forced.choices[0].finish_reason === 'tool_calls' && forced.choices[0].message.tool_calls &&
        forced.choices[0].message.tool_calls[0].function.name === 'get_weather' &&
        typeof JSON.parse(forced.choices[0].message.tool_calls[0].function.arguments) === 'object',
        'tool_choice required: the call forced by the server\'s grammar', forced.choices[0]);
  await expectError(client.chat.completions.create({ ...base, messages: ask, tools, tool_choice: 'required', max_tokens: 6,
                                                     response_format: { type: 'json_object' } }),
                    400, 'tool_choice required with a JSON response_format', (e) => /response_format/.test(e.message));
  // tool_choice none: the same text is content, no call parsed
  const none = await client.chat.completions.create({ ...base, messages: ask, tools, tool_choice: 'none', grammar: callGrammar,
                                                      max_tokens: 160, seed: 7 });
  check(!none.choices[0].message.tool_calls && none.choices[0].message.content.includes(callMarker) &&
        none.choices[0].finish_reason === 'stop', 'tool_choice none: the text stays content', none.choices[0]);
  // two calls; parallel_tool_calls false keeps the first (streamed too)
  const two = await client.chat.completions.create({ ...base, messages: ask, tools, grammar: twoCalls, max_tokens: 320, seed: 7 });
  check(two.choices[0].message.tool_calls && two.choices[0].message.tool_calls.length === 2, 'two calls', two.choices[0]);
  const one = await client.chat.completions.create({ ...base, messages: ask, tools, grammar: twoCalls, max_tokens: 320, seed: 7,
                                                     parallel_tool_calls: false });
  check(one.choices[0].message.tool_calls && one.choices[0].message.tool_calls.length === 1 &&
        one.choices[0].message.tool_calls[0].function.arguments === two.choices[0].message.tool_calls[0].function.arguments,
        'parallel_tool_calls false: the first call only', one.choices[0]);
  const os = await client.chat.completions.create({ ...base, messages: ask, tools, grammar: twoCalls, max_tokens: 320, seed: 7,
                                                    parallel_tool_calls: false, stream: true });
  const idx = new Set();
  for await (const ch of os) for (const c of ch.choices) for (const tc of (c.delta && c.delta.tool_calls) || []) idx.add(tc.index);
  check(idx.size === 1 && idx.has(0), 'parallel_tool_calls false streamed: deltas of call 0 only', [...idx]);
  await expectError(client.chat.completions.create({ ...base, messages: ask, tools, max_tokens: 2,
                                                     tool_choice: { type: 'function', function: { name: 'nope' } } }),
                    400, 'tool_choice naming an unknown tool');
}
{ // the round trip: the call and its result go back, the model answers
  const msgs = [...ask, { role: 'assistant', content: null, tool_calls: [call] },
                { role: 'tool', tool_call_id: call.id, content: 'Sunny, 21 C' }];
  const prompt = await post('/apply-template', { messages: msgs, tools, ...(Object.keys(KWARGS).length ? { chat_template_kwargs: KWARGS } : {}) });
  const city = JSON.parse(call.function.arguments).city;
  check(prompt.status === 200 && prompt.json.prompt.includes('Sunny, 21 C') && prompt.json.prompt.includes(city) &&
        prompt.json.prompt.includes('get_weather'), 'round trip: the call and the result reach the template', prompt.json);
  const r = await client.chat.completions.create({ ...base, messages: msgs, tools, max_tokens: 32, grammar: 'root ::= "It is sunny."' });
  check(r.choices[0].message.content === 'It is sunny.' && !r.choices[0].message.tool_calls && r.choices[0].finish_reason === 'stop',
        'round trip: the answer after the tool result', r.choices[0]);
  const s = await client.chat.completions.create({ ...base, messages: msgs, tools, max_tokens: 32, grammar: 'root ::= "It is sunny."',
                                                   stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null;
  for await (const ch of s) {
    for (const c of ch.choices) text += (c.delta && c.delta.content) || '';
    if (ch.usage) usage = ch.usage;
  }
  check(text === 'It is sunny.' && usage && usage.completion_tokens > 0, 'round trip streamed', { text, usage });
}

// ---- structured output -------------------------------------------------------------------
const schema = {
  type: 'object', additionalProperties: false, required: ['name', 'age', 'tags', 'ok'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, maxItems: 3 },
    ok: { type: 'boolean' },
    note: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 8 }] },
  },
};
function valid(v) {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return 'not an object';
  for (const k of Object.keys(v)) if (!(k in schema.properties)) return 'extra key ' + k;
  for (const k of schema.required) if (!(k in v)) return 'missing ' + k;
  if (typeof v.name !== 'string' || [...v.name].length < 1 || [...v.name].length > 12) return 'name';
  if (!Number.isInteger(v.age) || v.age < 0 || v.age > 150) return 'age';
  if (!Array.isArray(v.tags) || v.tags.length > 3 || v.tags.some((t) => !['red', 'green', 'blue'].includes(t))) return 'tags';
  if (typeof v.ok !== 'boolean') return 'ok';
  if ('note' in v && v.note !== null && (typeof v.note !== 'string' || [...v.note].length > 8)) return 'note';
  return null;
}
{
  let total = 0, good = 0, bad = [];
  for (let i = 0; total < N_SCHEMA; i++) {
    const r = await client.chat.completions.create({
      ...base, temperature: 1.0, seed: 1000 + i, n: 4, max_tokens: 60,
      messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    check(r.choices.length === 4 && r.choices.every((c, k) => c.index === k), 'json_schema: n = 4 choices, indexed', r.choices.length);
    for (const c of r.choices) {
      total++;
      let v, why;
      try { v = JSON.parse(c.message.content); why = valid(v); } catch (e) { why = 'JSON: ' + e.message; }
      if (!why) good++; else bad.push({ why, text: c.message.content, finish: c.finish_reason });
    }
  }
  check(good === total, `json_schema: ${good} of ${total} outputs parse and validate`, bad.slice(0, 3));
  let objs = 0;
  for (let i = 0; i < 8; i++) {
    const r = await client.chat.completions.create({ ...base, temperature: 1.0, seed: 50 + i, max_tokens: 40,
      messages: [{ role: 'user', content: 'JSON please' }], response_format: { type: 'json_object' } });
    try { const v = JSON.parse(r.choices[0].message.content); if (v && typeof v === 'object' && !Array.isArray(v)) objs++; } catch (e) {}
  }
  check(objs === 8, `json_object: ${objs} of 8 outputs are JSON objects`);
  const yn = await client.chat.completions.create({ ...base, temperature: 1.0, n: 6, max_tokens: 4,
    messages: [{ role: 'user', content: 'yes or no?' }], grammar: 'root ::= "yes" | "no"' });
  check(yn.choices.every((c) => c.message.content === 'yes' || c.message.content === 'no'), 'grammar: yes | no', yn.choices.map((c) => c.message.content));
  await expectError(client.chat.completions.create({ ...base, max_tokens: 4, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } } }),
    400, 'json_schema with an unsupported keyword', (e) => /pattern/.test(e.message) && e.param === 'response_format');
  await expectError(client.chat.completions.create({ ...base, max_tokens: 4, messages: [{ role: 'user', content: 'x' }],
    grammar: 'root ::= "a" undefined-rule' }), 400, 'a bad grammar', (e) => /grammar/.test(e.message) && /undefined-rule/.test(e.message));
}

// ---- forced calls: every output a call whose arguments validate --------------------------------
{
  const ftools = [{ type: 'function', function: { name: 'book', description: 'Book a room.', parameters: {
    type: 'object', additionalProperties: false, required: ['who', 'nights', 'room'],
    properties: {
      who: { type: 'string' }, nights: { type: 'integer', minimum: 1, maximum: 30 }, room: { enum: ['single', 'double'] },
      note: { type: 'string', maxLength: 10 }, paid: { type: ['boolean', 'null'] },
      extras: { type: 'array', maxItems: 2, items: { type: 'object', required: ['name'],
                properties: { name: { type: 'string' }, qty: { type: 'number' } } } },
    } } } }, { type: 'function', function: { name: 'ping', parameters: { type: 'object', properties: {} } } }];
  const len = (s) => [...s].length;
  function validCall(name, a) {
    if (!a || typeof a !== 'object' || Array.isArray(a)) return 'not an object';
    if (name === 'ping') return Object.keys(a).length ? 'ping with arguments' : null;
    if (name !== 'book') return 'unknown function ' + name;
    const props = ftools[0].function.parameters.properties;
    for (const k of Object.keys(a)) if (!(k in props)) return 'extra key ' + k;
    if (typeof a.who !== 'string') return 'who';
    if (!Number.isInteger(a.nights) || a.nights < 1 || a.nights > 30) return 'nights';
    if (a.room !== 'single' && a.room !== 'double') return 'room';
    if ('note' in a && (typeof a.note !== 'string' || len(a.note) > 10)) return 'note';
    if ('paid' in a && a.paid !== null && typeof a.paid !== 'boolean') return 'paid';
    if ('extras' in a && (!Array.isArray(a.extras) || a.extras.length > 2 || a.extras.some((x) => !x || typeof x !== 'object' ||
        typeof x.name !== 'string' || Object.keys(x).some((k) => k !== 'name' && k !== 'qty') ||
        ('qty' in x && typeof x.qty !== 'number')))) return 'extras';
    return null;
  }
  let total = 0, good = 0, books = 0;
  const bad = [], named = { type: 'function', function: { name: 'book' } };
  const forced = async (extra, seed, choice) => {
    const r = await client.chat.completions.create({ ...base, ...extra, temperature: 1.0, seed, n: 4, max_tokens: 300,
      messages: [{ role: 'user', content: 'Book a room.' }], tools: ftools, tool_choice: choice });
    for (const c of r.choices) {
      total++;
      let why = c.finish_reason !== 'tool_calls' ? 'finish ' + c.finish_reason : !c.message.tool_calls ? 'no call' : null;
      for (const tc of (!why && c.message.tool_calls) || []) {
        if (choice !== 'required' && tc.function.name !== 'book') why = why || 'called ' + tc.function.name;
        books += tc.function.name === 'book';
        try { why = why || validCall(tc.function.name, JSON.parse(tc.function.arguments)); } catch (e) { why = 'JSON: ' + e.message; }
      }
      if (!why) good++; else bad.push({ why, message: c.message });
    }
    return r;
  };
  for (let i = 0; total < N_TOOLS; i++) await forced({}, 3000 + i, i % 2 ? 'required' : named);
  check(good === total && books >= total / 2, `tool_choice required / by name: ${good} of ${total} forced outputs are calls ` +
        `that validate (${books} to book)`, bad.slice(0, 3));
  if (FORMAT === 'gemma4') {   // thinking on: the prompt leaves the thought channel open, the grammar lets it come first
    const r = await forced({ chat_template_kwargs: { enable_thinking: true } }, 77, named);
    check(r.choices.some((c) => c.message.reasoning_content) && good === total,
          'gemma4, thinking on: the thought channel, then a call that validates', r.choices.map((c) => c.message));
  }
}

// ---- logprobs, n, logit_bias, penalties ------------------------------------------------------
{
  const msgs = [{ role: 'user', content: 'And God said' }];
  const r = await client.chat.completions.create({ ...base, messages: msgs, max_tokens: 8, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs && r.choices[0].logprobs.content;
  check(lp && lp.length === r.usage.completion_tokens && lp.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 &&
        t.top_logprobs[0].token === t.token && Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6 &&
        t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob && t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob &&
        Array.isArray(t.bytes)), 'chat logprobs: one per token, greedy = the best, top 3 sorted', lp && lp.slice(0, 2));
  check(lp && Buffer.concat(lp.map((t) => Buffer.from(t.bytes))).toString('utf8') === r.choices[0].message.content,
        'chat logprobs: the tokens\' bytes are the content', r.choices[0].message.content);
  const s = await client.chat.completions.create({ ...base, messages: msgs, max_tokens: 8, logprobs: true, top_logprobs: 3, stream: true });
  const slp = [];
  for await (const ch of s) for (const c of ch.choices) if (c.logprobs && c.logprobs.content) slp.push(...c.logprobs.content);
  check(JSON.stringify(slp) === JSON.stringify(lp), 'chat logprobs streamed = not streamed', slp.length);
  const t = await client.completions.create({ model: undefined, prompt: 'And God said', max_tokens: 6, temperature: 0, logprobs: 2 });
  const L = t.choices[0].logprobs;
  check(L && L.tokens.length === t.usage.completion_tokens && L.token_logprobs.length === L.tokens.length &&
        L.top_logprobs.every((o) => Object.keys(o).length <= 2) && L.text_offset[0] === 0 && L.tokens.join('') === t.choices[0].text,
        'completions: legacy logprobs', L);
  // n = 2: two choices (streamed: both indexes, each finished), usage counts both
  const two = await client.chat.completions.create({ ...base, temperature: 1.0, messages: msgs, max_tokens: 5, n: 2 });
  check(two.choices.length === 2 && two.choices[0].index === 0 && two.choices[1].index === 1 &&
        two.usage.completion_tokens <= 10 && two.usage.completion_tokens >= 2, 'n = 2', two.usage);
  const ts = await client.chat.completions.create({ ...base, temperature: 1.0, messages: msgs, max_tokens: 5, n: 2, stream: true,
                                                    stream_options: { include_usage: true } });
  const fin = {}, texts = { 0: '', 1: '' };
  let usage = null;
  for await (const ch of ts) {
    for (const c of ch.choices) { texts[c.index] += (c.delta && c.delta.content) || ''; if (c.finish_reason) fin[c.index] = c.finish_reason; }
    if (ch.usage) usage = ch.usage;
  }
  check(fin[0] && fin[1] && usage && usage.completion_tokens >= 2, 'n = 2 streamed: both choices finish, usage', { fin, usage });
  // logit_bias: +100 on a token makes it the only one generated
  const forced = await client.chat.completions.create({ ...base, messages: msgs, max_tokens: 3, logprobs: true, logit_bias: { 300: 100 } });
  const ids = forced.choices[0].logprobs.content.map((x) => x.token);
  check(ids.length === 3 && ids.every((x) => x === ids[0]) && forced.choices[0].logprobs.content[0].logprob > -0.01,
        'logit_bias +100: that token every time', ids);
  await expectError(client.chat.completions.create({ ...base, messages: msgs, max_tokens: 1, logit_bias: { abc: 1 } }), 400, 'logit_bias: a bad key');
  const plain = await client.chat.completions.create({ ...base, messages: msgs, max_tokens: 24, logprobs: true });
  const pen = await client.chat.completions.create({ ...base, messages: msgs, max_tokens: 24, logprobs: true, frequency_penalty: 2, presence_penalty: 2 });
  const distinct = (c) => new Set(c.choices[0].logprobs.content.map((x) => x.token)).size;
  check(distinct(pen) >= distinct(plain), `penalties: ${distinct(pen)} distinct tokens of 24 (without: ${distinct(plain)})`);
  await expectError(client.chat.completions.create({ ...base, messages: msgs, max_tokens: 1, presence_penalty: 3 }), 400, 'presence_penalty out of range');
  await expectError(client.chat.completions.create({ ...base, messages: msgs, max_tokens: 1, n: 17 }), 400, 'n = 17');
}

// ---- thinking budget (templates that open <think>) ---------------------------------------------
if (THINK_OPENS) {
  const msgs = [{ role: 'user', content: 'Think first.' }];
  const raw = await client.chat.completions.create({ temperature: 0, messages: msgs, max_tokens: 12, reasoning_format: 'none',
                                                     thinking_budget_tokens: 0 });
  check(raw.choices[0].message.content.startsWith('\n</think>\n\n'), 'thinking_budget_tokens 0: the reasoning closed at once',
        raw.choices[0].message.content);
  const three = await client.chat.completions.create({ temperature: 0, messages: msgs, max_tokens: 12, reasoning_format: 'none',
                                                       thinking_budget_tokens: 3, logprobs: true });
  const c = three.choices[0];
  const before = Buffer.concat(c.logprobs.content.slice(0, 3).map((t) => Buffer.from(t.bytes)));
  const got = Buffer.from(c.message.content, 'utf8');
  check(got.subarray(0, before.length).equals(before) && got.subarray(before.length).toString('utf8').startsWith('\n</think>\n\n'),
        'thinking_budget_tokens 3: 3 reasoning tokens, then </think>', c.message.content);
  // constrained output when the template opened <think>: the reasoning closes (at once, or after its budget), then the schema
  for (const budget of [undefined, 3]) {
    const r = await client.chat.completions.create({ temperature: 0, messages: msgs, max_tokens: 60, thinking_budget_tokens: budget,
                                                     response_format: { type: 'json_schema', json_schema: { name: 'p', schema } } });
    let why;
    try { why = valid(JSON.parse(r.choices[0].message.content)); } catch (e) { why = 'JSON: ' + e.message; }
    check(!why && (budget === undefined ? !r.choices[0].message.reasoning_content : true),
          `json_schema with <think> opened (budget ${budget}): the content validates`, { why, message: r.choices[0].message });
  }
  const split = await client.chat.completions.create({ temperature: 0, messages: msgs, max_tokens: 12, thinking_budget_tokens: 3 });
  check(!split.choices[0].message.content.includes('think>'), 'thinking budget with the reasoning split: no markers in content',
        split.choices[0].message);
}
// ---- checkpoints where the last messages start, rendered by the template (recurrent models) ------
if (THINK_OPENS) {
  const history = [{ role: 'system', content: 'You are terse. '.repeat(20) }, { role: 'user', content: 'First?' },
                   { role: 'assistant', content: 'Yes.' }];
  await client.chat.completions.create({ ...base, messages: [...history, { role: 'user', content: 'Second question?' }], max_tokens: 2 });
  const b = await client.chat.completions.create({ ...base, messages: [...history, { role: 'user', content: 'An edited one?' }], max_tokens: 2 });
  const cached = b.usage.prompt_tokens_details.cached_tokens;
  check(cached > 0 && cached < b.usage.prompt_tokens, `an edited last message: ${cached} of ${b.usage.prompt_tokens} prompt tokens ` +
        'cached (the DeltaNet state at the start of the last message)', b.usage);
}
finish('agents.mjs');
