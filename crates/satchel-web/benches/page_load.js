// The conversation page's load time in headless chromium: from navigation
// to every event of the conversation on screen. Prints JSON.
// Usage: node page_load.js PLAYWRIGHT_DIR URL EVENTS ROUNDS
const { chromium } = require(process.argv[2]);
const [url, events, rounds] = [process.argv[3], Number(process.argv[4]), Number(process.argv[5])];

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const times = [];
  for (let round = 0; round < rounds; round++) {
    const page = await browser.newPage();
    const started = Date.now();
    await page.goto(url);
    await page.waitForFunction((n) => document.querySelectorAll('#events .event').length >= n, events, { timeout: 120000 });
    times.push(Date.now() - started);
    await page.close();
  }
  await browser.close();
  process.stdout.write(JSON.stringify({ times }) + '\n');
})().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error) }) + '\n');
});
