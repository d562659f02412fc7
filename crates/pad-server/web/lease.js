// The `»` lease marker and its live countdown. A lease is live while
// now < expires_at (L5): the page needs no event to know it ended, so one
// ticker updates every countdown and removes a marker when it reaches zero.

import { h } from './dom.js';
import { serverNow } from './api.js';

/** Whole seconds left, rounded up (so a fresh 10-minute lease reads 10m 00s). */
export function secondsLeft(lease) {
  return Math.max(0, Math.ceil((Date.parse(lease.expires_at) - serverNow()) / 1000));
}

/** 3725 → "1h 02m 05s", 843 → "14m 03s", 42 → "42s". */
export function duration(seconds) {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const pad = (n) => String(n).padStart(2, '0');
  if (h > 0) return `${h}h ${pad(m)}m ${pad(s)}s`;
  if (m > 0) return `${m}m ${pad(s)}s`;
  return `${s}s`;
}

function countdown(lease) {
  return h('span', { class: 'countdown', dataset: { expires: lease.expires_at } }, duration(secondsLeft(lease)));
}

/** `» runner-a 9m 58s`, for list rows. The element goes away at expiry. */
export function leaseMarker(lease) {
  return h(
    'span',
    { class: 'lease', dataset: { lease: lease.expires_at }, title: `Leased by ${lease.holder} (epoch ${lease.epoch})` },
    h('span', { class: 'lease-mark', 'aria-hidden': 'true' }, '»'),
    h('span', { class: 'visually-hidden' }, 'Leased by '),
    h('span', { class: 'lease-holder' }, lease.holder),
    countdown(lease),
  );
}

/** `» Lease: runner-a (expires in 14m 03s)`, for the item page. */
export function leaseLine(lease) {
  return h(
    'p',
    { class: 'lease-line', dataset: { lease: lease.expires_at } },
    h('span', { class: 'lease-mark', 'aria-hidden': 'true' }, '» '),
    h('span', { class: 'lease-text' }, 'Lease: ', h('strong', {}, lease.holder), ' (expires in ', countdown(lease), ')'),
    h('span', { class: 'lease-meta' }, `epoch ${lease.epoch}`, lease.session_id ? ` · session ${lease.session_id}` : ''),
  );
}

/**
 * Ticks every countdown on the page. When one reaches zero its marker is
 * removed and `onExpired` runs (the app refetches, to agree with the server).
 */
export function startTicker(onExpired) {
  const tick = () => {
    let expired = false;
    for (const el of document.querySelectorAll('.countdown[data-expires]')) {
      const left = secondsLeft({ expires_at: el.dataset.expires });
      if (left > 0) {
        const text = duration(left);
        if (el.textContent !== text) el.textContent = text;
        continue;
      }
      const marker = el.closest('[data-lease]');
      marker?.closest('.is-leased')?.classList.remove('is-leased');
      marker?.remove();
      expired = true;
    }
    if (expired) onExpired();
  };
  // Twice a second, so the display never lags the true value by a whole second.
  return setInterval(tick, 500);
}
