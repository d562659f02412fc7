//! Wake-ups only while someone waits (docs/api.md): the database notifies
//! `pad_ready` only while some instance is armed for a waiting claim-next,
//! and arming waits for every change that looked for a waiter before it.
//!
//! Whether a change was notified is read from a listener of our own, by
//! sending a marker notification after the change: notifications arrive in
//! commit order, so the first one read says whether the change's came.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use pad_core::{NewItem, Workspace};
use pad_postgres::PgStore;
use pad_store::{Actor, Store};
use sqlx::postgres::PgListener;

/// A store over `db` with a workspace, a pool of the test's own and a
/// listener of its own on `pad_ready`.
struct Setup {
    store: Arc<PgStore>,
    owner: Actor,
    ws: Workspace,
    raw: sqlx::PgPool,
    listener: PgListener,
}

async fn setup(db: &common::ScratchDb) -> Setup {
    let store = Arc::new(PgStore::open_with(&db.url, 8).await.unwrap());
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();
    let raw = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut listener = PgListener::connect(&db.url).await.unwrap();
    listener.listen("pad_ready").await.unwrap();
    Setup { store, owner, ws, raw, listener }
}

/// A change left open after its event was appended: the trigger has
/// looked for a waiter, and the transaction holds the lock until it ends.
async fn open_change(raw: &sqlx::PgPool, ws: &Workspace, owner: Actor) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut open = raw.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
         VALUES (1000000, $1, 'item.updated', 'TASK-1', $2, clock_timestamp(), '{}')",
    )
    .bind(ws.id)
    .bind(owner.user_id)
    .execute(&mut *open)
    .await
    .unwrap();
    open
}

/// A waiter's subscription and its arming, begun: returns once the row is
/// committed (the database's word), with the arming still to settle.
async fn begin_arming(
    store: &Arc<PgStore>, raw: &sqlx::PgPool,
) -> (pad_store::ReadySignals, tokio::task::JoinHandle<bool>) {
    let sub = Store::ready_signals(&**store).unwrap();
    let arming = {
        let store = store.clone();
        tokio::spawn(async move { Store::arm_ready_signals(&*store).await })
    };
    until_rows(raw, 1).await;
    (sub, arming)
}

/// The payload of the first notification after `change` commits: the
/// workspace's id if the change was notified, `marker` if not.
async fn first_notified_after(listener: &mut PgListener, db: &sqlx::PgPool, change: impl Future) -> String {
    change.await;
    notified_until_now(listener, db).await.into_iter().next().unwrap_or_else(|| "marker".into())
}

/// Waits for the store's own flag, not for a guessed time.
async fn until_armed(store: &PgStore) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while !store.ready_armed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the store never armed");
}

/// Waits until `ready_waiters` holds `n` rows: the database's own word.
async fn until_rows(db: &sqlx::PgPool, n: i64) {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM ready_waiters").fetch_one(db).await.unwrap();
            if rows == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("ready_waiters never held {n} rows"));
}

/// Every payload notified up to a marker sent now.
async fn notified_until_now(listener: &mut PgListener, db: &sqlx::PgPool) -> Vec<String> {
    sqlx::query("NOTIFY pad_ready, 'marker'").execute(db).await.unwrap();
    let mut got = Vec::new();
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), listener.recv()).await.unwrap().unwrap();
        if n.payload() == "marker" {
            return got;
        }
        got.push(n.payload().to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_notify_only_while_a_claim_next_may_wait() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED changes_notify_only_while_a_claim_next_may_wait: {} is not set", common::ENV);
    };
    let Setup { store, owner, ws, raw, mut listener } = setup(&db).await;
    store.set_ready_linger(Duration::ZERO);
    let create = |title: &'static str| {
        let (store, ws) = (store.clone(), ws.clone());
        async move {
            store.create_item(&ws, owner, &NewItem { title: title.into(), ..Default::default() }).await.unwrap();
        }
    };

    assert_eq!(
        first_notified_after(&mut listener, &raw, create("no one waits")).await,
        "marker",
        "with no claim-next waiting, a change notifies no one"
    );

    let first = Store::ready_signals(&*store).expect("PostgreSQL signals other instances' changes");
    assert!(!first.armed, "nothing armed the store yet");
    Store::arm_ready_signals(&*store).await;
    // The arming's own wait is bounded; on a busy machine it may give up
    // while the listener goes on arming.
    until_armed(&store).await;
    let second = Store::ready_signals(&*store).unwrap();
    assert!(second.armed, "a later subscriber finds the store armed and needs no extra look");
    assert_eq!(
        first_notified_after(&mut listener, &raw, create("someone waits")).await,
        ws.id.to_string(),
        "while armed, a change that makes an item ready is notified"
    );

    drop((first, second));
    until_rows(&raw, 0).await;
    assert_eq!(
        first_notified_after(&mut listener, &raw, create("no one waits again")).await,
        "marker",
        "once the last waiter left, changes notify no one again"
    );
}

/// A change that looked for a waiter before the store armed, and has not
/// committed: arming waits for it (so the waiter's next look sees it)
/// without making any other writer wait, and the change, having found no
/// waiter, notifies no one; a change made once the row is in place does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arming_waits_for_a_change_that_looked_before_it_and_blocks_no_writer() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED arming_waits_for_a_change_that_looked_before_it_and_blocks_no_writer: {} is not set",
            common::ENV
        );
    };
    let Setup { store, owner, ws, raw, mut listener } = setup(&db).await;

    let open = open_change(&raw, &ws, owner).await;

    let (sub, arming) = begin_arming(&store, &raw).await;
    assert!(!store.ready_armed(), "not armed while a change that looked before the row is open");
    let made = tokio::time::timeout(
        Duration::from_secs(60),
        store.create_item(&ws, owner, &NewItem { title: "meanwhile".into(), ..Default::default() }),
    )
    .await
    .expect("a writer never waits for an instance to arm");
    made.unwrap();
    assert!(!store.ready_armed(), "still not armed: the open change has not ended");

    open.commit().await.unwrap();
    arming.await.unwrap();
    until_armed(&store).await;
    assert_eq!(
        notified_until_now(&mut listener, &raw).await,
        vec![ws.id.to_string()],
        "the change made once the row was in place notified; the one that looked before it did not"
    );
    drop(sub);
}

/// The listening connection is cut while a claim-next waits: the store
/// arms again under its new connection, and changes are notified again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_lost_its_connection_arms_again() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_listener_that_lost_its_connection_arms_again: {} is not set", common::ENV);
    };
    let Setup { store, owner, ws, raw, mut listener } = setup(&db).await;

    let mut sub = Store::ready_signals(&*store).unwrap();
    Store::arm_ready_signals(&*store).await;
    until_armed(&store).await;
    // The wake-ups of the first connection and of the arming are in the
    // queue: read them, so only the cut can wake the waiter below.
    while sub.rx.try_recv().is_ok() {}
    let old: i32 = sqlx::query_scalar("SELECT pid FROM ready_waiters").fetch_one(&raw).await.unwrap();
    let cut: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(old).fetch_one(&raw).await.unwrap();
    assert!(cut);

    // The waiter is woken (notifications may have been lost), and a row
    // under a live backend other than the cut one comes back.
    tokio::time::timeout(Duration::from_secs(60), sub.rx.recv()).await.expect("the waiter is woken").unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let live: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM ready_waiters w JOIN pg_stat_activity a ON a.pid = w.pid WHERE w.pid <> $1",
            )
            .bind(old)
            .fetch_one(&raw)
            .await
            .unwrap();
            if live == 1 && store.ready_armed() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the store never armed again");
    // The arming's own wake-up was sent before the flag was set: read it.
    while sub.rx.try_recv().is_ok() {}
    store.create_item(&ws, owner, &NewItem { title: "after the cut".into(), ..Default::default() }).await.unwrap();
    assert_eq!(notified_until_now(&mut listener, &raw).await, vec![ws.id.to_string()]);
    tokio::time::timeout(Duration::from_secs(60), sub.rx.recv())
        .await
        .expect("the store's new connection listens again")
        .unwrap();
}

/// An arming that cannot settle (a transaction that looked before the row
/// stays open), and its waiter leaves: the row goes anyway, so changes stop
/// notifying no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_whose_arming_never_settled_goes_with_its_last_waiter() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_row_whose_arming_never_settled_goes_with_its_last_waiter: {} is not set",
            common::ENV
        );
    };
    let Setup { store, owner, ws, raw, .. } = setup(&db).await;
    store.set_ready_linger(Duration::ZERO);
    let open = open_change(&raw, &ws, owner).await;

    let (sub, arming) = begin_arming(&store, &raw).await;
    drop(sub);
    assert!(!arming.await.unwrap(), "never armed: the open change never ended");
    until_rows(&raw, 0).await;
    assert!(!store.ready_armed());
    open.rollback().await.unwrap();
}
