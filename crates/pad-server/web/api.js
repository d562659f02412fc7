// The JSON API over the session cookie: a server-side session id in an
// HttpOnly cookie the page cannot read (the token is never kept); writes echo the readable `pad_csrf`
// cookie in `X-CSRF-Token` (double submit), which the server requires.

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details ?? {};
  }
}

export const enc = encodeURIComponent;

function cookie(name) {
  for (const part of document.cookie.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return '';
}

// The server's clock is the only clock (docs/leases.md). Countdowns use it too:
// when this machine's clock is off by more than a few seconds (judged from
// the `Date` header, which has 1 s resolution), correct for it.
let clockOffsetMs = 0;
function noteServerDate(header) {
  const server = Date.parse(header ?? '');
  if (Number.isNaN(server)) return;
  const offset = server - Date.now();
  clockOffsetMs = Math.abs(offset) > 3000 ? offset : 0;
}

/** Now on the server's clock, in milliseconds. */
export function serverNow() {
  return Date.now() + clockOffsetMs;
}

/** Calls `/api/v1{path}`; resolves to the parsed JSON (null for 204), or throws ApiError. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET') headers['X-CSRF-Token'] = cookie('pad_csrf');
  let resp;
  try {
    resp = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'unavailable', 'Cannot reach the pad server. Is `pad serve` running?');
  }
  noteServerDate(resp.headers.get('Date'));
  if (resp.status === 204) return null;
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    const e = data?.error ?? {};
    throw new ApiError(resp.status, e.code ?? 'internal_error', e.message ?? `HTTP ${resp.status}`, e.details);
  }
  return data;
}

/**
 * Every page of a paged list (`GET …/history`, `…/comments`: docs/api.md,
 * "Pages of history and comments"), its `key` entries joined in order.
 */
export async function apiAll(path, key) {
  const all = [];
  let cursor = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await api('GET', cursor === null ? path : `${path}${sep}cursor=${enc(cursor)}`);
    all.push(...page[key]);
    cursor = page.next_cursor;
  } while (cursor);
  return { [key]: all };
}

/** `/workspaces/{ws}{rest}` */
export const wsPath = (ws, rest = '') => `/workspaces/${enc(ws)}${rest}`;
/** `/workspaces/{ws}/items/{ref}{rest}` */
export const itemPath = (ws, ref, rest = '') => wsPath(ws, `/items/${enc(ref)}${rest}`);
