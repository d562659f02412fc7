// pad's web UI: the shell (top bar, workspace switcher, sign-out), the
// hash router, and the wiring of live events to the open view.
//
// Routes:  #/ws/{ws}/items[?status=…&priority=…&kind=…&assignee=…&label=…&leased=…&q=…&sort=…]
//          #/ws/{ws}/items/{ref}   #/ws/{ws}/items/{ref}/edit   #/ws/{ws}/new
//          #/ws/{ws}/fleet (fleet.js)
//          #/ws/{ws}/settings   #/ws/{ws}/webhooks (settings.js; owners)

import { api, ApiError } from './api.js';
import { h, replace, toast } from './dom.js';
import { fleetView } from './fleet.js';
import { itemFormView } from './forms.js';
import { settingsView, webhooksView } from './settings.js';
import { startTicker } from './lease.js';
import { Live } from './live.js';
import { itemView, listView, signInView } from './views.js';

const app = document.getElementById('app');
const topbar = document.getElementById('topbar');
const wsSelect = document.getElementById('workspace');
const liveBadge = document.getElementById('live');

const state = {
  me: null,
  workspaces: [],
  ws: null,
  view: null,
};

const LIVE_TEXT = { connecting: 'Connecting', live: 'Live', offline: 'Offline' };
const live = new Live(
  (event) => state.view?.onEvent(event),
  (s) => {
    liveBadge.dataset.state = s;
    liveBadge.querySelector('.live-text').textContent = LIVE_TEXT[s];
    // Back online: what we show may be stale.
    if (s === 'live') state.view?.refresh();
  },
);

/** What views call on an API failure: a lost session goes back to sign-in. */
function fail(e, otherwise) {
  if (e instanceof ApiError && e.status === 401) {
    // A request of the page just left can fail after sign-out: the sign-in
    // form already shows, and must keep what is being typed into it.
    if (!state.me) return;
    return showSignIn('Your session has ended; sign in again.');
  }
  otherwise();
}

function mount(view) {
  state.view = view;
  replace(app, view.el);
  view.focus?.();
}

function showSignIn(message) {
  live.close();
  state.me = null;
  state.ws = null;
  topbar.hidden = true;
  document.title = 'Sign in · pad';
  const view = signInView(start);
  mount(view);
  if (message) toast(message, 'error');
}

/** After sign-in (or on load with a session): who am I, which workspaces. */
async function start() {
  try {
    state.me = await api('GET', '/me');
    state.workspaces = (await api('GET', '/workspaces')).workspaces;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return showSignIn();
    replace(app, h('main', { class: 'page', id: 'main' }, h('div', { class: 'notice notice-error', role: 'alert' }, e.message)));
    return;
  }
  document.getElementById('me').textContent = state.me.email;
  replace(wsSelect, state.workspaces.map((w) => h('option', { value: w.slug }, w.name)));
  topbar.hidden = false;
  route();
}

function parse(hash) {
  const [path, query = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query) };
}

/** One message for a workspace the caller cannot see (docs/api.md: 404 whether or not it exists). */
function noWorkspace(ws) {
  live.close();
  state.ws = null;
  // Nothing to show live, and no workspace of this name to select.
  liveBadge.hidden = true;
  document.getElementById('settings-link').hidden = true;
  document.getElementById('webhooks-link').hidden = true;
  // The menu stays on a workspace the caller has: the last one shown, else `default`, else the first.
  const first = state.workspaces.find((w) => w.slug === lastWs) ?? state.workspaces.find((w) => w.slug === 'default') ?? state.workspaces[0];
  wsSelect.value = first?.slug ?? '';
  document.title = 'Not found · pad';
  mount({
    el: h('main', { class: 'page', id: 'main' },
      h('div', { class: 'notice notice-error', role: 'alert' }, `No workspace ${ws}, or you are not a member of it.`),
      first ? h('p', {}, h('a', { href: `#/ws/${first.slug}/items` }, `Go to ${first.name}`)) : null),
    onEvent() {},
    refresh() {},
  });
}

/** The last workspace shown, where a missing one's page points back to. */
let lastWs = null;

/** Set by the `/` shortcut on another page: focus the list's search once it is shown. */
let focusSearch = false;

async function route() {
  if (!state.me) return;
  const { parts, params } = parse(location.hash);
  if (parts[0] !== 'ws' || !parts[1]) {
    const first = state.workspaces.find((w) => w.slug === 'default') ?? state.workspaces[0];
    if (!first) {
      mount({ el: h('main', { class: 'page', id: 'main' }, h('h1', {}, 'No workspaces'), h('p', {}, 'Ask an owner to add you to one, or run ', h('code', {}, 'pad workspace create'), '.')), onEvent() {}, refresh() {} });
      return;
    }
    location.replace(`#/ws/${first.slug}/items`);
    return;
  }
  const ws = parts[1];
  if (!state.workspaces.some((w) => w.slug === ws)) {
    // Perhaps made since sign-in: read the list again before saying no.
    try {
      state.workspaces = (await api('GET', '/workspaces')).workspaces;
      replace(wsSelect, state.workspaces.map((w) => h('option', { value: w.slug }, w.name)));
    } catch (e) {
      return fail(e, () => noWorkspace(ws));
    }
    if (parse(location.hash).parts[1] !== ws) return; // moved on meanwhile
    if (!state.workspaces.some((w) => w.slug === ws)) return noWorkspace(ws);
  }
  liveBadge.hidden = false;
  lastWs = ws;
  if (state.ws !== ws) {
    state.ws = ws;
    live.connect(ws);
  }
  wsSelect.value = ws;
  const ctx = { ws, workspace: state.workspaces.find((w) => w.slug === ws), me: state.me, fail };
  const [, , page, ref, sub] = parts;
  document.title = 'pad';
  const fleetLink = document.getElementById('fleet-link');
  fleetLink.href = `#/ws/${encodeURIComponent(ws)}/fleet`;
  fleetLink.toggleAttribute('aria-current', page === 'fleet');
  // The owner's pages: linked for owners only (the server refuses others).
  const owner = ctx.workspace?.role === 'owner';
  for (const [id, name] of [['settings-link', 'settings'], ['webhooks-link', 'webhooks']]) {
    const link = document.getElementById(id);
    link.href = `#/ws/${encodeURIComponent(ws)}/${name}`;
    link.hidden = !owner;
    link.toggleAttribute('aria-current', page === name);
  }
  if (page === 'fleet') {
    document.title = `Fleet · ${ws} · pad`;
    mount(fleetView(ctx));
  } else if (page === 'settings') {
    document.title = `Settings · ${ws} · pad`;
    mount(settingsView(ctx));
  } else if (page === 'webhooks') {
    document.title = `Webhooks · ${ws} · pad`;
    mount(webhooksView(ctx));
  } else if (page === 'new') mount(itemFormView(ctx, null));
  else if (page === 'items' && ref && sub === 'edit') mount(itemFormView(ctx, ref));
  else if (page === 'items' && ref) mount(itemView(ctx, ref));
  else {
    document.title = `Items · ${ws} · pad`;
    mount(listView(ctx, params));
    if (focusSearch) document.getElementById('f-q')?.focus();
  }
  focusSearch = false;
  window.scrollTo(0, 0);
}

/** Where a key press is typing, shortcuts stay out of the way. */
const typing = (el) => el instanceof Element && (el.closest('input, textarea, select, [contenteditable]') !== null || el.isContentEditable);

// Keyboard shortcuts: `c` new item, `/` search; the open view handles its own
// (the list: j/k and Enter). Never with a modifier, never while typing.
document.addEventListener('keydown', (ev) => {
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || !state.me || !state.ws || typing(ev.target)) return;
  if (state.view?.onKey?.(ev)) {
    ev.preventDefault();
  } else if (ev.key === 'c') {
    ev.preventDefault();
    location.hash = `#/ws/${state.ws}/new`;
  } else if (ev.key === '/') {
    ev.preventDefault();
    focusSearch = true;
    location.hash = `#/ws/${state.ws}/items`;
  }
});

wsSelect.addEventListener('change', () => {
  location.hash = `#/ws/${wsSelect.value}/items`;
});

document.getElementById('signout').addEventListener('click', async () => {
  try {
    await api('DELETE', '/session');
  } catch {
    // Signed out locally either way; the cookie is HttpOnly and goes when it expires.
  }
  history.replaceState(null, '', '#/');
  showSignIn();
  toast('Signed out');
});

// The skip link must not touch the hash, which is the router's.
document.getElementById('skip').addEventListener('click', (e) => {
  e.preventDefault();
  const main = document.getElementById('main');
  if (!main) return;
  main.tabIndex = -1;
  main.focus();
});

window.addEventListener('hashchange', route);
// A countdown reaching zero means the list or item changed (L5): re-read it.
startTicker(() => state.view?.refresh());
start();
