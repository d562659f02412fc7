//! A broken lease's reason and breaker, recorded with the break so its
//! holder can be told (docs/leases.md L7, L18, "Told why"; the telling is
//! `pad_store::steps::explain_lost`). Written on the writer connection by
//! the flow that breaks the lease.

use pad_core::Lease;
use pad_store::{Actor, StoreResult};
use rusqlite::Connection;

use crate::SqliteStore;
use crate::sql::Db;

impl SqliteStore {
    /// L7: kept with the break and keyed by the lease id, so the endings
    /// that follow need not clear them: they describe the last lease only
    /// while it is that lease.
    pub(crate) fn record_break(
        conn: &Connection, item_id: i64, lease: &Lease, reason: Option<&str>, by: Actor,
    ) -> StoreResult<()> {
        conn.exec(
            "UPDATE items SET broken_lease_id = ?, broken_reason = ?,
                    broken_by = (SELECT email FROM users WHERE id = ?) WHERE id = ?",
            (lease.lease_id, reason, by.user_id, item_id),
        )?;
        Ok(())
    }
}
