//! Claims' unlocked reads of one item, shared (docs/leases.md, "Claims on
//! one item share their read"): while a read of an item is in flight, the
//! claims of that item that arrive wait for the next read, which starts
//! once the one in flight has answered and serves all of them. Every claim
//! is thus decided on a read that began after it arrived — what reading
//! alone would give it — and many claimers of one hot item cost the
//! database one read at a time instead of one each.
//!
//! A claim the read leaves undecided (it may win) takes the item's turn at
//! the row lock; the claims of that item that reach the turn meanwhile wait
//! for it to end and then read again, so they see what it committed
//! instead of each waiting in the database for the row lock only to be
//! refused there.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pad_core::{ItemRef, Workspace};
use pad_store::steps::Locked;
use pad_store::{StoreError, StoreResult};
use sqlx::PgPool;
use tokio::sync::{oneshot, watch};

use crate::db;
use crate::leases::PEEK;
use crate::rows;

/// An item, as the read names it.
type Key = (i64, ItemRef);

/// What one read found: the row, or the error (`not_found` for no such item).
type Seen = StoreResult<Locked>;

pub(crate) struct Peeks {
    pool: PgPool,
    /// Per item with a read in flight, the claims waiting for the next one.
    waiting: Mutex<HashMap<Key, Vec<oneshot::Sender<Seen>>>>,
    /// Per item whose turn at the row lock a claim of this instance has,
    /// the claims waiting for it to end (woken by the senders' drop).
    turns: Mutex<HashMap<Key, Vec<oneshot::Sender<()>>>>,
    /// Reads made, for tests.
    reads: AtomicU64,
    /// Tests: while true, a read that has run waits before it answers.
    held: watch::Sender<bool>,
    /// Tests: reads that have run and wait for the hold to lift.
    paused: AtomicU64,
}

impl Peeks {
    pub(crate) fn new(pool: PgPool) -> Arc<Peeks> {
        Arc::new(Peeks {
            pool,
            waiting: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
            reads: AtomicU64::new(0),
            held: watch::Sender::new(false),
            paused: AtomicU64::new(0),
        })
    }

    fn waiting(&self) -> MutexGuard<'_, HashMap<Key, Vec<oneshot::Sender<Seen>>>> {
        // Nothing panics while the lock is held; recover the data if it ever did.
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn turns(&self) -> MutexGuard<'_, HashMap<Key, Vec<oneshot::Sender<()>>>> {
        self.turns.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The item's turn at the row lock, or, when another claim of this
    /// instance has it, `None` once that turn has ended (read again then).
    pub(crate) async fn turn(self: &Arc<Self>, ws: &Workspace, r: &ItemRef) -> Option<Turn> {
        let key = (ws.id, r.clone());
        let ended = match self.turns().entry(key.clone()) {
            Entry::Occupied(mut e) => {
                let (to, ended) = oneshot::channel();
                e.get_mut().push(to);
                ended
            }
            Entry::Vacant(e) => {
                e.insert(Vec::new());
                return Some(Turn { peeks: Arc::clone(self), key });
            }
        };
        // Woken when the turn's senders drop, however it ended.
        let _ = ended.await;
        None
    }

    /// The item `r` of `ws` as last committed, read after this call began.
    pub(crate) async fn read(self: &Arc<Self>, ws: &Workspace, r: &ItemRef) -> Seen {
        let key = (ws.id, r.clone());
        let (to, seen) = oneshot::channel();
        let first = match self.waiting().entry(key.clone()) {
            // A read is in flight: wait for the next, which a reader starts.
            Entry::Occupied(mut e) => {
                e.get_mut().push(to);
                None
            }
            Entry::Vacant(e) => {
                e.insert(Vec::new());
                Some(to)
            }
        };
        if let Some(to) = first {
            // A task of its own, so no claim's answer waits on others' reads
            // and a claim that goes away mid-read strands no one.
            tokio::spawn(Arc::clone(self).serve(key, to));
        }
        seen.await.map_err(|_| StoreError::Unavailable("the item's read was dropped before it answered".into()))?
    }

    /// Reads for `first`, then for whoever arrived during each read, until
    /// a read ends with no one waiting.
    async fn serve(self: Arc<Self>, key: Key, first: oneshot::Sender<Seen>) {
        // Should this task panic, the item's waiters are told `unavailable`
        // (their senders drop with the entry) and the next claim reads anew.
        struct Reading<'a>(&'a Peeks, &'a Key, bool);
        impl Drop for Reading<'_> {
            fn drop(&mut self) {
                if !self.2 {
                    self.0.waiting().remove(self.1);
                }
            }
        }
        let mut reading = Reading(&self, &key, false);
        let mut readers = vec![first];
        loop {
            let seen = self.peek(&key).await;
            self.reads.fetch_add(1, Ordering::Relaxed);
            if *self.held.borrow() {
                self.paused.fetch_add(1, Ordering::SeqCst);
                let _ = self.held.subscribe().wait_for(|held| !held).await;
                self.paused.fetch_sub(1, Ordering::SeqCst);
            }
            for to in readers {
                // The claim may have gone (a closed connection).
                let _ = to.send(seen.clone());
            }
            let mut waiting = self.waiting();
            let Entry::Occupied(mut e) = waiting.entry(key.clone()) else { return };
            if e.get().is_empty() {
                // Under the lock claims queue under: a claim after this starts a read.
                e.remove();
                reading.2 = true;
                return;
            }
            readers = std::mem::take(e.get_mut());
        }
    }

    async fn peek(&self, (ws, r): &Key) -> Seen {
        let row =
            sqlx::query(PEEK).bind(ws).bind(&r.prefix).bind(r.number).fetch_optional(&self.pool).await.map_err(db)?;
        rows::locked(row.as_ref(), r)
    }
}

/// A claim's turn at an item's row lock; ending it (its drop, also when
/// the claim is dropped mid-way) wakes the claims waiting for it.
pub(crate) struct Turn {
    peeks: Arc<Peeks>,
    key: Key,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.peeks.turns().remove(&self.key);
    }
}

/// What tests see and do.
impl Peeks {
    pub(crate) fn made(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Claims waiting for a read after the one in flight, and reads held
    /// after running.
    pub(crate) fn waiting_and_paused(&self) -> (usize, u64) {
        let waiting = self.waiting().values().map(Vec::len).sum();
        (waiting, self.paused.load(Ordering::SeqCst))
    }

    /// Claims waiting for another claim's turn at an item's row lock.
    pub(crate) fn waiting_for_turns(&self) -> usize {
        self.turns().values().map(Vec::len).sum()
    }

    pub(crate) fn hold(&self, held: bool) {
        self.held.send_replace(held);
    }
}
