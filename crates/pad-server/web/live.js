// Live updates: one EventSource per open workspace on the SSE event stream
// (docs/api.md, Events). It starts after the newest existing event, so opening the page
// does not replay history; the browser resumes with Last-Event-ID after a
// dropped connection. Views decide what an event means for them.

import { api, enc, wsPath } from './api.js';

// The event types of docs/api.md, Events: the stream names each SSE event by its type.
const TYPES = [
  'item.created', 'item.updated', 'item.deleted', 'item.restored', 'item.quarantined',
  'comment.created', 'lease.claimed', 'lease.released', 'lease.broken', 'lease.expired', 'lease.failed',
];

const PAGE = 1000;

/** The id of the newest event in `ws` (0 when there is none). */
async function newestEventId(ws) {
  let after = 0;
  for (;;) {
    const { events } = await api('GET', wsPath(ws, `/events?after=${after}&limit=${PAGE}`));
    if (events.length) after = events[events.length - 1].id;
    if (events.length < PAGE) return after;
  }
}

export class Live {
  /**
   * @param onEvent called with each event `{id, type, ref, actor, at, data}`
   * @param onState called with 'connecting' | 'live' | 'offline'
   */
  constructor(onEvent, onState) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.source = null;
    this.ws = null;
    this.lastId = 0;
    this.retry = null;
  }

  async connect(ws) {
    this.close();
    this.ws = ws;
    this.onState('connecting');
    this.lastId = 0;
    try {
      this.lastId = await newestEventId(ws);
    } catch {
      this.scheduleRetry();
      return;
    }
    if (this.ws !== ws) return; // switched workspace meanwhile
    this.open();
  }

  open() {
    const source = new EventSource(`/api/v1/workspaces/${enc(this.ws)}/events/stream?after=${this.lastId}`);
    this.source = source;
    const handle = (msg) => {
      this.lastId = Number(msg.lastEventId) || this.lastId;
      try {
        this.onEvent(JSON.parse(msg.data));
      } catch (e) {
        console.error('pad: bad event', e);
      }
    };
    for (const type of TYPES) source.addEventListener(type, handle);
    source.onopen = () => this.onState('live');
    source.onerror = () => {
      // The browser retries on its own unless the server refused (CLOSED):
      // then try again ourselves, later, from the last event we saw.
      if (source.readyState === EventSource.CLOSED) {
        this.source = null;
        this.scheduleRetry();
      } else {
        this.onState('connecting');
      }
    };
  }

  scheduleRetry() {
    this.onState('offline');
    clearTimeout(this.retry);
    const ws = this.ws;
    // Without a starting point yet, begin again from the top.
    this.retry = setTimeout(() => (this.lastId ? this.open() : this.connect(ws)), 5000);
  }

  close() {
    clearTimeout(this.retry);
    this.source?.close();
    this.source = null;
    this.ws = null;
  }
}
