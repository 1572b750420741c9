// flow.mjs drives the browser UI in Debian's chromium through playwright-core, for the
// Go test browser/uitest_test.go: it registers a redis-server with the add form, browses
// its keys, filters them, opens a hash and a stream, and saves a screenshot of each page.
//
// Environment:
//   UI_URL            base URL of the browser listener (the UI is at /)
//   REDIS_HOST, REDIS_PORT, REDIS_PASSWORD   the server to register
//   UI_EXPECT         JSON: {"prefix", "keys": [{"name", "type"}], "hash": {"name",
//                     "fields": [...]}, "stream": {"name", "ids": [...]}}
//   SHOT_DIR          where the PNG files go: dbs.png, keys.png, hash.png, stream.png
//                     (failure.png when a step fails)
//   CHROMIUM          the browser (default /usr/bin/chromium)
//   UI_SMOKE=1        only load a data: URL and exit: checks that chromium launches
//
// Every wait has a timeout, and a watchdog ends the run; playwright kills the browser it
// launched when node exits. Exit status 0 means every check passed.
import { chromium } from 'playwright-core';
import path from 'node:path';

const stepTimeout = 10_000;
const watchdog = setTimeout(() => {
  console.error('flow: watchdog: the flow took more than 120s');
  process.exit(3);
}, 120_000);
watchdog.unref();

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined || v === '') throw new Error(`flow: ${name} is not set`);
  return v;
};

let step = 'launch';
const log = (msg) => console.log(`flow: ${msg}`);
const begin = (name) => {
  step = name;
  log(name);
};

const browser = await chromium.launch({
  executablePath: env('CHROMIUM', '/usr/bin/chromium'),
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  timeout: 30_000,
});
let page;
let shotDir;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.setDefaultTimeout(stepTimeout);
  page.setDefaultNavigationTimeout(15_000);
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') log(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  page.on('requestfailed', (r) => log(`request failed: ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));

  if (process.env.UI_SMOKE === '1') {
    begin('smoke: data: URL');
    await page.goto('data:text/html,<title>smoke</title><p data-testid="smoke">chromium runs</p>');
    const text = await page.getByTestId('smoke').textContent();
    if (text !== 'chromium runs') throw new Error(`smoke: read ${JSON.stringify(text)}`);
    log(`smoke ok: ${browser.version()}`);
  } else {
    shotDir = env('SHOT_DIR');
    await run(page, shotDir);
  }
  await browser.close();
  log('ok');
  process.exit(0);
} catch (err) {
  console.error(`flow: step "${step}" failed: ${err.stack || err}`);
  if (page && shotDir) {
    try {
      await page.screenshot({ path: path.join(shotDir, 'failure.png'), timeout: 5_000 });
      const body = await page.locator('body').innerText({ timeout: 2_000 });
      console.error(`flow: page text at failure:\n${body.slice(0, 2000)}`);
    } catch (e) {
      console.error(`flow: no failure screenshot: ${e.message}`);
    }
  }
  await browser.close().catch(() => {});
  process.exit(1);
}

// run is the flow proper.
async function run(page, shotDir) {
  const base = env('UI_URL').replace(/\/$/, '');
  const redis = { host: env('REDIS_HOST'), port: env('REDIS_PORT'), password: env('REDIS_PASSWORD') };
  const want = JSON.parse(env('UI_EXPECT'));
  const dbName = 'uitest-db';
  const shot = async (name) => {
    const file = path.join(shotDir, name);
    await page.screenshot({ path: file });
    log(`screenshot ${file}`);
  };

  begin('open /');
  await page.goto(base + '/');
  await page.getByTestId('db-list').waitFor({ state: 'attached' }); // empty: maybe of no height

  begin('add a database');
  await page.getByTestId('add-db').click();
  const form = page.getByTestId('add-db-form');
  await form.waitFor();
  await fill(form, 'name', dbName);
  await fill(form, 'connectionType', 'STANDALONE');
  await fill(form, 'host', redis.host);
  await fill(form, 'port', redis.port);
  await fill(form, 'password', redis.password);
  await page.getByTestId('add-db-submit').click();

  begin('land on the key browser');
  const keyList = page.getByTestId('key-list');
  const formError = page.getByTestId('form-error');
  await keyList.or(formError.filter({ hasText: /\S/ })).first().waitFor();
  if (await formError.filter({ hasText: /\S/ }).count()) {
    throw new Error(`the add form says: ${await formError.innerText()}`);
  }
  await waitText(page.getByTestId('key-total'), new RegExp(`\\b${want.keys.length}\\b`), 'key-total');
  await waitRows(page, want.keys.map((k) => k.name), 'all keys');
  await waitText(page.getByTestId('key-scanned'), /\d/, 'key-scanned');
  for (const k of want.keys) {
    const row = page.getByTestId('key-row').filter({ has: openLink(page, k.name) });
    await waitText(row.getByTestId('key-type'), new RegExp(k.type, 'i'), `key-type of ${k.name}`);
  }
  const keysURL = page.url(); // the key panel may be a page of its own: come back here
  await shot('keys.png');

  begin('filter by pattern');
  const prefixed = want.keys.filter((k) => k.name.startsWith(want.prefix));
  await filter(page, want.prefix + '*', '');
  await waitRows(page, prefixed.map((k) => k.name), `keys matching ${want.prefix}*`);

  begin('filter by pattern and type hash');
  await filter(page, want.prefix + '*', 'hash');
  await waitRows(page, [want.hash.name], `hashes matching ${want.prefix}*`);

  begin('open the hash');
  await openLink(page, want.hash.name).click();
  const panel = page.getByTestId('key-panel');
  await waitText(panel.getByTestId('key-panel-type'), /hash/i, 'key-panel-type of the hash');
  await waitCount(panel.getByTestId('hash-field'), want.hash.fields.length, 'hash-field rows');
  const fieldText = (await panel.getByTestId('hash-field').allInnerTexts()).join('\n');
  for (const f of want.hash.fields) {
    if (!fieldText.includes(f)) throw new Error(`hash field ${f} is not shown: ${fieldText}`);
  }
  await shot('hash.png');

  begin('filter by type stream and open the stream');
  if ((await page.getByTestId('key-filter').count()) === 0) await page.goto(keysURL);
  await filter(page, want.prefix + '*', 'stream');
  await waitRows(page, [want.stream.name], `streams matching ${want.prefix}*`);
  await openLink(page, want.stream.name).click();
  await waitText(panel.getByTestId('key-panel-type'), /stream/i, 'key-panel-type of the stream');
  await waitCount(panel.getByTestId('stream-entry'), want.stream.ids.length, 'stream-entry rows');
  const entryText = (await panel.getByTestId('stream-entry').allInnerTexts()).join('\n');
  for (const id of want.stream.ids) {
    if (!entryText.includes(id)) throw new Error(`stream entry ${id} is not shown: ${entryText}`);
  }
  await shot('stream.png');

  begin('the database list');
  await page.goto(base + '/');
  const row = page.getByTestId('db-row').filter({ hasText: dbName });
  await waitCount(row, 1, `db-row of ${dbName}`);
  await row.getByTestId('db-open').waitFor();
  await waitText(row.getByTestId('db-status'), /\S/, `db-status of ${dbName}`);
  await shot('dbs.png');
}

// fill sets a form control by name, whatever its kind (input, select, radio group).
async function fill(form, name, value) {
  const controls = form.locator(`[name="${name}"]`);
  await controls.first().waitFor({ state: 'attached' });
  const kind = await controls.first().evaluate((el) => `${el.tagName.toLowerCase()}:${el.type || ''}`);
  if (kind.startsWith('select')) {
    await controls.first().selectOption(value);
  } else if (kind === 'input:radio') {
    await form.locator(`[name="${name}"][value="${value}"]`).check();
  } else {
    await controls.first().fill(value);
  }
}

// filter submits the key filter with a pattern and a type ('' for every type).
async function filter(page, match, type) {
  const form = page.getByTestId('key-filter');
  await fill(form, 'match', match);
  const typeControl = form.locator('[name="type"]');
  const isSelect = await typeControl.evaluate((el) => el.tagName === 'SELECT');
  if (isSelect) {
    // By value, else by label ("hash", "Hash", "All"…).
    const options = await typeControl.locator('option').evaluateAll((os) => os.map((o) => ({ value: o.value, label: o.textContent.trim() })));
    const opt = options.find((o) => o.value.toLowerCase() === type) ?? options.find((o) => o.label.toLowerCase() === type) ??
      (type === '' ? options.find((o) => /^(all|any)/i.test(o.label)) : undefined);
    if (!opt) throw new Error(`the type filter has no option ${JSON.stringify(type)}: ${JSON.stringify(options)}`);
    await typeControl.selectOption(opt.value);
  } else {
    await typeControl.fill(type);
  }
  await page.getByTestId('key-filter-submit').click();
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// openLink is the key-open element of the key named name.
function openLink(page, name) {
  return page.getByTestId('key-open').filter({ hasText: new RegExp(`^\\s*${escapeRe(name)}\\s*$`) });
}

// poll retries check until it returns true, for at most stepTimeout; describe says what
// was seen when it gives up.
async function poll(what, check, describe) {
  const deadline = Date.now() + stepTimeout;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not after ${stepTimeout}ms; seen: ${await describe()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitCount(locator, n, what) {
  await poll(`${n} ${what}`, async () => (await locator.count()) === n, async () => `${await locator.count()}`);
}

async function waitText(locator, re, what) {
  const text = async () => (await locator.count()) ? (await locator.first().innerText()) : '(absent)';
  await poll(`${what} ~ ${re}`, async () => re.test(await text()), text);
}

// waitRows waits until the key list shows exactly the keys names, in any order.
async function waitRows(page, names, what) {
  const want = [...names].sort().join('\n');
  const seen = async () => (await page.getByTestId('key-row').getByTestId('key-open').allInnerTexts()).map((s) => s.trim()).sort().join('\n');
  await poll(what, async () => (await seen()) === want, async () => JSON.stringify(await seen()));
}
