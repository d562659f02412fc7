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
  page.setDefaultTimeout(8000);
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
    { timeout: 3000 },
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
  await pad('item', 'claim', 'CHORE-1', '--holder', 'ci-7', '--ttl', '2s');
  await row('CHORE-1').locator('.lease').waitFor();
  await row('CHORE-1').locator('.lease').waitFor({ state: 'detached', timeout: 5000 });
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

test('a missing item is one clear message: no empty cards, no comment form', async () => {
  await page.goto(`${URL}/#/ws/default/items/TASK-999`);
  await page.locator('.item-page').getByText('TASK-999 was not found in default.').waitFor();
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
  await page.getByRole('heading', { name: 'Items' }).waitFor();
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
  await pad('item', 'claim', ref, '--holder', 'fleet-w1', '--ttl', '4s', '--note', 'warming caches');
  const held = fleetItem('.fleet-holder[data-holder="fleet-w1"]', ref);
  await held.waitFor();
  assert.equal(await page.locator('.fleet-holder[data-holder="fleet-w1"] .holder-name').textContent(), 'fleet-w1');
  assert.match(await held.locator('.countdown').textContent(), /^[1-4]s$/);
  // A long lease too, so the screenshots show a holder.
  await pad('item', 'claim', 'TASK-1', '--holder', 'runner-a', '--ttl', '30m');
  await fleetItem('.fleet-holder[data-holder="runner-a"]', 'TASK-1').waitFor();
  // Expiry (L5): gone with no event needed and no reload.
  await held.waitFor({ state: 'detached', timeout: 8000 });
  await page.locator('.fleet-holder[data-holder="fleet-w1"]').waitFor({ state: 'detached' });
  // The expiry reaches the last-hour chart over the live stream.
  await page.locator(`.fleet-chart[data-chart="expired"][data-total="${expiriesBefore + 1}"]`).waitFor({ timeout: 5000 });
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

test('keyboard: the sign-out button is reachable and signs out', async () => {
  await page.locator('#signout').focus();
  await page.keyboard.press('Enter');
  await page.getByLabel('API token').waitFor();
  await page.reload();
  await page.getByLabel('API token').waitFor();
  assert.deepEqual(pageErrors, []);
});
