// The owner's pages (README.md, "Web UI"):
//   #/ws/{ws}/settings  the workspace's lease settings (PATCH /workspaces/{ws})
//   #/ws/{ws}/webhooks  its subscriptions: add (the secret shown once), test,
//                       deliveries, resume, remove
// The top bar links them for owners only; the server refuses everyone else
// (403), and these pages say so instead of showing a form that cannot work.

import { api, ApiError, enc, wsPath } from './api.js';
import { ago, h, replace, toast } from './dom.js';

const UNITS = { s: 1, m: 60, h: 3600, d: 86400 };

/** "90s", "15m", "2h", "1d"; a bare number is seconds. null when it is not a duration. */
export function parseDuration(text) {
  const m = /^\s*(\d+)\s*([smhd]?)\s*$/i.exec(text);
  if (!m) return null;
  return Number(m[1]) * UNITS[(m[2] || 's').toLowerCase()];
}

/** Seconds as the largest unit that divides them: 900 → "15m", 5400 → "90m". */
export function formatDuration(seconds) {
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60]]) {
    if (seconds >= size && seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}

const isOwner = (ctx) => ctx.workspace?.role === 'owner';

/** The page for a member who is not an owner here. */
function ownersOnly(what) {
  return h('div', { class: 'notice notice-muted', role: 'status' },
    `Only owners of this workspace can change ${what}. Ask an owner, or see them with `, h('code', {}, 'pad workspace show'), '.');
}

/** One labelled input with its hint and error slot; `fields[name]` keeps them. */
function field(fields, name, label, control, hint) {
  control.id = `field-${name}`;
  control.name = name;
  const error = h('p', { class: 'field-error', id: `${control.id}-error` });
  control.setAttribute('aria-describedby', [hint ? `${control.id}-hint` : null, error.id].filter(Boolean).join(' '));
  const wrap = h('div', { class: `field field-${name}` },
    h('label', { for: control.id }, label), control,
    hint ? h('p', { class: 'hint', id: `${control.id}-hint` }, hint) : null, error);
  fields[name] = { control, error, wrap };
  return wrap;
}

function clearErrors(fields, summary) {
  summary.hidden = true;
  for (const f of Object.values(fields)) {
    f.error.textContent = '';
    f.wrap.classList.remove('has-error');
    f.control.removeAttribute('aria-invalid');
  }
}

/** Shows an API error at the field `details.field` names, or above the form. */
function showError(fields, summary, e) {
  const f = fields[e.details?.field];
  if (f) {
    f.error.textContent = e.message;
    f.wrap.classList.add('has-error');
    f.control.setAttribute('aria-invalid', 'true');
    f.control.focus();
  } else {
    replace(summary, e.message);
    summary.hidden = false;
  }
}

// The settings the API can change, with how the form shows them.
const SETTINGS = [
  { name: 'default_ttl_seconds', label: 'Default lease TTL', kind: 'duration', hint: 'A claim that names no TTL gets this one, e.g. 15m.' },
  { name: 'max_ttl_seconds', label: 'Longest lease TTL', kind: 'duration', hint: 'The most a claim or renewal may ask for, up to 24h.' },
  { name: 'max_hold_seconds', label: 'Longest hold', kind: 'duration', hint: 'How long any lease may be held, renewals included. Empty or 0: no cap.' },
  { name: 'quarantine_after_expiries', label: 'Quarantine after expiries', kind: 'count', hint: 'Expired leases that send an item to a person (needs-human). 0: never.' },
  { name: 'quarantine_after_failures', label: 'Quarantine after failures', kind: 'count', hint: 'Failed attempts that send an item to a person. 0: never.' },
];

export function settingsView(ctx) {
  const { ws } = ctx;
  const fields = {};
  const summary = h('div', { class: 'notice notice-error', role: 'alert', hidden: true });
  const form = h('form', { class: 'item-form card settings-form', novalidate: true, onsubmit: save }, summary,
    SETTINGS.map((s) => field(fields, s.name, s.label, h('input', { type: 'text', autocomplete: 'off', inputmode: s.kind === 'count' ? 'numeric' : 'text' }), s.hint)),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'button primary' }, 'Save settings')));
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const el = h('main', { class: 'page form-page', id: 'main' }, h('h1', {}, 'Workspace settings'), body);
  let current = null;

  function fill(view) {
    current = view.settings;
    for (const s of SETTINGS) {
      const v = current[s.name];
      fields[s.name].control.value = v == null ? '' : s.kind === 'duration' ? (v === 0 ? '0' : formatDuration(v)) : String(v);
    }
  }

  async function refresh() {
    try {
      const view = await api('GET', wsPath(ws));
      if (!isOwner({ workspace: view })) {
        replace(body, ownersOnly('its settings'));
        return;
      }
      // A save in progress keeps what is being typed.
      if (!form.isConnected) replace(body, form);
      if (!form.dataset.busy) fill(view);
    } catch (e) {
      ctx.fail(e, () => replace(body, h('div', { class: 'notice notice-error', role: 'alert' }, e.message)));
    }
  }

  async function save(ev) {
    ev.preventDefault();
    clearErrors(fields, summary);
    const patch = {};
    for (const s of SETTINGS) {
      const text = fields[s.name].control.value.trim();
      let value;
      if (s.kind === 'duration') {
        value = text === '' && s.name === 'max_hold_seconds' ? 0 : parseDuration(text);
        if (value === null) {
          return showError(fields, summary, new ApiError(400, 'validation_failed', `${s.label}: "${text}" is not a duration like 90s, 15m or 2h`, { field: s.name }));
        }
      } else {
        if (!/^\d+$/.test(text)) {
          return showError(fields, summary, new ApiError(400, 'validation_failed', `${s.label}: "${text}" is not a whole number`, { field: s.name }));
        }
        value = Number(text);
      }
      // Only what changed: a setting left alone stays as stored.
      if (value !== (current[s.name] ?? 0)) patch[s.name] = value;
    }
    if (Object.keys(patch).length === 0) return toast('Nothing changed');
    form.dataset.busy = '1';
    try {
      const view = await api('PATCH', wsPath(ws), patch);
      fill(view);
      toast('Settings saved');
    } catch (e) {
      ctx.fail(e, () => showError(fields, summary, e));
    } finally {
      delete form.dataset.busy;
    }
  }

  refresh();
  // Settings have no events: nothing to re-read live.
  return { el, refresh() {}, onEvent() {}, focus() {} };
}

export function webhooksView(ctx) {
  const { ws } = ctx;
  const fields = {};
  const summary = h('div', { class: 'notice notice-error', role: 'alert', hidden: true });
  const secret = h('div', { class: 'notice notice-muted webhook-secret', role: 'status', hidden: true });
  const addForm = h('form', { class: 'item-form card webhook-form', novalidate: true, onsubmit: add }, summary,
    h('h2', {}, 'Add a webhook'),
    field(fields, 'url', 'Payload URL', h('input', { type: 'url', autocomplete: 'off', placeholder: 'https://ci.example.com/pad' })),
    field(fields, 'events', 'Events', h('input', { type: 'text', autocomplete: 'off', placeholder: 'lease.expired, item.quarantined' }),
      'Comma-separated event types; empty: every event.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'button primary' }, 'Add webhook')));
  const list = h('div', { class: 'webhook-list', id: 'webhook-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const body = h('div', {}, secret, list, addForm);
  const el = h('main', { class: 'page webhooks', id: 'main' }, h('h1', {}, 'Webhooks'), body);
  // The delivery logs open now, by webhook id, re-read with the list.
  const open = new Set();

  async function refresh() {
    let hooks;
    try {
      ({ webhooks: hooks } = await api('GET', wsPath(ws, '/webhooks')));
    } catch (e) {
      if (e instanceof ApiError && e.status === 403) return replace(body, ownersOnly('its webhooks'));
      return ctx.fail(e, () => replace(list, h('div', { class: 'notice notice-error', role: 'alert' }, e.message)));
    }
    const logs = await Promise.all(hooks.map((w) => (open.has(w.id) ? deliveries(w.id) : null)));
    replace(list, hooks.length
      ? h('ul', { class: 'fleet-items webhooks-items' }, hooks.map((w, i) => webhookRow(w, logs[i])))
      : h('p', { class: 'empty' }, 'No webhooks yet.'));
  }

  async function deliveries(id) {
    try {
      return (await api('GET', wsPath(ws, `/webhooks/${id}/deliveries?limit=20`))).deliveries;
    } catch (e) {
      return e;
    }
  }

  function webhookRow(w, log) {
    const state = w.paused ? 'paused' : 'active';
    const act = (label, onclick, cls = 'button small') => h('button', { type: 'button', class: cls, onclick: (ev) => onclick(ev.currentTarget) }, label);
    return h('li', { class: 'fleet-item webhook', dataset: { id: String(w.id), state } },
      h('div', { class: 'webhook-head' },
        h('strong', { class: 'webhook-url' }, w.url), ' ',
        h('span', { class: `badge webhook-state webhook-${state}` }, w.paused ? 'Paused' : 'Active')),
      h('p', { class: 'fleet-note' },
        w.events.length ? `Events: ${w.events.join(', ')}` : 'Every event',
        ` · ${w.pending} pending`, w.dropped ? ` · ${w.dropped} dropped (queue full)` : '',
        ' · added ', ago(w.created_at), w.created_by ? ` by ${w.created_by}` : ''),
      h('div', { class: 'actions webhook-actions' },
        act('Send test', (b) => test(w, b)),
        act(log ? 'Hide deliveries' : 'Deliveries', () => { open.has(w.id) ? open.delete(w.id) : open.add(w.id); refresh(); }),
        w.paused ? act('Resume', (b) => resume(w, b)) : null,
        act('Remove', (b) => remove(w, b), 'button small danger-outline')),
      log ? deliveryLog(log) : null);
  }

  function deliveryLog(log) {
    if (log instanceof Error) return h('div', { class: 'notice notice-error', role: 'alert' }, log.message);
    if (!log.length) return h('p', { class: 'empty webhook-deliveries' }, 'No deliveries yet.');
    return h('ul', { class: 'webhook-deliveries' }, log.map((d) => h('li', { dataset: { outcome: d.outcome } },
      h('span', { class: 'badge' }, d.outcome), ' ', d.event_type, d.attempt > 1 ? ` (attempt ${d.attempt})` : '', ' · ',
      d.status_code ? `HTTP ${d.status_code}` : (d.error ?? 'no answer'), ` · ${d.duration_ms} ms · `, ago(d.at))));
  }

  async function add(ev) {
    ev.preventDefault();
    clearErrors(fields, summary);
    const events = fields.events.control.value.split(',').map((s) => s.trim()).filter(Boolean);
    try {
      const created = await api('POST', wsPath(ws, '/webhooks'), { url: fields.url.control.value.trim(), events });
      replace(secret, 'Signing secret for ', h('strong', {}, created.url), ' (shown this once; receivers check ',
        h('code', {}, 'X-Pad-Signature'), ' with it): ', h('code', { class: 'secret' }, created.secret));
      secret.hidden = false;
      fields.url.control.value = '';
      fields.events.control.value = '';
      toast('Webhook added');
      refresh();
    } catch (e) {
      // `events[2]` names the third event type: its input is the one field.
      if (e.details?.field?.startsWith('events')) e.details.field = 'events';
      ctx.fail(e, () => showError(fields, summary, e));
    }
  }

  async function test(w, button) {
    button.disabled = true;
    try {
      const d = await api('POST', wsPath(ws, `/webhooks/${w.id}/test`), {});
      const what = d.status_code ? `HTTP ${d.status_code}` : (d.error ?? 'no answer');
      toast(`Test delivery to ${w.url}: ${d.outcome} (${what})`, d.outcome === 'delivered' ? 'ok' : 'error');
    } catch (e) {
      ctx.fail(e, () => toast(e.message, 'error'));
    }
    button.disabled = false;
    open.add(w.id);
    refresh();
  }

  async function resume(w, button) {
    button.disabled = true;
    try {
      await api('POST', wsPath(ws, `/webhooks/${w.id}/resume`), {});
      toast(`Deliveries to ${w.url} resumed`);
    } catch (e) {
      ctx.fail(e, () => toast(e.message, 'error'));
    }
    refresh();
  }

  async function remove(w, button) {
    if (!window.confirm(`Remove the webhook to ${w.url}? Its queued deliveries are dropped.`)) return;
    button.disabled = true;
    try {
      await api('DELETE', wsPath(ws, `/webhooks/${enc(String(w.id))}`));
      toast(`Webhook to ${w.url} removed`);
    } catch (e) {
      ctx.fail(e, () => toast(e.message, 'error'));
    }
    refresh();
  }

  refresh();
  // Pending counts move with events: re-read, debounced, as the fleet does.
  let timer = null;
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, 500);
  };
  return { el, refresh: soon, onEvent: soon, focus() {} };
}
