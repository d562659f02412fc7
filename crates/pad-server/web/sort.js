// Column sorting of the item list. The API lists items oldest first and has
// no sort parameter, so the page sorts what it has read; with a sort set it
// reads every matching item first (up to SORT_MAX), so the order is the
// whole list's, not one page's. The state is `sort=priority` or
// `sort=-priority` (descending) in the address, beside the filters.

import { secondsLeft } from './lease.js';

export const SORT_MAX = 5000;

const STATUS_ORDER = ['open', 'in-progress', 'done', 'cancelled'];
const PRIORITY_ORDER = ['low', 'medium', 'high', 'critical'];

/** `TASK-12` → ['TASK', 12], so TASK-9 sorts before TASK-10. */
function refKey(ref) {
  const i = ref.lastIndexOf('-');
  return [ref.slice(0, i), Number(ref.slice(i + 1))];
}

const byText = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The sortable columns: header text, the comparison (ascending), and the
 * direction a first click sorts in (what a person most often wants first:
 * the most urgent, the newest).
 */
export const COLUMNS = [
  { key: 'ref', label: 'Ref', first: 'asc',
    cmp: (a, b) => { const [pa, na] = refKey(a.ref); const [pb, nb] = refKey(b.ref); return byText(pa, pb) || na - nb; } },
  { key: 'title', label: 'Title', first: 'asc', cmp: (a, b) => a.title.localeCompare(b.title, undefined, { sensitivity: 'base' }) },
  { key: 'status', label: 'Status', first: 'asc', cmp: (a, b) => STATUS_ORDER.indexOf(a.status) - STATUS_ORDER.indexOf(b.status) },
  { key: 'priority', label: 'Priority', first: 'desc', cmp: (a, b) => PRIORITY_ORDER.indexOf(a.priority) - PRIORITY_ORDER.indexOf(b.priority) },
  // Soonest to expire first; unleased items after every leased one.
  { key: 'lease', label: 'Lease', first: 'asc',
    cmp: (a, b) => (a.lease ? secondsLeft(a.lease) : Infinity) - (b.lease ? secondsLeft(b.lease) : Infinity) },
  { key: 'updated', label: 'Updated', first: 'desc', cmp: (a, b) => Date.parse(a.updated_at) - Date.parse(b.updated_at) },
];

/** `-priority` → {key: 'priority', dir: 'desc'}; unknown or empty → null. */
export function parseSort(value) {
  const desc = value?.startsWith('-');
  const key = desc ? value.slice(1) : value;
  return COLUMNS.some((c) => c.key === key) ? { key, dir: desc ? 'desc' : 'asc' } : null;
}

export const formatSort = (s) => (s ? `${s.dir === 'desc' ? '-' : ''}${s.key}` : '');

/** The sort after a click on column `key`: its first direction, then the other. */
export function nextSort(current, key) {
  const col = COLUMNS.find((c) => c.key === key);
  if (current?.key !== key) return { key, dir: col.first };
  return { key, dir: current.dir === 'asc' ? 'desc' : 'asc' };
}

/** A sorted copy; ties keep the API's order (oldest first), so the order is stable. */
export function sortItems(items, sort) {
  if (!sort) return items;
  const col = COLUMNS.find((c) => c.key === sort.key);
  const sign = sort.dir === 'desc' ? -1 : 1;
  return items.map((item, i) => [item, i]).sort(([a, i], [b, j]) => sign * col.cmp(a, b) || i - j).map(([item]) => item);
}
