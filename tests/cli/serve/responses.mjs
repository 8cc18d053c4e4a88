// responses.mjs - `pocket serve`'s /v1/responses (OpenAI's Responses API,
// tools/serve_responses.c) through the official `openai` npm client:
// responses.create plain and streamed (the same text for the same seed, the
// events in order, numbered, their item ids consistent, the stream's final
// response the same as the events built), a Codex-shaped history (reasoning,
// function_call and function_call_output items), a function call (named in
// tool_choice, forced by a grammar) and its round trip (the call and a
// function_call_output sent back as input: an answer), a streamed call, text.format json_schema (the
// output parses and follows the schema), and the refusals (stateless, hosted
// tools, unknown parameters) as the client's exceptions.
import { URL_, KEY, requireNode, check, finish } from './common.mjs';

const OpenAI = requireNode('openai');
const client = new OpenAI({ baseURL: URL_ + '/v1', apiKey: KEY, maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;

function usageOk(r, max, what) {
  const u = r.usage;
  check(u && u.input_tokens > 0 && u.output_tokens > 0 && u.output_tokens <= max &&
        u.total_tokens === u.input_tokens + u.output_tokens && u.input_tokens_details &&
        typeof u.input_tokens_details.cached_tokens === 'number' && u.output_tokens_details &&
        typeof u.output_tokens_details.reasoning_tokens === 'number', what + ': usage adds up', u);
  if (r.status === 'incomplete')
    check(r.incomplete_details?.reason === 'max_output_tokens' && u.output_tokens === max,
          what + ': incomplete after max_output_tokens', r.incomplete_details);
  else check(r.status === 'completed' && r.incomplete_details === null, what + ': completed', r.status);
}

// Read a stream of events: check their order, numbers and ids; returns { events, final }.
async function readEvents(stream, what) {
  const events = [], items = [], acc = [];
  let final = null, bad = [];
  for await (const ev of stream) {
    if (ev.sequence_number !== events.length) bad.push('sequence_number ' + ev.sequence_number + ' at ' + events.length);
    events.push(ev);
    if (ev.type === 'response.output_item.added') {
      if (ev.output_index !== items.length) bad.push('added at ' + ev.output_index);
      items.push(ev.item); acc.push('');
    } else if ('item_id' in ev && items[ev.output_index]?.id !== ev.item_id) bad.push(ev.type + ': item_id ' + ev.item_id);
    if (ev.type.endsWith('.delta')) acc[ev.output_index] += ev.delta;
    if (ev.type === 'response.output_text.done' && ev.text !== acc[ev.output_index]) bad.push('text.done != deltas');
    if (ev.type === 'response.function_call_arguments.done' && ev.arguments !== acc[ev.output_index]) bad.push('arguments.done != deltas');
    if (ev.type === 'response.output_item.done') {
      if (ev.item.id !== items[ev.output_index]?.id) bad.push('done: id');
      items[ev.output_index] = ev.item;
    }
    if (['response.completed', 'response.incomplete', 'response.failed'].includes(ev.type)) final = ev.response;
  }
  check(bad.length === 0, what + ': events numbered, ids consistent, deltas add up', bad);
  check(events[0]?.type === 'response.created' && events[1]?.type === 'response.in_progress' && final &&
        events[events.length - 1].response === final, what + ': created, in_progress ... a final event last',
        events.map((e) => e.type));
  check(final && JSON.stringify(final.output) === JSON.stringify(items), what + ': the final output is the items done',
        [final?.output, items]);
  return { events, final };
}

const textOf = (r) => r.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');

// ---- plain and streamed, the same seed: the same text
const params = { model, instructions: 'You answer in the words of the King James Bible.', input: 'What did God say?',
                 max_output_tokens: 24, temperature: 0.7, seed: 42, store: false };
const r = await client.responses.create(params);
check(r.object === 'response' && r.id.startsWith('resp_') && r.model === model && typeof r.created_at === 'number',
      'create: object, id, model, created_at', r);
check(r.output.some((o) => o.type === 'message' && o.role === 'assistant' && o.content[0]?.type === 'output_text'),
      'create: an assistant message with output_text', r.output);
check(typeof r.output_text === 'string' && r.output_text.length > 0 && r.output_text === textOf(r),
      'create: output_text (the SDK computes it) is the message text', r.output_text);
check(r.instructions === params.instructions && r.store === false && r.max_output_tokens === 24, 'create: echoed fields', r);
usageOk(r, 24, 'create');

const s = await client.responses.create({ ...params, stream: true });
const { events, final } = await readEvents(s, 'stream');
const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
check(deltas === r.output_text && textOf(final) === r.output_text, 'stream: same seed, same text', [deltas, r.output_text]);
check(final.status === r.status && final.usage.output_tokens === r.usage.output_tokens &&
      final.usage.input_tokens === r.usage.input_tokens, 'stream: same status and usage', [final.usage, r.usage]);

// the SDK's own stream helper builds the same response
const helper = client.responses.stream(params);
const built = await helper.finalResponse();
check(built.output_text === r.output_text, 'responses.stream(): finalResponse().output_text', built.output_text);

// ---- a conversation with a call and its result, as a client sends it back (Codex's items)
const history = [
  { type: 'message', role: 'developer', content: 'You may call tools.' },
  { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What is the weather in Rome?' }] },
  { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'I should ask the tool.' }] },
  { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Rome"}', status: 'completed' },
  { type: 'function_call_output', call_id: 'call_1', output: '{"celsius":21}' },
];
const h = await client.responses.create({ model, input: history, max_output_tokens: 12, temperature: 0, store: false,
                                          include: ['reasoning.encrypted_content'], parallel_tool_calls: false,
                                          tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }] });
check(h.output.length > 0 && h.usage.input_tokens > 20, 'history: items in, an answer out', h.output);
usageOk(h, 12, 'history');

// ---- a function call and its round trip. The call is forced by a grammar in the template's
// call format (hermes JSON: t_serve_agents.sh serves Qwen3's template), passed through as pocket's
// own `grammar` field, as agents.mjs does for chat completions.
const callGrammar = 'root ::= "<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"" ' +
                    '("Paris" | "Rome") "\\"}}\\n</tool_call>"';
const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city.', strict: true,
                 parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
                               required: ['city'], additionalProperties: false } }];
const input = [{ role: 'user', content: [{ type: 'input_text', text: 'What is the weather in Paris?' }] }];
const call = await client.responses.create({ model, input, tools, tool_choice: { type: 'function', name: 'get_weather' },
                                             grammar: callGrammar, max_output_tokens: 200, temperature: 0 });
const fc = call.output.find((o) => o.type === 'function_call');
let args = null;
try { args = JSON.parse(fc?.arguments); } catch (e) {}
check(fc && fc.name === 'get_weather' && fc.id.startsWith('fc_') && fc.call_id && fc.status === 'completed' &&
      args && ['Paris', 'Rome'].includes(args.city), 'function call: get_weather with valid arguments', call.output);
check(call.status === 'completed' && call.tool_choice.name === 'get_weather' && call.tools.length === 1,
      'function call: completed, tools and tool_choice echoed', call);

const round = await client.responses.create({
  model, tools, max_output_tokens: 16, temperature: 0,
  input: [...input, ...call.output, { type: 'function_call_output', call_id: fc?.call_id, output: JSON.stringify({ celsius: 18 }) }],
});
check(round.output.some((o) => o.type === 'message') && round.output_text.length > 0,
      'round trip: function_call_output in, an answer out', round.output);
usageOk(round, 16, 'round trip');
check(round.usage.input_tokens > call.usage.input_tokens, 'round trip: the call and its output are in the prompt',
      [round.usage.input_tokens, call.usage.input_tokens]);

// the same call, streamed: the arguments arrive as deltas
const cs = await client.responses.create({ model, input, tools, tool_choice: 'required', grammar: callGrammar,
                                           max_output_tokens: 200, temperature: 0, stream: true });
const called = await readEvents(cs, 'streamed call');
const sfc = called.final.output.find((o) => o.type === 'function_call');
check(called.events.some((e) => e.type === 'response.function_call_arguments.delta') &&
      called.events.some((e) => e.type === 'response.function_call_arguments.done') && sfc?.name === 'get_weather' &&
      JSON.parse(sfc.arguments).city !== undefined, 'streamed call: argument deltas, done, a valid call', called.final.output);

// ---- structured output: text.format json_schema
const schema = { type: 'object', properties: { answer: { type: 'string', enum: ['yes', 'no'] } },
                 required: ['answer'], additionalProperties: false };
const js = await client.responses.create({ model, input: 'Is the earth round? Answer in JSON.', max_output_tokens: 64,
                                           temperature: 0, text: { format: { type: 'json_schema', name: 'verdict', schema, strict: true } } });
let parsed = null;
try { parsed = JSON.parse(js.output_text); } catch (e) {}
check(js.status === 'completed' && parsed && ['yes', 'no'].includes(parsed.answer) && Object.keys(parsed).length === 1, 'json_schema: the output parses and follows the schema', js.output_text);
check(js.text.format.type === 'json_schema' && js.text.format.name === 'verdict', 'json_schema: text.format echoed', js.text);

// ---- refusals, as the client's exceptions
async function refused(body, status, param, needle, what) {
  try {
    await client.responses.create({ model, input: 'hi', max_output_tokens: 4, ...body });
    check(false, what + ': refused');
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status && e.param === param && e.message.includes(needle),
          what + ': ' + status + ' naming ' + param, { status: e.status, param: e.param, message: e.message });
  }
}
await refused({ previous_response_id: r.id }, 400, 'previous_response_id', 'stateless', 'previous_response_id');
await refused({ tools: [{ type: 'web_search' }] }, 400, 'tools[0]', 'web_search', 'a hosted tool');
await refused({ input: [{ type: 'item_reference', id: 'msg_1' }] }, 400, 'input[0]', 'stores nothing', 'item_reference');
await refused({ frobnicate: true }, 400, 'frobnicate', 'unknown parameter', 'an unknown parameter');
await refused({ text: { format: { type: 'json_schema', name: 'x' } } }, 400, 'text.format.schema', 'schema', 'a schema missing');

finish('responses.mjs');
