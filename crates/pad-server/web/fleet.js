// The fleet page (#/ws/{ws}/fleet): who holds what right now, what the
// fleet did over the last hour, and the quarantine queue. Live: any event
// re-reads the page (debounced); countdowns tick with the shared ticker
// (lease.js), which also re-reads at expiry. README.md, "Web UI".

import { api, ApiError, serverNow, wsPath } from './api.js';
import { h, replace, toast } from './dom.js';
import { duration, secondsLeft } from './lease.js';

const HOUR_MS = 60 * 60 * 1000;
const MINUTES = 60;
const PAGE = 1000;
/** At most this many events of the last hour are read for the charts (10 pages). */
const MAX_EVENTS = 10 * PAGE;
const CHART_TYPES = ['lease.released', 'lease.expired', 'lease.failed', 'item.quarantined'];
const NEEDS_HUMAN = 'needs-human';

/** Every item matching `query`, following cursors. */
async function allItems(ws, query) {
  const out = [];
  let cursor = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('GET', wsPath(ws, `/items?${query}&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
    out.push(...page.items);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return out;
}

/** The first chart event after event id `after`, or null. */
async function firstAfter(ws, after) {
  const { events } = await api('GET', wsPath(ws, `/events?after=${after}&limit=1&type=${CHART_TYPES.join(',')}`));
  return events[0] ?? null;
}

/**
 * The chart events of the last hour, oldest first. Event ids grow with time,
 * so the hour's first event is found by a binary search over `after` (a few
 * dozen one-event reads however long the log), then read forward.
 */
async function recentEvents(ws) {
  const since = serverNow() - HOUR_MS;
  const recent = (e) => e === null || Date.parse(e.at) >= since;
  // Invariant: the first event after `lo` is older than the hour; after `hi`, not.
  let lo = -1;
  let hi = 0;
  if (!recent(await firstAfter(ws, 0))) {
    lo = 0;
    hi = 1;
    while (!recent(await firstAfter(ws, hi))) {
      lo = hi;
      hi *= 2;
    }
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (recent(await firstAfter(ws, mid))) hi = mid;
      else lo = mid;
    }
  }
  const out = [];
  let after = hi;
  for (let read = 0; read < MAX_EVENTS; read += PAGE) {
    const { events } = await api('GET', wsPath(ws, `/events?after=${after}&limit=${PAGE}&type=${CHART_TYPES.join(',')}`));
    for (const e of events) if (Date.parse(e.at) >= since) out.push(e);
    if (events.length < PAGE) break;
    after = events[events.length - 1].id;
  }
  return out;
}

/** Per-minute counts over the last hour, oldest minute first. */
function perMinute(events, pick) {
  const now = serverNow();
  const bins = new Array(MINUTES).fill(0);
  for (const e of events) {
    if (!pick(e)) continue;
    const age = Math.floor((now - Date.parse(e.at)) / 60000);
    if (age >= 0 && age < MINUTES) bins[MINUTES - 1 - age] += 1;
  }
  return bins;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

/** A 60-bar inline SVG chart with its total, e.g. "Completed 12". */
function chart(name, bins, kind) {
  const max = Math.max(1, ...bins);
  const total = bins.reduce((a, b) => a + b, 0);
  const width = 120;
  const height = 32;
  const bar = width / bins.length;
  const bars = bins.map((n, i) => {
    const hgt = n ? Math.max(2, (n / max) * height) : 0;
    const rect = svg('rect', { x: (i * bar).toFixed(2), y: (height - hgt).toFixed(2), width: Math.max(1, bar - 0.4).toFixed(2), height: hgt.toFixed(2) });
    if (n) rect.append(svg('title', {}, `${n} ${MINUTES - 1 - i === 0 ? 'this minute' : `${MINUTES - 1 - i} min ago`}`));
    return rect;
  });
  const graphic = svg('svg', { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', class: 'spark', role: 'img', 'aria-label': `${name}: ${total} in the last hour, per minute` },
    svg('line', { x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5, class: 'spark-base' }), ...bars);
  return h('figure', { class: `fleet-chart chart-${kind}`, dataset: { chart: kind, total: String(total) } },
    h('figcaption', {}, h('span', { class: 'chart-name' }, name), h('strong', { class: 'chart-total' }, String(total))),
    graphic,
    // The time axis: the hour runs left to right, ending now.
    h('div', { class: 'chart-axis', 'aria-hidden': 'true' }, h('span', {}, '60 min ago'), h('span', {}, 'now')));
}

function itemLink(ws, item) {
  return h('a', { href: `#/ws/${encodeURIComponent(ws)}/items/${encodeURIComponent(item.ref)}`, class: 'fleet-ref' }, item.ref);
}

/**
 * The note a person most wants next to a held item: the previous worker's
 * handoff note, else the last failure's note while a failure is still the
 * item's latest outcome (a later success makes it old news: docs/leases.md,
 * "News that is true").
 */
function lastNote(item) {
  const failureIsNews = item.last_failure_at && !(item.last_success_at && Date.parse(item.last_success_at) >= Date.parse(item.last_failure_at));
  return item.last_lease?.note ?? (failureIsNews ? item.last_failure_note : null) ?? null;
}

function holderCard(ws, holder, items) {
  return h('section', { class: 'fleet-holder', dataset: { holder } },
    h('h3', {}, h('span', { class: 'lease-mark', 'aria-hidden': 'true' }, '» '), h('span', { class: 'holder-name' }, holder),
      h('span', { class: 'holder-count' }, ` · ${items.length} held`)),
    h('ul', { class: 'fleet-items' }, items.map((item) => {
      const note = lastNote(item);
      return h('li', { class: 'fleet-item', dataset: { ref: item.ref, lease: item.lease.expires_at } },
        itemLink(ws, item), ' ', h('span', { class: 'fleet-title' }, item.title), ' ',
        h('span', { class: 'countdown', dataset: { expires: item.lease.expires_at }, title: 'Lease expires in' }, duration(secondsLeft(item.lease))),
        note ? h('p', { class: 'fleet-note' }, h('span', { class: 'visually-hidden' }, 'Last note: '), note) : null);
    })));
}

export function fleetView(ctx) {
  const { ws } = ctx;
  const role = ctx.me?.workspaces?.find((w) => w.slug === ws)?.role;
  const isOwner = role === 'owner';
  const holders = h('div', { class: 'fleet-holders', id: 'fleet-holders' });
  const charts = h('div', { class: 'fleet-charts', id: 'fleet-charts' });
  const queue = h('div', { class: 'fleet-queue', id: 'fleet-queue' });
  const el = h('main', { class: 'page fleet', id: 'main' },
    h('h1', {}, 'Fleet'),
    h('section', { 'aria-labelledby': 'fleet-live' }, h('h2', { id: 'fleet-live' }, 'Holding now'), holders),
    h('section', { 'aria-labelledby': 'fleet-hour' }, h('h2', { id: 'fleet-hour' }, 'Last hour'), charts),
    h('section', { 'aria-labelledby': 'fleet-q' }, h('h2', { id: 'fleet-q' }, 'Quarantine'), queue));

  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    let leased, quarantined, events;
    try {
      [leased, quarantined, events] = await Promise.all([
        allItems(ws, 'leased=true'),
        allItems(ws, `label=${NEEDS_HUMAN}`),
        recentEvents(ws),
      ]);
    } catch (e) {
      ctx.fail(e, () => toast(e.message, 'error'));
      return;
    }
    if (mine !== seq) return; // a newer refresh is under way
    const byHolder = new Map();
    for (const item of leased.filter((i) => i.lease && secondsLeft(i.lease) > 0)) {
      if (!byHolder.has(item.lease.holder)) byHolder.set(item.lease.holder, []);
      byHolder.get(item.lease.holder).push(item);
    }
    const names = [...byHolder.keys()].sort();
    replace(holders, names.length
      ? names.map((n) => holderCard(ws, n, byHolder.get(n)))
      : h('p', { class: 'empty' }, 'No live leases.'));

    replace(charts,
      chart('Completed', perMinute(events, (e) => e.type === 'lease.released' && e.data?.ended === 'completed'), 'completed'),
      chart('Expiries', perMinute(events, (e) => e.type === 'lease.expired'), 'expired'),
      chart('Failures', perMinute(events, (e) => e.type === 'lease.failed'), 'failed'),
      chart('Quarantines', perMinute(events, (e) => e.type === 'item.quarantined'), 'quarantined'));

    const reasons = new Map();
    for (const e of events) if (e.type === 'item.quarantined' && e.data?.reason) reasons.set(e.ref, e.data.reason);
    replace(queue, quarantined.length
      ? h('ul', { class: 'fleet-items' }, quarantined.map((item) => h('li', { class: 'fleet-item quarantined', dataset: { ref: item.ref } },
          itemLink(ws, item), ' ', h('span', { class: 'fleet-title' }, item.title),
          h('p', { class: 'fleet-note' }, reasons.get(item.ref)
            ?? (item.failures ? `failed ${item.failures} times` : 'labelled needs-human'),
            item.last_failure_note ? ` · last note: ${item.last_failure_note}` : ''),
          isOwner ? h('button', { type: 'button', class: 'button small', onclick: (ev) => requeue(item, ev.currentTarget) }, 'Requeue') : null)))
      : h('p', { class: 'empty' }, 'Nothing needs a person.'));
  }

  async function requeue(item, button) {
    button.disabled = true;
    try {
      await api('POST', wsPath(ws, `/items/${encodeURIComponent(item.ref)}/requeue`), {});
      toast(`${item.ref} is back in the queue`);
    } catch (e) {
      button.disabled = false;
      const msg = e instanceof ApiError && e.status === 403 ? 'Only owners can requeue.' : e.message;
      ctx.fail(e, () => toast(msg, 'error'));
    }
    refresh();
  }

  let timer = null;
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  };
  refresh();
  return { el, refresh: soon, onEvent: soon, focus() {} };
}
