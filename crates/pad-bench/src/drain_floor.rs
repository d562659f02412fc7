//! The drain floor (PostgreSQL): the least SQL that does what the contract
//! makes every drained item write, to tell how far a PostgreSQL drain can go
//! on this machine at all, whatever the server around it.
//!
//! Per item, as pad's drain: a claim grants the best ready item's lease
//! (`FOR UPDATE SKIP LOCKED`, next epoch, a new lease id, an expiry) and
//! appends `lease.claimed`; a complete, fenced by the lease id, sets the
//! status, ends the lease (the last lease's record, L18), adds a history
//! version and appends `item.updated` and `lease.released`
//! (docs/leases.md; docs/api.md, "Events"). Each is one autocommitted
//! statement sent by this process over a connection of its own per worker.
//! Nothing else: no HTTP, no auth, no answer beyond the ids, no event order
//! across transactions, no wake-ups, no webhooks, one workspace, a narrow
//! table in a schema of its own beside pad's.

use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};

use crate::Result;

/// The floor's tables, in their own schema of the bench's database.
const SCHEMA: &[&str] = &[
    "DROP SCHEMA IF EXISTS pad_floor CASCADE",
    "CREATE SCHEMA pad_floor",
    "CREATE TABLE pad_floor.items (
        id bigserial PRIMARY KEY, number bigint NOT NULL UNIQUE, title text NOT NULL,
        status text NOT NULL, priority int NOT NULL, version bigint NOT NULL DEFAULT 1,
        created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
        lease_holder text, lease_epoch bigint NOT NULL DEFAULT 0, lease_id bigint,
        lease_acquired_at timestamptz, lease_expires_at timestamptz,
        last_lease_id bigint, last_lease_holder text, last_lease_ended_at timestamptz, last_lease_ended text)",
    "CREATE INDEX ON pad_floor.items (priority DESC, created_at, id) WHERE status = 'open'",
    "CREATE TABLE pad_floor.item_versions (
        item_id bigint NOT NULL, version bigint NOT NULL, at timestamptz NOT NULL, changes jsonb NOT NULL,
        PRIMARY KEY (item_id, version))",
    "CREATE TABLE pad_floor.events (
        id bigserial PRIMARY KEY, type text NOT NULL, item_ref text NOT NULL, at timestamptz NOT NULL, data jsonb NOT NULL)",
    "CREATE SEQUENCE pad_floor.lease_ids",
];

const SEED: &str = "INSERT INTO pad_floor.items (number, title, status, priority, created_at, updated_at)
    SELECT x, 'floor item ' || x, 'open', 1, now() + x * interval '1 microsecond', now()
    FROM generate_series(1, $1::bigint) AS x";

/// The best ready item's lease, with its `lease.claimed`: the item's
/// number, the lease id, and what an HTTP answer shows of them
/// ([`crate::http_floor`]).
pub(crate) const CLAIM: &str = "WITH c AS (
        SELECT id FROM pad_floor.items
        WHERE status = 'open' AND (lease_holder IS NULL OR lease_expires_at <= now())
        ORDER BY priority DESC, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED),
    u AS (
        UPDATE pad_floor.items i SET lease_holder = $1, lease_epoch = i.lease_epoch + 1,
            lease_id = nextval('pad_floor.lease_ids'), lease_acquired_at = now(),
            lease_expires_at = now() + interval '1 hour'
        FROM c WHERE i.id = c.id
        RETURNING i.id, i.number, i.title, i.created_at, i.updated_at, i.lease_id, i.lease_epoch,
            i.lease_acquired_at, i.lease_expires_at),
    e AS (
        INSERT INTO pad_floor.events (type, item_ref, at, data)
        SELECT 'lease.claimed', 'TASK-' || u.number, now(), jsonb_build_object(
            'holder', $1::text, 'epoch', u.lease_epoch, 'lease_id', u.lease_id, 'expires_at', u.lease_expires_at)
        FROM u)
    SELECT number, lease_id, title, created_at, updated_at, lease_epoch, lease_acquired_at, lease_expires_at FROM u";

/// The complete, fenced by the item's number ($1) and the lease id ($2):
/// status, the lease's end, a history version, two events. No row when the
/// lease was not live.
pub(crate) const COMPLETE: &str = "WITH u AS (
        UPDATE pad_floor.items SET status = 'done', version = version + 1, updated_at = now(),
            last_lease_id = lease_id, last_lease_holder = lease_holder, last_lease_ended_at = now(),
            last_lease_ended = 'completed', lease_holder = NULL, lease_acquired_at = NULL, lease_expires_at = NULL
        WHERE number = $1 AND lease_id = $2 AND lease_expires_at > now()
        RETURNING id, number, title, created_at, updated_at, version, lease_epoch, last_lease_id,
            last_lease_holder, last_lease_ended_at),
    h AS (
        INSERT INTO pad_floor.item_versions (item_id, version, at, changes)
        SELECT id, version, now(), '{\"status\": {\"from\": \"open\", \"to\": \"done\"}}' FROM u),
    e AS (
        INSERT INTO pad_floor.events (type, item_ref, at, data)
        SELECT t, 'TASK-' || u.number, now(), d
        FROM u, LATERAL (VALUES ('item.updated', '{\"fields\": [\"status\"]}'::jsonb),
                                ('lease.released', jsonb_build_object('ended', 'completed',
                                    'holder', u.last_lease_holder, 'lease_id', u.last_lease_id))) AS v (t, d))
    SELECT number, title, created_at, updated_at, lease_epoch, last_lease_id, last_lease_holder, last_lease_ended_at
    FROM u";

/// The floor's tables with `items` items, on `pool`'s database.
pub async fn prepare(pool: &PgPool, items: u64) -> Result<()> {
    for statement in SCHEMA {
        sqlx::query(*statement).execute(pool).await?;
    }
    sqlx::query(SEED).bind(items as i64).execute(pool).await?;
    sqlx::query("VACUUM ANALYZE pad_floor.items").execute(pool).await?;
    Ok(())
}

/// A pool of `workers` connections to `pool`'s database, one per worker.
pub async fn connect(pool: &PgPool, workers: usize) -> Result<PgPool> {
    let opts = (*pool.connect_options()).clone();
    Ok(PgPoolOptions::new().min_connections(workers as u32).max_connections(workers as u32).connect_with(opts).await?)
}

/// One worker: claims and completes until no item is left; the numbers it got.
pub async fn drain(pool: PgPool, holder: String) -> Result<Vec<i64>> {
    let mut got = Vec::new();
    let mut conn = pool.acquire().await?;
    loop {
        let claimed = sqlx::query(CLAIM).bind(&holder).fetch_optional(&mut *conn).await?;
        let Some(claimed) = claimed else { break };
        let (number, lease_id): (i64, i64) = (claimed.get("number"), claimed.get("lease_id"));
        let done = sqlx::query(COMPLETE).bind(number).bind(lease_id).fetch_optional(&mut *conn).await?;
        if done.is_none() {
            return Err(format!("the floor's complete of item {number} found its lease gone").into());
        }
        got.push(number);
    }
    Ok(got)
}

/// What the floor wrote: (events, history versions, items done).
pub async fn written(pool: &PgPool) -> Result<(i64, i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT count(*) FROM pad_floor.events), (SELECT count(*) FROM pad_floor.item_versions),
                (SELECT count(*) FROM pad_floor.items WHERE status = 'done')",
    )
    .fetch_one(pool)
    .await?)
}

/// Drops the floor's schema.
pub async fn finish(pool: &PgPool) -> Result<()> {
    sqlx::query("DROP SCHEMA pad_floor CASCADE").execute(pool).await?;
    Ok(())
}
