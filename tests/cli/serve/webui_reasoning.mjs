// webui_reasoning.mjs - the chat page with a reasoning model: the chain model
// (tests/lib/mk_chain_model.py), whose greedy answer is known, served with
// the template named by t_serve.sh; POCKET_EXPECT (JSON, as for
// reasoning.mjs) says the content and the reasoning. The reasoning streams
// into a "thinking" block while the model thinks (the answer box goes
// through the state "thinking"), the block folds when the answer comes and
// opens on a click; the answer shows without markers; the next request sends
// the answer back, not the reasoning.
import { check, finish } from './common.mjs';
import { openPage, giveKey, turn } from './browser.mjs';

const want = JSON.parse(process.env.POCKET_EXPECT);
const { context, page, sent, consoleErrors } = await openPage();
try {
  await giveKey(page);
  await page.fill('#temp', '0');
  // the answer box's states, in order, as the page sets them: the value each
  // change replaced (the records come in batches), then the last one
  await page.evaluate(() => {
    window.states = [];
    new MutationObserver((records) => {
      for (const r of records) if (r.target.classList.contains('assistant')) window.states.push(r.oldValue);
    }).observe(document.getElementById('log'), { subtree: true, attributeOldValue: true, attributeFilter: ['data-state'] });
  });
  await turn(page, 'What is 1 + 1?');
  const got = await page.evaluate(() => {
    const box = document.querySelector('.msg.assistant'), d = box.querySelector('details.thinking');
    return { content: box.querySelector('.text').textContent, reasoning: d && d.querySelector('.reasoning').textContent,
             open: d && d.open, summary: d && d.querySelector('summary').textContent,
             states: window.states.slice(1).concat([box.dataset.state]) };
  });
  check(got.content === want.content, 'the answer, without markers', got);
  check(got.reasoning === want.reasoning, 'the reasoning in a thinking block', got);
  const t = got.states.indexOf('thinking');
  check(t >= 0 && got.states.indexOf('answering', t) > t && got.states[got.states.length - 1] === 'done',
        'the thinking block showed while the model thought, then the answer', got.states);
  check(got.open === false, 'the thinking block is folded once the answer came', got);
  await page.click('.msg.assistant details.thinking summary');
  check(await page.$eval('.msg.assistant details.thinking', (d) => d.open), 'a click opens it');
  check(await page.isVisible('.msg.assistant details.thinking .reasoning'), '... and the reasoning shows');

  await turn(page, 'And again?');
  const body = sent[sent.length - 1];
  check(body.messages.length === 3 && body.messages[1].role === 'assistant' && body.messages[1].content === want.content,
        'the history sent back holds the answer, not the reasoning', body.messages);
  const second = await page.$$eval('.msg.assistant', (els) => els.map((e) => e.querySelector('.text').textContent));
  check(second.length === 2 && second[1] === want.content, 'a second answer', second);
  // (the 401: the model list fetched before the key was typed)
  check(consoleErrors.filter((e) => !/status of 401/.test(e)).length === 0, 'no script errors', consoleErrors);
} finally {
  await context.close();
}
finish('webui_reasoning.mjs');
