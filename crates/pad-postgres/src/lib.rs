//! pad's PostgreSQL store: many `pad serve` instances may share one database.
//!
//! Every lease decision is one statement on the database's clock, so
//! instances never consult their own clocks and never need to agree with each
//! other: the statement locks the item row (`FOR UPDATE`, which under READ
//! COMMITTED waits for and returns the latest committed version), reads
//! `clock_timestamp()` once the lock is held, and writes only if the lease
//! predicate holds. The rule's *meaning* still lives in `pad_core::lease`:
//! each answer is replayed through it, and a statement that disagrees with
//! the rule is rolled back instead of committed. Event rows are written in
//! the same transaction as the change they record.
//!
//! Why `clock_timestamp()` and not `now()`: `now()` is the transaction's
//! start, which precedes the lock wait. A claim that waited for a release
//! would be stamped before the release it waited for, so two leases'
//! intervals could overlap. Time read after the lock follows commit order,
//! as the SQLite backend's clock does under its write lock.

mod broken;
mod rows;
mod settings;
mod webhooks;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use pad_core::lease::{self, ClaimDecision, LeaseEnd, LeaseHandle, LeaseSlot, ReleaseDecision, RenewDecision, Ttl};
use pad_core::model::{DEFAULT_KINDS, validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate::{self, Lines};
use pad_core::{
    Claimant, Comment, Event, EventFilter, EventKind, FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, Kind,
    LIST_LIMIT_MAX, Lease, Member, NEEDS_HUMAN, NewItem, Page, Principal, Role, Timestamp, TokenInfo, User,
    ValidFrontierFilter, Version, Workspace,
};
use pad_store::{
    Actor, ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ObservedExpiry, ReleaseOutcome,
    ReleaseRequest, RenewRequest, Store, StoreError, StoreResult, shared,
};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, QueryBuilder, Row};

use rows::{ITEM_SELECT, item_from_row};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Pool size per instance unless `PAD_PG_MAX_CONNECTIONS` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// How long a request waits for a connection before answering `unavailable`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

pub struct PgStore {
    pool: PgPool,
}

/// Maps a driver error once, at this crate's boundary. Anything that says
/// "the database is not reachable right now" is `Unavailable` (HTTP 503,
/// CLI exit 8); the pool reconnects by itself once it is back.
fn db(e: sqlx::Error) -> StoreError {
    let transient = match &e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => true,
        // 08: connection exceptions; 53: out of connections or memory; 57P0x:
        // shutdown, crash, or not accepting connections yet; 40001/40P01:
        // serialization failure or deadlock, which a retry resolves.
        sqlx::Error::Database(d) => d.code().is_some_and(|c| {
            c.starts_with("08") || c.starts_with("53") || c.starts_with("57P") || c == "40001" || c == "40P01"
        }),
        _ => false,
    };
    if transient { StoreError::Unavailable(e.to_string()) } else { StoreError::Internal(e.to_string()) }
}

fn parse_ref(field: &str, s: &str) -> StoreResult<ItemRef> {
    Ok(ItemRef::parse_field(field, s)?)
}

/// TTLs are bounded to a day (L8), so they always fit the `integer` column.
fn ttl_param(ttl: Ttl) -> i32 {
    i32::try_from(ttl.seconds()).expect("L8 bounds TTLs to 86400 seconds")
}

/// Locks an item's row and then reads the clock: `prev` is the latest
/// committed version (READ COMMITTED re-reads it after any lock wait), `cur`
/// adds `db_now`, taken only once `prev` has produced its locked row. Every
/// lease statement and every fenced write starts with this.
macro_rules! locked_item {
    () => {
        "WITH prev AS MATERIALIZED (
            SELECT id, deleted_at, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at,
                   lease_renewed_at, lease_expires_at, lease_ttl_seconds, lease_note, lease_note_holder,
                   lease_id, lease_note_lease_id
            FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3
            FOR UPDATE
        ),
        cur AS MATERIALIZED (SELECT prev.*, clock_timestamp() AS db_now FROM prev)"
    };
}

/// The lease a lease statement wrote, read back by [`rows::written_lease`].
macro_rules! returning_lease {
    () => {
        "RETURNING i.lease_holder AS new_holder, i.lease_user_id AS new_user_id, i.lease_session_id AS new_session_id,
                   i.lease_epoch AS new_epoch, i.lease_acquired_at AS new_acquired_at,
                   i.lease_renewed_at AS new_renewed_at, i.lease_expires_at AS new_expires_at,
                   i.lease_ttl_seconds AS new_ttl_seconds, i.lease_id AS new_lease_id"
    };
}

/// L18: the `SET` list that makes the lease in a row's `lease_*` columns
/// (as they were before the statement) its last lease, ended by expiry at
/// its `expires_at`. `$p` prefixes the old columns.
macro_rules! expired_as_last {
    ($p:literal) => {
        concat!(
            "last_lease_id = ",
            $p,
            "lease_id, last_lease_epoch = ",
            $p,
            "lease_epoch, ",
            "last_lease_holder = ",
            $p,
            "lease_holder, last_lease_session_id = ",
            $p,
            "lease_session_id, ",
            "last_lease_acquired_at = ",
            $p,
            "lease_acquired_at, last_lease_ended_at = ",
            $p,
            "lease_expires_at, ",
            "last_lease_ended = 'expired', ",
            "last_lease_note = CASE WHEN ",
            $p,
            "lease_note_lease_id = ",
            $p,
            "lease_id THEN ",
            $p,
            "lease_note END"
        )
    };
}

/// L1-L3, L12, L13 in one statement. Writes when there is no live lease
/// (grant: next epoch, `acquired_at = now`) or it is the claimant's own
/// (refresh: epoch and `acquired_at` kept; only if $9 allows it, L17). A grant
/// takes the next lease id and, over an expired lease, records that lease as
/// the last one (L18). $4 user, $5 holder, $6 session, $7 ttl seconds, $8 note,
/// $9 refresh.
const CLAIM: &str = concat!(
    locked_item!(),
    ",
    d AS MATERIALIZED (
        SELECT cur.*,
            (cur.lease_holder IS NOT NULL AND cur.lease_expires_at > cur.db_now) AS live,
            (cur.lease_user_id = $4 AND cur.lease_holder = $5 AND cur.lease_session_id IS NOT DISTINCT FROM $6) AS mine,
            (cur.lease_holder IS NOT NULL AND cur.lease_expires_at <= cur.db_now) AS expired_prev,
            CASE WHEN cur.lease_holder IS NULL OR cur.lease_expires_at <= cur.db_now
                THEN nextval('lease_ids') END AS grant_lease_id
        FROM cur
    ),
    upd AS (
        UPDATE items i SET
            lease_holder = $5, lease_user_id = $4, lease_session_id = $6,
            lease_id = COALESCE(d.grant_lease_id, d.lease_id),
            lease_note_lease_id = CASE WHEN $8 IS NULL THEN i.lease_note_lease_id
                ELSE COALESCE(d.grant_lease_id, d.lease_id) END,
            last_lease_id = CASE WHEN d.expired_prev THEN d.lease_id ELSE i.last_lease_id END,
            last_lease_epoch = CASE WHEN d.expired_prev THEN d.lease_epoch ELSE i.last_lease_epoch END,
            last_lease_holder = CASE WHEN d.expired_prev THEN d.lease_holder ELSE i.last_lease_holder END,
            last_lease_session_id = CASE WHEN d.expired_prev THEN d.lease_session_id ELSE i.last_lease_session_id END,
            last_lease_acquired_at = CASE WHEN d.expired_prev THEN d.lease_acquired_at ELSE i.last_lease_acquired_at END,
            last_lease_ended_at = CASE WHEN d.expired_prev THEN d.lease_expires_at ELSE i.last_lease_ended_at END,
            last_lease_ended = CASE WHEN d.expired_prev THEN 'expired' ELSE i.last_lease_ended END,
            last_lease_note = CASE WHEN d.expired_prev
                THEN CASE WHEN d.lease_note_lease_id = d.lease_id THEN d.lease_note END
                ELSE i.last_lease_note END,
            lease_epoch = CASE WHEN d.live THEN d.lease_epoch ELSE d.lease_epoch + 1 END,
            lease_acquired_at = CASE WHEN d.live THEN d.lease_acquired_at ELSE d.db_now END,
            lease_renewed_at = d.db_now,
            lease_expires_at = d.db_now + $7 * interval '1 second',
            lease_ttl_seconds = $7,
            lease_expiries = i.lease_expiries + CASE WHEN d.lease_holder IS NOT NULL AND NOT d.live THEN 1 ELSE 0 END,
            lease_note = COALESCE($8, i.lease_note),
            lease_note_holder = CASE WHEN $8 IS NULL THEN i.lease_note_holder ELSE $5 END
        FROM d
        WHERE i.id = d.id AND d.deleted_at IS NULL AND (NOT d.live OR (d.mine AND $9))
        ",
    returning_lease!(),
    ", i.lease_expiries AS new_expiries, i.labels AS new_labels
    )
    SELECT d.*, upd.* FROM d LEFT JOIN upd ON true"
);

/// L4 in one statement: extends only a live lease with this epoch and/or
/// lease id (L17), holder and user. $4 user, $5 holder, $6 epoch or NULL, $7
/// ttl seconds or NULL (keep), $8 note, $9 lease id or NULL.
const RENEW: &str = concat!(
    locked_item!(),
    ",
    upd AS (
        UPDATE items i SET
            lease_renewed_at = cur.db_now,
            lease_ttl_seconds = COALESCE($7, cur.lease_ttl_seconds),
            lease_expires_at = cur.db_now + COALESCE($7, cur.lease_ttl_seconds) * interval '1 second',
            lease_note = COALESCE($8, i.lease_note),
            lease_note_holder = CASE WHEN $8 IS NULL THEN i.lease_note_holder ELSE i.lease_holder END,
            lease_note_lease_id = CASE WHEN $8 IS NULL THEN i.lease_note_lease_id ELSE i.lease_id END
        FROM cur
        WHERE i.id = cur.id AND cur.deleted_at IS NULL
          AND cur.lease_holder IS NOT NULL AND cur.lease_expires_at > cur.db_now
          AND ($6::bigint IS NULL OR cur.lease_epoch = $6) AND ($9::bigint IS NULL OR cur.lease_id = $9)
          AND cur.lease_user_id = $4 AND cur.lease_holder = $5
        ",
    returning_lease!(),
    "
    )
    SELECT cur.*, upd.* FROM cur LEFT JOIN upd ON true"
);

/// L6/L7 in one statement: clears a live lease that is ours (and has the
/// given epoch and lease id, if given), or any live lease when forced. The
/// ended lease becomes the last lease, released or broken (L18). The epoch
/// counter stays. $4 user, $5 holder, $6 epoch or NULL, $7 force, $8 lease id or NULL.
const RELEASE: &str = concat!(
    locked_item!(),
    ",
    d AS MATERIALIZED (
        SELECT cur.*, (cur.lease_user_id = $4 AND cur.lease_holder = $5
            AND ($6::bigint IS NULL OR cur.lease_epoch = $6) AND ($8::bigint IS NULL OR cur.lease_id = $8)) AS ours
        FROM cur
    ),
    upd AS (
        UPDATE items i SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL,
            lease_acquired_at = NULL, lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL,
            last_lease_id = d.lease_id, last_lease_epoch = d.lease_epoch, last_lease_holder = d.lease_holder,
            last_lease_session_id = d.lease_session_id, last_lease_acquired_at = d.lease_acquired_at,
            last_lease_ended_at = d.db_now,
            last_lease_ended = CASE WHEN d.ours THEN 'released' ELSE 'broken' END,
            last_lease_note = CASE WHEN d.lease_note_lease_id = d.lease_id THEN d.lease_note END
        FROM d
        WHERE i.id = d.id AND d.lease_holder IS NOT NULL AND d.lease_expires_at > d.db_now
          AND ($7 OR d.ours)
        RETURNING i.id
    )
    SELECT d.*, upd.id IS NOT NULL AS cleared FROM d LEFT JOIN upd ON true"
);

/// Locks an item for a content write (and its L10 fence check).
const LOCK_ITEM: &str = concat!(locked_item!(), " SELECT * FROM cur");

/// L5/L13 on a row the caller has locked: forgets a lease that has expired
/// and counts the expiry. $1 item id, $2 the caller's clock.
const EXPIRE: &str = concat!(
    "UPDATE items SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL,
        lease_acquired_at = NULL, lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL,
        lease_expiries = lease_expiries + 1, ",
    expired_as_last!(""),
    " WHERE id = $1 AND lease_holder IS NOT NULL AND lease_expires_at <= $2
    RETURNING lease_expiries, labels"
);

/// L5/L13 for every instance's background observer: takes expired leases
/// no one else is handling (`SKIP LOCKED`), forgets and counts them. A claim
/// or release that locked the row first records the expiry itself, and the
/// re-check after the lock skips rows that were claimed again, so each
/// expiry is recorded exactly once across instances.
const OBSERVE_EXPIRED: &str = concat!(
    "WITH expired AS MATERIALIZED (
        SELECT id, lease_holder, lease_epoch, lease_acquired_at, lease_expires_at FROM items
        WHERE lease_holder IS NOT NULL AND lease_expires_at <= now()
        ORDER BY lease_expires_at LIMIT 500
        FOR UPDATE SKIP LOCKED
    )
    UPDATE items i SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL,
        lease_acquired_at = NULL, lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL,
        lease_expiries = i.lease_expiries + 1, ",
    expired_as_last!("i."),
    "
    FROM expired e, workspaces w
    WHERE i.id = e.id AND w.id = i.workspace_id
    RETURNING i.id, i.workspace_id, w.slug, i.prefix, i.number, e.lease_holder, e.lease_epoch,
        e.lease_acquired_at, e.lease_expires_at, i.lease_expiries, i.labels, w.quarantine_after_expiries, now() AS db_now"
);

/// Event ids must become visible in id order, or a reader paging by
/// `after = last id` (SSE resume) could skip an event whose transaction
/// committed after a later id's. Without serializing writers: an event's id
/// is its transaction's id times [`EVENTS_PER_TRANSACTION`] plus its index
/// in the transaction ([`INSERT_EVENT`]), and readers serve only ids below
/// the oldest transaction that may still write one ([`EVENTS_AFTER`]). Every
/// event that can still commit has a larger id than any id served, so none is
/// skipped (docs/api.md, "Event order on PostgreSQL").
const EVENTS_PER_TRANSACTION: i64 = 65_536;

/// Appends one event. $1 workspace, $2 type, $3 ref, $4 actor, $5 at, $6 data.
/// Inserts nothing (and the caller errs) past [`EVENTS_PER_TRANSACTION`].
/// The next index is one past this transaction's last event, found by one
/// backward step of the primary key within the transaction's id range.
const INSERT_EVENT: &str = "WITH tx AS (SELECT pg_current_xact_id()::text::bigint * 65536 AS base),
    slot AS (
        SELECT tx.base,
            COALESCE((SELECT max(id) FROM events WHERE id >= tx.base AND id < tx.base + 65536) - tx.base + 1, 0) AS n
        FROM tx
    )
    INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
    SELECT slot.base + slot.n, $1, $2, $3, $4, $5, $6 FROM slot WHERE slot.n < 65536";

/// The head of a workspace's event page, oldest first, stopping below
/// the visibility horizon: the oldest transaction that was running when this
/// statement's snapshot was taken and may write events, i.e. all of them but
/// those another backend type or another database owns, which never write
/// pad's events (known by their `backend_xid`; unknown ones count). With no
/// such transaction, the snapshot's `xmax`: no transaction that starts
/// writing later can take a smaller id.
const EVENTS_AFTER: &str = "WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
    others AS MATERIALIZED (
        SELECT a.backend_xid FROM pg_stat_activity a
        WHERE a.backend_xid IS NOT NULL
          AND (a.backend_type <> 'client backend'
               OR a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))
    ),
    horizon AS MATERIALIZED (
        SELECT COALESCE(
            (SELECT min(x::text::bigint) FROM snap, pg_snapshot_xip(snap.s) AS x
             WHERE NOT EXISTS (SELECT 1 FROM others o WHERE o.backend_xid = xid(x))),
            (SELECT pg_snapshot_xmax(snap.s)::text::bigint FROM snap)
        ) * 65536 AS below
    )
    SELECT e.id, e.type, e.item_ref, u.email, e.at, e.data
    FROM events e CROSS JOIN horizon h LEFT JOIN users u ON u.id = e.actor_id
    WHERE e.id < h.below AND e.workspace_id = ";

/// The class of the per-workspace advisory lock that blocker changes take
/// (two-key form, which does not overlap [`EVENTS_LOCK_KEY`]'s one-key space).
const BLOCKERS_LOCK_CLASS: i32 = 0x7061_6462; // "padb"

/// One recorded expiry, for [`PgStore::record_expiry`].
struct Expiry {
    ws: i64,
    threshold: u32,
    item: i64,
    item_ref: ItemRef,
    holder: String,
    epoch: i64,
    expired_at: Timestamp,
    /// The count and labels after the expiry was counted.
    expiries: i64,
    labels: Vec<String>,
}

/// The SQL predicate and `pad_core::lease` are two encodings of one rule: the
/// statement decides atomically, the rule says what the answer means. If they
/// ever disagree the error drops the transaction, so it rolls back.
fn agree(wrote: Option<&Lease>, decided: Option<&Lease>) -> StoreResult<()> {
    if wrote == decided { Ok(()) } else { Err(disagree(wrote, decided)) }
}

fn disagree(wrote: impl std::fmt::Debug, decided: impl std::fmt::Debug) -> StoreError {
    StoreError::Internal(format!("lease statement and lease rule disagree: wrote {wrote:?}, rule decided {decided:?}"))
}

/// An item row under our lock, with the clock read after taking it.
struct Locked {
    id: i64,
    deleted: bool,
    slot: LeaseSlot,
    now: Timestamp,
}

impl Locked {
    fn from_row(row: Option<&PgRow>, r: &ItemRef) -> StoreResult<Self> {
        let row = row.ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
        Ok(Locked {
            id: row.get("id"),
            deleted: row.get::<Option<Timestamp>, _>("deleted_at").is_some(),
            slot: rows::lease_slot(row)?,
            now: row.get("db_now"),
        })
    }

    /// Deleted items take no leases and no edits.
    fn live(self, r: &ItemRef) -> StoreResult<Self> {
        if self.deleted { Err(StoreError::not_found(format!("item {r} (deleted)"))) } else { Ok(self) }
    }
}

fn max_connections_from_env() -> StoreResult<u32> {
    match std::env::var("PAD_PG_MAX_CONNECTIONS") {
        Err(_) => Ok(DEFAULT_MAX_CONNECTIONS),
        Ok(v) => v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            StoreError::invalid("PAD_PG_MAX_CONNECTIONS", format!("{v:?} is not a positive number of connections"))
        }),
    }
}

impl PgStore {
    /// Connects to `postgres://…` / `postgresql://…`, applies migrations, and
    /// pools up to `PAD_PG_MAX_CONNECTIONS` (default 16) connections.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, max_connections_from_env()?).await
    }

    pub async fn open_with(url: &str, max_connections: u32) -> StoreResult<Self> {
        let opts = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::invalid("database_url", format!("not a PostgreSQL URL: {e}")))?;
        Self::migrate(&opts).await?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // Pings a pooled connection before use, so connections that died
            // with a database restart are replaced instead of failing a request.
            .test_before_acquire(true)
            .connect_lazy_with(opts);
        Ok(PgStore { pool })
    }

    /// Runs migrations on a one-connection pool of their own. sqlx's migrator
    /// holds a session-level advisory lock (`pg_advisory_lock`, keyed by the
    /// database name) while it works, so instances starting at once apply
    /// each migration exactly once; should it fail half-way, closing this
    /// pool ends the session, so the lock never rides into the serving pool.
    async fn migrate(opts: &PgConnectOptions) -> StoreResult<()> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(opts.clone())
            .await
            .map_err(db)?;
        let result = MIGRATOR.run(&pool).await;
        pool.close().await;
        result.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e) => db(e),
            e => StoreError::Internal(format!("migrations: {e}")),
        })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// One token insert, under the per-user cap (docs/api.md, "Tokens"). The
    /// user's row lock serializes concurrent mints of one user, so the cap
    /// holds across instances.
    async fn insert_token(
        &self,
        user: Actor,
        name: &str,
        hash: &str,
        scope: Option<(i64, Role)>,
    ) -> StoreResult<TokenInfo> {
        validate::text("name", name, 1, 200, Lines::Single)?;
        let mut tx = self.begin().await?;
        sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
            .bind(user.user_id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let live: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE user_id = $1 AND revoked_at IS NULL")
            .bind(user.user_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        shared::too_many_tokens(live)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO tokens (user_id, name, hash, created_at, workspace_id, role)
             VALUES ($1, $2, $3, now(), $4, $5) RETURNING id",
        )
        .bind(user.user_id)
        .bind(name)
        .bind(hash)
        .bind(scope.map(|s| s.0))
        .bind(scope.map(|s| s.1.as_str()))
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let sql = format!("{} WHERE t.id = $1", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        rows::token_from_row(&row)
    }

    async fn begin(&self) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
        self.pool.begin().await.map_err(db)
    }

    async fn lock_item(conn: &mut PgConnection, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked> {
        let row = sqlx::query(LOCK_ITEM)
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
        Locked::from_row(row.as_ref(), r)
    }

    async fn load_item(conn: &mut PgConnection, id: i64, now: Timestamp) -> StoreResult<Item> {
        let sql = format!("{ITEM_SELECT} WHERE i.id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *conn).await.map_err(db)?;
        item_from_row(&row, now)
    }

    async fn find_id(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT id FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3")
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))
    }

    async fn item_id(conn: &mut PgConnection, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT id FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3 AND deleted_at IS NULL",
        )
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid(field, format!("{r} does not exist in this workspace")))
    }

    async fn member_id(conn: &mut PgConnection, ws: &Workspace, field: &str, email: &str) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT u.id FROM users u JOIN members m ON m.user_id = u.id WHERE m.workspace_id = $1 AND u.email = $2",
        )
        .bind(ws.id)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid(field, format!("{email} is not a member of this workspace")))
    }

    async fn set_blockers(conn: &mut PgConnection, ws: &Workspace, item: i64, blockers: &[ItemRef]) -> StoreResult<()> {
        sqlx::query("DELETE FROM item_blockers WHERE item_id = $1").bind(item).execute(&mut *conn).await.map_err(db)?;
        for (i, b) in blockers.iter().enumerate() {
            let bid = Self::item_id(conn, ws, &format!("blocked_by[{i}]"), b).await?;
            sqlx::query("INSERT INTO item_blockers (item_id, blocker_id) VALUES ($1, $2)")
                .bind(item)
                .bind(bid)
                .execute(&mut *conn)
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    /// The `(item, blocker)` links reachable from `item` through blockers,
    /// for [`shared::check_blockers_acyclic`].
    async fn blocker_edges(conn: &mut PgConnection, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>> {
        let rows = sqlx::query(
            "WITH RECURSIVE reach(id) AS (SELECT $1::bigint UNION SELECT b.blocker_id FROM item_blockers b JOIN reach r ON b.item_id = r.id)
             SELECT i.prefix AS ip, i.number AS inum, j.prefix AS bp, j.number AS bnum
             FROM reach r JOIN item_blockers b ON b.item_id = r.id JOIN items i ON i.id = b.item_id JOIN items j ON j.id = b.blocker_id",
        )
        .bind(item)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    ItemRef { prefix: row.get("ip"), number: row.get("inum") },
                    ItemRef { prefix: row.get("bp"), number: row.get("bnum") },
                )
            })
            .collect())
    }

    /// The item's row is locked (or just inserted) by the caller, so
    /// `MAX(version) + 1` cannot race.
    async fn add_version(
        conn: &mut PgConnection,
        id: i64,
        actor: Actor,
        changes: serde_json::Map<String, serde_json::Value>,
        at: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO item_versions (item_id, version, actor_id, at, changes)
             VALUES ($1, (SELECT COALESCE(MAX(version), 0) + 1 FROM item_versions WHERE item_id = $1), $2, $3, $4)",
        )
        .bind(id)
        .bind(actor.user_id)
        .bind(at)
        .bind(serde_json::Value::Object(changes))
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    /// Appends to the event log; see [`EVENTS_PER_TRANSACTION`] for its ids.
    async fn event(
        conn: &mut PgConnection,
        ws: i64,
        kind: EventKind,
        item_ref: &ItemRef,
        actor: Option<Actor>,
        at: Timestamp,
        data: serde_json::Value,
    ) -> StoreResult<()> {
        let written = sqlx::query(INSERT_EVENT)
            .bind(ws)
            .bind(kind.as_str())
            .bind(item_ref.to_string())
            .bind(actor.map(|a| a.user_id))
            .bind(at)
            .bind(data)
            .execute(&mut *conn)
            .await
            .map_err(db)?
            .rows_affected();
        if written != 1 {
            return Err(StoreError::Internal(format!("more than {EVENTS_PER_TRANSACTION} events in one transaction")));
        }
        webhooks::enqueue(conn, ws, kind).await?;
        Ok(())
    }

    async fn set_deleted(
        &self,
        ws: &Workspace,
        actor: Actor,
        item_ref: &str,
        fence: LeaseHandle,
        deleted: bool,
    ) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let mut tx = self.begin().await?;
        let locked = Self::lock_item(&mut tx, ws, &r).await?;
        let now = locked.now;
        lease::check_fence(&locked.slot, fence, now).map_err(|live| StoreError::lost(live, now))?;
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        if locked.deleted == deleted {
            return Ok(old);
        }
        let at: Timestamp = sqlx::query_scalar(
            "UPDATE items SET deleted_at = CASE WHEN $2 THEN $3 END,
                    updated_at = GREATEST($3, updated_at + interval '1 microsecond'), version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(locked.id)
        .bind(deleted)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let new = Self::load_item(&mut tx, locked.id, now).await?;
        Self::add_version(&mut tx, locked.id, actor, new.changes_since(Some(&old)), at).await?;
        let kind = if deleted { EventKind::ItemDeleted } else { EventKind::ItemRestored };
        Self::event(&mut tx, ws.id, kind, &r, Some(actor), at, serde_json::json!({})).await?;
        tx.commit().await.map_err(db)?;
        Ok(new)
    }
}

#[async_trait]
impl Store for PgStore {
    async fn now(&self) -> StoreResult<Timestamp> {
        sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(&self.pool).await.map_err(db)
    }

    async fn has_users(&self) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users)").fetch_one(&self.pool).await.map_err(db)
    }

    async fn ensure_user(&self, email: &str) -> StoreResult<User> {
        validate::email("email", email)?;
        let mut conn = self.pool.acquire().await.map_err(db)?;
        rows::ensure_user(&mut conn, email).await
    }

    async fn create_workspace(&self, slug: &str, name: &str, owner: Actor) -> StoreResult<Workspace> {
        validate_slug("slug", slug)?;
        validate::text("name", name, 1, 200, Lines::Single)?;
        let mut tx = self.begin().await?;
        // `DO NOTHING` waits for a concurrent insert of the same slug and then
        // skips: two instances bootstrapping at once get one workspace, and the
        // loser a validation error it can recognize.
        let row = sqlx::query(
            "INSERT INTO workspaces (slug, name, created_at) VALUES ($1, $2, now())
             ON CONFLICT (slug) DO NOTHING RETURNING *",
        )
        .bind(slug)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid("slug", format!("workspace {slug:?} already exists")))?;
        let ws = rows::workspace_from_row(&row)?;
        sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, 'owner', now())")
            .bind(ws.id)
            .bind(owner.user_id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for (kind, prefix) in DEFAULT_KINDS {
            sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3)")
                .bind(ws.id)
                .bind(kind)
                .bind(prefix)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(ws)
    }

    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
        let rows = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = $1 ORDER BY w.slug")
            .bind(user.user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(|r| Ok((rows::workspace_from_row(r)?, rows::role(r)?))).collect()
    }

    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
        validate_slug("workspace", slug)?;
        let row = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = $1 AND w.slug = $2")
            .bind(user.user_id)
            .bind(slug)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("workspace {slug}")))?;
        Ok((rows::workspace_from_row(&row)?, rows::role(&row)?))
    }

    async fn set_member(&self, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
        validate::email("email", email)?;
        let mut tx = self.begin().await?;
        // Serializes membership changes per workspace, so two concurrent
        // demotions cannot both see "another owner remains".
        sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
            .bind(ws.id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let user = rows::ensure_user(&mut tx, email).await?;
        let current: Option<String> =
            sqlx::query_scalar("SELECT role FROM members WHERE workspace_id = $1 AND user_id = $2")
                .bind(ws.id)
                .bind(user.id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
        if current.as_deref() == Some("owner") && role != Role::Owner {
            let owners: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'owner'")
                    .bind(ws.id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
            if owners <= 1 {
                return Err(StoreError::invalid("role", "a workspace needs at least one owner"));
            }
        }
        let added: Timestamp = sqlx::query_scalar(
            "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, $3, now())
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role RETURNING added_at",
        )
        .bind(ws.id)
        .bind(user.id)
        .bind(role.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Member { email: user.email, role, added_at: added })
    }

    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>> {
        let rows = sqlx::query("SELECT u.email, m.role, m.added_at FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 ORDER BY m.added_at, u.id")
            .bind(ws.id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|r| Ok(Member { email: r.get("email"), role: rows::role(r)?, added_at: r.get("added_at") }))
            .collect()
    }

    async fn remove_member(&self, ws: &Workspace, email: &str) -> StoreResult<()> {
        validate::email("email", email)?;
        let mut tx = self.begin().await?;
        // Serializes membership changes per workspace, as set_member does.
        sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
            .bind(ws.id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let row = sqlx::query(
            "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 AND u.email = $2",
        )
        .bind(ws.id)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("member {email}")))?;
        let user: i64 = row.get("user_id");
        if rows::role(&row)? == Role::Owner {
            let owners: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'owner'")
                    .bind(ws.id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
            if owners <= 1 {
                return Err(StoreError::invalid("email", "a workspace needs at least one owner"));
            }
        }
        sqlx::query("DELETE FROM members WHERE workspace_id = $1 AND user_id = $2")
            .bind(ws.id)
            .bind(user)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query(
            "UPDATE tokens SET revoked_at = now() WHERE user_id = $1 AND workspace_id = $2 AND revoked_at IS NULL",
        )
        .bind(user)
        .bind(ws.id)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn create_token(&self, user: Actor, name: &str, hash: &str) -> StoreResult<TokenInfo> {
        self.insert_token(user, name, hash, None).await
    }

    async fn create_scoped_token(
        &self,
        user: Actor,
        name: &str,
        hash: &str,
        ws: &Workspace,
        role: Role,
    ) -> StoreResult<TokenInfo> {
        self.insert_token(user, name, hash, Some((ws.id, role))).await
    }

    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
        let sql = format!(
            "{} WHERE t.revoked_at IS NULL AND (t.workspace_id = $1 OR t.user_id = $2) ORDER BY t.id",
            rows::TOKEN_SELECT
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ws.id)
            .bind(user.user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(rows::token_from_row).collect()
    }

    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo> {
        let sql = format!("{} WHERE t.revoked_at IS NULL AND t.id = $1", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("token {id}")))?;
        rows::token_from_row(&row)
    }

    async fn revoke_token(&self, id: i64) -> StoreResult<()> {
        sqlx::query("UPDATE tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email,
                    (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute') AS stale
             FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1 AND t.revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        // Record use at most once a minute, so authentication stays off the
        // write path; the repeated condition makes concurrent first uses
        // (one token, many instances) write once.
        if row.get::<bool, _>("stale") {
            sqlx::query(
                "UPDATE tokens SET last_used_at = now()
                 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
            )
            .bind(row.get::<i64, _>("token_id"))
            .execute(&self.pool)
            .await
            .map_err(db)?;
        }
        Ok(Some(rows::principal_from_row(&row)?))
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        validate::email("email", email)?;
        let email = email.to_lowercase();
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
            .bind(&email)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        Ok(id.map(|id| User { id, email }))
    }

    async fn bootstrap(&self, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
        validate::email("email", email)?;
        validate_slug("slug", slug)?;
        let mut tx = self.begin().await?;
        // Instances starting at once on an empty database: the first takes
        // the lock and bootstraps, the others wait and then see its user.
        sqlx::query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE").execute(&mut *tx).await.map_err(db)?;
        let any: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users)").fetch_one(&mut *tx).await.map_err(db)?;
        if any {
            return Ok(false);
        }
        let user = rows::ensure_user(&mut tx, email).await?;
        shared::failpoint("bootstrap-user");
        let ws: i64 =
            sqlx::query_scalar("INSERT INTO workspaces (slug, name, created_at) VALUES ($1, $2, now()) RETURNING id")
                .bind(slug)
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
        sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, 'owner', now())")
            .bind(ws)
            .bind(user.id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for (kind, prefix) in DEFAULT_KINDS {
            sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3)")
                .bind(ws)
                .bind(kind)
                .bind(prefix)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        shared::failpoint("bootstrap-workspace");
        sqlx::query("INSERT INTO tokens (user_id, name, hash, created_at) VALUES ($1, 'bootstrap', $2, now())")
            .bind(user.id)
            .bind(hash)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        shared::failpoint("bootstrap-token");
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO sessions (hash, token_id, created_at, expires_at)
             VALUES ($1, $2, now(), now() + make_interval(secs => $3))",
        )
        .bind(hash)
        .bind(token_id)
        .bind(ttl_seconds as f64)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email
             FROM sessions s JOIN tokens t ON t.id = s.token_id JOIN users u ON u.id = t.user_id
             WHERE s.hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND t.revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.as_ref().map(rows::principal_from_row).transpose()
    }

    async fn revoke_session(&self, hash: &str) -> StoreResult<()> {
        sqlx::query("UPDATE sessions SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL")
            .bind(hash)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn update_settings(
        &self,
        ws: &Workspace,
        patch: &pad_core::settings::SettingsPatch,
    ) -> StoreResult<Workspace> {
        self.update_settings_tx(ws, patch).await
    }

    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>> {
        let rows = sqlx::query("SELECT name, prefix FROM kinds WHERE workspace_id = $1 ORDER BY position")
            .bind(ws.id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| Kind { name: r.get("name"), prefix: r.get("prefix") }).collect())
    }

    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
        validate_kind_name("name", name)?;
        validate_prefix("prefix", prefix)?;
        // Insert first and explain afterwards: a clash check before the insert
        // could pass for two concurrent adds of the same kind.
        let added =
            sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                .bind(ws.id)
                .bind(name)
                .bind(prefix)
                .execute(&self.pool)
                .await
                .map_err(db)?
                .rows_affected();
        if added == 0 {
            let existing: String =
                sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = $1 AND (name = $2 OR prefix = $3)")
                    .bind(ws.id)
                    .bind(name)
                    .bind(prefix)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db)?;
            return Err(StoreError::invalid(
                if existing == name { "name" } else { "prefix" },
                format!("clashes with kind {existing:?}"),
            ));
        }
        Ok(Kind { name: name.into(), prefix: prefix.into() })
    }

    async fn create_item(&self, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item> {
        let v = new.validate()?;
        let mut tx = self.begin().await?;
        let parent = match &v.parent {
            Some(p) => Some(Self::item_id(&mut tx, ws, "parent", p).await?),
            None => None,
        };
        let assignee = match &v.assignee {
            Some(a) => Some(Self::member_id(&mut tx, ws, "assignee", a).await?),
            None => None,
        };
        // The kind's row lock serializes creates per prefix until commit, so
        // numbers are distinct; a refused create rolls its number back.
        let counter = sqlx::query(
            "UPDATE kinds SET next_number = next_number + 1 WHERE workspace_id = $1 AND name = $2
             RETURNING prefix, next_number - 1 AS number, clock_timestamp() AS db_now",
        )
        .bind(ws.id)
        .bind(&v.kind)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?
        .ok_or_else(|| shared::unknown_kind(&v.kind))?;
        let now: Timestamp = counter.get("db_now");
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, labels, parent_id, assignee_id, created_by, created_at, updated_at, not_before)
             VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $8, $9, $10, $11, $12, $12, $13) RETURNING id",
        )
        .bind(ws.id)
        .bind(counter.get::<String, _>("prefix"))
        .bind(counter.get::<i64, _>("number"))
        .bind(&v.kind)
        .bind(&v.title)
        .bind(&v.body)
        .bind(v.priority.rank())
        .bind(&v.labels)
        .bind(parent)
        .bind(assignee)
        .bind(actor.user_id)
        .bind(now)
        .bind(v.not_before)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        Self::set_blockers(&mut tx, ws, id, &v.blocked_by).await?;
        let item = Self::load_item(&mut tx, id, now).await?;
        Self::add_version(&mut tx, id, actor, item.changes_since(None), now).await?;
        let data = shared::event::created(&item);
        Self::event(&mut tx, ws.id, EventKind::ItemCreated, &item.item_ref, Some(actor), now, data).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn get_item(&self, ws: &Workspace, item_ref: &str) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let sql = format!("{ITEM_SELECT} WHERE i.workspace_id = $1 AND i.prefix = $2 AND i.number = $3");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
        item_from_row(&row, row.get("db_now"))
    }

    async fn list_items(
        &self,
        ws: &Workspace,
        filter: &ItemFilter,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<Item>> {
        let (after, limit) = shared::list_window(filter, limit, cursor)?;
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(ITEM_SELECT);
        qb.push(" WHERE i.workspace_id = ").push_bind(ws.id).push(" AND i.id > ").push_bind(after);
        if !filter.include_deleted {
            qb.push(" AND i.deleted_at IS NULL");
        }
        if !filter.status.is_empty() {
            let status: Vec<&str> = filter.status.iter().map(|s| s.as_str()).collect();
            qb.push(" AND i.status = ANY(").push_bind(status).push(")");
        }
        if !filter.kind.is_empty() {
            let kinds: Vec<String> = filter.kind.iter().map(|k| k.to_ascii_lowercase()).collect();
            qb.push(" AND i.kind = ANY(").push_bind(kinds).push(")");
        }
        if !filter.priority.is_empty() {
            let ranks: Vec<i64> = filter.priority.iter().map(|p| p.rank()).collect();
            qb.push(" AND i.priority = ANY(").push_bind(ranks).push(")");
        }
        if !filter.labels.is_empty() {
            qb.push(" AND i.labels @> ").push_bind(filter.labels.clone());
        }
        if let Some(a) = &filter.assignee {
            qb.push(" AND a.email = ").push_bind(a.to_lowercase());
        }
        if let Some(p) = &filter.parent {
            push_parent(&mut qb, ws, p);
        }
        // The same statement's now() as `db_now`, so the filter and each
        // item's `lease` agree (L5).
        match filter.leased {
            Some(true) => {
                qb.push(" AND i.lease_holder IS NOT NULL AND i.lease_expires_at > now()");
            }
            Some(false) => {
                qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= now())");
            }
            None => {}
        }
        if let Some(q) = &filter.q {
            let q = q.to_lowercase();
            qb.push(" AND (strpos(lower(i.title), ")
                .push_bind(q.clone())
                .push(") > 0 OR strpos(lower(i.body), ")
                .push_bind(q)
                .push(") > 0)");
        }
        qb.push(" ORDER BY i.id LIMIT ").push_bind(i64::from(limit) + 1);
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db)?;
        let mut items = Vec::with_capacity(rows.len());
        let mut last_id: i64 = 0;
        for row in rows.iter().take(limit as usize) {
            last_id = row.get("id");
            items.push(item_from_row(row, row.get("db_now"))?);
        }
        let next_cursor = (rows.len() > limit as usize).then(|| last_id.to_string());
        Ok(Page { items, next_cursor })
    }

    async fn update_item(&self, ws: &Workspace, actor: Actor, item_ref: &str, patch: &ItemPatch) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let p = patch.validate()?;
        let mut tx = self.begin().await?;
        if p.blocked_by.is_some() {
            // Two updates locking different rows could each add one half of a
            // cycle, so blocker changes in a workspace take turns. The turn is
            // taken before the row lock: a blocker link takes a key-share lock
            // on the blocker's row, and waiting for the turn while holding a
            // row another turn-holder links to would deadlock.
            sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
                .bind(BLOCKERS_LOCK_CLASS)
                .bind(ws.id as i32)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        let locked = Self::lock_item(&mut tx, ws, &r).await?.live(&r)?;
        let now = locked.now;
        // L10: the row is locked until commit, so the fence holds for the write.
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        let Some((new, changes)) = shared::plan_update(&locked.slot, &old, &p, now)? else { return Ok(old) };
        if new.kind != old.kind {
            let known: Option<String> =
                sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = $1 AND name = $2")
                    .bind(ws.id)
                    .bind(&new.kind)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db)?;
            known.ok_or_else(|| shared::unknown_kind(&new.kind))?;
        }
        let parent = match &new.parent {
            Some(pr) => {
                let pid = Self::item_id(&mut tx, ws, "parent", pr).await?;
                // Refuse cycles: walk up from the new parent.
                let cycle: bool = sqlx::query_scalar(
                    "WITH RECURSIVE up(id) AS (SELECT $1::bigint UNION SELECT i.parent_id FROM items i JOIN up ON i.id = up.id WHERE i.parent_id IS NOT NULL)
                     SELECT EXISTS (SELECT 1 FROM up WHERE id = $2)",
                )
                .bind(pid)
                .bind(locked.id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
                if cycle {
                    return Err(StoreError::invalid("parent", format!("{pr} is a descendant of {r}")));
                }
                Some(pid)
            }
            None => None,
        };
        let assignee = match &new.assignee {
            Some(a) => Some(Self::member_id(&mut tx, ws, "assignee", a).await?),
            None => None,
        };
        if new.blocked_by != old.blocked_by {
            Self::set_blockers(&mut tx, ws, locked.id, &new.blocked_by).await?;
            shared::check_blockers_acyclic(&r, &Self::blocker_edges(&mut tx, locked.id).await?)?;
        }
        // `updated_at` strictly increases per item even if two writes read the
        // same microsecond or the database clock steps back.
        let at: Timestamp = sqlx::query_scalar(
            "UPDATE items SET title = $2, body = $3, kind = $4, status = $5, priority = $6, labels = $7,
                    parent_id = $8, assignee_id = $9, not_before = $11,
                    updated_at = GREATEST($10, updated_at + interval '1 microsecond'), version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(locked.id)
        .bind(&new.title)
        .bind(&new.body)
        .bind(&new.kind)
        .bind(new.status.as_str())
        .bind(new.priority.rank())
        .bind(&new.labels)
        .bind(parent)
        .bind(assignee)
        .bind(now)
        .bind(new.not_before)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let data = shared::event::updated(&changes);
        Self::add_version(&mut tx, locked.id, actor, changes, at).await?;
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        Self::event(&mut tx, ws.id, EventKind::ItemUpdated, &r, Some(actor), at, data).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn requeue(&self, ws: &Workspace, actor: Actor, item_ref: &str) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let mut tx = self.begin().await?;
        let locked = Self::lock_item(&mut tx, ws, &r).await?.live(&r)?;
        let now = locked.now;
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        let expiries: i64 = sqlx::query_scalar("SELECT lease_expiries FROM items WHERE id = $1")
            .bind(locked.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let Some((new, changes)) = shared::plan_requeue(&old, expiries) else { return Ok(old) };
        let at: Timestamp = sqlx::query_scalar(
            "UPDATE items SET labels = $2, lease_expiries = 0, failures = 0, retry_at = NULL,
                    updated_at = GREATEST($3, updated_at + interval '1 microsecond'), version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(locked.id)
        .bind(&new.labels)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let data = shared::event::updated(&changes);
        Self::add_version(&mut tx, locked.id, actor, changes, at).await?;
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        Self::event(&mut tx, ws.id, EventKind::ItemUpdated, &r, Some(actor), at, data).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn delete_item(&self, ws: &Workspace, actor: Actor, item_ref: &str, fence: LeaseHandle) -> StoreResult<Item> {
        self.set_deleted(ws, actor, item_ref, fence, true).await
    }

    async fn restore_item(&self, ws: &Workspace, actor: Actor, item_ref: &str) -> StoreResult<Item> {
        self.set_deleted(ws, actor, item_ref, LeaseHandle::default(), false).await
    }

    async fn history(&self, ws: &Workspace, item_ref: &str) -> StoreResult<Vec<Version>> {
        let r = parse_ref("ref", item_ref)?;
        let id = self.find_id(ws, &r).await?;
        let rows = sqlx::query("SELECT v.version, u.email, v.at, v.changes FROM item_versions v JOIN users u ON u.id = v.actor_id WHERE v.item_id = $1 ORDER BY v.version DESC")
            .bind(id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| Version {
                version: row.get("version"),
                actor: row.get("email"),
                at: row.get("at"),
                changes: row.get("changes"),
            })
            .collect())
    }

    async fn add_comment(&self, ws: &Workspace, actor: Actor, item_ref: &str, body: &str) -> StoreResult<Comment> {
        let r = parse_ref("ref", item_ref)?;
        pad_core::model::validate_comment(body)?;
        let mut tx = self.begin().await?;
        // Locked so a concurrent delete cannot slip in between check and insert.
        let locked = Self::lock_item(&mut tx, ws, &r).await?.live(&r)?;
        let row = sqlx::query(
            "INSERT INTO comments (item_id, author_id, body, created_at) VALUES ($1, $2, $3, $4)
             RETURNING id, (SELECT email FROM users WHERE id = $2) AS author",
        )
        .bind(locked.id)
        .bind(actor.user_id)
        .bind(body)
        .bind(locked.now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let id: i64 = row.get("id");
        let data = shared::event::commented(id);
        Self::event(&mut tx, ws.id, EventKind::CommentCreated, &r, Some(actor), locked.now, data).await?;
        tx.commit().await.map_err(db)?;
        Ok(Comment { id, author: row.get("author"), body: body.to_string(), created_at: locked.now })
    }

    async fn list_comments(&self, ws: &Workspace, item_ref: &str) -> StoreResult<Vec<Comment>> {
        let r = parse_ref("ref", item_ref)?;
        let id = self.find_id(ws, &r).await?;
        let rows = sqlx::query("SELECT c.id, u.email, c.body, c.created_at FROM comments c JOIN users u ON u.id = c.author_id WHERE c.item_id = $1 ORDER BY c.id")
            .bind(id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| Comment {
                id: row.get("id"),
                author: row.get("email"),
                body: row.get("body"),
                created_at: row.get("created_at"),
            })
            .collect())
    }

    async fn claim(&self, ws: &Workspace, item_ref: &str, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
        let r = parse_ref("ref", item_ref)?;
        let ttl = req.validate(&ws.settings)?;
        let mut tx = self.begin().await?;
        match Self::claim_in(&mut tx, ws, &r, req, ttl).await {
            Ok(claimed) => {
                tx.commit().await.map_err(db)?;
                Ok(claimed.outcome)
            }
            Err(e) => {
                // Drops the row lock now rather than when the pool recycles the connection.
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    async fn renew(&self, ws: &Workspace, item_ref: &str, req: &RenewRequest) -> StoreResult<Lease> {
        let r = parse_ref("ref", item_ref)?;
        let ttl = req.validate(&ws.settings)?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        // One statement, so no transaction: it commits or does nothing.
        let row = sqlx::query(RENEW)
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .bind(req.actor.user_id)
            .bind(&req.holder)
            .bind(req.handle.epoch)
            .bind(ttl.map(ttl_param))
            .bind(&req.note)
            .bind(req.handle.lease_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        let locked = Locked::from_row(row.as_ref(), &r)?.live(&r)?;
        let wrote = rows::written_lease(row.as_ref().expect("Locked::from_row refuses a missing row"))?;
        let now = locked.now;
        match lease::decide_renew(&locked.slot, &claimant, req.handle, ttl, now) {
            RenewDecision::Renewed(l) => {
                agree(wrote.as_ref(), Some(&l))?;
                Ok(l)
            }
            RenewDecision::Lost(live) => {
                agree(wrote.as_ref(), None)?;
                let mut conn = self.pool.acquire().await.map_err(db)?;
                Err(Self::explain_lost(&mut conn, locked.id, req.handle, StoreError::lost(live, now)).await)
            }
            RenewDecision::Held(l) => {
                agree(wrote.as_ref(), None)?;
                Err(StoreError::held(l, now))
            }
        }
    }

    async fn release(&self, ws: &Workspace, item_ref: &str, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome> {
        let r = parse_ref("ref", item_ref)?;
        req.validate()?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        let mut tx = self.begin().await?;
        let row = sqlx::query(RELEASE)
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .bind(req.actor.user_id)
            .bind(&req.holder)
            .bind(req.handle.epoch)
            .bind(req.force)
            .bind(req.handle.lease_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        let locked = Locked::from_row(row.as_ref(), &r)?;
        let cleared: bool = row.as_ref().expect("Locked::from_row refuses a missing row").get("cleared");
        let now = locked.now;
        let decision = lease::decide_release(&locked.slot, &claimant, req.handle, req.force, now);
        let ends = matches!(decision, ReleaseDecision::Released(_) | ReleaseDecision::Broken(_));
        if cleared != ends {
            return Err(disagree(cleared, &decision));
        }
        let (lease, kind, reason) = match decision {
            ReleaseDecision::Released(l) => (l, LeaseEnd::Released, "released"),
            ReleaseDecision::Broken(l) => (l, LeaseEnd::Broken, "broken"),
            refused => {
                // L5/L13: a recorded but expired lease is observed here, once.
                if let (ReleaseDecision::NoLiveLease, Some(old)) = (&refused, &locked.slot.current) {
                    Self::expire_locked(&mut tx, ws, &r, locked.id, old, now).await?;
                }
                // Committing also drops the row lock now.
                tx.commit().await.map_err(db)?;
                return match refused {
                    ReleaseDecision::Held(l) => Err(StoreError::held(l, now)),
                    ReleaseDecision::Lost(l) => Err(StoreError::lost(Some(l), now)),
                    _ => Ok(ReleaseOutcome { released: false, reason: "no live lease", lease: None }),
                };
            }
        };
        if kind == LeaseEnd::Broken {
            Self::record_break(&mut tx, locked.id, &lease, req.reason.as_deref(), req.actor).await?;
        }
        let data = shared::event::ended(&lease, kind, req.reason.as_deref());
        let event = if kind == LeaseEnd::Broken { EventKind::LeaseBroken } else { EventKind::LeaseReleased };
        Self::event(&mut tx, ws.id, event, &r, Some(req.actor), now, data).await?;
        tx.commit().await.map_err(db)?;
        Ok(ReleaseOutcome { released: true, reason, lease: Some(lease) })
    }

    async fn complete(&self, ws: &Workspace, item_ref: &str, req: &CompleteRequest) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        req.validate()?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        let mut tx = self.begin().await?;
        // The row stays locked until commit, so the lease decided on is the one ended.
        let locked = Self::lock_item(&mut tx, ws, &r).await?.live(&r)?;
        let now = locked.now;
        let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
            Ok(l) => l,
            Err(e) => return Err(Self::explain_lost(&mut tx, locked.id, req.handle, shared::end_refused(e, now)).await),
        };
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        if old.status != req.status {
            let new = Item { status: req.status, ..old.clone() };
            let changes = new.changes_since(Some(&old));
            let at: Timestamp = sqlx::query_scalar(
                "UPDATE items SET status = $2, updated_at = GREATEST($3, updated_at + interval '1 microsecond'),
                        version = version + 1
                 WHERE id = $1 RETURNING updated_at",
            )
            .bind(locked.id)
            .bind(req.status.as_str())
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            let data = shared::event::updated(&changes);
            Self::add_version(&mut tx, locked.id, req.actor, changes, at).await?;
            Self::event(&mut tx, ws.id, EventKind::ItemUpdated, &r, Some(req.actor), at, data).await?;
        }
        Self::end_lease(&mut tx, locked.id, LeaseEnd::Completed, now).await?;
        let data = shared::event::ended(&lease, LeaseEnd::Completed, None);
        Self::event(&mut tx, ws.id, EventKind::LeaseReleased, &r, Some(req.actor), now, data).await?;
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn fail(&self, ws: &Workspace, item_ref: &str, req: &FailRequest) -> StoreResult<FailOutcome> {
        let r = parse_ref("ref", item_ref)?;
        let threshold = req.validate(&ws.settings)?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        let mut tx = self.begin().await?;
        let locked = Self::lock_item(&mut tx, ws, &r).await?.live(&r)?;
        let now = locked.now;
        let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
            Ok(l) => l,
            Err(e) => return Err(Self::explain_lost(&mut tx, locked.id, req.handle, shared::end_refused(e, now)).await),
        };
        let failures: i64 = sqlx::query_scalar("SELECT failures + 1 FROM items WHERE id = $1")
            .bind(locked.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let s = &ws.settings;
        let retry_at = now + lease::retry_backoff(failures, s.retry_backoff_base_seconds, s.retry_backoff_max_seconds);
        // The note is the lease's handoff note (L12) and the last failure's.
        let labels: Vec<String> = sqlx::query_scalar(
            "UPDATE items SET failures = $2, retry_at = $3, last_failure_note = $4,
                    lease_note = COALESCE($4, lease_note),
                    lease_note_holder = CASE WHEN $4 IS NULL THEN lease_note_holder ELSE lease_holder END,
                    lease_note_lease_id = CASE WHEN $4 IS NULL THEN lease_note_lease_id ELSE lease_id END
             WHERE id = $1 RETURNING labels",
        )
        .bind(locked.id)
        .bind(failures)
        .bind(retry_at)
        .bind(&req.note)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        Self::end_lease(&mut tx, locked.id, LeaseEnd::Failed, now).await?;
        let data = shared::event::failed(&lease, failures, retry_at, req.note.as_deref());
        Self::event(&mut tx, ws.id, EventKind::LeaseFailed, &r, Some(req.actor), now, data).await?;
        let quarantined = lease::should_quarantine(failures, threshold, &labels);
        if quarantined {
            sqlx::query("UPDATE items SET labels = array_append(labels, $2) WHERE id = $1")
                .bind(locked.id)
                .bind(NEEDS_HUMAN)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            let data = shared::event::quarantined_failures(failures);
            Self::event(&mut tx, ws.id, EventKind::ItemQuarantined, &r, None, now, data).await?;
        }
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(FailOutcome { item, quarantined })
    }

    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>> {
        let f = filter.validate()?;
        let mut qb = QueryBuilder::new(ITEM_SELECT);
        push_frontier(&mut qb, ws, &f, limit);
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db)?;
        rows.iter().map(|r| item_from_row(r, r.get("db_now"))).collect()
    }

    async fn claim_next(
        &self,
        ws: &Workspace,
        filter: &FrontierFilter,
        req: &ClaimRequest,
    ) -> StoreResult<Option<(Item, ClaimOutcome)>> {
        let f = filter.validate()?;
        let ttl = req.validate(&ws.settings)?;
        let mut tx = self.begin().await?;
        loop {
            // SKIP LOCKED: concurrent callers (on any instance) pass over rows
            // another is claiming instead of waiting for them; the re-check
            // after the lock drops rows claimed since this statement began.
            let mut qb = QueryBuilder::new(
                "SELECT i.id, i.prefix, i.number, i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch,
                        i.lease_acquired_at, i.lease_renewed_at, i.lease_expires_at, i.lease_ttl_seconds, i.lease_id,
                        now() AS db_now
                 FROM items i",
            );
            push_frontier(&mut qb, ws, &f, 1);
            qb.push(" FOR UPDATE OF i SKIP LOCKED");
            let Some(row) = qb.build().fetch_optional(&mut *tx).await.map_err(db)? else {
                tx.commit().await.map_err(db)?;
                return Ok(None);
            };
            let r = ItemRef { prefix: row.get("prefix"), number: row.get("number") };
            let id: i64 = row.get("id");
            // On the frontier, a recorded lease is an expired one: observe it
            // first, and pass over the item if that quarantines it.
            if let Some(old) = rows::lease_slot(&row)?.current {
                let quarantined = Self::expire_locked(&mut tx, ws, &r, id, &old, row.get("db_now")).await?;
                if quarantined && f.without_labels.iter().any(|l| l == NEEDS_HUMAN) {
                    continue;
                }
            }
            let claimed = Self::claim_in(&mut tx, ws, &r, req, ttl).await?;
            let item = Self::load_item(&mut tx, id, claimed.now).await?;
            tx.commit().await.map_err(db)?;
            return Ok(Some((item, claimed.outcome)));
        }
    }

    async fn observe_expiries(&self) -> StoreResult<Vec<ObservedExpiry>> {
        let mut tx = self.begin().await?;
        let rows = sqlx::query(OBSERVE_EXPIRED).fetch_all(&mut *tx).await.map_err(db)?;
        let mut observed = Vec::with_capacity(rows.len());
        for row in &rows {
            let expiry = Expiry {
                ws: row.get("workspace_id"),
                threshold: u32::try_from(row.get::<i32, _>("quarantine_after_expiries")).unwrap_or(0),
                item: row.get("id"),
                item_ref: ItemRef { prefix: row.get("prefix"), number: row.get("number") },
                holder: row.get("lease_holder"),
                epoch: row.get("lease_epoch"),
                expired_at: row.get("lease_expires_at"),
                expiries: row.get("lease_expiries"),
                labels: row.get("labels"),
            };
            let quarantined = Self::record_expiry(&mut tx, &expiry, row.get("db_now")).await?;
            let acquired: Timestamp = row.get("lease_acquired_at");
            observed.push(ObservedExpiry {
                workspace: row.get("slug"),
                held: expiry.expired_at - acquired,
                quarantined,
            });
        }
        tx.commit().await.map_err(db)?;
        Ok(observed)
    }

    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>> {
        let rows = sqlx::query(
            "SELECT w.slug, COUNT(*) AS n FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at > now() GROUP BY w.slug ORDER BY w.slug",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(rows.iter().map(|r| (r.get("slug"), u64::try_from(r.get::<i64, _>("n")).unwrap_or(0))).collect())
    }

    async fn events_where(
        &self,
        ws: &Workspace,
        after: i64,
        limit: u32,
        filter: &EventFilter,
    ) -> StoreResult<Vec<Event>> {
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(EVENTS_AFTER);
        qb.push_bind(ws.id).push(" AND e.id > ").push_bind(after);
        if let Some(r) = &filter.item_ref {
            qb.push(" AND e.item_ref = ").push_bind(r.to_string());
        }
        if !filter.kinds.is_empty() {
            let kinds: Vec<&str> = filter.kinds.iter().map(|k| k.as_str()).collect();
            qb.push(" AND e.type = ANY(").push_bind(kinds).push(")");
        }
        qb.push(" ORDER BY e.id LIMIT ").push_bind(i64::from(limit.clamp(1, 1000)));
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| Event {
                id: row.get("id"),
                kind: row.get("type"),
                item_ref: row.get("item_ref"),
                actor: row.get("email"),
                at: row.get("at"),
                data: row.get("data"),
            })
            .collect())
    }

    // Webhooks: all in webhooks.rs (docs/webhooks.md).
    async fn create_webhook(
        &self,
        ws: &Workspace,
        actor: Actor,
        new: &pad_core::webhook::CreateWebhook,
        secret: &str,
    ) -> StoreResult<pad_core::webhook::Webhook> {
        webhooks::create(self, ws, actor, new, secret).await
    }
    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<pad_core::webhook::Webhook>> {
        webhooks::list(self, ws).await
    }
    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()> {
        webhooks::delete(self, ws, id).await
    }
    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<pad_store::WebhookTarget> {
        webhooks::target(self, ws, id).await
    }
    async fn webhook_deliveries(
        &self,
        ws: &Workspace,
        id: i64,
        limit: u32,
    ) -> StoreResult<Vec<pad_core::webhook::WebhookDelivery>> {
        webhooks::deliveries(self, ws, id, limit).await
    }
    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        hold_seconds: i64,
    ) -> StoreResult<Vec<pad_store::DueDelivery>> {
        webhooks::claim(self, limit, hold_seconds).await
    }
    async fn finish_webhook_delivery(
        &self,
        due: &pad_store::DueDelivery,
        result: &pad_store::AttemptResult,
    ) -> StoreResult<()> {
        webhooks::finish(self, due, result).await
    }
    async fn log_webhook_test(
        &self,
        ws: &Workspace,
        id: i64,
        result: &pad_store::AttemptResult,
    ) -> StoreResult<pad_core::webhook::WebhookDelivery> {
        webhooks::log_test(self, ws, id, result).await
    }
}

/// A claim's result with what claim-next needs to load the item.
struct Claimed {
    outcome: ClaimOutcome,
    now: Timestamp,
}

impl PgStore {
    /// L1-L3, L12, L13: the CLAIM statement, its reading through
    /// `decide_claim`, and the events of a grant, inside the caller's
    /// transaction. Shared by claim and claim-next.
    async fn claim_in(
        conn: &mut PgConnection,
        ws: &Workspace,
        r: &ItemRef,
        req: &ClaimRequest,
        ttl: Ttl,
    ) -> StoreResult<Claimed> {
        let claimant =
            Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: req.session_id.as_deref() };
        let row = sqlx::query(CLAIM)
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .bind(req.actor.user_id)
            .bind(&req.holder)
            .bind(&req.session_id)
            .bind(ttl_param(ttl))
            .bind(&req.note)
            .bind(req.refresh)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
        let locked = Locked::from_row(row.as_ref(), r)?.live(r)?;
        let row = row.expect("Locked::from_row refuses a missing row");
        let wrote = rows::written_lease(&row)?;
        let now = locked.now;
        // The statement allocated the grant's id; the rule is told it to compare.
        let grant_id = wrote.as_ref().map_or(0, |l| l.lease_id);
        let outcome = match lease::decide_claim(&locked.slot, &claimant, ttl, req.refresh, grant_id, now) {
            ClaimDecision::Held(l) => {
                agree(wrote.as_ref(), None)?;
                return Err(StoreError::held(l, now));
            }
            ClaimDecision::Refresh(l) => {
                agree(wrote.as_ref(), Some(&l))?;
                ClaimOutcome { lease: l, refreshed: true, previous_note: None, previous_holder: None }
            }
            ClaimDecision::Grant { lease: l, previous_expired } => {
                agree(wrote.as_ref(), Some(&l))?;
                if previous_expired {
                    let old = locked.slot.current.as_ref().expect("an expired lease was recorded");
                    let expiry = Expiry {
                        ws: ws.id,
                        threshold: ws.settings.quarantine_after_expiries,
                        item: locked.id,
                        item_ref: r.clone(),
                        holder: old.holder.clone(),
                        epoch: old.epoch,
                        expired_at: old.expires_at,
                        expiries: row.get("new_expiries"),
                        labels: row.get("new_labels"),
                    };
                    Self::record_expiry(conn, &expiry, now).await?;
                }
                let data = shared::event::claimed(&l);
                Self::event(conn, ws.id, EventKind::LeaseClaimed, r, Some(req.actor), now, data).await?;
                ClaimOutcome {
                    lease: l,
                    refreshed: false,
                    previous_note: row.get("lease_note"),
                    previous_holder: row.get("lease_note_holder"),
                }
            }
        };
        Ok(Claimed { outcome, now })
    }

    /// L18: ends the live lease on a row the caller has locked, `how`, at
    /// `at`: it becomes the last lease (with the note written under it).
    async fn end_lease(conn: &mut PgConnection, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "UPDATE items SET last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = $2, last_lease_ended = $3,
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END,
                    lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
                    lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL
             WHERE id = $1",
        )
        .bind(id)
        .bind(at)
        .bind(how.as_str())
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    /// Forgets and counts `old`, an expired lease on a row the caller has
    /// locked, then records it. Returns whether that quarantined the item.
    async fn expire_locked(
        conn: &mut PgConnection,
        ws: &Workspace,
        r: &ItemRef,
        id: i64,
        old: &Lease,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let row = sqlx::query(EXPIRE)
            .bind(id)
            .bind(now)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?
            .ok_or_else(|| disagree("no expiry", old))?;
        let expiry = Expiry {
            ws: ws.id,
            threshold: ws.settings.quarantine_after_expiries,
            item: id,
            item_ref: r.clone(),
            holder: old.holder.clone(),
            epoch: old.epoch,
            expired_at: old.expires_at,
            expiries: row.get("lease_expiries"),
            labels: row.get("labels"),
        };
        Self::record_expiry(conn, &expiry, now).await
    }

    /// L5/L13: the `lease.expired` event of an expiry already counted, and
    /// quarantine (`needs-human` and an event saying why) when the count
    /// reaches the workspace's threshold. Returns whether it quarantined.
    async fn record_expiry(conn: &mut PgConnection, e: &Expiry, now: Timestamp) -> StoreResult<bool> {
        let data = shared::event::expired(&e.holder, e.epoch, e.expired_at);
        Self::event(conn, e.ws, EventKind::LeaseExpired, &e.item_ref, None, now, data).await?;
        if !lease::should_quarantine(e.expiries, e.threshold, &e.labels) {
            return Ok(false);
        }
        sqlx::query("UPDATE items SET labels = array_append(labels, $2) WHERE id = $1")
            .bind(e.item)
            .bind(NEEDS_HUMAN)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
        let expiries = e.expiries;
        Self::event(
            conn,
            e.ws,
            EventKind::ItemQuarantined,
            &e.item_ref,
            None,
            now,
            shared::event::quarantined(expiries),
        )
        .await?;
        Ok(true)
    }
}

/// The frontier predicate and order (L11), appended to a SELECT over
/// `items i`. "No live lease" is judged by the statement's `now()`.
fn push_frontier(qb: &mut QueryBuilder<Postgres>, ws: &Workspace, f: &ValidFrontierFilter, limit: u32) {
    qb.push(" WHERE i.workspace_id = ").push_bind(ws.id);
    qb.push(" AND i.deleted_at IS NULL AND i.status = 'open'");
    qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= now())");
    // L14, L16: deferred and backing-off items wait.
    qb.push(" AND (i.not_before IS NULL OR i.not_before <= now()) AND (i.retry_at IS NULL OR i.retry_at <= now())");
    for r in &f.exclude {
        qb.push(" AND NOT (i.prefix = ")
            .push_bind(r.prefix.clone())
            .push(" AND i.number = ")
            .push_bind(r.number)
            .push(")");
    }
    qb.push(
        " AND NOT EXISTS (SELECT 1 FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
           WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled'))",
    );
    if !f.kinds.is_empty() {
        qb.push(" AND i.kind = ANY(").push_bind(f.kinds.clone()).push(")");
    }
    if !f.labels.is_empty() {
        qb.push(" AND i.labels @> ").push_bind(f.labels.clone());
    }
    if !f.without_labels.is_empty() {
        qb.push(" AND NOT (i.labels && ").push_bind(f.without_labels.clone()).push(")");
    }
    if let Some(p) = f.min_priority {
        qb.push(" AND i.priority >= ").push_bind(p.rank());
    }
    if let Some(p) = &f.parent {
        push_parent(qb, ws, p);
    }
    qb.push(" ORDER BY i.priority DESC, i.created_at, i.id LIMIT ")
        .push_bind(i64::from(limit.clamp(1, LIST_LIMIT_MAX)));
}

/// ` AND` the item is a child of `p`.
fn push_parent(qb: &mut QueryBuilder<Postgres>, ws: &Workspace, p: &ItemRef) {
    qb.push(" AND i.parent_id = (SELECT id FROM items WHERE workspace_id = ")
        .push_bind(ws.id)
        .push(" AND prefix = ")
        .push_bind(p.prefix.clone())
        .push(" AND number = ")
        .push_bind(p.number)
        .push(")");
}
