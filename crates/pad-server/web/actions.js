// What a person may do to one item from its page, by role (docs/api.md,
// Authorization): editors edit, delete and restore; the lease's own holder
// gives it back (docs/leases.md L6); owners break anyone's live lease, with a
// reason that is recorded in the `lease.broken` event (L7). A button the role
// may not use is not shown; the server refuses the call anyway.

import { api, ApiError, itemPath } from './api.js';
import { h, replace, toast } from './dom.js';

const RANK = { viewer: 0, editor: 1, owner: 2 };

/** Whether the caller's role in the open workspace is at least `min`. */
export const can = (ctx, min) => (RANK[ctx.workspace?.role] ?? -1) >= RANK[min];

/** An API refusal in words a person reads ("Reason must not be empty"), `fieldLabels` naming the fields. */
export function words(e, fieldLabels = {}) {
  if (!(e instanceof ApiError)) return String(e);
  if (e.status === 403) return 'Your role in this workspace does not allow that.';
  const field = String(e.details?.field ?? '');
  const label = fieldLabels[field];
  if (label && e.message.startsWith(`${field}: `)) return `${label} ${e.message.slice(field.length + 2)}`;
  return e.message;
}

/** Edit, Delete or Restore, for the title row. `changed` re-reads the page. */
export function itemButtons(ctx, item, changed) {
  if (!can(ctx, 'editor')) return null;
  const path = itemPath(ctx.ws, item.ref);
  async function run(button, method, rest, done) {
    button.disabled = true;
    try {
      await api(method, path + rest);
      toast(done);
      changed();
    } catch (e) {
      button.disabled = false;
      ctx.fail(e, () => toast(words(e), 'error'));
    }
  }
  const buttons = item.deleted_at
    ? [h('button', { type: 'button', class: 'button', id: 'restore-item',
        onclick: (ev) => run(ev.currentTarget, 'POST', '/restore', `Restored ${item.ref}`) }, 'Restore')]
    : [h('a', { class: 'button', href: `#/ws/${ctx.ws}/items/${item.ref}/edit` }, 'Edit'),
      // Soft delete, undone by Restore on this same page: no confirmation step.
      h('button', { type: 'button', class: 'button danger-outline', id: 'delete-item',
        onclick: (ev) => run(ev.currentTarget, 'DELETE', '', `Deleted ${item.ref}; Restore brings it back`) }, 'Delete')];
  return h('div', { class: 'item-actions' }, buttons);
}

/**
 * The lease's buttons and the break form. The form lives outside the part of
 * the page that live events redraw, so typing a reason survives an update.
 * `show(item)` redraws the buttons for the item as it now is.
 */
export function leaseControls(ctx, changed) {
  const buttons = h('span', { class: 'lease-actions' });
  const reason = h('input', {
    id: 'break-reason', type: 'text', maxlength: '500', autocomplete: 'off',
    'aria-describedby': 'break-reason-hint break-reason-error',
  });
  const error = h('p', { class: 'field-error', id: 'break-reason-error', role: 'alert' });
  const heading = h('strong', {});
  const submit = h('button', { type: 'submit', class: 'button danger' }, 'Break lease');
  const form = h('form', { class: 'break-form', hidden: true, novalidate: true, onsubmit: breakLease, 'aria-label': 'Break the lease' },
    h('p', { class: 'break-title' }, heading),
    h('label', { for: 'break-reason' }, 'Reason'),
    reason,
    h('p', { class: 'hint', id: 'break-reason-hint' }, 'Recorded in the event log with your name. The holder loses the lease at once; its next renew or completion is refused.'),
    error,
    h('div', { class: 'actions' }, submit, h('button', { type: 'button', class: 'button subtle', onclick: close }, 'Cancel')));
  let item = null;

  function close() {
    form.hidden = true;
    error.textContent = '';
    reason.removeAttribute('aria-invalid');
  }

  function invalid(message) {
    error.textContent = message;
    reason.setAttribute('aria-invalid', 'true');
    reason.focus();
  }

  async function post(body, button, done) {
    button.disabled = true;
    try {
      const out = await api('POST', itemPath(ctx.ws, item.ref, '/release'), body);
      toast(out.released ? done : `${item.ref} had no live lease`);
      close();
      changed();
      return true;
    } catch (e) {
      ctx.fail(e, () => (form.hidden ? toast(words(e), 'error') : invalid(words(e, { reason: 'Reason' }))));
      return false;
    } finally {
      button.disabled = false;
    }
  }

  async function breakLease(ev) {
    ev.preventDefault();
    if (!reason.value.trim()) return invalid('Reason must not be empty');
    const ok = await post({ force: true, reason: reason.value.trim() }, submit, `Broke ${item.lease.holder}'s lease on ${item.ref}`);
    if (ok) reason.value = '';
  }

  function show(next) {
    item = next;
    const lease = item?.lease;
    if (!lease) {
      replace(buttons);
      close();
      return;
    }
    // A release names the caller's own holder label; the web's is the email.
    const mine = lease.holder === ctx.me?.email && can(ctx, 'editor');
    const owner = can(ctx, 'owner');
    replace(buttons,
      mine ? h('button', { type: 'button', class: 'button small', id: 'release-lease',
        onclick: (e) => post({ holder: lease.holder, epoch: lease.epoch }, e.currentTarget, `Released ${item.ref}`) }, 'Release') : null,
      owner && !mine ? h('button', { type: 'button', class: 'button small danger-outline', id: 'break-lease', 'aria-expanded': String(!form.hidden),
        onclick: (e) => {
          e.currentTarget.setAttribute('aria-expanded', 'true');
          form.hidden = false;
          heading.textContent = `Break ${lease.holder}'s lease on ${item.ref}`;
          reason.focus();
        } }, 'Break lease…') : null);
    if (!form.hidden) heading.textContent = `Break ${lease.holder}'s lease on ${item.ref}`;
  }

  return { buttons, form, show };
}
