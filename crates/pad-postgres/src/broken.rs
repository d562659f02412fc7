//! A broken lease's reason and breaker, recorded with the break so its
//! holder can be told (docs/leases.md L7, L18, "Told why"; the telling is
//! `pad_store::steps::explain_lost`). Written in the breaking transaction,
//! under the item's row lock.

use pad_core::Lease;
use pad_store::{Actor, StoreResult};
use sqlx::postgres::PgConnection;

use crate::{PgStore, db};

impl PgStore {
    /// L7: kept with the break and keyed by the lease id, so the endings
    /// that follow need not clear them: they describe the last lease only
    /// while it is that lease.
    pub(crate) async fn record_break(
        conn: &mut PgConnection, item_id: i64, lease: &Lease, reason: Option<&str>, by: Actor,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE items SET broken_lease_id = $1, broken_reason = $2,
                    broken_by = (SELECT email FROM users WHERE id = $3) WHERE id = $4",
        )
        .bind(lease.lease_id)
        .bind(reason)
        .bind(by.user_id)
        .bind(item_id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }
}
