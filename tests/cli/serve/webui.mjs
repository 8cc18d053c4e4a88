// webui.mjs - the chat page at / in headless Chromium (Debian's, driven by
// playwright-core): it loads with nothing from other hosts, takes the API
// key, sends a message, shows a streamed answer and tok/s; Stop aborts a long
// answer and the page stays usable. Screenshot: $POCKET_SHOT.
import fs from 'node:fs';
import { URL_, KEY, requireNode, check, finish, metrics, sleep } from './common.mjs';

const { chromium } = requireNode('playwright-core');
fs.rmSync(process.env.POCKET_PROFILE, { recursive: true, force: true });
const context = await chromium.launchPersistentContext(process.env.POCKET_PROFILE, {
  executablePath: process.env.POCKET_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
  viewport: { width: 1000, height: 700 },
});
try {
  const page = context.pages()[0] || await context.newPage();
  const foreign = [], consoleErrors = [];
  page.on('request', (r) => { if (!r.url().startsWith(URL_)) foreign.push(r.url()); });
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));

  const resp = await page.goto(URL_ + '/');
  check(resp.status() === 200 && (resp.headers()['content-type'] || '').startsWith('text/html'), 'GET / is an HTML page', resp.status());
  await page.fill('#apikey', KEY);
  await page.dispatchEvent('#apikey', 'change');
  await page.waitForFunction(() => document.getElementById('model').textContent.startsWith('kjv-moe-f16'), null, { timeout: 10000 });
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

  // Stop: a long answer (the whole context) is aborted; the slot frees up
  await page.fill('#maxtok', '100000');
  await page.fill('#input', 'Tell me all the generations of Adam');
  await page.click('#send');
  await page.waitForFunction(() => { const m = document.querySelectorAll('.msg.assistant .text'); return m.length === 2 && m[1].textContent.length > 20; }, null, { timeout: 20000 });
  check(await page.isEnabled('#stop'), 'Stop is enabled while streaming');
  await page.click('#stop');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant')[1].dataset.state === 'done', null, { timeout: 5000 });
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
  await page.waitForFunction(() => { const m = document.querySelectorAll('.msg.assistant'); return m.length === 3 && m[2].dataset.state === 'done'; }, null, { timeout: 30000 });
  const third = await page.$$eval('.msg.assistant .text', (els) => els[2].textContent);
  check(third.trim().length > 0, 'a third answer after Stop', third);

  await page.screenshot({ path: process.env.POCKET_SHOT, fullPage: true });
  check(fs.statSync(process.env.POCKET_SHOT).size > 5000, 'screenshot saved to ' + process.env.POCKET_SHOT);
  check(foreign.length === 0, 'no request leaves the server (no CDN)', foreign);
  // (the one 401 is the model list fetched before the key was typed)
  const unexpected = consoleErrors.filter((e) => !/status of 401/.test(e));
  check(unexpected.length === 0, 'no script errors in the console', unexpected);
} finally {
  await context.close();
}
finish('webui.mjs');
