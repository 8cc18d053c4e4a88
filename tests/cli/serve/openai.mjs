// openai.mjs - `pocket serve` through the official `openai` npm client:
// models, chat completions (plain and streamed), stop strings across token
// boundaries, the completions endpoint, usage counts, errors.
import { URL_, KEY, requireNode, check, finish } from './common.mjs';

const OpenAI = requireNode('openai');
const client = new OpenAI({ baseURL: URL_ + '/v1', apiKey: KEY, maxRetries: 0, timeout: 60000 });

const models = await client.models.list();
const ids = models.data.map((m) => m.id);
check(ids.length === 1 && ids[0] === 'kjv-moe-f16', 'models.list names the served model', ids);
const model = ids[0];

function usageOk(u, finishReason, maxTokens, what) {
  check(u && u.prompt_tokens > 0 && u.completion_tokens >= 0 && u.total_tokens === u.prompt_tokens + u.completion_tokens,
        what + ': usage adds up', u);
  if (finishReason === 'length') check(u.completion_tokens === maxTokens, what + ': finish "length" after max_tokens tokens', u);
  else check(finishReason === 'stop' && u.completion_tokens <= maxTokens, what + ': finish "stop" within max_tokens', { finishReason, u });
}

// ---- chat, not streamed
const messages = [{ role: 'system', content: 'You answer in the words of the King James Bible.' },
                  { role: 'user', content: 'What did God say?' }];
const params = { model, messages, max_tokens: 24, temperature: 0.7, seed: 42 };
const chat = await client.chat.completions.create(params);
const text = chat.choices[0].message.content;
check(chat.object === 'chat.completion' && chat.model === model && chat.id.startsWith('chatcmpl-'), 'chat: object, model, id', chat);
check(chat.choices[0].message.role === 'assistant' && typeof text === 'string' && text.length > 0, 'chat: non-empty assistant text', text);
usageOk(chat.usage, chat.choices[0].finish_reason, 24, 'chat');
const again = await client.chat.completions.create(params);
check(again.choices[0].message.content === text, 'chat: same seed, same text', [text, again.choices[0].message.content]);

// ---- chat, streamed: the chunks concatenate to the same text
const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
let streamed = '', finishReason = null, usage = null, chunks = 0, roleSeen = false, idsSeen = new Set();
for await (const chunk of stream) {
  chunks++;
  idsSeen.add(chunk.id);
  if (chunk.usage) usage = chunk.usage;
  const c = chunk.choices[0];
  if (!c) continue;
  if (c.delta.role === 'assistant') roleSeen = true;
  if (c.delta.content) streamed += c.delta.content;
  if (c.finish_reason) finishReason = c.finish_reason;
}
check(chunks > 3 && roleSeen && idsSeen.size === 1, 'stream: several chunks, a role delta, one id', { chunks, roleSeen, ids: [...idsSeen] });
check(streamed === text, 'stream: chunks concatenate to the non-streamed text', [streamed, text]);
check(finishReason === chat.choices[0].finish_reason, 'stream: same finish_reason', finishReason);
check(usage && usage.completion_tokens === chat.usage.completion_tokens && usage.prompt_tokens === chat.usage.prompt_tokens,
      'stream: usage chunk matches', usage);

// ---- stop strings (cut from the output, also across token boundaries)
const base = await client.completions.create({ model, prompt: 'And God said', max_tokens: 40, temperature: 0 });
const full = base.choices[0].text;
check(full.length > 30, 'completions: greedy text', full);
const k = Math.floor(full.length / 3);
const stopStr = full.slice(k, k + 7);           // 7 bytes mid-text: spans tokens here
const expect = full.slice(0, full.indexOf(stopStr));
const cut = await client.completions.create({ model, prompt: 'And God said', max_tokens: 40, temperature: 0, stop: [stopStr, 'zzzz-not-there'] });
check(cut.choices[0].text === expect && cut.choices[0].finish_reason === 'stop',
      'stop: text cut before the stop string, finish "stop"', { stopStr, expect, got: cut.choices[0].text });
check(cut.usage.completion_tokens < base.usage.completion_tokens, 'stop: fewer tokens generated', cut.usage);
let cutStreamed = '', cutFinish = null;
for await (const ch of await client.completions.create({ model, prompt: 'And God said', max_tokens: 40, temperature: 0, stop: stopStr, stream: true })) {
  const c = ch.choices[0];
  if (c) { cutStreamed += c.text; if (c.finish_reason) cutFinish = c.finish_reason; }
}
check(cutStreamed === expect && cutFinish === 'stop', 'stop (streamed, one string): no part of the stop string is sent', { cutStreamed, expect });
// a stop string in chat
const chatStop = stopStr.length ? await client.chat.completions.create({ ...params, stop: text.slice(3, 9) }) : null;
check(chatStop && chatStop.choices[0].message.content === text.slice(0, text.indexOf(text.slice(3, 9))) &&
      chatStop.choices[0].finish_reason === 'stop', 'stop (chat)', chatStop && chatStop.choices[0]);

// ---- completions endpoint
const comp = await client.completions.create({ model, prompt: 'In the beginning', max_tokens: 12, seed: 7 });
check(comp.object === 'text_completion' && comp.choices[0].text.length > 0, 'completions: text', comp.choices[0]);
usageOk(comp.usage, comp.choices[0].finish_reason, 12, 'completions');
let compStreamed = '', compChunks = 0;
for await (const ch of await client.completions.create({ model, prompt: 'In the beginning', max_tokens: 12, seed: 7, stream: true })) {
  compChunks++;
  if (ch.choices[0]) compStreamed += ch.choices[0].text;
}
check(compStreamed === comp.choices[0].text && compChunks > 3, 'completions (streamed) = not streamed', [compStreamed, comp.choices[0].text]);
const zero = await client.completions.create({ model, prompt: 'In the beginning', max_tokens: 0 });
check(zero.choices[0].text === '' && zero.usage.completion_tokens === 0 && zero.choices[0].finish_reason === 'length', 'max_tokens 0', zero);

// ---- errors surface as the client's exceptions
async function expectError(what, status, fn) {
  try { await fn(); check(false, what + ': no error'); }
  catch (e) { check(e.status === status && e.error && typeof e.error.message === 'string', what + ' -> ' + status, { status: e.status, error: e.error }); }
}
await expectError('models.retrieve of another id', 404, () => client.models.retrieve('gpt-4o'));
await expectError('negative max_tokens', 400, () => client.chat.completions.create({ ...params, max_tokens: -5 }));
await expectError('wrong API key', 401, () => new OpenAI({ baseURL: URL_ + '/v1', apiKey: 'wrong', maxRetries: 0 }).models.list());

finish('openai.mjs');
