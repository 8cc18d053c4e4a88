// browser.mjs - the chat page at / in headless Chromium (Debian's, driven by
// playwright-core), for webui*.mjs: a fresh profile ($POCKET_PROFILE), the
// page opened with the API key typed in, requests to other hosts and script
// errors collected, and the body of every chat request the page sends.
import fs from 'node:fs';
import { URL_, KEY, requireNode, check } from './common.mjs';

// Opens the page; routes(page) may install request routes before it loads.
// Returns { context, page, foreign, consoleErrors, sent }.
export async function openPage({ routes } = {}) {
  const { chromium } = requireNode('playwright-core');
  fs.rmSync(process.env.POCKET_PROFILE, { recursive: true, force: true });
  const context = await chromium.launchPersistentContext(process.env.POCKET_PROFILE, {
    executablePath: process.env.POCKET_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
    viewport: { width: 1000, height: 700 },
  });
  const page = context.pages()[0] || await context.newPage();
  const foreign = [], consoleErrors = [], sent = [];
  page.on('request', (r) => {
    if (!r.url().startsWith(URL_)) foreign.push(r.url());
    else if (r.url().endsWith('/v1/chat/completions')) sent.push(JSON.parse(r.postData()));
  });
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  if (routes) await routes(page);
  const resp = await page.goto(URL_ + '/');
  check(resp.status() === 200 && (resp.headers()['content-type'] || '').startsWith('text/html'), 'GET / is an HTML page', resp.status());
  return { context, page, foreign, consoleErrors, sent };
}

// Types the API key and waits for the model list: the model's name and
// context shown (want: a prefix of that text, e.g. "models:" for an error).
export async function giveKey(page, want = '') {
  await page.fill('#apikey', KEY);
  await page.dispatchEvent('#apikey', 'change');
  await page.waitForFunction((w) => { const t = document.getElementById('model').textContent;
    return w ? t.startsWith(w) : / \(context \d+\)$/.test(t); }, want, { timeout: 10000 });
}

// Sends TEXT (Enter) and waits until the page can send again.
export async function turn(page, text, timeout = 60000) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => !document.getElementById('send').disabled, null, { timeout });
}

// What the page shows: the messages in order, as { role (class), text,
// dropped, lines (its height in lines of text) }.
export async function transcript(page) {
  return page.$$eval('#log .msg', (els) => els.map((e) => ({
    role: e.className.replace(/\bmsg\b|\bdropped\b/g, '').trim(), text: (e.querySelector('.text') || e).textContent,
    dropped: e.classList.contains('dropped'),
    lines: Math.round(e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight)) })));
}
