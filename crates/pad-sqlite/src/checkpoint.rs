//! The WAL stays bounded (docs/operations.md, "The WAL stays bounded").
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its
//! threshold, with the writer held; pad turns it off for its writer and
//! keeps the log short in three steps, cheapest first:
//!
//! 1. Past [`WAL_SOFT_BYTES`] this thread runs a *passive* checkpoint on a
//!    connection of its own, beside the writer and the readers.
//! 2. Past twice that, passive checkpoints have not let the log restart
//!    (readers always hold some snapshot that is still in the log, or writes
//!    never pause). This thread then takes the writer between two batches
//!    and truncates the log there ([`Writer::truncate_wal`]): pad's own
//!    readers step aside for it (the [`Gate`]), so they cannot starve it,
//!    and the writes queued meanwhile wait on the writer, not on SQLite's
//!    busy handler. Most frames are already copied by step 1, so the pause
//!    is short.
//! 3. Past [`WAL_HARD_BYTES`] the writer does step 2 itself before it opens
//!    another batch: the backpressure for a machine so busy that this
//!    thread does not get to run. The bound therefore holds whatever the
//!    scheduling.
//!
//! [`Writer::truncate_wal`]: crate::writer::Writer::truncate_wal

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, mpsc};
use std::time::Duration;

use pad_store::{StoreError, StoreResult};
use rusqlite::Connection;

use crate::writer::Writer;

/// SQLite's own checkpoint threshold: 1 000 pages of 4 KiB. Also the
/// `journal_size_limit`: a log that restarts is cut back to this size.
pub(crate) const WAL_SOFT_BYTES: u64 = 1000 * 4096;
/// Past this the writer empties the log before it opens another batch, so
/// the log never holds much more than this plus one batch.
pub const WAL_HARD_BYTES: u64 = 4 * WAL_SOFT_BYTES;
/// How long a truncation waits for a reader outside pad (a backup) before it
/// gives up until the next try.
const TRUNCATE_PATIENCE: Duration = Duration::from_millis(200);
/// How often the WAL's size is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Held shared by every read, exclusively while the log is truncated: a
/// truncating checkpoint must wait until no reader is in the log, and
/// readers that keep starting would starve it.
pub(crate) type Gate = Arc<RwLock<()>>;

/// The WAL file beside the database at `db_path`.
pub(crate) fn wal_path(db_path: &Path) -> PathBuf {
    let mut wal = db_path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// The WAL file's size; 0 when it does not exist. With `journal_size_limit`
/// set, the file's size follows the log's.
pub(crate) fn wal_len(wal: &Path) -> u64 {
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// Copies the log into the database and empties it, on `conn` (the writer,
/// outside any transaction), with pad's readers held off by `gate`. Busy
/// (another checkpoint, or a reader outside pad) or failed: the next try
/// does it.
pub(crate) fn truncate(conn: &Connection, gate: &Gate) {
    let _readers_out = gate.write().unwrap_or_else(|p| p.into_inner());
    let _ = conn.busy_timeout(TRUNCATE_PATIENCE);
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    let _ = conn.busy_timeout(crate::BUSY_TIMEOUT);
}

/// Runs until dropped.
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// `conn`: the checkpointer's own connection; `writer`: for step 2.
    pub(crate) fn start(conn: Connection, db_path: &Path, writer: Writer) -> StoreResult<Self> {
        let wal = wal_path(db_path);
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("pad-sqlite-checkpoint".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(LOOK_EVERY) {
                    let len = wal_len(&wal);
                    if len > 2 * WAL_SOFT_BYTES {
                        writer.truncate_wal();
                    } else if len > WAL_SOFT_BYTES {
                        // Busy (another checkpoint) or failed: the next look tries again.
                        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    }
                }
            })
            .map_err(|e| StoreError::Unavailable(format!("cannot start the SQLite checkpointer: {e}")))?;
        Ok(Checkpointer { _stop: stop })
    }
}
