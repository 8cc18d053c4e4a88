// ollama.mjs - `pocket serve`'s Ollama API through the official `ollama` npm
// client (tests/cli/t_serve_ollama.sh starts the server: the bundled model with
// Qwen3.5's chat template): version, list (tags), show, ps; chat and generate,
// plain and streamed (the same greedy text both ways), raw generate, format
// with a JSON schema and "json", a tool-call round trip (the call, sent whole
// when streamed, then its result back), and refusals as the client's errors.
import { URL_, KEY, requireNode, check, finish } from './common.mjs';

const { Ollama } = requireNode('ollama');
const client = new Ollama({ host: URL_, headers: { Authorization: 'Bearer ' + KEY } });
const dateOk = (s) => typeof s === 'string' && !Number.isNaN(new Date(s).getTime());

// ---- the model endpoints
const v = await client.version();
check(typeof v.version === 'string' && v.version.length > 0, 'version', v);
const tags = await client.list();
check(tags.models.length === 1, 'list: one model', tags);
const entry = tags.models[0], model = entry.name;
check(model.endsWith(':latest') && entry.model === model && /^[0-9a-f]{64}$/.test(entry.digest) && entry.size > 0 &&
      dateOk(entry.modified_at), 'list: name, digest, size, modified_at', entry);
check(entry.details.format === 'gguf' && entry.details.family && entry.details.parameter_size &&
      entry.details.quantization_level, 'list: details', entry.details);
const show = await client.show({ model });
check(show.capabilities.includes('completion') && show.capabilities.includes('tools') &&
      show.capabilities.includes('thinking'), 'show: capabilities of the Qwen3.5 template', show.capabilities);
check(show.model_info['general.architecture'] === entry.details.family && show.template.includes('tool_call') &&
      /num_ctx\s+2048/.test(show.parameters), 'show: model_info, template, parameters', { info: show.model_info, p: show.parameters });
const ps = await client.ps();
check(ps.models.length === 1 && ps.models[0].name === model && ps.models[0].digest === entry.digest, 'ps: the model, loaded', ps);

// Not streamed, the durations are what the server's timings give (the
// whole time alone, to the second, without them); streamed, all are measured.
function final(r, max, what) {
  check(r.done === true && ['stop', 'length'].includes(r.done_reason) && dateOk(r.created_at), what + ': done, done_reason, created_at', r);
  check(r.prompt_eval_count > 0 && r.eval_count > 0 && r.eval_count <= max && r.total_duration >= 0 &&
        r.load_duration === 0, what + ': counts and durations', r);
  if (r.done_reason === 'length') check(r.eval_count === max, what + ': "length" after num_predict tokens', r);
}

// ---- chat, plain and streamed
const options = { temperature: 0, num_predict: 16, seed: 1 };
const messages = [{ role: 'system', content: 'You answer in the words of the King James Bible.' },
                  { role: 'user', content: 'Who made the heaven and the earth?' }];
const chat = await client.chat({ model, messages, stream: false, think: false, options });
check(chat.model === model && chat.message.role === 'assistant' && typeof chat.message.content === 'string' &&
      chat.message.content.length > 0, 'chat: an assistant message', chat);
final(chat, 16, 'chat');
const parts = await client.chat({ model, messages, stream: true, think: false, options });
let text = '', n = 0, last = null;
for await (const p of parts) { n++; text += p.message.content; last = p; }
check(text === chat.message.content, 'chat streamed: the same text', [text, chat.message.content]);
check(n > 2 && last.done && last.eval_count === chat.eval_count && last.prompt_eval_count === chat.prompt_eval_count &&
      last.eval_duration > 0 && last.prompt_eval_duration > 0 && last.total_duration >= last.eval_duration + last.prompt_eval_duration,
      'chat streamed: pieces, then the counts and the durations', last);

// ---- generate: a chat of one message, and raw
const gen = await client.generate({ model, prompt: 'Who made the heaven and the earth?', stream: false, think: false, options });
check(typeof gen.response === 'string' && gen.response.length > 0, 'generate: a response', gen);
final(gen, 16, 'generate');
let gtext = '';
for await (const p of await client.generate({ model, prompt: 'Who made the heaven and the earth?', stream: true, think: false, options }))
  gtext += p.response;
check(gtext === gen.response, 'generate streamed: the same text', [gtext, gen.response]);
const raw = await client.generate({ model, prompt: 'In the beginning God', raw: true, stream: false, options });
check(typeof raw.response === 'string' && raw.response.length > 0 && raw.prompt_eval_count < 12, 'generate raw: the prompt as it is', raw);

// ---- format: a JSON schema, and "json"
const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] };
for (let seed = 1; seed <= 3; seed++) {
  const f = await client.chat({ model, messages: [{ role: 'user', content: 'Name and age of Methuselah, as JSON.' }],
                                format: schema, stream: false, think: false, options: { temperature: 0.8, seed, num_predict: 200 } });
  let obj = null;
  try { obj = JSON.parse(f.message.content); } catch (e) {}
  check(obj && typeof obj.name === 'string' && Number.isInteger(obj.age), 'format schema: valid (seed ' + seed + ')', f.message.content);
}
const fj = await client.generate({ model, prompt: 'A JSON object, please.', format: 'json', stream: false, think: false,
                                   options: { temperature: 0.8, seed: 7, num_predict: 200 } });
let oj = null;
try { oj = JSON.parse(fj.response); } catch (e) {}
check(oj !== null && typeof oj === 'object' && !Array.isArray(oj), 'format json: an object', fj.response);

// ---- a tool call round trip. Ollama's API has no tool_choice; pocket takes
// it on /api/chat (its extension), so the tiny model must call.
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
const toolReq = { model, messages: ask, tools, tool_choice: 'required', think: false, options: { temperature: 0, num_predict: 128 } };
const t1 = await client.chat({ ...toolReq, stream: false });
const call = t1.message.tool_calls && t1.message.tool_calls[0];
check(call && call.function.name === 'get_weather' && typeof call.function.arguments === 'object' &&
      typeof call.function.arguments.city === 'string', 'tool call: get_weather with an object of arguments', t1.message);
const withCalls = [];
for await (const p of await client.chat({ ...toolReq, stream: true }))
  if (p.message.tool_calls) withCalls.push(p.message.tool_calls);
// the same call but for its id (each request's calls get ids of their own)
const callsOf = (cs) => JSON.stringify(cs.map((c) => c.function));
check(withCalls.length === 1 && callsOf(withCalls[0]) === callsOf(t1.message.tool_calls) &&
      withCalls[0].every((c) => typeof c.id === 'string' && c.id.length > 0),
      'tool call streamed: whole, in one piece, the same call', [withCalls, t1.message.tool_calls]);
const t2 = await client.chat({ model, tools, stream: false, think: false, options: { temperature: 0, num_predict: 24 },
                               messages: [...ask, t1.message, { role: 'tool', tool_name: 'get_weather', content: '18 degrees, sunny' }] });
check(t2.done && t2.message.role === 'assistant' && t2.prompt_eval_count > t1.prompt_eval_count,
      'tool result: answered with the call and its result in the prompt', t2);

// ---- refusals: the client's ResponseError, with the status and the message
async function refused(what, fn, status, re) {
  try { await fn(); check(false, what + ': refused', 'no error'); }
  catch (e) { check(e.status_code === status && re.test(e.error), what + ': ' + status + ' ' + re, { status: e.status_code, error: e.error }); }
}
await refused('images', () => client.chat({ model, stream: false, messages: [{ role: 'user', content: 'x', images: ['aGVsbG8='] }] }),
              400, /images.*text models/);
await refused('template', () => client.generate({ model, prompt: 'x', template: '{{ .Prompt }}', stream: false }), 400, /template/);
await refused('num_ctx beyond the server', () => client.chat({ model, messages, stream: true, options: { num_ctx: 1 << 20 } }),
              400, /num_ctx.*2048/);
await refused('mirostat', () => client.generate({ model, prompt: 'x', options: { mirostat: 2 } }), 400, /Mirostat/);
await refused('no messages', () => client.chat({ model, messages: [] }), 400, /messages/);

finish('ollama.mjs');
