// console.mjs drives the web console in Debian's chromium through playwright-core, for
// the Go test cmd/clouddb/console_test.go, against a real clouddb: a wrong key pair is
// refused, the right one signs in, a subscription and then a database are created
// through the forms and followed until active, the database's redis-cli line is handed to
// the Go test (which runs it), the database is deleted through the UI and goes, and
// signing out closes the pages again.
//
// Environment:
//   UI_URL            base URL of the API listener (the console is at /)
//   API_KEY, SECRET_KEY   the account's key pair
//   SHOT_DIR          where the PNG files go: console.png (a subscription's databases),
//                     task.png, database.png (failure.png when a step fails)
//   HANDOFF_DIR       the exchange with the Go test: the flow writes redis-cli.txt and
//                     waits for ping.txt ("PONG" to go on); it saves the HTML of every
//                     page it receives under pages/ for the Go test to check
//   CHROMIUM          the browser (default /usr/bin/chromium)
//
// Every wait has a timeout, and a watchdog ends the run; playwright kills the browser it
// launched when node exits. Exit status 0 means every check passed.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const stepTimeout = 10_000;
// Long enough for a subscription and a database to become active with servers started
// on a loaded machine.
const settleTimeout = 90_000;
const watchdog = setTimeout(() => {
  console.error('console: watchdog: the flow took more than 200s');
  process.exit(3);
}, 200_000);
watchdog.unref();

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined || v === '') throw new Error(`console: ${name} is not set`);
  return v;
};

let step = 'launch';
const log = (msg) => console.log(`console: ${msg}`);
const begin = (name) => {
  step = name;
  log(name);
};

const shotDir = env('SHOT_DIR');
const handoff = env('HANDOFF_DIR');
const pagesDir = path.join(handoff, 'pages');
fs.mkdirSync(pagesDir, { recursive: true });

const browser = await chromium.launch({
  executablePath: env('CHROMIUM', '/usr/bin/chromium'),
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  timeout: 30_000,
});
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.setDefaultTimeout(stepTimeout);
  page.setDefaultNavigationTimeout(15_000);
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') log(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  // Every HTML document the browser receives (meta refreshes included) is saved for the
  // Go test, which checks that none holds the secret key.
  let saved = 0;
  page.on('response', async (r) => {
    if (r.request().resourceType() !== 'document' || r.status() >= 300 && r.status() < 400) return;
    try {
      const body = await r.text();
      saved += 1;
      fs.writeFileSync(path.join(pagesDir, `${String(saved).padStart(3, '0')}.html`), body);
    } catch (e) {
      log(`response of ${r.url()} not read: ${e.message}`);
    }
  });
  await run(page, context);
  await browser.close();
  log(`ok (${saved} pages saved)`);
  process.exit(0);
} catch (err) {
  console.error(`console: step "${step}" failed: ${err.stack || err}`);
  if (page) {
    try {
      await page.screenshot({ path: path.join(shotDir, 'failure.png'), timeout: 5_000 });
      const body = await page.locator('body').innerText({ timeout: 2_000 });
      console.error(`console: page ${page.url()} at failure:\n${body.slice(0, 2000)}`);
    } catch (e) {
      console.error(`console: no failure screenshot: ${e.message}`);
    }
  }
  await browser.close().catch(() => {});
  process.exit(1);
}

// run is the flow proper.
async function run(page, context) {
  const base = env('UI_URL').replace(/\/$/, '');
  const apiKey = env('API_KEY');
  const secretKey = env('SECRET_KEY');
  const subName = 'console-sub';
  const dbName = 'console-db';
  const shot = async (name) => {
    const file = path.join(shotDir, name);
    await page.screenshot({ path: file });
    log(`screenshot ${file}`);
  };

  begin('open /: the sign-in form');
  await page.goto(base + '/');
  const signIn = page.getByTestId('sign-in-form');
  await signIn.waitFor();

  begin('a wrong key pair is refused');
  await signIn.locator('[name="apiKey"]').fill(apiKey);
  await signIn.locator('[name="secretKey"]').fill('wrong-' + secretKey.slice(0, 4));
  await page.getByTestId('sign-in-submit').click();
  await waitText(page.getByTestId('form-error'), /authentication failed/, 'the sign-in error');
  await signIn.waitFor();
  if ((await context.cookies()).some((c) => c.name === 'clouddb_console')) throw new Error('a session cookie after a refused sign-in');

  begin('sign in');
  await signIn.locator('[name="apiKey"]').fill(apiKey);
  await signIn.locator('[name="secretKey"]').fill(secretKey);
  await page.getByTestId('sign-in-submit').click();
  await page.getByTestId('subscription-list').waitFor();
  const cookies = (await context.cookies()).filter((c) => c.name === 'clouddb_console');
  if (cookies.length !== 1) throw new Error(`session cookies: ${JSON.stringify(cookies.map((c) => c.name))}`);
  const cookie = cookies[0];
  if (!cookie.httpOnly || cookie.sameSite !== 'Strict' || cookie.expires !== -1 || cookie.path !== '/') {
    throw new Error(`the session cookie: ${JSON.stringify({ ...cookie, value: '…' })}`);
  }
  if (cookie.value.includes(secretKey)) throw new Error('the session cookie holds the secret in clear');

  begin('create a subscription');
  const subForm = page.getByTestId('new-subscription-form');
  await subForm.locator('[name="name"]').fill(subName);
  await subForm.locator('[name="dbName"]').fill(subName + '-plan');
  await subForm.locator('[name="dbMemory"]').fill('0.1');
  await page.getByTestId('new-subscription-submit').click();
  await followTask(page, 'subscriptionCreateRequest');
  await waitText(page.getByTestId('task-subscription-status'), /^active$/, 'the subscription status on its task page', settleTimeout);

  begin('the subscription: its creation-plan database becomes active');
  await page.getByTestId('task-subscription-open').click();
  await waitCount(page.getByTestId('database-row'), 1, 'database rows');
  await waitText(page.getByTestId('database-row').getByTestId('status'), /^active$/, 'the plan database status', settleTimeout);

  begin('create a database through the form');
  await page.getByTestId('new-database').click();
  const dbForm = page.getByTestId('new-database-form');
  await dbForm.locator('[name="name"]').fill(dbName);
  await dbForm.locator('[name="memoryLimitInGb"]').fill('0.1');
  await dbForm.locator('[name="password"]').fill(''); // a generated one
  await page.getByTestId('new-database-submit').click();
  await followTask(page, 'databaseCreateRequest');

  begin('the task page follows the database until it is active');
  await waitText(page.getByTestId('task-database-status'), /^active$/, 'the database status on its task page', settleTimeout);
  await shot('task.png');

  begin('the database page: its redis-cli line');
  await page.getByTestId('task-database-open').click();
  const cliEl = page.getByTestId('redis-cli');
  await cliEl.waitFor();
  const cli = (await cliEl.innerText()).trim();
  if (!/^redis-cli -h \S+ -p \d+ --user default --pass '.+'$/.test(cli)) throw new Error(`the redis-cli line: ${cli}`);
  const userSelect = await cliEl.evaluate((el) => getComputedStyle(el).userSelect);
  if (userSelect !== 'all') throw new Error(`the redis-cli line has user-select: ${userSelect}`);
  // One click selects the whole line.
  await cliEl.click();
  const selected = await page.evaluate(() => String(window.getSelection()));
  if (selected.trim() !== cli) throw new Error(`one click selected ${JSON.stringify(selected)}, not the line`);
  await shot('database.png');

  begin('hand the redis-cli line to the Go test, which runs it');
  fs.writeFileSync(path.join(handoff, 'redis-cli.txt.tmp'), cli);
  fs.renameSync(path.join(handoff, 'redis-cli.txt.tmp'), path.join(handoff, 'redis-cli.txt')); // never read half-written
  const ping = await waitFile(path.join(handoff, 'ping.txt'), 30_000);
  if (ping.trim() !== 'PONG') throw new Error(`the Go test's PING with the line: ${ping}`);

  begin('the subscription\'s databases');
  await page.getByTestId('database-subscription').click();
  await waitCount(page.getByTestId('database-row'), 2, 'database rows');
  const row = page.getByTestId('database-row').filter({ has: page.getByTestId('database-open').filter({ hasText: dbName }) });
  await waitText(row.getByTestId('status'), /^active$/, `the status of ${dbName}`);
  const rowCli = (await row.getByTestId('redis-cli').innerText()).trim();
  if (rowCli !== cli) throw new Error(`the list's redis-cli line ${rowCli} is not the database page's ${cli}`);
  await page.mouse.move(0, 0);
  await shot('console.png');

  begin('delete the database through the UI');
  await row.getByTestId('database-open').click();
  await page.getByTestId('delete-database').click();
  await page.getByTestId('delete-database-form').waitFor();
  await page.getByTestId('delete-database-confirm').click();
  await followTask(page, 'databaseDeleteRequest');
  await page.getByTestId('task-resource-gone').waitFor({ timeout: settleTimeout });

  begin('it is gone from the subscription');
  await page.getByTestId('task-resource-gone').getByTestId('task-subscription-open').click();
  await waitCount(page.getByTestId('database-open').filter({ hasText: dbName }), 0, `rows of ${dbName}`);
  await waitCount(page.getByTestId('database-row'), 1, 'database rows');

  begin('the tasks page');
  await page.getByTestId('nav-tasks').click();
  await page.getByTestId('task-list').waitFor();
  const commands = await page.getByTestId('task-row').getByTestId('task-command').evaluateAll((els) => els.map((e) => e.title));
  for (const want of ['subscriptionCreateRequest', 'databaseCreateRequest', 'databaseDeleteRequest']) {
    if (!commands.includes(want)) throw new Error(`the tasks page lacks ${want}: ${JSON.stringify(commands)}`);
  }
  await waitCount(page.getByTestId('task-row').getByTestId('status').filter({ hasNotText: 'processing-completed' }), 0, 'tasks not completed');

  begin('sign out');
  await page.getByTestId('sign-out').click();
  await signIn.waitFor();
  if ((await context.cookies()).some((c) => c.name === 'clouddb_console')) throw new Error('the session cookie is still there');
  await page.goto(base + '/console/subscriptions');
  await signIn.waitFor();
  if ((await page.getByTestId('subscription-list').count()) !== 0) throw new Error('the subscriptions are shown after signing out');
}

// followTask waits for the task page of a task of the command to show it completed; the
// page reloads itself meanwhile.
async function followTask(page, command) {
  await page.waitForURL(/\/console\/tasks\/[^/]+$/);
  await waitText(page.getByTestId('task-command'), new RegExp(`^${command}$`), 'the task command');
  await waitText(page.getByTestId('task-status'), /^processing-(completed|error)$/, 'the task status', settleTimeout);
  const status = (await page.getByTestId('task-status').innerText()).trim();
  if (status !== 'processing-completed') {
    const error = await page.getByTestId('task-error').innerText().catch(() => '(no error shown)');
    throw new Error(`task ${page.url()}: ${status}: ${error}`);
  }
}

// poll retries check until it returns true, for at most timeout; describe says what was
// seen when it gives up. A check that throws (the page is reloading) is retried.
async function poll(what, check, describe, timeout = stepTimeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // the page navigated (a meta refresh) between the locator and its read
    }
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeout}ms; seen: ${await describe().catch((e) => e.message)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitCount(locator, n, what) {
  await poll(`${n} ${what}`, async () => (await locator.count()) === n, async () => `${await locator.count()}`);
}

async function waitText(locator, re, what, timeout = stepTimeout) {
  const text = async () => (await locator.count()) ? (await locator.first().innerText({ timeout: 1_000 })).trim() : '(absent)';
  await poll(`${what} ~ ${re}`, async () => re.test(await text()), text, timeout);
}

async function waitFile(file, timeout) {
  await poll(`the file ${path.basename(file)}`, async () => fs.existsSync(file), async () => 'absent', timeout);
  return fs.readFileSync(file, 'utf8');
}
