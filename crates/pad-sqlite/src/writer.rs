//! The one writer, with group commit (docs/operations.md, "SQLite writes: group commit").
//!
//! One rusqlite connection owns every write. A write flow takes it (callers
//! queue in arrival order), runs inside a `SAVEPOINT` of the *batch*
//! transaction — opened by the first flow with `BEGIN IMMEDIATE` — and
//! gives the connection to the next flow. Once nobody is queued, the whole
//! batch commits: every flow that queued while a commit was running joins
//! the next batch, so one commit (and, with `synchronous=full`, one fsync)
//! serves them all.
//!
//! The guarantees: a flow's result is returned only after the `COMMIT` of
//! its batch succeeded (acknowledged means committed); a flow that fails or
//! is abandoned rolls back to its savepoint, so it leaves no partial write
//! and its neighbours in the batch still commit; such a flow may answer
//! from what earlier flows of the batch wrote, so its answer too waits for
//! the batch's `COMMIT` ([`Tx::rollback`]), or, when it cannot wait (it
//! was dropped), it commits the batch before it lets go of the writer: no
//! answer tells of an uncommitted write. A batch whose commit fails fails
//! every flow in it. Statements run on the caller's thread (they take
//! microseconds). A flow that ends with nobody queued behind it commits its
//! batch itself when commits do not wait on the disk (`synchronous=normal`):
//! a lone writer then pays no hand-over to the committer. Otherwise the
//! commit runs on the committer's thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use pad_core::Timestamp;
use pad_store::{StoreError, StoreResult};
use rusqlite::Connection;
use tokio::sync::{Mutex, OwnedMutexGuard, watch};

use crate::checkpoint::{self, Gate};
use crate::clock::Clock;
use crate::sql::db;

/// A batch's outcome: `None` until its `COMMIT` ran.
type Outcome = Option<StoreResult<()>>;

#[derive(Clone)]
pub(crate) struct Writer {
    shared: Arc<Mutex<Batching>>,
    signals: Arc<Signals>,
}

/// What a flow needs to end: who is queued behind it, and the committer.
struct Signals {
    /// Flows waiting for the connection.
    queued: AtomicUsize,
    /// Whether a flow may commit its batch on its own thread: only when a
    /// commit does not wait on the disk.
    inline: bool,
    kick: mpsc::Sender<()>,
}

/// Counts a flow as queued until it holds the connection or gives up.
struct Queued<'a>(&'a AtomicUsize);

impl<'a> Queued<'a> {
    fn join(queued: &'a AtomicUsize) -> Self {
        queued.fetch_add(1, Ordering::AcqRel);
        Queued(queued)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The writer connection and the batch open on it, if any.
pub(crate) struct Batching {
    conn: Connection,
    batch: Option<watch::Sender<Outcome>>,
    /// Flows of the open batch that ended with their writes kept: what a
    /// flow after them reads may be theirs, not yet committed.
    kept: usize,
    /// The WAL file, kept under its hard bound (`checkpoint.rs`).
    wal: PathBuf,
    /// Keeps pad's readers out while the log is truncated.
    gate: Gate,
}

impl Batching {
    /// Joins the open batch or opens one, then opens this flow's savepoint.
    fn enter(&mut self) -> StoreResult<watch::Receiver<Outcome>> {
        if self.batch.is_some() && self.conn.is_autocommit() {
            self.abort(ended_on_error());
        }
        if self.batch.is_none() {
            self.bound_wal();
            run(&self.conn, "BEGIN IMMEDIATE")?;
            self.batch = Some(watch::channel(None).0);
        }
        let done = self.batch.as_ref().map(watch::Sender::subscribe).expect("a batch is open");
        run(&self.conn, "SAVEPOINT flow")?;
        Ok(done)
    }

    /// Between batches, with no write open: a log past its hard bound is
    /// emptied here before it may grow any further (`checkpoint.rs`, step 3).
    fn bound_wal(&self) {
        if checkpoint::wal_len(&self.wal) > checkpoint::WAL_HARD_BYTES {
            checkpoint::truncate(&self.conn, &self.gate);
        }
    }

    /// Undoes one flow: its savepoint only, unless the batch itself is gone.
    fn undo(&mut self) {
        if self.batch.is_none() {
            return;
        }
        let undone = run(&self.conn, "ROLLBACK TO flow").and_then(|()| run(&self.conn, "RELEASE flow"));
        if let Err(e) = undone {
            self.abort(e);
        } else if self.conn.is_autocommit() {
            self.abort(ended_on_error());
        }
    }

    /// Fails the open batch: rolled back, every flow in it told.
    fn abort(&mut self, e: StoreError) {
        if !self.conn.is_autocommit() {
            let _ = run(&self.conn, "ROLLBACK");
        }
        self.kept = 0;
        if let Some(batch) = self.batch.take() {
            batch.send_replace(Some(Err(e)));
        }
    }

    /// Commits the open batch, if any, and tells its flows.
    fn commit(&mut self) {
        let Some(batch) = self.batch.take() else { return };
        self.kept = 0;
        let outcome = if self.conn.is_autocommit() { Err(ended_on_error()) } else { run(&self.conn, "COMMIT") };
        if outcome.is_err() && !self.conn.is_autocommit() {
            let _ = run(&self.conn, "ROLLBACK");
        }
        batch.send_replace(Some(outcome));
    }
}

/// SQLite rolled the batch's transaction back on its own (a statement failed
/// in a way that ends the transaction, such as a full disk).
fn ended_on_error() -> StoreError {
    StoreError::Internal("the batch's transaction ended on an error".into())
}

/// Transaction control statements, from the statement cache like the rest.
fn run(conn: &Connection, sql: &str) -> StoreResult<()> {
    conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map(drop).map_err(db)
}

impl Writer {
    /// Takes `conn` (opened, with its pragmas set) and starts the committer.
    /// `inline`: commits do not wait on the disk (`synchronous=normal`).
    pub(crate) fn start(conn: Connection, inline: bool, gate: Gate) -> StoreResult<Self> {
        let wal = checkpoint::wal_path(Path::new(conn.path().unwrap_or_default()));
        // A log that restarts is cut back to the soft bound, so the file's
        // size says how much log there is, not how much there once was.
        conn.pragma_update_and_check(None, "journal_size_limit", checkpoint::WAL_SOFT_BYTES.cast_signed(), |_| Ok(()))
            .map_err(db)?;
        let shared = Arc::new(Mutex::new(Batching { conn, batch: None, kept: 0, wal, gate }));
        let (kick, kicks) = mpsc::channel();
        let committer = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("pad-sqlite-commit".into())
            .spawn(move || commit_loop(&committer, &kicks))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the SQLite committer: {e}")))?;
        Ok(Writer { shared, signals: Arc::new(Signals { queued: AtomicUsize::new(0), inline, kick }) })
    }

    /// Opens a write flow; `now` is read once the connection is held, so
    /// time order is commit order (`clock.rs`).
    pub(crate) async fn begin(&self, clock: &Clock) -> StoreResult<Tx> {
        let mut held = {
            // Queued until it holds the connection, even if the caller gives up.
            let _queued = Queued::join(&self.signals.queued);
            Arc::clone(&self.shared).lock_owned().await
        };
        match held.enter() {
            Ok(done) => Ok(Tx { held: Some(held), done, signals: Arc::clone(&self.signals), now: clock.tick() }),
            Err(e) => {
                // A batch left open must still be committed.
                drop(held);
                let _ = self.signals.kick.send(());
                Err(e)
            }
        }
    }

    /// Between two batches (the open one committed first), copies the log
    /// into the database and empties it (`checkpoint.rs`, step 2). Blocks:
    /// for the checkpointer's thread; writes queue on the writer meanwhile.
    pub(crate) fn truncate_wal(&self) {
        let mut held = self.shared.blocking_lock();
        held.commit();
        checkpoint::truncate(&held.conn, &held.gate);
    }

    /// Commits whatever is open, now.
    pub(crate) async fn flush(&self) {
        self.shared.lock().await.commit();
    }
}

/// Commits a batch whenever a flow has ended; kicks that arrived while a
/// commit ran are served by the next one. Ends with the store.
fn commit_loop(shared: &Mutex<Batching>, kicks: &mpsc::Receiver<()>) {
    while kicks.recv().is_ok() {
        while kicks.try_recv().is_ok() {}
        shared.blocking_lock().commit();
    }
}

/// A write flow: the writer connection, inside this flow's savepoint of the
/// open batch. Dropping it without [`commit`](Tx::commit) undoes the flow.
pub struct Tx {
    held: Option<OwnedMutexGuard<Batching>>,
    done: watch::Receiver<Outcome>,
    signals: Arc<Signals>,
    pub(crate) now: Timestamp,
}

impl Tx {
    pub(crate) fn conn(&self) -> &Connection {
        &self.held.as_ref().expect("a flow holds the writer until it ends").conn
    }

    /// Ends the flow keeping nothing, once what it read can be told: a flow
    /// that answers without writing (a refusal names the lease that refused
    /// it) may have read what earlier flows of its batch kept, so it waits
    /// for that batch's `COMMIT` as theirs do, and fails if that does
    /// (docs/operations.md, "SQLite writes: group commit": no answer tells
    /// of an uncommitted write). The batch goes on meanwhile.
    pub(crate) async fn rollback(mut self) -> StoreResult<()> {
        let mut held = self.held.take().expect("a flow holds the writer until it ends");
        let read_kept = held.kept > 0;
        held.undo();
        drop(held);
        let _ = self.signals.kick.send(());
        if !read_kept {
            return Ok(());
        }
        self.settled().await
    }

    /// Ends the flow and waits for its batch to commit.
    pub(crate) async fn commit(mut self) -> StoreResult<()> {
        let mut held = self.held.take().expect("a flow holds the writer until it ends");
        if let Err(e) = run(&held.conn, "RELEASE flow") {
            held.undo();
            return Err(e);
        }
        held.kept += 1;
        if self.signals.inline && self.signals.queued.load(Ordering::Acquire) == 0 {
            // Nobody to share the batch with: commit it now, here.
            held.commit();
        }
        drop(held);
        if self.done.borrow().is_none() {
            let _ = self.signals.kick.send(());
        }
        self.settled().await
    }

    /// The outcome of this flow's batch, once it has one.
    async fn settled(&mut self) -> StoreResult<()> {
        let outcome = self.done.wait_for(Option::is_some).await;
        match outcome.as_deref() {
            Ok(Some(result)) => result.clone(),
            _ => Err(StoreError::Unavailable("the store closed before this write committed".into())),
        }
    }
}

impl Drop for Tx {
    /// A flow dropped unended (an early return, a caller gone) may still be
    /// answered from what it read: with no way to wait here, what earlier
    /// flows kept in the batch commits now, before the answer can leave.
    fn drop(&mut self) {
        if let Some(mut held) = self.held.take() {
            let read_kept = held.kept > 0;
            held.undo();
            if read_kept {
                held.commit();
            }
            drop(held);
            let _ = self.signals.kick.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use rusqlite::Connection;

    use super::Writer;
    use crate::clock::Clock;
    use crate::sql::Db;

    fn writer(dir: &tempfile::TempDir) -> (Writer, std::path::PathBuf) {
        writer_committing(dir, true)
    }

    /// `inline`: as with `synchronous=normal`; otherwise every commit is the
    /// committer's, as with `full`.
    fn writer_committing(dir: &tempfile::TempDir, inline: bool) -> (Writer, std::path::PathBuf) {
        let path = dir.path().join("w.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (k INTEGER PRIMARY KEY)").unwrap();
        (Writer::start(conn, inline, crate::checkpoint::Gate::default()).unwrap(), path)
    }

    fn keys(path: &std::path::Path) -> Vec<i64> {
        let c = Connection::open(path).unwrap();
        c.all("SELECT k FROM t ORDER BY k", [], |r| crate::sql::Col::col(r, 0)).unwrap()
    }

    /// Flows queued behind an open one all join its batch (the committer
    /// queues after them); the last ten to queue write, then fail on a
    /// constraint and give up. Every key of the others must be committed and
    /// acknowledged, none of the failed ones', and the first failure must
    /// have shared its batch with the successes before it (a flow that gives
    /// up commits the batch it read: the next test).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_flow_leaves_its_batch_neighbours_committed() {
        failing_flows_in_a_batch(true).await;
    }

    /// The same with every commit on the committer (`synchronous=full`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_flow_leaves_its_batch_neighbours_committed_with_full() {
        failing_flows_in_a_batch(false).await;
    }

    async fn failing_flows_in_a_batch(inline: bool) {
        let dir = tempfile::tempdir().unwrap();
        let (w, path) = writer_committing(&dir, inline);
        let (w, clock) = (Arc::new(w), Arc::new(Clock::default()));
        let first = w.begin(&clock).await.unwrap();
        let flow = |k: i64| {
            let (w, clock) = (Arc::clone(&w), Arc::clone(&clock));
            tokio::spawn(async move {
                let tx = w.begin(&clock).await.unwrap();
                let batch = tx.done.clone();
                tx.conn().exec("INSERT INTO t (k) VALUES (?)", [k]).unwrap();
                if k > 90 {
                    assert!(tx.conn().exec("INSERT INTO t (k) VALUES (?)", [k]).is_err(), "the duplicate fails");
                    drop(tx);
                    (k, batch, false)
                } else {
                    tx.commit().await.unwrap();
                    (k, batch, true)
                }
            })
        };
        // Each group waits until it is queued on the writer (its own count,
        // not a guess at how long spawning takes); then the first flow ends.
        let mut tasks: Vec<_> = (1..=90).map(flow).collect();
        while w.signals.queued.load(Ordering::Acquire) < 90 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        tasks.extend((91..=100).map(flow));
        while w.signals.queued.load(Ordering::Acquire) < 100 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        first.conn().exec("INSERT INTO t (k) VALUES (0)", []).unwrap();
        let first_batch = first.done.clone();
        first.commit().await.unwrap();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap());
        }
        assert_eq!(keys(&path), (0..=90).collect::<Vec<_>>());
        let shared = done.iter().filter(|(_, b, _)| b.same_channel(&first_batch)).count();
        assert!(shared > 1, "flows that queued behind the first joined its batch ({shared} did)");
        assert!(
            done.iter().any(|(_, b, ok)| !ok && done.iter().any(|(_, b2, ok2)| *ok2 && b.same_channel(b2))),
            "a failed flow and a committed one shared a batch"
        );
    }

    /// The writer alone keeps the WAL under its hard bound: no checkpointer
    /// runs here at all, and a reader keeps asking throughout, so nothing
    /// depends on another thread getting time.
    #[tokio::test]
    async fn the_writer_alone_keeps_the_wal_under_its_hard_bound() {
        let dir = tempfile::tempdir().unwrap();
        let (w, path) = writer(&dir);
        let reader = Connection::open(&path).unwrap();
        let clock = Clock::default();
        let wal = crate::checkpoint::wal_path(&path);
        let blob = vec![7_u8; 64 * 1024];
        let mut largest = 0;
        // 40 MB written, ten times the hard bound.
        for k in 0..640_i64 {
            let tx = w.begin(&clock).await.unwrap();
            tx.conn().exec("CREATE TABLE IF NOT EXISTS b (k INTEGER PRIMARY KEY, v BLOB)", []).unwrap();
            tx.conn().exec("INSERT INTO b (k, v) VALUES (?, ?)", rusqlite::params![k, blob]).unwrap();
            tx.commit().await.unwrap();
            let n: i64 = reader.query_row("SELECT count(*) FROM b", [], |r| r.get(0)).unwrap();
            assert_eq!(n, k + 1);
            largest = largest.max(crate::checkpoint::wal_len(&wal));
        }
        // One batch (one 64 KiB row and its pages) may land past the bound before the next checks it.
        let bound = crate::checkpoint::WAL_HARD_BYTES + 256 * 1024;
        assert!(largest <= bound, "the WAL reached {largest} bytes; the bound is {bound}");
        assert!(largest > crate::checkpoint::WAL_SOFT_BYTES, "the test wrote enough to need the bound ({largest})");
    }

    /// Three flows in one batch: A has written key 1 and waits for the
    /// batch (`a_done`); B holds the writer and has read A's write; C is
    /// queued behind B, ahead of the committer, so the batch cannot commit
    /// before B and C let it.
    struct ThreeInABatch {
        path: std::path::PathBuf,
        a_done: tokio::task::JoinHandle<pad_store::StoreResult<()>>,
        b: super::Tx,
        c: tokio::task::JoinHandle<super::Tx>,
        _dir: tempfile::TempDir,
    }

    async fn three_in_a_batch(inline: bool) -> ThreeInABatch {
        let dir = tempfile::tempdir().unwrap();
        let (w, path) = writer_committing(&dir, inline);
        let (w, clock) = (Arc::new(w), Arc::new(Clock::default()));
        let a = w.begin(&clock).await.unwrap();
        let flow = || {
            let (w, clock) = (Arc::clone(&w), Arc::clone(&clock));
            tokio::spawn(async move { w.begin(&clock).await.unwrap() })
        };
        // Queued: the writer's own count, not a guess at how long spawning takes.
        let queued = |n: usize| {
            let w = Arc::clone(&w);
            async move {
                while w.signals.queued.load(Ordering::Acquire) < n {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        };
        let b = flow();
        queued(1).await;
        let c = flow();
        queued(2).await;
        a.conn().exec("INSERT INTO t (k) VALUES (1)", []).unwrap();
        let a_done = tokio::spawn(a.commit());
        let b = b.await.unwrap();
        let seen: i64 = b.conn().scalar("SELECT count(*) FROM t", []).unwrap();
        assert_eq!(seen, 1, "B reads A's write inside the batch");
        ThreeInABatch { path, a_done, b, c, _dir: dir }
    }

    /// A flow dropped unended (an early return) may still be answered from
    /// what it read, and cannot wait: what B read must be committed once B
    /// let go, with C still holding the writer (another connection reads
    /// it). Both ways of committing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flow_that_gives_up_commits_what_it_may_have_read() {
        for inline in [true, false] {
            let t = three_in_a_batch(inline).await;
            drop(t.b);
            let c = t.c.await.unwrap();
            assert_eq!(keys(&t.path), vec![1], "what B read is committed once B let go (inline: {inline})");
            drop(c);
            t.a_done.await.unwrap().unwrap();
        }
    }

    /// Through [`Tx::rollback`], the way refusals end: B's answer waits for
    /// the batch it read to commit, and the batch goes on meanwhile (C
    /// joins it) instead of committing early.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refusal_waits_for_the_batch_it_read() {
        let t = three_in_a_batch(true).await;
        let mut refused = std::pin::pin!(t.b.rollback());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(refused.as_mut().poll(&mut cx).is_pending(), "B's answer waits for A's batch");
        let c = t.c.await.unwrap();
        assert_eq!(keys(&t.path), Vec::<i64>::new(), "the batch goes on: C is in it");
        c.conn().exec("INSERT INTO t (k) VALUES (2)", []).unwrap();
        c.commit().await.unwrap();
        refused.await.unwrap();
        t.a_done.await.unwrap().unwrap();
        assert_eq!(keys(&t.path), vec![1, 2]);
    }

    /// A flow dropped before it commits (a caller that went away) leaves
    /// nothing, and the writer serves the next flow.
    #[tokio::test]
    async fn an_abandoned_flow_is_undone() {
        let dir = tempfile::tempdir().unwrap();
        let (w, path) = writer(&dir);
        let clock = Clock::default();
        let tx = w.begin(&clock).await.unwrap();
        tx.conn().exec("INSERT INTO t (k) VALUES (1)", []).unwrap();
        drop(tx);
        let tx = w.begin(&clock).await.unwrap();
        tx.conn().exec("INSERT INTO t (k) VALUES (2)", []).unwrap();
        tx.commit().await.unwrap();
        assert_eq!(keys(&path), vec![2]);
    }

    /// Acknowledged means committed: once `commit` returns, another
    /// connection reads the write.
    #[tokio::test]
    async fn a_commit_returns_after_the_batch_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (w, path) = writer(&dir);
        let clock = Clock::default();
        for k in 0..20 {
            let tx = w.begin(&clock).await.unwrap();
            tx.conn().exec("INSERT INTO t (k) VALUES (?)", [k]).unwrap();
            tx.commit().await.unwrap();
            assert_eq!(keys(&path).len(), usize::try_from(k + 1).unwrap());
        }
    }
}
