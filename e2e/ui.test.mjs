// pad's web UI, end to end in headless Chromium (ARCHITECTURE.md, Web UI).
//
// Driven by crates/pad/tests/e2e/ui.rs, which starts a real `pad serve` and sets
//   PAD_URL    the server, e.g. http://127.0.0.1:41234
//   PAD_TOKEN  the owner's token of workspace `default`
//   PAD_BIN    the `pad` binary, for claims and releases "from another terminal"
//   PAD_HOME   whose `default` profile points that binary at the server
//   PAD_SCREENSHOT_DIR  where the screenshots go (default ../target/ui-screenshots)
// Uses Debian's /usr/bin/chromium through playwright-core; never downloads a browser.
//
// The tests run in order and share one page, like a person working through a session.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through \`cargo test -p pad --test ui\``);
  return v;
};
const URL = need('PAD_URL');
const TOKEN = need('PAD_TOKEN');
const PAD_BIN = need('PAD_BIN');
const PAD_HOME = need('PAD_HOME');
const SHOTS = resolve(process.env.PAD_SCREENSHOT_DIR ?? join(import.meta.dirname, '..', 'target', 'ui-screenshots'));

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 812 };

/** `pad ARGS…` against the test server, through its saved profile. */
async function pad(...args) {
  const env = { ...process.env, PAD_HOME, NO_COLOR: '1' };
  for (const k of ['PAD_URL', 'PAD_TOKEN', 'PAD_PROFILE', 'PAD_WORKSPACE']) delete env[k];
  try {
    const { stdout } = await promisify(execFile)(PAD_BIN, args, { env, cwd: PAD_HOME });
    return stdout.trim();
  } catch (e) {
    throw new Error(`pad ${args.join(' ')} failed (${e.code}): ${e.stderr}`);
  }
}

let browser;
let page;
let profileDir;
const pageErrors = [];

before(async () => {
  profileDir = mkdtempSync(join(tmpdir(), 'pad-chromium-'));
  mkdirSync(SHOTS, { recursive: true });
  // A fresh profile directory (playwright passes it as --user-data-dir).
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    viewport: DESKTOP,
    colorScheme: 'light',
  });
  browser = context;
  page = await context.newPage();
  // A net against a hang, not a deadline for the page: on a loaded machine
  // Chromium, the server and the live stream all answer late.
  page.setDefaultTimeout(30000);
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // Refused requests (401, 400…) are part of the tests; anything else, such
  // as a Content-Security-Policy violation, is a bug.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(`console: ${m.text()}`);
  });
  // Set before any page script: the XSS payloads below try to flip it.
  await context.addInitScript(() => {
    window.__pwned = undefined;
  });
});

after(async () => {
  await browser?.close();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
});

/** Marks the document; a reload would lose the mark. */
const markDocument = () => page.evaluate(() => (window.__sameDocument = true));
const assertNoReload = async () => assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page reloaded');

const row = (ref) => page.locator(`tr[data-ref="${ref}"]`);

async function shot(name, viewport) {
  await page.setViewportSize(viewport);
  // A calm frame: no toasts, no hover, scrolled to the top (the bar is sticky).
  await page.evaluate(() => {
    document.getElementById('toasts').replaceChildren();
    document.activeElement?.blur();
    window.scrollTo(0, 0);
  });
  await page.mouse.move(0, 0);
  await page.waitForTimeout(150); // let layout settle after the resize
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const { scroll, width } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    width: window.innerWidth,
  }));
  assert.ok(scroll <= width, `${name}: horizontal scroll (${scroll}px content in a ${width}px window)`);
  await page.setViewportSize(DESKTOP);
}

test('sign in with a token; a wrong one is refused with a message', async () => {
  await page.goto(URL);
  await page.getByLabel('API token').fill('pad_not-a-real-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#token-error').filter({ hasText: /unknown or revoked/ }).waitFor();

  await page.getByLabel('API token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Items' }).waitFor();
  assert.match(page.url(), /#\/ws\/default\/items$/);
  assert.equal(await page.locator('#workspace').inputValue(), 'default');
  await page.locator('#live[data-state="live"]').waitFor();
  // The session is an HttpOnly cookie: page scripts never see the token.
  assert.ok(!(await page.evaluate(() => document.cookie)).includes(TOKEN));
});

test('validation errors show the API message next to the field', async () => {
  await page.getByRole('link', { name: 'New item' }).click();
  await page.getByRole('heading', { name: 'New item' }).waitFor();
  await page.getByRole('button', { name: 'Create item' }).click();
  const titleError = page.locator('#field-title-error');
  await titleError.filter({ hasText: /must not be empty/ }).waitFor();
  // In words: the field's own name, not the API's `title:` prefix.
  assert.equal(await titleError.textContent(), 'Title must not be empty');
  assert.equal(await page.getByLabel('Title').getAttribute('aria-invalid'), 'true');

  await page.getByLabel('Title').fill('x'.repeat(501));
  await page.getByRole('button', { name: 'Create item' }).click();
  await titleError.filter({ hasText: /at most 500 characters/ }).waitFor();

  await page.getByLabel('Title').fill('A fine title');
  await page.getByLabel('Labels').fill('ok, bad\u0007label');
  await page.getByRole('button', { name: 'Create item' }).click();
  await page.locator('#field-labels-error').filter({ hasText: /control characters/ }).waitFor();
  assert.equal(await titleError.textContent(), '', 'the old title error is cleared');
});

test('create an item through the form and see it listed', async () => {
  await page.getByLabel('Title').fill('Wire the deploy pipeline');
  await page.getByLabel('Priority').selectOption('high');
  await page.getByLabel('Labels').fill('infra, ci');
  await page.getByLabel('Description').fill(
    'Ship it **bold**ly.\n\n## Steps\n\n- [x] build the image\n- [ ] push to `registry`\n\nSee [the runbook](https://example.com/runbook).',
  );
  await page.getByRole('button', { name: 'Create item' }).click();
  await page.getByRole('heading', { name: 'Wire the deploy pipeline' }).waitFor();
  assert.match(page.url(), /#\/ws\/default\/items\/TASK-1$/);

  await page.getByRole('link', { name: '← All items' }).click();
  await row('TASK-1').waitFor();
  assert.equal(await row('TASK-1').locator('.title-link').textContent(), 'Wire the deploy pipeline');
  assert.equal(await row('TASK-1').locator('.badge.prio').textContent(), 'High');
  assert.equal(await row('TASK-1').locator('.lease').count(), 0);
});

test('a claim from the CLI shows the » marker and a live countdown, with no reload', async () => {
  await markDocument();
  await pad('item', 'claim', 'TASK-1', '--holder', 'runner-a', '--ttl', '10m');
  const lease = row('TASK-1').locator('.lease');
  await lease.waitFor();
  assert.equal(await lease.locator('.lease-mark').textContent(), '»');
  assert.equal(await lease.locator('.lease-holder').textContent(), 'runner-a');
  const first = await lease.locator('.countdown').textContent();
  assert.match(first, /^(10m 00s|9m [0-5]\ds)$/);
  // It counts down by itself.
  await page.waitForFunction(
    (before) => document.querySelector('tr[data-ref="TASK-1"] .countdown')?.textContent !== before,
    first,
  );
  assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector('.lease-mark')).color), 'rgb(12, 133, 153)');
  await assertNoReload();
});

test('a release from the CLI removes the marker live', async () => {
  await pad('item', 'release', 'TASK-1', '--holder', 'runner-a');
  await row('TASK-1').locator('.lease').waitFor({ state: 'detached' });
  await assertNoReload();
});

test('an expiring lease disappears when its countdown reaches zero (L5)', async () => {
  await pad('item', 'create', 'Short-lived job', '--kind', 'chore');
  await row('CHORE-1').waitFor();
  // 6 s: the marker must show (claim, event, refetch, render) before the
  // lease ends, also on a busy machine.
  await pad('item', 'claim', 'CHORE-1', '--holder', 'ci-7', '--ttl', '6s');
  await row('CHORE-1').locator('.lease').waitFor();
  await row('CHORE-1').locator('.lease').waitFor({ state: 'detached' });
  await assertNoReload();
});

test('the item page shows the Lease: line live and the rendered markdown', async () => {
  await page.getByRole('link', { name: 'Wire the deploy pipeline' }).click();
  await page.getByRole('heading', { name: 'Wire the deploy pipeline' }).waitFor();
  assert.equal(await page.locator('.lease-line').count(), 0);

  await pad('item', 'claim', 'TASK-1', '--holder', 'runner-a', '--ttl', '10m');
  const line = page.locator('.lease-line .lease-text');
  await line.waitFor();
  assert.match(await line.textContent(), /^Lease: runner-a \(expires in (10m 00s|9m [0-5]\ds)\)$/);

  const body = page.locator('#item-body');
  assert.equal(await body.locator('strong').textContent(), 'bold');
  assert.equal(await body.locator('h2').textContent(), 'Steps');
  assert.equal(await body.locator('code').textContent(), 'registry');
  assert.equal(await body.locator('a').getAttribute('rel'), 'noopener noreferrer');
  assert.equal(await body.locator('input[type="checkbox"]').count(), 2);
  await page.locator('.item-head .chip').getByText('ci', { exact: true }).waitFor();
});

test('comments can be added and show up', async () => {
  // An empty comment is refused in words, not with the API's `body:` prefix.
  await page.getByRole('button', { name: 'Comment' }).click();
  await page.locator('#comment-error').filter({ hasText: 'Comment must not be empty' }).waitFor();
  await page.getByLabel('Add a comment').fill('Image builds in 4 minutes.\nPush is next.');
  await page.getByRole('button', { name: 'Comment' }).click();
  await page.locator('.comment-body').filter({ hasText: 'Image builds in 4 minutes.' }).waitFor();
  // Another user's comment from the CLI arrives live.
  await pad('item', 'comment', 'TASK-1', 'Registry credentials rotated.');
  await page.locator('.comment-body').filter({ hasText: 'Registry credentials rotated.' }).waitFor();
});

test('the edit form changes status, and history records it', async () => {
  await page.getByRole('link', { name: 'Edit' }).click();
  await page.getByRole('heading', { name: 'Edit TASK-1' }).waitFor();
  await page.waitForFunction(() => document.getElementById('field-title').value !== '');
  await page.getByLabel('Status').selectOption('in-progress');
  await page.getByLabel('Blocked by').fill('nonsense');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#field-blocked_by-error').filter({ hasText: /not an item ref/ }).waitFor();
  await page.getByLabel('Blocked by').fill('CHORE-1');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('.item-head .status-in-progress').waitFor();
  await page.locator('.history .changes').filter({ hasText: 'status' }).first().waitFor();
  await page.locator('.details a.ref', { hasText: 'CHORE-1' }).waitFor();
});

test('a <script> in a title or body is shown as text and never runs', async () => {
  const payload = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>';
  await page.goto(`${URL}/#/ws/default/new`);
  await page.getByLabel('Title').fill(`Hostile ${payload}`);
  await page.getByLabel('Labels').fill('<b onmouseover=window.__pwned=1>x</b>');
  await page.getByLabel('Description').fill(`Body ${payload}\n\n<a href="javascript:window.__pwned=1">click</a>`);
  await page.getByRole('button', { name: 'Create item' }).click();
  const title = page.locator('h1.item-title');
  await title.waitFor();
  assert.equal(await title.textContent(), `Hostile ${payload}`);
  await pad('item', 'comment', 'TASK-2', payload);
  await page.locator('.comment-body').filter({ hasText: '<script>' }).waitFor();
  await page.locator('#item-body a').filter({ hasText: 'click' }).click();

  await page.getByRole('link', { name: '← All items' }).click();
  await row('TASK-2').waitFor();
  assert.equal(await row('TASK-2').locator('.title-link').textContent(), `Hostile ${payload}`);
  await row('TASK-2').locator('.title-link').hover();

  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('#app script, #app img[onerror], #app [onmouseover], #app a[href^="javascript"]').count(), 0);
});

test('screenshots: list and item, desktop and phone', async () => {
  // A few more items, so the board looks like a working day.
  const more = [
    ['Flaky login test on CI', 'bug', 'critical', 'ci'],
    ['Add a retry budget to the fetcher', 'feature', 'medium', 'backend'],
    ['Rotate staging certificates', 'chore', 'low', 'infra'],
    ['Document the lease protocol for workers', 'task', 'medium', 'docs'],
  ];
  for (const [title, kind, priority, label] of more) {
    await pad('item', 'create', title, '--kind', kind, '--priority', priority, '--label', label);
  }
  await pad('item', 'claim', 'BUG-1', '--holder', 'ci-7', '--ttl', '45m');
  await pad('item', 'update', 'FEAT-1', '--status', 'done');
  await page.goto(`${URL}/#/ws/default/items`);
  await row('BUG-1').locator('.lease').waitFor();
  await row('FEAT-1').locator('.status-done').waitFor();
  await shot('list-desktop', DESKTOP);
  await shot('list-phone', PHONE);

  await page.goto(`${URL}/#/ws/default/items/TASK-1`);
  await page.locator('.lease-line').waitFor();
  await page.locator('.comment').first().waitFor();
  await shot('item-desktop', DESKTOP);
  await shot('item-phone', PHONE);

  await page.goto(`${URL}/#/ws/default/new`);
  await page.getByRole('button', { name: 'Create item' }).click();
  await page.locator('#field-title-error').filter({ hasText: /empty/ }).waitFor();
  await shot('form-phone', PHONE);
});

test('on a phone the list headers sit on one line, none cut off', async () => {
  await page.goto(`${URL}/#/ws/default/items`);
  await page.locator('tbody tr').first().waitFor();
  await page.setViewportSize(PHONE);
  const layout = await page.evaluate(() => {
    const tr = document.querySelector('.items thead tr');
    const tops = [...tr.querySelectorAll('th')].map((th) => th.getBoundingClientRect().top);
    return { tops: new Set(tops.map(Math.round)).size, scroll: tr.scrollWidth, width: tr.clientWidth, count: tops.length };
  });
  await page.setViewportSize(DESKTOP);
  assert.ok(layout.count >= 6, `${layout.count} headers`);
  assert.equal(layout.tops, 1, 'the headers wrapped onto more than one line');
  assert.ok(layout.scroll <= layout.width, `headers cut off: ${layout.scroll}px in ${layout.width}px`);
});

test('a missing item is one clear message: no empty cards, no comment form', async () => {
  await page.goto(`${URL}/#/ws/default/items/TASK-999`);
  await page.locator('.item-page').getByText('No item TASK-999 in workspace default.').waitFor();
  assert.equal(await page.locator('.item-grid').isVisible(), false, 'the cards are hidden');
  assert.equal(await page.locator('#comment').isVisible(), false, 'no live comment form');
  await shot('missing-item-desktop', DESKTOP);
  await shot('missing-item-phone', PHONE);
  // The same view shows a real item again.
  await page.goto(`${URL}/#/ws/default/items/TASK-1`);
  await page.locator('#comment').waitFor();
});

test('the item page shows each blocker with its status and title', async () => {
  await page.goto(`${URL}/#/ws/default/items/TASK-1`);
  const blocker = page.locator('.details .linked', { hasText: 'CHORE-1' });
  await blocker.locator('.linked-title', { hasText: 'Short-lived job' }).waitFor();
  assert.equal(await blocker.locator('.badge').textContent(), 'Open');
  await shot('item-blockers-phone', PHONE);
});

test('the item page shows failures, the last failure note and how the last lease ended', async () => {
  const ref = await pad('item', 'create', 'Flaky job');
  const claimed = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'worker-9', '--note', 'halfway through'));
  await page.goto(`${URL}/#/ws/default/items/${ref}`);
  // The live lease's note is shown under its Lease line.
  await page.locator('.lease-note', { hasText: 'Progress: halfway through' }).waitFor();
  await pad('item', 'fail', ref, '--epoch', String(claimed.lease.epoch), '--holder', 'worker-9', '--note', 'disk full on /tmp');
  await page.locator('.lease-note').waitFor({ state: 'detached' });
  const details = page.locator('.details');
  await details.getByText('Failures').waitFor();
  const value = (name) => details.locator('dt', { hasText: name }).locator('xpath=following-sibling::dd[1]');
  assert.match(await value('Failures').textContent(), /^1 · retry /);
  assert.equal(await value('Last failure').textContent(), 'disk full on /tmp');
  const last = await value('Last lease').textContent();
  assert.match(last, /^worker-9 · failed .* · epoch 1disk full on \/tmp$/);
  await shot('item-failed-desktop', DESKTOP);
  await shot('item-failed-phone', PHONE);
});

test('a capped lease shows when it must end, and a later success is the news (L19, L14)', async () => {
  const ref = await pad('item', 'create', 'Capped job');
  const claimed = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'worker-8', '--ttl', '10m', '--max-hold', '2h'));
  await page.goto(`${URL}/#/ws/default/items/${ref}`);
  const details = page.locator('.details');
  await details.getByText('Held until').waitFor();
  const value = (name) => details.locator('dt', { hasText: name }).locator('xpath=following-sibling::dd[1]');
  assert.match(await value('Held until').textContent(), /max hold$/);
  await pad('item', 'fail', ref, '--epoch', String(claimed.lease.epoch), '--holder', 'worker-8', '--note', 'exit 2');
  await details.getByText('Held until').waitFor({ state: 'detached' });
  await pad('run', ref, '--holder', 'worker-8', '--', 'true');
  await details.getByText('Last success').waitFor();
  assert.match(await value('Failures').textContent(), /^1$/, 'the success cleared the backoff');
});

test('the assignee is shown as a person, not as @email', async () => {
  await pad('item', 'update', 'TASK-1', '--assignee', 'owner@localhost');
  await page.goto(`${URL}/#/ws/default/items`);
  const who = row('TASK-1').locator('.assignee');
  await who.filter({ hasText: 'owner' }).waitFor();
  const text = (await who.textContent()).replace('Assigned to ', '');
  assert.equal(text, 'owner');
  assert.equal(await who.getAttribute('title'), 'Assigned to owner@localhost');
});

test('filters narrow the list (leased, status, kind, label)', async () => {
  await page.goto(`${URL}/#/ws/default/items`);
  await row('BUG-1').waitFor();
  const refs = () => page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.ref));
  const waitFor = async (expected) => {
    await page.waitForFunction(
      (want) => [...document.querySelectorAll('tbody tr')].map((r) => r.dataset.ref).join() === want,
      expected.join(),
    ).catch(async () => assert.deepEqual(await refs(), expected));
  };
  await page.getByLabel('Lease').selectOption('true');
  await waitFor(['TASK-1', 'BUG-1']);
  assert.match(page.url(), /leased=true/);
  await page.getByLabel('Lease').selectOption('');
  await page.getByLabel('Status').selectOption('done');
  await waitFor(['FEAT-1']);
  await page.getByLabel('Status').selectOption('');
  await page.getByLabel('Kind').selectOption('chore');
  await waitFor(['CHORE-1', 'CHORE-2']);
  await page.getByLabel('Kind').selectOption('');
  await page.locator('#f-label').fill('ci');
  await waitFor(['TASK-1', 'BUG-1']);
  // Filters live in the address: a reload keeps them.
  await page.reload();
  await waitFor(['TASK-1', 'BUG-1']);
  assert.equal(await page.locator('#f-label').inputValue(), 'ci');
});

/** Signs out and back in with `token`, landing on the items list. */
async function signInAs(token) {
  await page.locator('#signout').click();
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Items' }).waitFor().catch(async (e) => {
    const shown = await page.evaluate(() => `${location.hash} | ${document.getElementById('app').innerText.slice(0, 300)} | ${document.getElementById('toasts').innerText}`);
    throw new Error(`not signed in: ${shown}\n${e.message}`);
  });
}

const fleetItem = (scope, ref) => page.locator(`${scope} .fleet-item[data-ref="${ref}"]`);

test('fleet: a claim from the CLI appears under its holder with a countdown; expiry removes it', async () => {
  await page.locator('#fleet-link').click();
  await page.getByRole('heading', { name: 'Fleet' }).waitFor();
  assert.match(page.url(), /#\/ws\/default\/fleet$/);
  await markDocument();
  const expiredChart = page.locator('.fleet-chart[data-chart="expired"]');
  const expiriesBefore = Number(await expiredChart.getAttribute('data-total'));
  const ref = await pad('item', 'create', 'Fleet job', '--kind', 'chore');
  await pad('item', 'claim', ref, '--holder', 'fleet-w1', '--ttl', '8s', '--note', 'warming caches');
  const held = fleetItem('.fleet-holder[data-holder="fleet-w1"]', ref);
  await held.waitFor();
  assert.equal(await page.locator('.fleet-holder[data-holder="fleet-w1"] .holder-name').textContent(), 'fleet-w1');
  assert.match(await held.locator('.countdown').textContent(), /^[1-8]s$/);
  // A long lease too, so the screenshots show a holder.
  await pad('item', 'claim', 'TASK-1', '--holder', 'runner-a', '--ttl', '30m');
  await fleetItem('.fleet-holder[data-holder="runner-a"]', 'TASK-1').waitFor();
  // Expiry (L5): gone with no event needed and no reload.
  await held.waitFor({ state: 'detached' });
  await page.locator('.fleet-holder[data-holder="fleet-w1"]').waitFor({ state: 'detached' });
  // The expiry reaches the last-hour chart over the live stream.
  await page.locator(`.fleet-chart[data-chart="expired"][data-total="${expiriesBefore + 1}"]`).waitFor();
  await assertNoReload();
});

test('fleet: a quarantined item is listed with its reason; an editor cannot requeue it, an owner can', async () => {
  // Earlier tests may have failed items too: count from what the chart shows now.
  const failedBefore = Number(await page.locator('.fleet-chart[data-chart="failed"]').getAttribute('data-total'));
  const ref = await pad('item', 'create', 'Flaky migration', '--kind', 'bug');
  const claimed = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'fleet-w2'));
  await pad('item', 'fail', ref, '--holder', 'fleet-w2', '--epoch', String(claimed.lease.epoch),
    '--note', 'segfault in step 3', '--max-failures', '1');
  const queued = fleetItem('.fleet-queue', ref);
  await queued.waitFor();
  assert.match(await queued.locator('.fleet-note').textContent(), /failed 1 times.*segfault in step 3/);
  await page.locator(`.fleet-chart[data-chart="failed"][data-total="${failedBefore + 1}"]`).waitFor();
  await page.locator('.fleet-chart[data-chart="quarantined"][data-total="1"]').waitFor();
  await shot('fleet-desktop', DESKTOP);
  await shot('fleet-phone', PHONE);

  // An editor sees the queue without the button, and the server refuses the requeue.
  await pad('member', 'add', 'fleet-editor@example.com', '--role', 'editor');
  const minted = JSON.parse(await pad('--format', 'json', 'token', 'create', 'fleet-editor', '--email', 'fleet-editor@example.com'));
  await signInAs(minted.token);
  await page.locator('#fleet-link').click();
  await queued.waitFor();
  assert.equal(await queued.getByRole('button', { name: 'Requeue' }).count(), 0);
  const status = await page.evaluate(async (r) => {
    const csrf = document.cookie.split(';').map((c) => c.trim().split('=')).find(([k]) => k === 'pad_csrf')?.[1] ?? '';
    const resp = await fetch(`/api/v1/workspaces/default/items/${r}/requeue`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: '{}',
    });
    return resp.status;
  }, ref);
  assert.equal(status, 403);
  assert.match(await pad('--format', 'json', 'item', 'show', ref), /needs-human/);

  // The owner's one click puts it back in the queue, recorded in history.
  await signInAs(TOKEN);
  await page.locator('#fleet-link').click();
  await markDocument();
  await queued.getByRole('button', { name: 'Requeue' }).click();
  await queued.waitFor({ state: 'detached' });
  const item = JSON.parse(await pad('--format', 'json', 'item', 'show', ref));
  const shown = item.item ?? item;
  assert.deepEqual([shown.labels, shown.failures], [[], 0]);
  assert.match(await pad('--format', 'json', 'item', 'history', ref), /requeued/);
  await assertNoReload();
  await page.locator('.fleet-queue .empty').waitFor();
});

test('fleet: a failure note a later success has answered is not shown as the last note (News that is true)', async () => {
  const ref = await pad('item', 'create', 'Flaky network step', '--kind', 'chore');
  const first = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'fleet-w3'));
  await pad('item', 'fail', ref, '--holder', 'fleet-w3', '--epoch', String(first.lease.epoch),
    '--note', 'flaky net in step 2', '--max-failures', '5');
  // Held again before any success: the failure is the news, and shown.
  const again = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'fleet-w4', '--ttl', '30m'));
  await page.locator('#fleet-link').click();
  const held = fleetItem('.fleet-holder[data-holder="fleet-w4"]', ref);
  await held.locator('.fleet-note', { hasText: 'flaky net in step 2' }).waitFor();
  await pad('item', 'release', ref, '--holder', 'fleet-w4', '--epoch', String(again.lease.epoch));
  // A success answers it; the next holder's card carries no stale note.
  await pad('run', ref, '--holder', 'fleet-w3', '--', 'true');
  const third = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'fleet-w5', '--ttl', '30m'));
  const next = fleetItem('.fleet-holder[data-holder="fleet-w5"]', ref);
  await next.waitFor();
  assert.equal(await next.locator('.fleet-note').count(), 0);
  await pad('item', 'release', ref, '--holder', 'fleet-w5', '--epoch', String(third.lease.epoch));
  await next.waitFor({ state: 'detached' });
});

/** A request from the page with its session and CSRF token, as the UI's own code would send it. */
const fetchStatus = (method, path, body) => page.evaluate(async ([m, p, b]) => {
  const csrf = document.cookie.split(';').map((c) => c.trim().split('=')).find(([k]) => k === 'pad_csrf')?.[1] ?? '';
  const resp = await fetch(`/api/v1/workspaces/default${p}`, {
    method: m, headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: b === undefined ? undefined : JSON.stringify(b),
  });
  return resp.status;
}, [method, path, body]);

/** A member with `role` and a fresh token of theirs. */
async function memberToken(email, role) {
  await pad('member', 'add', email, '--role', role);
  return JSON.parse(await pad('--format', 'json', 'token', 'create', `ui-${role}`, '--email', email)).token;
}

let editorToken;
let viewerToken;

test('an owner breaks a stuck lease with a reason from the item page, and releases their own', async () => {
  const ref = await pad('item', 'create', 'Stuck deploy of the billing service', '--kind', 'bug', '--priority', 'high');
  await pad('item', 'claim', ref, '--holder', 'vm-gone-17', '--ttl', '1h');
  await page.goto(`${URL}/#/ws/default/items/${ref}`);
  await page.locator('.lease-line .lease-text', { hasText: 'vm-gone-17' }).waitFor();
  assert.equal(await page.locator('#release-lease').count(), 0, 'not our lease: no Release');
  await markDocument();
  await page.getByRole('button', { name: 'Break lease…' }).click();
  const form = page.getByRole('form', { name: 'Break the lease' });
  await form.getByText(`Break vm-gone-17's lease on ${ref}`).waitFor();
  await form.getByRole('button', { name: 'Break lease' }).click();
  assert.equal(await page.locator('#break-reason-error').textContent(), 'Reason must not be empty');
  assert.equal(await page.getByLabel('Reason').getAttribute('aria-invalid'), 'true');
  await shot('break-lease-desktop', DESKTOP);
  await shot('break-lease-phone', PHONE);
  await page.getByLabel('Reason').fill('its VM was deleted; the job is stuck');
  await form.getByRole('button', { name: 'Break lease' }).click();
  await page.locator('.lease-line').waitFor({ state: 'detached' });
  assert.equal(await form.isVisible(), false, 'the form closes');
  await page.locator('.last-lease', { hasText: 'broken' }).waitFor();
  // The reason is in the event log, with who broke it.
  const broken = await page.evaluate(async (r) => {
    const resp = await fetch(`/api/v1/workspaces/default/events?ref=${r}&type=lease.broken`);
    return (await resp.json()).events[0];
  }, ref);
  assert.deepEqual([broken.data.reason, broken.actor], ['its VM was deleted; the job is stuck', 'owner@localhost']);

  // The owner's own lease (holder: their email, as the web names it) is given back with Release.
  await pad('item', 'claim', ref, '--holder', 'owner@localhost', '--ttl', '10m');
  await page.locator('#release-lease').waitFor();
  assert.equal(await page.locator('#break-lease').count(), 0);
  await page.locator('#release-lease').click();
  await page.locator('.lease-line').waitFor({ state: 'detached' });
  await assertNoReload();
});

test('an editor can delete and restore an item but sees no Break button, and the server refuses a break', async () => {
  editorToken = await memberToken('web-editor@example.com', 'editor');
  viewerToken = await memberToken('web-viewer@example.com', 'viewer');
  const ref = await pad('item', 'create', 'Retire the old cron box');
  await pad('item', 'claim', ref, '--holder', 'cron-worker', '--ttl', '1h');
  await signInAs(editorToken);
  await page.goto(`${URL}/#/ws/default/items/${ref}`);
  await page.locator('.lease-line .lease-text', { hasText: 'cron-worker' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Break lease…' }).count(), 0);
  assert.equal(await fetchStatus('POST', `/items/${ref}/release`, { force: true, reason: 'trying' }), 403);
  await page.locator('.lease-line').waitFor(); // still held

  await page.getByRole('button', { name: 'Delete' }).click();
  await page.locator('#deleted-badge').waitFor();
  await page.locator('.notice-muted', { hasText: 'Restore brings it back' }).waitFor();
  assert.equal(await page.getByRole('link', { name: 'Edit' }).count(), 0, 'no Edit on a deleted item');
  await shot('deleted-item-phone', PHONE);
  const shown = async () => { const j = JSON.parse(await pad('--format', 'json', 'item', 'show', ref)); return j.item ?? j; };
  assert.notEqual((await shown()).deleted_at ?? null, null);
  await page.locator('.history .changes li', { hasText: /^deleted$/ }).waitFor();
  await page.getByRole('button', { name: 'Restore' }).click();
  await page.locator('#deleted-badge').waitFor({ state: 'detached' });
  await page.locator('.history .changes li', { hasText: /^restored$/ }).waitFor();
  await page.getByRole('button', { name: 'Delete' }).waitFor();
  assert.equal((await shown()).deleted_at ?? null, null);
});

test('a viewer sees no Edit, Delete, Break or comment form, and the server refuses a delete', async () => {
  const ref = await pad('item', 'create', 'Read-only for viewers');
  await pad('item', 'claim', ref, '--holder', 'someone', '--ttl', '1h');
  await signInAs(viewerToken);
  await page.goto(`${URL}/#/ws/default/items/${ref}`);
  await page.locator('.lease-line').waitFor();
  for (const name of ['Edit', 'Delete', 'Restore', 'Break lease…', 'Release', 'Comment']) {
    assert.equal(await page.getByRole('button', { name, exact: true }).or(page.getByRole('link', { name, exact: true })).count(), 0, name);
  }
  assert.equal(await page.locator('#comment').isVisible(), false);
  assert.equal(await fetchStatus('DELETE', `/items/${ref}`), 403);
  const item = JSON.parse(await pad('--format', 'json', 'item', 'show', ref));
  assert.equal((item.item ?? item).deleted_at ?? null, null);
  await signInAs(TOKEN);
});

test('the item page lists its children live, and shows the assignee as a person', async () => {
  const parent = await pad('item', 'create', 'Release 2.0', '--kind', 'feature', '--assignee', 'owner@localhost');
  const a = await pad('item', 'create', 'Write the changelog', '--parent', parent);
  const b = await pad('item', 'create', 'Tag the release', '--parent', parent, '--kind', 'chore');
  await pad('item', 'update', a, '--status', 'done');
  await page.goto(`${URL}/#/ws/default/items/${parent}`);
  const kids = page.locator('#item-children .child');
  await kids.first().waitFor();
  assert.deepEqual(await kids.evaluateAll((els) => els.map((e) => e.dataset.ref)), [a, b]);
  assert.equal(await kids.nth(0).locator('.child-title').textContent(), 'Write the changelog');
  assert.equal(await kids.nth(0).locator('.badge').textContent(), 'Done');
  // A new child arrives without a reload.
  await markDocument();
  const c = await pad('item', 'create', 'Announce it', '--parent', parent);
  await page.locator(`#item-children .child[data-ref="${c}"]`).waitFor();
  await assertNoReload();
  const who = page.locator('.details .person');
  assert.equal(await who.locator('.person-name').textContent(), 'owner');
  assert.equal(await who.locator('.person-email').textContent(), 'owner@localhost');
  await shot('item-children-desktop', DESKTOP);
  await shot('item-children-phone', PHONE);
  // The child's page names its parent with status and title.
  await page.goto(`${URL}/#/ws/default/items/${b}`);
  await page.locator('.details .linked', { hasText: parent }).locator('.linked-title', { hasText: 'Release 2.0' }).waitFor();
  // An item without children shows no Children card.
  assert.equal(await page.locator('#item-children').isVisible(), false);
});

const listRefs = () => page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.ref));
async function waitForRefs(expected) {
  await page.waitForFunction(
    (want) => [...document.querySelectorAll('tbody tr')].map((r) => r.dataset.ref).join() === want,
    expected.join(),
  ).catch(async () => assert.deepEqual(await listRefs(), expected));
}

let sortRefs;
test('priority and assignee filters, and sorting by a column header (kept in the address)', async () => {
  const make = async (title, priority, extra = []) => pad('item', 'create', title, '--label', 'sortme', '--priority', priority, ...extra);
  const low = await make('Bump a dev dependency', 'low');
  const crit = await make('Checkout returns 500', 'critical', ['--assignee', 'web-editor@example.com']);
  const med = await make('Tidy the README', 'medium');
  const high = await make('Add an index on events', 'high', ['--assignee', 'web-editor@example.com']);
  sortRefs = { low, crit, med, high };
  await page.goto(`${URL}/#/ws/default/items?label=sortme`);
  await waitForRefs([low, crit, med, high]);

  await page.getByLabel('Priority').selectOption('critical');
  await waitForRefs([crit]);
  assert.match(page.url(), /priority=critical/);
  await page.getByLabel('Priority').selectOption('');
  await page.locator('#f-assignee option[value="web-editor@example.com"]').waitFor({ state: 'attached' });
  await page.getByLabel('Assignee').selectOption('web-editor@example.com');
  await waitForRefs([crit, high]);
  assert.match(page.url(), /assignee=web-editor%40example.com/);
  await page.getByLabel('Assignee').selectOption('');
  await waitForRefs([low, crit, med, high]);

  // Priority sorts most urgent first, then the other way.
  await page.getByRole('button', { name: 'Priority' }).click();
  await waitForRefs([crit, high, med, low]);
  assert.match(page.url(), /sort=-priority/);
  assert.equal(await page.locator('th.c-priority').getAttribute('aria-sort'), 'descending');
  await page.getByRole('button', { name: 'Priority' }).click();
  await waitForRefs([low, med, high, crit]);
  assert.match(page.url(), /sort=priority(&|$)/);
  await page.getByRole('button', { name: 'Title' }).click();
  await waitForRefs([high, low, crit, med]);
  assert.equal(await page.locator('th.c-priority').getAttribute('aria-sort'), null);
  // The address keeps it: a reload sorts the same.
  await page.getByRole('button', { name: 'Priority' }).click();
  await page.reload();
  await waitForRefs([crit, high, med, low]);
  assert.equal(await page.locator('th.c-priority').getAttribute('aria-sort'), 'descending');
  await shot('list-sorted-desktop', DESKTOP);
  await shot('list-sorted-phone', PHONE);
  // On a phone the filters fold behind one button, which says how many are on.
  await page.setViewportSize(PHONE);
  assert.equal(await page.locator('#f-status').isVisible(), false);
  const toggle = page.getByRole('button', { name: 'Filters · 1 on' });
  await toggle.click();
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  await page.locator('#f-status').waitFor();
  await shot('list-filters-open-phone', PHONE);
  await page.setViewportSize(PHONE);
  // On a phone the headers stay as sort buttons.
  await page.getByRole('button', { name: 'Title' }).click();
  await waitForRefs([high, low, crit, med]);
  await page.setViewportSize(DESKTOP);
});

test('keyboard: j/k move the selection, Enter opens, / searches, c creates; not while typing', async () => {
  const { low, crit, med, high } = sortRefs;
  await page.goto(`${URL}/#/ws/default/items?label=sortme&sort=-priority`);
  await waitForRefs([crit, high, med, low]);
  await page.locator('body').click({ position: { x: 5, y: 400 } });
  await page.keyboard.press('j');
  await page.locator(`tr.is-selected[data-ref="${crit}"]`).waitFor();
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  await page.keyboard.press('k');
  await page.locator(`tr.is-selected[data-ref="${high}"]`).waitFor();
  assert.equal(await page.locator('tr.is-selected').count(), 1);
  // A live re-read of the list (another user's comment) keeps the selection and the focus.
  // Rows are rebuilt on a re-read: a mark on the old ones tells when it happened.
  await page.evaluate(() => { for (const r of document.querySelectorAll('tbody tr')) r.dataset.marked = '1'; });
  await pad('item', 'comment', crit, 'Seen in production too.');
  await page.waitForFunction(() => document.querySelector('tbody tr')?.dataset.marked === undefined);
  await page.locator(`tr.is-selected[data-ref="${high}"]`).waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.closest('tr')?.dataset.ref), high);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Add an index on events' }).waitFor();
  assert.match(page.url(), new RegExp(`/items/${high}$`));

  // `/` from another page goes to the list with the search focused; typing there is typing.
  await page.keyboard.press('/');
  await page.waitForFunction(() => document.activeElement?.id === 'f-q');
  await page.keyboard.type('cj');
  assert.equal(await page.locator('#f-q').inputValue(), 'cj');
  assert.match(page.url(), /#\/ws\/default\/items/);
  await page.locator('#f-q').fill('');
  await page.locator('#f-q').blur();
  await page.keyboard.press('c');
  await page.getByRole('heading', { name: 'New item' }).waitFor();
  // The form focuses its title: a `c` typed there is a letter, not a shortcut.
  await page.keyboard.type('c');
  assert.equal(await page.getByLabel('Title').inputValue(), 'c');
});

test('the editor previews markdown as the server renders it, never running markup', async () => {
  await page.goto(`${URL}/#/ws/default/new`);
  await page.getByLabel('Title').fill('Preview me');
  await page.getByLabel('Description').fill('## Plan\n\n- [ ] **ship** it\n\n<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>\n\n[x](javascript:window.__pwned=1)');
  await page.getByRole('tab', { name: 'Preview' }).click();
  const preview = page.locator('#body-preview');
  await preview.locator('h2', { hasText: 'Plan' }).waitFor();
  assert.equal(await preview.locator('strong').textContent(), 'ship');
  assert.equal(await preview.locator('input[type="checkbox"]').count(), 1);
  assert.equal(await preview.locator('script, [onerror], a[href^="javascript"]').count(), 0);
  assert.equal(await page.getByLabel('Description').isVisible(), false);
  assert.equal(await page.getByRole('tab', { name: 'Preview' }).getAttribute('aria-selected'), 'true');
  await shot('preview-desktop', DESKTOP);
  await shot('preview-phone', PHONE);
  await page.getByRole('tab', { name: 'Write' }).click();
  assert.equal(await page.getByLabel('Description').isVisible(), true);
  // Too long for an item body: the preview says so in words.
  await page.getByLabel('Description').fill('a'.repeat(256 * 1024 + 1));
  await page.getByRole('tab', { name: 'Preview' }).click();
  await preview.getByText(/^Description must be at most 256 KiB/).waitFor();
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
});

test('a missing workspace is one clear message, with no list, filters or live stream', async () => {
  await page.goto(`${URL}/#/ws/no-such-place/items`);
  await page.getByRole('alert').filter({ hasText: 'No workspace no-such-place, or you are not a member of it.' }).waitFor();
  assert.equal(await page.locator('.filters, table.items, .item-grid').count(), 0);
  await page.getByRole('link', { name: /^Go to / }).waitFor();
  // The menu stays on a workspace the caller has, the one the link offers.
  assert.equal(await page.locator('#workspace').inputValue(), 'default');
  assert.match(await page.getByRole('link', { name: /^Go to / }).getAttribute('href'), /^#\/ws\/default\//);
  await shot('missing-workspace-desktop', DESKTOP);
  await shot('missing-workspace-phone', PHONE);
  // An item in it says the same.
  await page.goto(`${URL}/#/ws/no-such-place/items/TASK-1`);
  await page.getByText('No workspace no-such-place, or you are not a member of it.').waitFor();
  await page.goto(`${URL}/#/ws/default/items`);
  await page.locator('#live[data-state="live"]').waitFor();
});

test('an owner changes the lease settings in the browser; the next claim gets the new default TTL', async () => {
  await page.goto(`${URL}/#/ws/default/items`);
  await page.locator('#settings-link').click();
  await page.getByRole('heading', { name: 'Workspace settings' }).waitFor();
  assert.match(page.url(), /#\/ws\/default\/settings$/);
  const ttl = page.getByLabel('Default lease TTL');
  assert.equal(await ttl.inputValue(), '15m');
  await markDocument();
  // A default above the longest TTL: the server's message, at the field.
  await page.getByLabel('Longest lease TTL').fill('1h');
  await ttl.fill('2h');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.locator('.field-default_ttl_seconds.has-error').waitFor();
  assert.match(await page.locator('#field-default_ttl_seconds-error').textContent(), /default_ttl_seconds.*1h/);
  assert.match(await pad('--format', 'json', 'workspace', 'show', 'default'), /"default_ttl_seconds": ?900/);
  // Not a duration: said before anything is sent.
  await ttl.fill('soon');
  await page.getByRole('button', { name: 'Save settings' }).click();
  assert.match(await page.locator('#field-default_ttl_seconds-error').textContent(), /not a duration/);
  await ttl.fill('30m');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText('Settings saved').waitFor();
  await page.locator('.field-default_ttl_seconds.has-error').waitFor({ state: 'detached' });
  const shown = JSON.parse(await pad('--format', 'json', 'workspace', 'show', 'default'));
  assert.equal(shown.settings.default_ttl_seconds, 1800);
  const ref = await pad('item', 'create', 'Settings check');
  const claimed = JSON.parse(await pad('--format', 'json', 'item', 'claim', ref, '--holder', 'settings-w'));
  assert.equal(claimed.lease.ttl_seconds, 1800);
  await pad('item', 'release', ref, '--holder', 'settings-w', '--epoch', String(claimed.lease.epoch));
  await shot('settings-desktop', DESKTOP);
  await shot('settings-phone', PHONE);
  // Back to the defaults the other tests expect.
  await ttl.fill('15m');
  await page.getByLabel('Longest lease TTL').fill('24h');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText('Settings saved').waitFor();
  await assertNoReload();
});

test('an owner adds a webhook (its secret shown once), tests it, sees the delivery and removes it', async () => {
  await page.locator('#webhooks-link').click();
  await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
  assert.match(page.url(), /#\/ws\/default\/webhooks$/);
  await markDocument();
  // A URL the server refuses: its message at the field, nothing added.
  await page.getByLabel('Payload URL').fill('ftp://ci.example.com/hook');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('.field-url.has-error').waitFor();
  assert.match(await page.locator('#field-url-error').textContent(), /http:\/\/ or https:\/\//);
  assert.equal(await page.locator('.webhook').count(), 0);
  // An unknown event type, at the events field.
  await page.getByLabel('Payload URL').fill('http://127.0.0.1:9/pad-hook');
  await page.getByLabel('Events').fill('lease.expired, lease.exploded');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('.field-events.has-error').waitFor();
  await page.getByLabel('Events').fill('lease.expired, item.quarantined');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  const secret = page.locator('.webhook-secret code.secret');
  await secret.waitFor();
  assert.match(await secret.textContent(), /^whsec_[0-9a-f]{64}$/);
  const hook = page.locator('.webhook', { hasText: 'http://127.0.0.1:9/pad-hook' });
  await hook.waitFor();
  assert.match(await hook.textContent(), /Events: lease\.expired, item\.quarantined/);
  assert.equal(await hook.getAttribute('data-state'), 'active');
  // The CLI sees the same subscription, and never the secret again.
  const listed = await pad('--format', 'json', 'webhook', 'list');
  assert.match(listed, /127\.0\.0\.1:9\/pad-hook/);
  assert.doesNotMatch(listed, /whsec_/);
  // A test delivery to a closed port: the outcome, then the log.
  await hook.getByRole('button', { name: 'Send test' }).click();
  await page.locator('.toast', { hasText: 'Test delivery to http://127.0.0.1:9/pad-hook' }).waitFor();
  await hook.locator('.webhook-deliveries li', { hasText: 'webhook.test' }).waitFor();
  await shot('webhooks-desktop', DESKTOP);
  await shot('webhooks-phone', PHONE);
  page.once('dialog', (d) => d.accept());
  await hook.getByRole('button', { name: 'Remove' }).click();
  await hook.waitFor({ state: 'detached' });
  assert.doesNotMatch(await pad('--format', 'json', 'webhook', 'list'), /pad-hook/);
  await assertNoReload();
});

test('an editor gets no Settings or Webhooks link; the pages say owners only, and the server refuses', async () => {
  const token = await memberToken('settings-editor@example.com', 'editor');
  await signInAs(token);
  assert.equal(await page.locator('#settings-link').isVisible(), false);
  assert.equal(await page.locator('#webhooks-link').isVisible(), false);
  await page.goto(`${URL}/#/ws/default/settings`);
  await page.getByText('Only owners of this workspace can change its settings').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Save settings' }).count(), 0);
  await page.goto(`${URL}/#/ws/default/webhooks`);
  await page.getByText('Only owners of this workspace can change its webhooks').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Add webhook' }).count(), 0);
  const settings = async () => JSON.parse(await pad('--format', 'json', 'workspace', 'show', 'default')).settings;
  const before = await settings();
  assert.equal(await fetchStatus('PATCH', '', { default_ttl_seconds: 60 }), 403);
  assert.equal(await fetchStatus('POST', '/webhooks', { url: 'http://127.0.0.1:9/x', events: [] }), 403);
  assert.deepEqual(await settings(), before);
  assert.doesNotMatch(await pad('--format', 'json', 'webhook', 'list'), /127\.0\.0\.1:9\/x/);
  await signInAs(TOKEN);
  await page.locator('#settings-link').waitFor();
});

test('keyboard: the sign-out button is reachable and signs out', async () => {
  await page.locator('#signout').focus();
  await page.keyboard.press('Enter');
  await page.getByLabel('API token').waitFor();
  await page.reload();
  await page.getByLabel('API token').waitFor();
  assert.deepEqual(pageErrors, []);
});
