//! A broken lease's reason and breaker, and telling its holder
//! (docs/leases.md L7, L18, "Told why").

use pad_core::Lease;
use pad_core::lease::LeaseHandle;
use pad_store::{Actor, StoreError, StoreResult};
use sqlx::postgres::PgConnection;

use crate::{PgStore, db};

impl PgStore {
    /// L7: kept with the break and keyed by the lease id, so the endings
    /// that follow need not clear them: they describe the last lease only
    /// while it is that lease.
    pub(crate) async fn record_break(
        conn: &mut PgConnection,
        item_id: i64,
        lease: &Lease,
        reason: Option<&str>,
        by: Actor,
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

    /// A `lease_lost` refusal, with the caller's own lease as it ended when
    /// the item's last lease is the one `handle` names. The refusal stands
    /// even if that cannot be read.
    pub(crate) async fn explain_lost(
        conn: &mut PgConnection,
        item_id: i64,
        handle: LeaseHandle,
        e: StoreError,
    ) -> StoreError {
        let StoreError::LeaseLost { now, .. } = &e else { return e };
        match Self::load_item(conn, item_id, *now).await {
            Ok(item) => e.with_ended(item.last_lease, handle),
            Err(_) => e,
        }
    }
}
