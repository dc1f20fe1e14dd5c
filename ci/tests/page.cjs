// node ci/tests/page.cjs URL SCREENSHOT SECONDS: the live page in Debian's chromium (headless,
// driven by playwright-core from IB_BROWSER_DIR, ./task tools), watched for SECONDS from its first
// answered query (it says "page.cjs: ready" on stderr then: the browser's start and the page's
// load take seconds on a busy host, and a test that stops a part under the page waits for it),
// then a screenshot of the whole page. Prints one JSON object: the console's errors and the page's
// uncaught ones, the status line, each panel's title and text as shown, and every range query
// the page made with its answer's points per series (when, and what each panel was given).
const { chromium } = require(`${process.env.IB_BROWSER_DIR}/node_modules/playwright-core`);

const [url, screenshot, seconds] = process.argv.slice(2);

(async () => {
  // The flags this machine's closed network needs (no background fetches to Google's hosts).
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const errors = [];
  const queries = [];
  let answered, inFlight = 0, lastAnswer = 0;
  const firstAnswer = new Promise((resolve) => { answered = resolve; });
  // A page that refreshes (a run's live address) is watched for its queries, and its panels
  // are read as they are: every refresh empties them. It is watched in a window of its first
  // row, Perses renders and queries a panel only once it is in view, so that each refresh
  // stays cheap beside a load that fills both CPUs (all 26 panels took over 10 s a refresh).
  // Any other page is read once it has settled, in a window tall enough for every panel.
  const refreshes = new URL(url).searchParams.has('refresh');
  try {
    const page = await browser.newPage({ viewport: { width: 1600, height: refreshes ? 600 : 4200 } });
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    const isQuery = (r) => r.url().includes('/api/v1/query_range');
    page.on('request', (r) => { if (isQuery(r)) inFlight += 1; });
    for (const done of ['requestfinished', 'requestfailed']) {
      page.on(done, (r) => { if (isQuery(r)) { inFlight -= 1; lastAnswer = Date.now(); } });
    }
    page.on('response', async (r) => {
      if (!isQuery(r)) return;
      const form = new URLSearchParams(r.request().postData() || new URL(r.url()).search);
      let points = null;
      try {
        points = (await r.json()).data.result.map((s) => (s.values || []).length);
      } catch (e) {
        points = null;
      }
      queries.push({ at: Date.now(), query: form.get('query'), status: r.status(), points });
      if (r.status() === 200) answered();
    });
    await page.goto(url);
    // At most a minute for the first answer; a page that never gets one is shown as it is.
    await Promise.race([firstAnswer, page.waitForTimeout(60000)]);
    process.stderr.write('page.cjs: ready\n');
    await page.waitForTimeout(Number(seconds) * 1000);
    // The panels as shown once the page is quiet: no range query in flight, none answered
    // and no panel's text changed for a second, and every panel drawn. A panel is drawn in
    // steps (a time series' legend header before its rows): on a busy host a query still
    // unanswered left a panel with its legend alone, for more than a second, while the rest
    // stood still. The panels returned are those of the last check. At most a minute, then as
    // they are.
    const read = () => [...document.querySelectorAll('section[data-testid="panel"]')].map((s) => ({
      title: s.querySelector('h6')?.textContent ?? '',
      text: s.innerText.replace(s.querySelector('header')?.innerText ?? '', '').trim(),
    }));
    let panels = await page.evaluate(read);
    if (!refreshes) {
      let last = JSON.stringify(panels), since = Date.now();
      for (const until = Date.now() + 60000; Date.now() < until; await page.waitForTimeout(250)) {
        panels = await page.evaluate(read);
        const now = JSON.stringify(panels);
        if (now !== last || inFlight > 0) { last = now; since = Date.now(); continue; }
        const quiet = Date.now() - Math.max(since, lastAnswer);
        if (quiet >= 1000 && panels.every((p) => p.text !== '')) break;
      }
    }
    const status = await page.textContent('#status');
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(JSON.stringify({ errors, status, panels, queries }));
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(`page.cjs: ${e}`);
  process.exit(1);
});
