// Create and edit an item. Validation is the server's (pad-core's): the form
// shows the API error's `message` and marks the field that `details.field`
// names (`labels[2]` → the Labels input).

import { api, ApiError, itemPath, wsPath } from './api.js';
import { h, replace, select, toast } from './dom.js';
import { PRIORITIES, STATUSES, itemHref, pretty } from './views.js';

const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);

/** The create form (`ref` null) or the edit form of `ref`. */
export function itemFormView(ctx, ref) {
  const editing = Boolean(ref);
  const kinds = ctx.workspace?.kinds?.map((k) => k.name) ?? ['task'];
  const options = (values) => values.map((value) => ({ value, label: pretty(value) }));
  const summary = h('div', { class: 'notice notice-error', role: 'alert', hidden: true });
  const fields = {};

  /** One labelled control with its hint and its error slot. */
  function field(name, label, control, hint) {
    control.id = `field-${name}`;
    control.name = name;
    const error = h('p', { class: 'field-error', id: `${control.id}-error` });
    const described = [hint ? `${control.id}-hint` : null, error.id].filter(Boolean).join(' ');
    control.setAttribute('aria-describedby', described);
    const wrap = h('div', { class: `field field-${name}` },
      h('label', { for: control.id }, label),
      control,
      hint ? h('p', { class: 'hint', id: `${control.id}-hint` }, hint) : null,
      error);
    fields[name] = { control, error, wrap };
    return wrap;
  }

  const submit = h('button', { type: 'submit', class: 'button primary' }, editing ? 'Save changes' : 'Create item');
  const cancelHref = editing ? itemHref(ctx.ws, ref) : `#/ws/${ctx.ws}/items`;
  const form = h(
    'form',
    { class: 'item-form card', novalidate: true, onsubmit: save },
    summary,
    field('title', 'Title', h('input', { type: 'text', autocomplete: 'off' })),
    h('div', { class: 'field-row' },
      field('kind', 'Kind', select({}, options(kinds), 'task')),
      field('priority', 'Priority', select({}, options(PRIORITIES), 'medium')),
      editing ? field('status', 'Status', select({}, options(STATUSES), 'open')) : null),
    field('labels', 'Labels', h('input', { type: 'text', autocomplete: 'off', placeholder: 'infra, ci' }), 'Comma-separated; a label never holds a comma.'),
    h('div', { class: 'field-row' },
      field('assignee', 'Assignee', h('input', { type: 'email', autocomplete: 'off', placeholder: 'member@example.com' })),
      field('parent', 'Parent', h('input', { type: 'text', autocomplete: 'off', placeholder: 'TASK-1' })),
      field('blocked_by', 'Blocked by', h('input', { type: 'text', autocomplete: 'off', placeholder: 'BUG-2, TASK-7' }), 'Comma-separated refs.')),
    field('body', 'Description', h('textarea', { rows: 10 }), 'Markdown: **bold**, _italic_, `code`, lists, links, tables.'),
    h('div', { class: 'actions' }, submit, h('a', { class: 'button subtle', href: cancelHref }, 'Cancel')),
  );

  // Write / Preview over the description. The preview is the server's
  // rendering and sanitizing of the unsaved text (POST …/render), the same
  // as the saved item's body.html, so what it shows is what the item will.
  const body = fields.body;
  const preview = h('div', { class: 'markdown preview', id: 'body-preview', hidden: true, tabindex: '0', 'aria-label': 'Rendered preview' });
  const tab = (label, selected, onclick) => h('button', { type: 'button', role: 'tab', class: 'tab', 'aria-selected': String(selected), 'aria-controls': selected ? body.control.id : preview.id, onclick }, label);
  const writeTab = tab('Write', true, () => showPreview(false));
  const previewTab = tab('Preview', false, () => showPreview(true));
  body.control.before(h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Write or preview' }, writeTab, previewTab));
  body.control.after(preview);
  let previewSeq = 0;

  async function showPreview(on) {
    writeTab.setAttribute('aria-selected', String(!on));
    previewTab.setAttribute('aria-selected', String(on));
    body.control.hidden = on;
    preview.hidden = !on;
    if (!on) return body.control.focus();
    const mine = ++previewSeq;
    const text = body.control.value;
    if (!text.trim()) return replace(preview, h('p', { class: 'muted' }, 'Nothing to preview.'));
    replace(preview, h('p', { class: 'muted' }, 'Rendering…'));
    try {
      const { html } = await api('POST', wsPath(ctx.ws, '/render'), { markdown: text });
      // The one other place HTML goes in: sanitized by the server, like body.html.
      if (mine === previewSeq) preview.innerHTML = html;
    } catch (e) {
      if (mine === previewSeq) ctx.fail(e, () => replace(preview, h('p', { class: 'field-error' }, e instanceof ApiError && e.details?.field === 'markdown'
        ? `Description ${e.message.replace(/^markdown: /, '')}` : e.message)));
    }
  }

  const el = h(
    'main',
    { class: 'page form-page', id: 'main' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: `#/ws/${ctx.ws}/items` }, '← All items'),
      editing ? [' / ', h('a', { href: itemHref(ctx.ws, ref) }, ref.toUpperCase())] : null),
    h('h1', {}, editing ? `Edit ${ref.toUpperCase()}` : 'New item'),
    form,
  );

  // What the form started from, to send only what changed (and to guard the
  // write with `expected_updated_at`).
  let original = null;
  let saving = false;

  function values() {
    const v = (name) => fields[name]?.control.value.trim() ?? '';
    const out = {
      title: fields.title.control.value,
      body: fields.body.control.value,
      kind: v('kind'),
      priority: v('priority'),
      labels: list(v('labels')),
      parent: v('parent') || null,
      blocked_by: list(v('blocked_by')),
      assignee: v('assignee') || null,
    };
    if (editing) out.status = v('status');
    return out;
  }

  // The text each list field was filled with: untouched, it is not sent,
  // so an edit of the title never rewrites labels or blockers.
  const filled = {};

  function fill(item) {
    original = item;
    const set = (name, value) => fields[name] && (fields[name].control.value = value ?? '');
    set('title', item.title);
    set('body', item.body);
    set('kind', item.kind);
    set('priority', item.priority);
    set('status', item.status);
    set('labels', (filled.labels = item.labels.join(', ')));
    set('parent', item.parent);
    set('blocked_by', (filled.blocked_by = item.blocked_by.join(', ')));
    set('assignee', item.assignee);
  }

  function clearErrors() {
    summary.hidden = true;
    for (const f of Object.values(fields)) {
      f.error.textContent = '';
      f.control.removeAttribute('aria-invalid');
      f.wrap.classList.remove('has-error');
    }
  }

  function showError(e) {
    let message = e instanceof ApiError ? e.message : String(e);
    // `labels[2]`, `blocked_by[0]` → the input that holds them.
    const raw = String(e.details?.field ?? '');
    const name = raw.replace(/\[\d+\]$/, '');
    const f = fields[name];
    // In words, not API field names: "title: must not be empty" reads
    // "Title must not be empty".
    if (f && raw && message.startsWith(`${raw}: `)) {
      message = `${f.wrap.querySelector('label')?.textContent ?? raw} ${message.slice(raw.length + 2)}`;
    }
    if (f === fields.body && !preview.hidden) showPreview(false);
    if (f) {
      f.error.textContent = message;
      f.control.setAttribute('aria-invalid', 'true');
      f.wrap.classList.add('has-error');
      f.control.focus();
    } else {
      replace(summary, message);
      summary.hidden = false;
      summary.scrollIntoView({ block: 'nearest' });
    }
  }

  async function save(ev) {
    ev.preventDefault();
    clearErrors();
    submit.disabled = true;
    saving = true;
    try {
      const v = values();
      let item;
      if (editing) {
        const patch = { expected_updated_at: original.updated_at };
        const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
        const untouched = (k) => k in filled && fields[k].control.value === filled[k];
        for (const [k, value] of Object.entries(v)) if (!untouched(k) && !same(value, original[k])) patch[k] = value;
        item = await api('PATCH', itemPath(ctx.ws, ref), patch);
        toast(`Saved ${item.ref}`);
      } else {
        // Empty optional fields are left out rather than sent as null.
        const body = Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null));
        item = await api('POST', wsPath(ctx.ws, '/items'), body);
        toast(`Created ${item.ref}`);
      }
      location.hash = itemHref(ctx.ws, item.ref);
    } catch (e) {
      ctx.fail(e, () => showError(e));
    } finally {
      submit.disabled = false;
      saving = false;
    }
  }

  if (editing) {
    submit.disabled = true;
    api('GET', itemPath(ctx.ws, ref))
      .then((item) => {
        fill(item);
        submit.disabled = false;
        fields.title.control.focus();
      })
      .catch((e) => ctx.fail(e, () => showError(e)));
  }

  return {
    el,
    focus: () => !editing && fields.title.control.focus(),
    refresh() {},
    // Someone else's change shows up as `update_conflict` on save; say so early.
    onEvent(ev) {
      if (editing && original && !saving && ev.ref?.toUpperCase() === original.ref && ev.type === 'item.updated') {
        replace(summary, `${original.ref} was changed by ${ev.actor ?? 'someone'} since you opened it; saving will be refused. Reload to see the change.`);
        summary.hidden = false;
      }
    },
  };
}
