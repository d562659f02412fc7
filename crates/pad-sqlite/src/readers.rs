//! The read connections (docs/operations.md, "SQLite writes: group commit"):
//! a few read-only connections beside the writer, each owned by a thread of
//! its own. In WAL mode a reader sees the last committed state and never
//! waits on the writer. A read may scan a large workspace or wait on the
//! disk, so it runs on these threads, never on the server's: and since the
//! threads are fixed, so is the memory they hold.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, mpsc};

use pad_store::{StoreError, StoreResult};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::checkpoint::Gate;

type Job = Box<dyn FnOnce(&Connection) + Send>;

pub(crate) struct Readers {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

impl Readers {
    /// One thread per connection, all taking reads from one queue.
    /// `gate`: held shared by each read, so the log can be truncated between
    /// reads (`checkpoint.rs`).
    pub(crate) fn start(conns: Vec<Connection>, gate: &Gate) -> StoreResult<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for (n, conn) in conns.into_iter().enumerate() {
            let queue = Arc::clone(&queue);
            let gate = Arc::clone(gate);
            std::thread::Builder::new()
                .name(format!("pad-sqlite-read-{n}"))
                .spawn(move || {
                    loop {
                        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok(job) = next else { return };
                        // A read that panics answers its caller with an
                        // error (its reply is dropped); the thread goes on.
                        let _reading = gate.read().unwrap_or_else(|p| p.into_inner());
                        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| job(&conn)));
                    }
                })
                .map_err(|e| StoreError::Unavailable(format!("cannot start an SQLite reader: {e}")))?;
        }
        Ok(Readers { jobs: Mutex::new(Some(jobs)) })
    }

    /// Runs `f` on the next free read connection.
    pub(crate) async fn read<T: Send + 'static>(
        &self, f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            // Its caller has gone (a request deadline, a closed connection):
            // no one would get the answer (docs/operations.md).
            if reply.is_closed() {
                return;
            }
            let _ = reply.send(f(conn));
        });
        let sent = match self.jobs.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(jobs) => jobs.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(StoreError::Unavailable("the store is closed".into()));
        }
        answer.await.map_err(|_| StoreError::Internal("a read failed without an answer".into()))?
    }

    /// Lets the reader threads end once the queued reads are done.
    pub(crate) fn close(&self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, RwLock};
    use std::task::{Context, Waker};

    use rusqlite::Connection;

    use super::Readers;
    use crate::checkpoint::Gate;

    /// A read whose caller went away (a request deadline, a closed
    /// connection) before a reader took it is not run (docs/operations.md,
    /// "SQLite writes: group commit").
    #[tokio::test]
    async fn a_read_whose_caller_is_gone_is_not_run() {
        let gate: Gate = Arc::new(RwLock::new(()));
        let readers = Readers::start(vec![Connection::open_in_memory().unwrap()], &gate).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        // While the gate is held, the one reader runs nothing.
        let held = gate.write().unwrap();
        let mut gone = {
            let ran = Arc::clone(&ran);
            Box::pin(readers.read(move |_| {
                ran.fetch_add(1, SeqCst);
                Ok(())
            }))
        };
        // Its first poll queues the read; then its caller goes.
        assert!(gone.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        drop(gone);
        drop(held);
        // One reader takes reads in order: once this one is answered, the
        // gone one has been taken.
        readers.read(|_| Ok(())).await.unwrap();
        assert_eq!(ran.load(SeqCst), 0, "the gone caller's read ran");
    }
}
