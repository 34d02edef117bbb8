// Drives Debian's chromium with playwright-core through `satchel web`:
// a recorded conversation and its tool calls, search, a tool result with
// <script> and <img onerror> that must stay inert, forgetting a memory.
// Prints one JSON report. Usage: node browser.js PLAYWRIGHT_DIR BASE_URL [SCREENSHOT_DIR]
const { chromium } = require(process.argv[2]);
const base = process.argv[3];
const shots = process.argv[4];

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const report = { dialogs: [], errors: [], console: [] };
  const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  try {
    page.on('dialog', (dialog) => { report.dialogs.push(dialog.message()); dialog.accept(); });
    page.on('pageerror', (error) => report.errors.push(String(error)));
    page.on('console', (message) => { if (message.type() === 'error') report.console.push(message.text()); });
    const shot = async (name) => { if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true }); };

    await page.goto(`${base}/`);
    await page.waitForSelector('#conversations li a');
    report.titles = await page.$$eval('#conversations li a', (links) => links.map((a) => a.textContent));
    await shot('conversations');

    await page.click('#conversations li a');
    await page.waitForSelector('#events .event.tool');
    report.tool_text = await page.textContent('#events .event.tool');
    report.answer_html = await page.innerHTML('#events .event.assistant .md');
    report.hacked = await page.evaluate(() => (window.hacked === undefined ? null : window.hacked));
    report.injected = await page.evaluate(() => document.querySelectorAll('#main script, #main img, #main [onerror]').length);
    await shot('conversation');

    // A statement from the page: it streams, then the conversation shows it.
    await page.fill('#chat-input', 'hello from the browser');
    await page.click('#send');
    // Answered: the conversation is read again and shows it among its events.
    const inEvents = (text) => page.waitForFunction((wanted) =>
      [...document.querySelectorAll('#events .event')].some((e) => e.textContent.includes(wanted)), text);
    await inEvents('The browser got an answer');
    report.chat = await page.$$eval('#events .event.assistant', (items) => items.map((i) => i.textContent));
    await shot('chat');

    // A permission question answered in the page.
    await page.fill('#chat-input', 'make a file');
    await page.click('#send');
    await page.waitForSelector('.consent button.answer-once');
    report.question = await page.textContent('.consent');
    await page.click('.consent button.answer-once');
    await inEvents('The page allowed it.');

    // Stop during a long tool.
    await page.fill('#chat-input', 'sleep a while');
    await page.click('#send');
    await page.waitForSelector('.tool-line');
    await page.waitForSelector('#stop:not([hidden])');
    await page.click('#stop');
    await page.waitForSelector('#done');
    report.stopped = await page.textContent('#done');

    // A statement made in another tab shows up here.
    const conversation = page.url();
    const other = await browser.newPage();
    await other.goto(conversation);
    await other.waitForSelector('#chat-input');
    await other.fill('#chat-input', 'from the other tab');
    await other.click('#send');
    await page.waitForFunction(() => document.querySelector('#main').textContent.includes('From the other tab.'), null, { timeout: 15000 });
    report.followed = true;
    await other.close();

    await page.goto(`${base}/#/`);
    await page.waitForSelector('#search');
    await page.fill('#search', 'zebras');
    await page.press('#search', 'Enter');
    await page.waitForFunction(() => location.hash.includes('zebras') && !document.querySelector('#conversations'));
    report.search_none = await page.textContent('#main');
    await page.fill('#search', 'markup');
    await page.press('#search', 'Enter');
    await page.waitForSelector('#conversations li');
    report.search_found = await page.$$eval('#conversations li', (items) => items.length);

    // The layer filter: the one memory is long-term, none is mid-term.
    await page.goto(`${base}/#/memory`);
    await page.waitForSelector('#memory-layer');
    await page.selectOption('#memory-layer', 'mid');
    await page.click('form.search button');
    await page.waitForFunction(() => location.hash.includes('layer=mid')
      && document.querySelectorAll('#memories li').length === 0, null, { timeout: 10000 });
    report.mid_memories = 0;

    await page.goto(`${base}/#/memory`);
    await page.waitForSelector('#memories li');
    report.memories_before = await page.$$eval('#memories li', (items) => items.length);
    await shot('memory');
    await page.click('#memories li button.forget');
    await page.waitForFunction(() => document.querySelectorAll('#memories li').length === 0);
    report.memories_after = 0;

    await page.goto(`${base}/#/audit`);
    await page.waitForSelector('#audit tr td');
    report.audit_rows = await page.$$eval('#audit tr', (rows) => rows.length - 1);
    await page.goto(`${base}/#/code`);
    await page.waitForSelector('.bar');
    report.code_text = await page.textContent('#main');
    await shot('code');
  } catch (error) {
    report.failure = String(error && error.stack || error);
    report.page = await page.textContent('#main').catch(() => null);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(report) + '\n');
})();
