// Building DOM without markup strings. Every string passed to h() becomes a
// text node (or an attribute value), never parsed HTML: titles, labels,
// holders and comments from the API can contain `<script>` and stay inert.
// The only HTML the page inserts is what the server rendered and sanitized:
// an item's body (views.js) and the editor's preview (forms.js).

/**
 * h('a', {href: '#/x', class: 'link'}, 'text', child, [more children])
 * Props: `class`, `on<event>` handlers, `dataset`, DOM properties for
 * value/checked/disabled/selected, everything else as attributes.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value == null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (['value', 'checked', 'disabled', 'selected'].includes(key)) el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/** Appends children (nodes, strings, numbers, nested arrays; null skipped). */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replaces an element's content. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A select with options [{value, label}] or plain strings. */
export function select(props, options, current) {
  return h(
    'select',
    props,
    options.map((o) => {
      const { value, label } = typeof o === 'string' ? { value: o, label: o } : o;
      return h('option', { value, selected: value === current }, label);
    }),
  );
}

const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** "Mar 3, 2026, 14:05" with the full timestamp as a tooltip. */
export function time(iso) {
  return h('time', { datetime: iso, title: iso }, DATE.format(new Date(iso)));
}

/** "just now", "5m ago", "3h ago", "2d ago", else a date. */
export function ago(iso) {
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  const text =
    s < 45 ? 'just now' : s < 3600 ? `${Math.round(s / 60)}m ago` : s < 86400 ? `${Math.round(s / 3600)}h ago`
      : s < 30 * 86400 ? `${Math.round(s / 86400)}d ago` : DATE.format(new Date(iso));
  return h('time', { datetime: iso, title: DATE.format(new Date(iso)) }, text);
}

/** Announces a short message in the toast region (polite live region). */
export function toast(message, kind = 'ok') {
  const region = document.getElementById('toasts');
  const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, message);
  region.append(el);
  setTimeout(() => el.remove(), 4000);
}
