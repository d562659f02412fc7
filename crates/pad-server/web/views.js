// The pages: sign-in, the item list, and one item. Each view returns
// `{ el, onEvent(event), refresh() }`; app.js mounts it and forwards live
// events, and the view decides whether an event concerns what it shows.

import { can, itemButtons, leaseControls, words } from './actions.js';
import { api, apiAll, ApiError, itemPath, wsPath } from './api.js';
import { ago, h, replace, select, time, toast } from './dom.js';
import { leaseLine, leaseMarker } from './lease.js';
import { COLUMNS, formatSort, nextSort, parseSort, sortItems } from './sort.js';

export const STATUSES = ['open', 'in-progress', 'done', 'cancelled'];
export const PRIORITIES = ['low', 'medium', 'high', 'critical'];

export const pretty = (s) => (s.charAt(0).toUpperCase() + s.slice(1)).replace('-', ' ');

export const statusBadge = (s) => h('span', { class: `badge status-${s}` }, pretty(s));
export const priorityBadge = (p) =>
  h('span', { class: `badge prio prio-${p}`, title: `Priority: ${p}` }, h('span', { class: 'dot', 'aria-hidden': 'true' }), pretty(p));

/** An assignee as a person: the name part of the email, the whole one on hover. */
const person = (email) =>
  h('span', { class: 'assignee', title: `Assigned to ${email}` }, h('span', { class: 'visually-hidden' }, 'Assigned to '), email.split('@')[0]);
/** The same person in full, for the item page: name, and the email under it. */
const personFull = (email) =>
  h('span', { class: 'person' }, h('span', { class: 'person-name' }, email.split('@')[0]), h('br'), h('span', { class: 'muted person-email' }, email));
const labelChips = (labels) =>
  labels.length ? h('span', { class: 'labels' }, labels.map((l) => h('span', { class: 'chip' }, l))) : null;

export const itemHref = (ws, ref) => `#/ws/${ws}/items/${ref}`;

/** Runs `fetcher` so that only the latest call's answer is applied. */
function latest(fetcher, apply, fail) {
  let seq = 0;
  return async () => {
    const mine = ++seq;
    try {
      const result = await fetcher();
      if (mine === seq) apply(result);
    } catch (e) {
      if (mine === seq) fail(e);
    }
  };
}

/** Coalesces bursts (a claim-next sweep, a replay) into one call. */
export function debounce(fn, ms = 120) {
  let t;
  return () => {
    clearTimeout(t);
    t = setTimeout(fn, ms);
  };
}

function errorBox(e) {
  return h('div', { class: 'notice notice-error', role: 'alert' }, e instanceof ApiError ? e.message : String(e));
}

// ---------------------------------------------------------------- sign in

export function signInView(onSignedIn) {
  const error = h('p', { class: 'field-error', id: 'token-error', role: 'alert' });
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    'aria-describedby': 'token-hint token-error', required: true,
  });
  const button = h('button', { type: 'submit', class: 'button primary wide' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin-card', novalidate: true, onsubmit: submit },
    h('div', { class: 'brand brand-lg' }, h('span', { class: 'brand-mark', 'aria-hidden': 'true' }, '»'), 'pad'),
    h('h1', {}, 'Sign in'),
    h('p', { class: 'muted' }, 'Work items with execution leases.'),
    h('div', { class: 'field' },
      h('label', { for: 'token' }, 'API token'),
      input,
      h('p', { class: 'hint', id: 'token-hint' }, h('code', {}, 'pad serve'), ' prints one on first start; ', h('code', {}, 'pad token create'), ' makes more.'),
      error),
    button,
  );

  async function submit(ev) {
    ev.preventDefault();
    error.textContent = '';
    input.removeAttribute('aria-invalid');
    if (!input.value.trim()) {
      error.textContent = 'Enter a token.';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    try {
      await api('POST', '/session', { token: input.value.trim() });
      input.value = '';
      await onSignedIn();
    } catch (e) {
      error.textContent = e.message;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  }

  const el = h('main', { class: 'signin', id: 'main' }, form);
  return { el, focus: () => input.focus(), onEvent() {}, refresh() {} };
}

// ---------------------------------------------------------------- list

const LIST_FILTERS = ['status', 'priority', 'kind', 'assignee', 'label', 'leased', 'q'];
const PAGE = 100;

export function listView(ctx, params) {
  const filters = Object.fromEntries(LIST_FILTERS.map((k) => [k, params.get(k) ?? '']));
  let sort = parseSort(params.get('sort'));
  let items = [];
  let nextCursor = null;
  // The selected row (keys j/k), by ref so that a live re-read keeps it.
  let selected = null;

  const control = (id, label, input) => h('div', { class: 'filter' }, h('label', { for: id }, label), input);
  const onFilter = (key) => (ev) => {
    filters[key] = ev.target.value.trim();
    toggleText();
    syncHash();
    reload();
  };
  // Typing filters after a pause; the input is taken from the event, since
  // by then the page may have moved on (a `c` right after typing).
  const typed = (key) => {
    let input = null;
    const later = debounce(() => el.isConnected && onFilter(key)({ target: input }), 300);
    return { oninput: (ev) => { input = ev.target; later(); }, onchange: onFilter(key) };
  };
  const kinds = ctx.workspace?.kinds ?? [];
  // Members fill in once read; until then the chosen assignee stands alone.
  const assigneeOptions = (emails) => [{ value: '', label: 'Anyone' },
    ...[...new Set([...emails, filters.assignee].filter(Boolean))].sort().map((e) => ({ value: e, label: e }))];
  const assignee = select({ id: 'f-assignee', onchange: onFilter('assignee') }, assigneeOptions([]), filters.assignee);
  api('GET', wsPath(ctx.ws, '/members'))
    .then(({ members }) => {
      replace(assignee, [...select({}, assigneeOptions(members.map((m) => m.email)), filters.assignee).children]);
      assignee.value = filters.assignee;
    })
    .catch(() => {});
  // On a phone the filters other than search fold behind this button (app.css).
  const toggle = h('button', { type: 'button', class: 'button small filters-toggle', 'aria-expanded': 'false', 'aria-controls': 'filters',
    onclick: () => {
      const open = bar.classList.toggle('open');
      toggle.setAttribute('aria-expanded', String(open));
    } });
  const toggleText = () => {
    const n = LIST_FILTERS.filter((k) => k !== 'q' && filters[k]).length;
    toggle.textContent = n ? `Filters · ${n} on` : 'Filters';
  };
  toggleText();
  const bar = h(
    'form',
    { class: 'filters', id: 'filters', role: 'search', 'aria-label': 'Filter items', onsubmit: (e) => e.preventDefault() },
    control('f-q', 'Search', h('input', { id: 'f-q', type: 'search', placeholder: 'Title or body', value: filters.q, ...typed('q') })),
    toggle,
    control('f-status', 'Status', select({ id: 'f-status', onchange: onFilter('status') },
      [{ value: '', label: 'Any status' }, ...STATUSES.map((s) => ({ value: s, label: pretty(s) }))], filters.status)),
    control('f-priority', 'Priority', select({ id: 'f-priority', onchange: onFilter('priority') },
      [{ value: '', label: 'Any priority' }, ...[...PRIORITIES].reverse().map((p) => ({ value: p, label: pretty(p) }))], filters.priority)),
    control('f-kind', 'Kind', select({ id: 'f-kind', onchange: onFilter('kind') },
      [{ value: '', label: 'Any kind' }, ...kinds.map((k) => ({ value: k.name, label: pretty(k.name) }))], filters.kind)),
    control('f-assignee', 'Assignee', assignee),
    control('f-label', 'Label', h('input', { id: 'f-label', type: 'text', placeholder: 'e.g. infra', value: filters.label, ...typed('label') })),
    control('f-leased', 'Lease', select({ id: 'f-leased', onchange: onFilter('leased') },
      [{ value: '', label: 'Any' }, { value: 'true', label: 'Leased' }, { value: 'false', label: 'Not leased' }], filters.leased)),
  );

  const count = h('span', { class: 'count', 'aria-live': 'polite' });
  const body = h('tbody');
  const headRow = h('tr');
  const table = h('table', { class: 'items' }, h('thead', {}, headRow), body);
  const empty = h('div', { class: 'empty', hidden: true });
  const problem = h('div');
  const more = h('button', { type: 'button', class: 'button', hidden: true, onclick: loadMore }, 'Load more');
  const keys = h('p', { class: 'shortcuts muted' }, 'Keys: ', h('kbd', {}, 'c'), ' new item · ', h('kbd', {}, '/'), ' search · ',
    h('kbd', {}, 'j'), ' ', h('kbd', {}, 'k'), ' move · ', h('kbd', {}, 'Enter'), ' open');

  const el = h(
    'main',
    { class: 'page', id: 'main' },
    h('div', { class: 'page-head' },
      h('div', { class: 'page-title' }, h('h1', {}, 'Items'), count),
      h('a', { class: 'button primary', href: `#/ws/${ctx.ws}/new` }, h('span', { 'aria-hidden': 'true' }, '+ '), 'New item')),
    bar,
    problem,
    h('div', { class: 'table-wrap' }, table, empty),
    h('div', { class: 'more' }, more),
    keys,
  );

  /** Headers are buttons; `aria-sort` tells which one sorts, and how. */
  function renderHead() {
    replace(headRow, COLUMNS.map((c) => {
      const on = sort?.key === c.key;
      const dir = on ? sort.dir : null;
      return h('th', { scope: 'col', class: `c-${c.key}`, 'aria-sort': on ? (dir === 'asc' ? 'ascending' : 'descending') : null },
        h('button', { type: 'button', class: 'sort', dataset: { sort: c.key }, onclick: () => setSort(nextSort(sort, c.key)) },
          c.label, h('span', { class: 'sort-mark', 'aria-hidden': 'true' }, on ? (dir === 'asc' ? ' ▲' : ' ▼') : '')));
    }));
  }

  function setSort(next) {
    const reread = !sort && next && nextCursor;
    sort = next;
    syncHash();
    renderHead();
    // The whole list is read once a sort is set (sort.js); otherwise the order is local.
    if (reread) reload();
    else render();
  }

  function query(limit, cursor) {
    const q = new URLSearchParams();
    for (const k of LIST_FILTERS) if (filters[k]) q.set(k, filters[k]);
    q.set('limit', String(limit));
    if (cursor) q.set('cursor', cursor);
    return `?${q}`;
  }

  /** Keeps the filters and the sort in the address, without a navigation. */
  function syncHash() {
    const q = new URLSearchParams();
    for (const k of LIST_FILTERS) if (filters[k]) q.set(k, filters[k]);
    if (sort) q.set('sort', formatSort(sort));
    const hash = `#/ws/${ctx.ws}/items${q.size ? `?${q}` : ''}`;
    history.replaceState(null, '', hash);
  }

  function row(item) {
    const href = itemHref(ctx.ws, item.ref);
    const meta = [labelChips(item.labels), item.assignee ? person(item.assignee) : null];
    const classes = ['row', item.lease ? 'is-leased' : '', item.ref === selected ? 'is-selected' : ''].filter(Boolean).join(' ');
    return h(
      'tr',
      { class: classes, dataset: { ref: item.ref } },
      h('td', { class: 'c-ref' }, h('a', { href, class: 'ref', tabindex: '-1' }, item.ref)),
      h('td', { class: 'c-title' }, h('a', { href, class: 'title-link' }, item.title),
        meta.some(Boolean) ? h('div', { class: 'row-meta' }, meta) : null),
      h('td', { class: 'c-status' }, statusBadge(item.status)),
      h('td', { class: 'c-priority' }, priorityBadge(item.priority)),
      h('td', { class: 'c-lease' }, item.lease ? leaseMarker(item.lease) : null),
      h('td', { class: 'c-updated' }, ago(item.updated_at)),
    );
  }

  function render() {
    const hadFocus = body.contains(document.activeElement);
    replace(body, sortItems(items, sort).map(row));
    if (hadFocus) selectedRow()?.querySelector('.title-link')?.focus();
    const filtered = LIST_FILTERS.some((k) => filters[k]);
    count.textContent = `${items.length}${nextCursor ? '+' : ''} ${items.length === 1 ? 'item' : 'items'}`;
    table.hidden = items.length === 0;
    empty.hidden = items.length > 0;
    replace(empty, filtered
      ? h('p', {}, 'No items match these filters.')
      : [h('p', {}, 'No items yet.'), h('a', { class: 'button primary', href: `#/ws/${ctx.ws}/new` }, 'Create the first one')]);
    more.hidden = !nextCursor;
  }

  const selectedRow = () => (selected ? body.querySelector(`tr[data-ref="${CSS.escape(selected)}"]`) : null);

  /** j/k: moves the selection (and the focus, so Enter follows the row's link). */
  function move(step) {
    const rows = [...body.rows];
    if (!rows.length) return;
    const at = rows.indexOf(selectedRow());
    const next = rows[at < 0 ? (step > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + step))];
    selectedRow()?.classList.remove('is-selected');
    next.classList.add('is-selected');
    selected = next.dataset.ref;
    next.querySelector('.title-link').focus();
    next.scrollIntoView({ block: 'nearest' });
  }

  /** Reads one page, or with a sort set every page up to SORT_MAX. */
  async function fetchList() {
    let page = await api('GET', wsPath(ctx.ws, `/items${query(Math.min(500, Math.max(PAGE, items.length)))}`));
    if (!sort) return page;
    const all = [...page.items];
    while (page.next_cursor && all.length < SORT_MAX) {
      page = await api('GET', wsPath(ctx.ws, `/items${query(500, page.next_cursor)}`));
      all.push(...page.items);
    }
    return { items: all, next_cursor: page.next_cursor };
  }

  // A refetch keeps as many rows as are shown (up to the API's maximum).
  const reload = latest(
    fetchList,
    (page) => {
      items = page.items;
      nextCursor = page.next_cursor;
      replace(problem);
      render();
    },
    (e) => ctx.fail(e, () => replace(problem, errorBox(e))),
  );

  async function loadMore() {
    more.disabled = true;
    try {
      const page = await api('GET', wsPath(ctx.ws, `/items${query(PAGE, nextCursor)}`));
      items = items.concat(page.items);
      nextCursor = page.next_cursor;
      render();
    } catch (e) {
      ctx.fail(e, () => toast(e.message, 'error'));
    } finally {
      more.disabled = false;
    }
  }

  const refetch = debounce(reload);
  renderHead();
  reload();
  return {
    el,
    refresh: refetch,
    // Any change to an item or its lease may change what this list shows.
    onEvent: (ev) => ev.ref && refetch(),
    // Keyboard shortcuts of this page (app.js calls it only when no field has the focus).
    onKey(ev) {
      if (ev.key === 'j' || ev.key === 'k') {
        move(ev.key === 'j' ? 1 : -1);
        return true;
      }
      if (ev.key === '/') {
        document.getElementById('f-q').focus();
        return true;
      }
      // Enter on the focused link or a button does what it always does.
      if (ev.key === 'Enter' && selectedRow() && !ev.target.closest?.('a, button')) {
        location.hash = itemHref(ctx.ws, selected);
        return true;
      }
      return false;
    },
  };
}

// ---------------------------------------------------------------- one item

/** `holder · how it ended · when`, then its note: the handoff a new holder reads (L18). */
function lastLease(l) {
  return h('span', { class: 'last-lease' },
    h('strong', {}, l.holder), ` · ${l.ended} `, ago(l.ended_at), ` · epoch ${l.epoch}`,
    l.note ? [h('br'), h('span', { class: 'note' }, l.note)] : null);
}

export function itemView(ctx, ref) {
  const head = h('div', { class: 'item-head' });
  const lease = h('div', { class: 'lease-slot', 'aria-live': 'polite' });
  const side = h('aside', { class: 'item-side', 'aria-label': 'Details' });
  const bodyEl = h('div', { class: 'markdown', id: 'item-body' });
  const children = h('ol', { class: 'children', id: 'item-children' });
  const childrenCard = h('section', { class: 'card', 'aria-labelledby': 'h-children', hidden: true },
    h('h2', { id: 'h-children' }, 'Children'), children);
  const comments = h('ol', { class: 'comments' });
  const history = h('ol', { class: 'history' });
  const problem = h('div');
  const controls = leaseControls(ctx, () => refetch());

  const commentError = h('p', { class: 'field-error', id: 'comment-error', role: 'alert' });
  const commentInput = h('textarea', { id: 'comment', name: 'comment', rows: 3, 'aria-describedby': 'comment-error' });
  const commentButton = h('button', { type: 'submit', class: 'button primary' }, 'Comment');
  const commentForm = h(
    'form',
    { class: 'comment-form', novalidate: true, onsubmit: addComment, hidden: !can(ctx, 'editor') },
    h('label', { for: 'comment' }, 'Add a comment'),
    commentInput,
    commentError,
    h('div', { class: 'actions' }, commentButton),
  );

  // Hidden until the item is there: a missing item is one message, not
  // empty cards with a live comment form.
  const grid = h('div', { class: 'item-grid', hidden: true },
    h('div', { class: 'item-main' },
      h('section', { class: 'card', 'aria-labelledby': 'h-desc' }, h('h2', { id: 'h-desc', class: 'visually-hidden' }, 'Description'), bodyEl),
      childrenCard,
      h('section', { class: 'card', 'aria-labelledby': 'h-comments' }, h('h2', { id: 'h-comments' }, 'Comments'), comments, commentForm),
      h('section', { class: 'card', 'aria-labelledby': 'h-history' }, h('h2', { id: 'h-history' }, 'History'), history)),
    side);

  const el = h(
    'main',
    { class: 'page item-page', id: 'main' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: `#/ws/${ctx.ws}/items` }, '← All items')),
    problem,
    head,
    lease,
    controls.form,
    grid,
  );

  // The refs this page shows besides its own: an event on one of them re-reads the page.
  let shown = new Set();

  function renderItem(item, html) {
    document.title = `${item.ref} ${item.title} · pad`;
    replace(
      head,
      h('div', { class: 'item-ref' }, h('span', { class: 'ref' }, item.ref), h('span', { class: 'chip chip-kind' }, item.kind),
        item.deleted_at ? h('span', { class: 'badge status-cancelled', id: 'deleted-badge' }, 'Deleted') : null),
      h('div', { class: 'item-title-row' },
        h('h1', { class: 'item-title' }, item.title),
        itemButtons(ctx, item, () => refetch())),
      h('div', { class: 'badges' }, statusBadge(item.status), priorityBadge(item.priority), labelChips(item.labels)),
      item.deleted_at
        ? h('p', { class: 'notice notice-muted', role: 'status' }, 'Deleted ', ago(item.deleted_at),
          '. It is hidden from lists and never handed out; ', can(ctx, 'editor') ? 'Restore brings it back.' : 'an editor can restore it.')
        : null,
    );
    // The live lease and its holder's progress note (docs/leases.md L12).
    controls.show(item);
    const line = item.lease ? leaseLine(item.lease) : null;
    line?.append(controls.buttons);
    replace(lease, line,
      item.lease && item.lease_note ? h('p', { class: 'lease-note' }, 'Progress: ', item.lease_note) : null);

    const link = (r) => h('a', { href: itemHref(ctx.ws, r), class: 'ref' }, r);
    // A parent or blocker with its status and title, so whether it still
    // blocks is visible without opening it.
    const linked = (r) => {
      const info = h('span', { class: 'linked-info' });
      api('GET', itemPath(ctx.ws, r))
        .then((it) => replace(info, statusBadge(it.status), ' ', h('span', { class: 'linked-title' }, it.title)))
        .catch(() => replace(info, h('span', { class: 'muted' }, 'not found')));
      return h('span', { class: 'linked' }, link(r), info);
    };
    const row = (name, value) => [h('dt', {}, name), h('dd', {}, value ?? h('span', { class: 'muted' }, '—'))];
    replace(
      side,
      h('dl', { class: 'details' },
        row('Kind', pretty(item.kind)),
        row('Assignee', item.assignee ? personFull(item.assignee) : null),
        row('Parent', item.parent ? linked(item.parent) : null),
        row('Blocked by', item.blocked_by.length ? h('span', { class: 'refs' }, item.blocked_by.map(linked)) : null),
        row('Created', [time(item.created_at), h('br'), h('span', { class: 'muted' }, `by ${item.created_by}`)]),
        row('Updated', ago(item.updated_at)),
        // What workers left behind (docs/leases.md L14, L16, L18): shown only
        // when there is something, so a fresh item's card stays short.
        // A success after failures is the news; the failures are history.
        item.last_success_at ? row('Last success', time(item.last_success_at)) : null,
        item.failures ? row('Failures', [String(item.failures),
          item.retry_at ? h('span', { class: 'muted' }, ' · retry ', time(item.retry_at)) : null]) : null,
        item.not_before ? row('Not before', time(item.not_before)) : null,
        // L19: a capped lease ends at its cap however often it is renewed.
        item.lease && item.lease.hold_until
          ? row('Held until', [time(item.lease.hold_until),
            h('span', { class: 'muted' }, item.lease.hold_until === item.lease.expires_at ? ' · capped: ends then' : ' · max hold')])
          : null,
        item.last_failure_note ? row('Last failure', h('span', { class: 'note' }, item.last_failure_note)) : null,
        item.last_lease ? row('Last lease', lastLease(item.last_lease)) : null),
    );

    // The one place HTML goes in: the server rendered the markdown and
    // sanitized it with ammonia (GET …/body.html).
    if (html.trim()) bodyEl.innerHTML = html;
    else replace(bodyEl, h('p', { class: 'muted' }, 'No description.'));
    shown = new Set([item.parent, ...item.blocked_by].filter(Boolean).map((r) => r.toUpperCase()));
  }

  /** Items whose parent is this one (the list API's `parent` filter). */
  function renderChildren(page) {
    childrenCard.hidden = page.items.length === 0;
    replace(children, page.items.map((c) => h('li', { class: 'child', dataset: { ref: c.ref } },
      h('a', { href: itemHref(ctx.ws, c.ref), class: 'ref' }, c.ref), ' ',
      statusBadge(c.status), ' ',
      h('a', { href: itemHref(ctx.ws, c.ref), class: 'child-title' }, c.title),
      c.lease ? leaseMarker(c.lease) : null)));
    if (page.next_cursor) children.append(h('li', { class: 'muted' }, `Only the first ${page.items.length} are shown.`));
    for (const c of page.items) shown.add(c.ref.toUpperCase());
  }

  function renderComments(list) {
    replace(comments, list.length
      ? list.map((c) => h('li', { class: 'comment' },
        h('div', { class: 'comment-head' }, h('strong', {}, c.author), ' ', ago(c.created_at)),
        h('div', { class: 'comment-body' }, c.body)))
      : h('li', { class: 'muted' }, 'No comments yet.'));
  }

  function renderHistory(versions) {
    const change = (field, { from, to }) => {
      if (field === 'body') return h('li', {}, h('span', { class: 'field-name' }, 'body'), ' edited');
      // A soft delete or restore (docs/api.md), said as such rather than as a timestamp.
      if (field === 'deleted_at') return h('li', {}, to ? 'deleted' : 'restored');
      const show = (v) => (v == null || v === '' || (Array.isArray(v) && !v.length) ? '∅' : Array.isArray(v) ? v.join(', ') : String(v));
      return h('li', {}, h('span', { class: 'field-name' }, field), ' ', h('span', { class: 'from' }, show(from)), ' → ', h('span', { class: 'to' }, show(to)));
    };
    replace(history, versions.map((v) => h('li', { class: 'version' },
      h('div', { class: 'version-head' }, h('span', { class: 'version-no' }, `v${v.version}`), ' ', h('strong', {}, v.actor), ' ',
        v.version === 1 ? 'created this item' : 'changed', ' · ', ago(v.at)),
      v.version === 1 ? null : h('ul', { class: 'changes' }, Object.entries(v.changes).map(([f, c]) => change(f, c))))));
  }

  const reload = latest(
    () => Promise.all([
      api('GET', itemPath(ctx.ws, ref)),
      api('GET', itemPath(ctx.ws, ref, '/body.html')),
      apiAll(itemPath(ctx.ws, ref, '/comments?limit=200'), 'comments'),
      apiAll(itemPath(ctx.ws, ref, '/history?limit=50'), 'versions'),
      api('GET', wsPath(ctx.ws, `/items?parent=${encodeURIComponent(ref)}&limit=100`)),
    ]),
    ([item, body, c, hist, kids]) => {
      replace(problem);
      grid.hidden = false;
      renderItem(item, body.html);
      renderChildren(kids);
      renderComments(c.comments);
      renderHistory(hist.versions);
    },
    (e) => ctx.fail(e, () => {
      if (e.code === 'not_found' || e.code === 'validation_failed') {
        grid.hidden = true;
        replace(head);
        replace(lease);
        controls.show(null);
        document.title = `Not found · pad`;
      }
      replace(problem, errorBox(e.code === 'not_found' || e.code === 'validation_failed'
        ? `No item ${ref.toUpperCase()} in workspace ${ctx.ws}.` : e));
    }),
  );

  async function addComment(ev) {
    ev.preventDefault();
    commentError.textContent = '';
    commentInput.removeAttribute('aria-invalid');
    commentButton.disabled = true;
    try {
      await api('POST', itemPath(ctx.ws, ref, '/comments'), { body: commentInput.value });
      commentInput.value = '';
      toast('Comment added');
      refetch();
    } catch (e) {
      ctx.fail(e, () => {
        commentError.textContent = words(e, { body: 'Comment' });
        commentInput.setAttribute('aria-invalid', 'true');
        commentInput.focus();
      });
    } finally {
      commentButton.disabled = false;
    }
  }

  const refetch = debounce(reload);
  reload();
  return {
    el,
    refresh: refetch,
    // Its own events, those of the items it shows (parent, blockers,
    // children), and creations, since a new item may be a child of this one.
    onEvent: (ev) => {
      const r = ev.ref?.toUpperCase();
      if (r && (r === ref.toUpperCase() || shown.has(r) || ev.type === 'item.created')) refetch();
    },
  };
}
