//! The read connections (docs/operations.md, "SQLite writes: group commit"): a few
//! read-only connections beside the writer. In WAL mode a reader sees the
//! last committed state and never waits on the writer.

use std::sync::Mutex;

use pad_store::{StoreError, StoreResult};
use rusqlite::Connection;
use tokio::sync::Semaphore;

pub(crate) struct Readers {
    idle: Mutex<Vec<Connection>>,
    free: Semaphore,
}

impl Readers {
    pub(crate) fn new(conns: Vec<Connection>) -> Self {
        Readers { free: Semaphore::new(conns.len()), idle: Mutex::new(conns) }
    }

    /// Runs `f` on an idle read connection, waiting for one if all are busy.
    /// A read may scan a large workspace, so on a multi-threaded runtime the
    /// worker thread hands its other tasks on while it runs.
    pub(crate) async fn read<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let _permit = self.free.acquire().await.map_err(|_| StoreError::Unavailable("the store is closed".into()))?;
        let lent =
            Lent { readers: self, conn: Some(self.idle().pop().expect("a permit stands for an idle connection")) };
        blocking(|| f(lent.conn.as_ref().expect("lent until dropped")))
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn close(&self) {
        self.free.close();
    }
}

/// A connection out of the idle list, put back however the read ends.
struct Lent<'a> {
    readers: &'a Readers,
    conn: Option<Connection>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            self.readers.idle().push(c);
        }
    }
}

/// Runs `f`, telling a multi-threaded tokio runtime that it blocks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
