// webui.mjs - the chat page at / in headless Chromium (tests/cli/serve/browser.mjs):
// it loads with nothing from other hosts, takes the API key, sends a message,
// shows a streamed answer and tok/s; a failed request (a wrong API key) is
// not kept: its message and empty reply go, the error shows, the text is back
// in the input box and is sent alone once the key is right; Stop aborts a
// long answer and the page stays usable. Screenshot: $POCKET_SHOT.
import fs from 'node:fs';
import { KEY, check, finish, metrics, sleep } from './common.mjs';
import { openPage, giveKey, transcript } from './browser.mjs';

const { context, page, foreign, consoleErrors, sent } = await openPage();
try {
  await giveKey(page, 'kjv-moe-f16');
  check(true, 'the page lists the model after the API key is given');

  // send a message, see it stream
  await page.fill('#maxtok', '48');
  await page.fill('#input', 'And God said');
  await page.click('#send');
  await page.waitForSelector('.msg.assistant[data-state="done"]', { timeout: 30000 });
  const answer = await page.textContent('.msg.assistant .text');
  const stats = await page.textContent('#stats');
  check(answer && answer.trim().length > 0, 'a streamed answer appears', answer);
  check(/\d+ tokens, [\d.]+ tok\/s/.test(stats), 'tok/s is shown', stats);
  check((await page.$$('.msg.user')).length === 1 && (await page.$$('.msg.error')).length === 0, 'one user message, no error bubble');

  // a failing request: a wrong API key (401) is not kept
  await page.fill('#apikey', 'wrong-key');
  await page.fill('#input', 'And the earth');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.msg.error', { timeout: 10000 });
  await page.waitForFunction(() => !document.getElementById('send').disabled, null, { timeout: 10000 });
  let shown = await transcript(page);
  check(shown.length === 3 && shown[2].role === 'error' && /key/i.test(shown[2].text),
        'a failed request: the error is shown, its message and empty reply are gone', shown);
  check(await page.inputValue('#input') === 'And the earth', 'a failed request: its text is back in the input box');
  await page.fill('#apikey', KEY);
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => { const m = document.querySelectorAll('.msg.assistant'); return m.length === 2 && m[1].dataset.state === 'done'; }, null, { timeout: 30000 });
  const body = sent[sent.length - 1];
  check(body.messages.length === 3 && body.messages.map((m) => m.role).join() === 'user,assistant,user' &&
        body.messages[2].content === 'And the earth' && body.messages[1].content === answer,
        'sent again: the history holds the first turn and the message once', body.messages);
  shown = await transcript(page);
  check(shown.map((m) => m.role).join() === 'user,assistant,error,user,assistant', 'the page: two turns and the error between', shown);

  // Stop: a long answer (the whole context) is aborted; the slot frees up
  await page.fill('#maxtok', '100000');
  await page.fill('#input', 'Tell me all the generations of Adam');
  await page.click('#send');
  await page.waitForFunction(() => { const m = document.querySelectorAll('.msg.assistant .text'); return m.length === 3 && m[2].textContent.length > 20; }, null, { timeout: 20000 });
  check(await page.isEnabled('#stop'), 'Stop is enabled while streaming');
  await page.click('#stop');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant')[2].dataset.state === 'done', null, { timeout: 5000 });
  const stopped = await page.textContent('#stats');
  check(/stopped/.test(stopped), 'Stop aborts the stream', stopped);
  check(await page.isEnabled('#send') && !(await page.isEnabled('#stop')), 'Send is enabled again, Stop disabled');
  let idle = false;
  for (let i = 0; i < 50 && !idle; i++) { const m = await metrics(); idle = m['pocket_busy_slots'] === 0; if (!idle) await sleep(30); }
  check(idle, 'the aborted generation was cancelled on the server');
  // and it still works after the stop (keyboard: Enter sends)
  await page.fill('#maxtok', '16');
  await page.fill('#input', 'In the beginning');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => { const m = document.querySelectorAll('.msg.assistant'); return m.length === 4 && m[3].dataset.state === 'done'; }, null, { timeout: 30000 });
  const fourth = await page.$$eval('.msg.assistant .text', (els) => els[3].textContent);
  check(fourth.trim().length > 0, 'an answer after Stop', fourth);

  await page.screenshot({ path: process.env.POCKET_SHOT, fullPage: true });
  check(fs.statSync(process.env.POCKET_SHOT).size > 5000, 'screenshot saved to ' + process.env.POCKET_SHOT);
  check(foreign.length === 0, 'no request leaves the server (no CDN)', foreign);
  // (the 401s: the model list fetched before the key was typed, the wrong key)
  const unexpected = consoleErrors.filter((e) => !/status of 401/.test(e));
  check(unexpected.length === 0, 'no script errors in the console', unexpected);
} finally {
  await context.close();
}
finish('webui.mjs');
