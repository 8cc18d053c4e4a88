// webui_context.mjs - the chat page through a conversation longer than the
// context, on a server with the bundled model's own 256 tokens
// (tests/cli/t_serve.sh starts it without -c):
//   1. the page knows the context (/v1/models): ten turns are all answered;
//      the oldest turns are left out (greyed, one line saying so each time),
//      the system prompt always sent, and what is sent is what the page shows
//      as kept;
//   2. the page does not know it (the model list blocked): the server's 400
//      context_length_exceeded makes it retry with fewer turns; every turn
//      is answered all the same;
//   3. a message too long for the context on its own: the error is shown,
//      nothing of it is kept, the text is back in the input box, and the
//      conversation goes on.
// Screenshot of case 1: $POCKET_SHOT with -context before .png.
import { check, finish } from './common.mjs';
import { openPage, giveKey, turn, transcript } from './browser.mjs';

const SYSTEM = 'You are a scribe of the King James Bible.';
const WORDS = ['In the beginning', 'And God said', 'Let there be light', 'And the evening and the morning',
               'Who made the firmament?', 'And the waters', 'Tell me of the garden', 'And Adam knew',
               'What came next?', 'And it was so'];
const SHOT = process.env.POCKET_SHOT.replace(/\.png$/, '-context.png');   // a look at case 1
const NOTICE = /^Dropped the (oldest turn|\d+ oldest turns) to fit the (256-token )?context\.$/;

// n turns; returns the transcript. Every turn must be answered.
async function converse(page, n) {
  let answered = 0;
  for (let i = 0; i < n; i++) {
    await turn(page, WORDS[i % WORDS.length]);
    const last = (await transcript(page)).filter((m) => m.role === 'assistant').pop();
    if (last && last.text.trim().length > 0 && (await page.$$('.msg.error')).length === 0) answered++;
  }
  check(answered === n, `${answered} of ${n} turns answered, no error`, await transcript(page));
  return transcript(page);
}

// the turns on the page that are still sent = the last request's messages
function keptMatchesSent(shown, body, what) {
  const kept = shown.filter((m) => (m.role === 'user' || m.role === 'assistant') && !m.dropped);
  const wire = body.messages.filter((m) => m.role !== 'system');
  const same = kept.length === wire.length + 1 &&
               wire.every((m, i) => m.role === kept[i].role && m.content === kept[i].text);
  check(same, what + ': the last request carries exactly the turns the page shows as kept',
        { kept: kept.map((m) => m.role + ': ' + m.text.slice(0, 20)), sent: wire.map((m) => m.role + ': ' + m.content.slice(0, 20)) });
}

function notices(shown, what) {
  const n = shown.filter((m) => m.role === 'notice');
  check(n.length >= 2, `${what}: turns were dropped, a line each time (${n.length})`, shown);
  check(n.every((m) => NOTICE.test(m.text) && m.lines === 1), `${what}: each notice is one line`, n);
  const users = shown.filter((m) => m.role === 'user');
  check(users[0].dropped && users[1].dropped && !users[users.length - 1].dropped,
        `${what}: the oldest turns are greyed, the latest not`, users);
}

// ---- 1. the page knows the context ------------------------------------------------------
{
  const { context, page, sent, consoleErrors } = await openPage();
  try {
    await giveKey(page, 'kjv-moe-f16');
    check(/context 256\)/.test(await page.textContent('#model')), 'the page shows the context size', await page.textContent('#model'));
    await page.fill('#maxtok', '48');
    await page.fill('#system', SYSTEM);
    const shown = await converse(page, 10);
    notices(shown, 'known context');
    check(sent.length >= 10, `requests sent: ${sent.length} for 10 turns`);
    check(sent.every((b) => b.messages[0].role === 'system' && b.messages[0].content === SYSTEM),
          'every request opens with the system prompt');
    check(!sent[sent.length - 1].messages.some((m) => m.content === WORDS[0]), 'the first message is no longer sent');
    keptMatchesSent(shown, sent[sent.length - 1], 'known context');
    const stats = await page.textContent('#stats');
    const used = /context (\d+) of 256/.exec(stats);
    check(used && +used[1] <= 256, 'the stats show the context used', stats);
    check(consoleErrors.filter((e) => !/status of 40[01]/.test(e)).length === 0, 'no script errors', consoleErrors);
    await page.screenshot({ path: SHOT, fullPage: true });
  } finally {
    await context.close();
  }
}

// ---- 2. the context unknown: the server's 400 drives the retries --------------------------
{
  const statuses = [];
  const { context, page, sent, consoleErrors } = await openPage({
    routes: (p) => p.route('**/v1/models', (r) => r.abort()),
  });
  try {
    page.on('response', (r) => { if (r.url().endsWith('/v1/chat/completions')) statuses.push(r.status()); });
    await giveKey(page, 'models:');
    await page.fill('#maxtok', '48');
    const shown = await converse(page, 8);
    check(statuses.includes(400), 'the server refused over-long prompts (400) and the page retried',
          statuses.join(' '));
    check(statuses.filter((s) => s === 200).length === 8, 'eight answers (200)', statuses.join(' '));
    notices(shown, 'unknown context');
    keptMatchesSent(shown, sent[sent.length - 1], 'unknown context');
    check(consoleErrors.filter((e) => !/status of 40[01]|ERR_FAILED/.test(e)).length === 0, 'no script errors', consoleErrors);
  } finally {
    await context.close();
  }
}

// ---- 3. a message too long on its own --------------------------------------------------------
{
  const { context, page, consoleErrors } = await openPage();
  try {
    await giveKey(page, 'kjv-moe-f16');
    await page.fill('#maxtok', '16');
    await turn(page, 'In the beginning');
    const long = 'And God said, Let there be light: and there was light. '.repeat(30).trim();
    await turn(page, long);
    const shown = await transcript(page);
    check(shown.map((m) => m.role).join() === 'user,assistant,error' && /context/.test(shown[2].text),
          'too long: the error is shown, nothing of the message kept', shown);
    check(await page.inputValue('#input') === long, 'too long: the text is back in the input box');
    await turn(page, 'And the evening');
    const after = await transcript(page);
    check(after.filter((m) => m.role === 'assistant').length === 2 && after[after.length - 1].text.trim().length > 0,
          'the conversation goes on after it', after);
    check(consoleErrors.filter((e) => !/status of 40[01]/.test(e)).length === 0, 'no script errors', consoleErrors);
  } finally {
    await context.close();
  }
}

finish('webui_context.mjs');
