// anthropic.mjs - `pocket serve`'s Anthropic Messages API through the
// official `@anthropic-ai/sdk` npm client (tests/cli/t_serve_anthropic.sh):
// messages.create, the same text streamed (messages.stream and the raw
// events of stream: true, in Anthropic's order), max_tokens and stop
// sequences as stop reasons, a tool_use -> tool_result round trip,
// countTokens equal to the prompt a create reports, errors as the SDK's
// exceptions with Anthropic's error types, the key sent as x-api-key.
// With POCKET_EXPECT (the chain model, tests/lib/mk_chain_model.py, under the
// chatml template) it checks thinking blocks instead: the reasoning the
// model gives as a thinking block with a signature, streamed and not.
import { URL_, KEY, requireNode, check, finish } from './common.mjs';

const Anthropic = requireNode('@anthropic-ai/sdk').default ?? requireNode('@anthropic-ai/sdk');
const client = new Anthropic({ baseURL: URL_, apiKey: KEY, maxRetries: 0, timeout: 60000 });
const model = 'claude-anything';   // one model is served: any name is taken

// The raw events of a stream: in order, each block started, deltas of its kind, stopped.
function eventsInOrder(events) {
  const types = events.map((e) => e.type);
  let open = -1, next = 0, ok = types[0] === 'message_start' && types.at(-1) === 'message_stop' &&
    types.at(-2) === 'message_delta';
  const kinds = [];
  for (const e of events.slice(1, -2)) {
    if (e.type === 'ping') continue;
    if (e.type === 'content_block_start') { ok &&= open < 0 && e.index === next; open = next++; kinds[open] = e.content_block.type; }
    else if (e.type === 'content_block_delta') {
      const want = { text_delta: 'text', thinking_delta: 'thinking', signature_delta: 'thinking', input_json_delta: 'tool_use' };
      ok &&= e.index === open && want[e.delta.type] === kinds[open];
    } else if (e.type === 'content_block_stop') { ok &&= e.index === open; open = -1; }
    else ok = false;
  }
  return ok && open < 0;
}

async function rawStream(params) {
  const events = [];
  for await (const e of await client.messages.create({ ...params, stream: true })) events.push(e);
  return events;
}

if (process.env.POCKET_EXPECT) {
  // ---- thinking: the chain model's <think> reasoning as a thinking block
  const want = JSON.parse(process.env.POCKET_EXPECT);
  const params = { model, max_tokens: 64, temperature: 0, messages: [{ role: 'user', content: 'What is 1 + 1?' }],
                   thinking: { type: 'enabled', budget_tokens: 1024 } };
  const m = await client.messages.create(params);
  check(m.content.length === 2 && m.content[0].type === 'thinking' && m.content[0].thinking === want.reasoning &&
        typeof m.content[0].signature === 'string' && m.content[0].signature.length > 0 &&
        m.content[1].type === 'text' && m.content[1].text === want.content && m.stop_reason === 'end_turn',
        'thinking: a thinking block (with a signature), then the text', m);
  const s = client.messages.stream(params);
  let thinking = '', signature = '';
  s.on('thinking', (d) => { thinking += d; });
  s.on('signature', (g) => { signature = g; });
  const f = await s.finalMessage();
  check(thinking === want.reasoning && signature === m.content[0].signature && JSON.stringify(f.content) === JSON.stringify(m.content),
        'thinking streamed: the same blocks, the same signature', { thinking, signature, content: f.content });
  const ev = await rawStream(params);
  check(eventsInOrder(ev) && ev.some((e) => e.delta?.type === 'signature_delta'), 'thinking streamed: events in order, a signature_delta',
        ev.map((e) => e.type + (e.delta ? ':' + e.delta.type : '')));
  // the thinking block sent back in the next turn is taken
  const next = await client.messages.create({ ...params, messages: [...params.messages, { role: 'assistant', content: m.content },
                                                                    { role: 'user', content: 'And 2 + 2?' }] });
  check(next.type === 'message' && next.content.length > 0, 'thinking: the blocks sent back are taken', next);
  finish('anthropic.mjs (thinking)');
}

// ---- messages.create
const system = 'You answer in the words of the King James Bible.';
const messages = [{ role: 'user', content: 'What did God say?' }];
const params = { model, system, messages, max_tokens: 24, temperature: 0 };
const m = await client.messages.create(params);
const text = m.content.map((b) => b.text).join('');
check(m.type === 'message' && m.role === 'assistant' && m.id.startsWith('msg_'), 'create: a message, its id', m);
check(m.content.length === 1 && m.content[0].type === 'text' && text.length > 0, 'create: one text block', m.content);
check(['end_turn', 'max_tokens'].includes(m.stop_reason) && m.stop_sequence === null, 'create: stop_reason', m);
check(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) > 0 && m.usage.output_tokens > 0 &&
      (m.stop_reason !== 'max_tokens' || m.usage.output_tokens === 24), 'create: usage', m.usage);

// the same text streamed, through the helper and as raw events
const s = client.messages.stream(params);
let streamed = '';
s.on('text', (d) => { streamed += d; });
const f = await s.finalMessage();
check(streamed === text && f.content.length === 1 && f.content[0].text === text, 'stream: the same text', [streamed, text]);
check(f.stop_reason === m.stop_reason && f.usage.output_tokens === m.usage.output_tokens &&
      f.usage.input_tokens + f.usage.cache_read_input_tokens === m.usage.input_tokens + m.usage.cache_read_input_tokens,
      'stream: stop_reason and usage', [f.usage, m.usage]);
const ev = await rawStream(params);
check(eventsInOrder(ev), 'stream: events in Anthropic\'s order', ev.map((e) => e.type));
check(ev.filter((e) => e.delta?.type === 'text_delta').map((e) => e.delta.text).join('') === text, 'stream: text_deltas add up', ev);

// max_tokens; a stop sequence cut from the text
const short = await client.messages.create({ ...params, max_tokens: 3 });
check(short.stop_reason === 'max_tokens' && short.usage.output_tokens === 3, 'max_tokens: stop_reason max_tokens', short);
const long = await client.messages.create({ ...params, max_tokens: 40 });
const full = long.content[0].text, k = Math.floor(full.length / 3), stop = full.slice(k, k + 6);
const cut = await client.messages.create({ ...params, max_tokens: 40, stop_sequences: [stop, 'zzzz-not-there'] });
check(cut.stop_reason === 'stop_sequence' && cut.stop_sequence === stop && cut.content[0].text === full.slice(0, full.indexOf(stop)),
      'stop_sequences: stop_reason stop_sequence, the string named, the text cut', { cut, stop });
const cutS = await client.messages.stream({ ...params, max_tokens: 40, stop_sequences: [stop] }).finalMessage();
check(cutS.stop_reason === 'stop_sequence' && cutS.stop_sequence === stop, 'stop_sequences streamed', cutS);

// countTokens: the prompt create counted
const count = await client.messages.countTokens({ model, system, messages });
check(count.input_tokens === m.usage.input_tokens + m.usage.cache_read_input_tokens, 'countTokens: the prompt create counted',
      [count, m.usage]);

// ---- a tool_use -> tool_result round trip (tool_choice forces the call: its input is JSON by grammar;
// the bundled model spells the call nearly a byte a token: ~70 tokens at the least, so 128 of them)
const tools = [{ name: 'get_weather', description: 'The weather in a city now',
                 input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
try {
  const call = await client.messages.create({ model, max_tokens: 128, temperature: 0, tools, messages: ask,
                                              tool_choice: { type: 'tool', name: 'get_weather' } });
  const use = call.content.find((b) => b.type === 'tool_use');
  check(call.stop_reason === 'tool_use' && use && use.name === 'get_weather' && typeof use.input === 'object' &&
        typeof use.input.city === 'string' && typeof use.id === 'string' && use.id.length > 0, 'tools: a tool_use block', call);
  const toolCount = await client.messages.countTokens({ model, tools, messages: ask });
  check(toolCount.input_tokens > count.input_tokens, 'countTokens: tools count', toolCount);
  const callS = client.messages.stream({ model, max_tokens: 128, temperature: 0, tools, messages: ask,
                                         tool_choice: { type: 'tool', name: 'get_weather' } });
  let json = '';
  callS.on('inputJson', (d) => { json += d; });
  const callF = await callS.finalMessage();
  const useS = callF.content.find((b) => b.type === 'tool_use');
  check(useS && JSON.stringify(useS.input) === JSON.stringify(use.input) && JSON.stringify(JSON.parse(json)) === JSON.stringify(use.input) &&
        callF.stop_reason === 'tool_use', 'tools streamed: the same input, input_json_delta pieces', { json, content: callF.content });
  if (use) {
    const answer = await client.messages.create({
      model, max_tokens: 16, temperature: 0, tools,
      messages: [...ask, { role: 'assistant', content: call.content },
                 { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18 degrees, clear' }] }],
    });
    check(answer.type === 'message' && ['end_turn', 'max_tokens', 'tool_use'].includes(answer.stop_reason) && answer.content.length > 0,
          'tools: the tool_result answered', answer);
  }
} catch (e) {
  check(false, 'tools: the requests answered', String(e));
}

// the tool_result path on its own, whatever the model does: a hand-written call in the history;
// countTokens renders the same prompt (tools, the call, its result)
const history = [...ask,
  { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' },
                                 { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: '18 degrees' }] },
                            { type: 'text', text: 'Thanks.' }] }];
const after = await client.messages.create({ model, max_tokens: 8, temperature: 0, tools, messages: history });
const afterCount = await client.messages.countTokens({ model, tools, messages: history });
check(after.type === 'message' && afterCount.input_tokens === after.usage.input_tokens + after.usage.cache_read_input_tokens &&
      afterCount.input_tokens > count.input_tokens, 'tools: a tool_use / tool_result history answered, counted alike', [after, afterCount]);

// ---- errors: the SDK's exceptions, Anthropic's error types, the field named
async function fails(p, status, type, words, what, c = client) {
  try {
    await c.messages.create(p);
    check(false, what + ': refused');
  } catch (e) {
    check(e instanceof Anthropic.APIError && e.status === status && e.error?.type === 'error' &&
          e.error?.error?.type === type && words.every((w) => e.message.includes(w)), what, { status: e.status, error: e.error, message: e.message });
  }
}
await fails({ model, max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] },
            400, 'invalid_request_error', ['messages.0.content.0', 'image'], 'an image block: 400 naming it');
await fails({ model, max_tokens: -1, messages }, 400, 'invalid_request_error', ['max_tokens'], 'max_tokens -1: 400 naming it');
await fails({ model, max_tokens: 8, messages, tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
            400, 'invalid_request_error', ['tools.0', 'web_search_20250305'], 'a server tool: 400 naming it');
await fails({ model, max_tokens: 8, messages }, 401, 'authentication_error', [], 'a wrong key: 401',
            new Anthropic({ baseURL: URL_, apiKey: 'wrong', maxRetries: 0 }));
finish('anthropic.mjs');
