//! WAL checkpoints off the write path (docs/operations.md, "SQLite writes:
//! group commit"). SQLite's automatic checkpoint runs inside the commit that
//! crosses its threshold, with the writer held: every write queued behind
//! that commit would wait for the checkpoint's disk syncs. The writer's
//! automatic checkpoint is off instead, and this thread, on a connection of
//! its own, checkpoints whenever the WAL has grown past the same threshold
//! SQLite uses (1 000 pages). A passive checkpoint runs beside the writer
//! and never blocks it.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use pad_store::{StoreError, StoreResult};
use rusqlite::Connection;

use crate::sql::db;

/// SQLite's own default: 1 000 pages of 4 KiB.
const WAL_LIMIT_BYTES: u64 = 1000 * 4096;
/// How often the WAL's size is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Runs until dropped.
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    pub(crate) fn start(conn: Connection, db_path: &Path) -> StoreResult<Self> {
        let mut wal = db_path.as_os_str().to_owned();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("pad-sqlite-checkpoint".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(LOOK_EVERY) {
                    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_LIMIT_BYTES) {
                        // Busy (another checkpoint) or failed: the next look tries again.
                        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).map_err(db);
                    }
                }
            })
            .map_err(|e| StoreError::Unavailable(format!("cannot start the SQLite checkpointer: {e}")))?;
        Ok(Checkpointer { _stop: stop })
    }
}
