//! A refusal does not queue (docs/leases.md): a claim of an item another
//! holder's live lease holds is answered `lease_held` from the row as last
//! committed, without waiting for the row's lock. Claims on one item share
//! that read: those that arrive while one is in flight share the next.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use pad_core::NewItem;
use pad_postgres::PgStore;
use pad_store::{Actor, Store, StoreError};
use sqlx::Connection;

/// A connection in a transaction that holds the row lock of `r`, as a
/// concurrent claim, renew or release would; end it with `COMMIT` or
/// `ROLLBACK`.
async fn lock_row(db: &common::ScratchDb, r: &pad_core::ItemRef) -> sqlx::PgConnection {
    let mut locker = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    sqlx::query("SELECT id FROM items WHERE prefix = $1 AND number = $2 FOR UPDATE")
        .bind(&r.prefix)
        .bind(r.number)
        .execute(&mut locker)
        .await
        .unwrap();
    locker
}

fn release_by(actor: Actor, holder: &str) -> pad_store::ReleaseRequest {
    pad_store::ReleaseRequest {
        actor,
        holder: holder.into(),
        handle: Default::default(),
        force: false,
        reason: None,
        succeeded: false,
    }
}

/// Another transaction holds the item's row lock (as a concurrent claim,
/// renew or release would) while a second holder claims the held item: the
/// answer comes while the lock is still held. Before, the claim waited in
/// line for the lock, so it could only answer after the other transaction
/// ended; here that transaction ends only after the answer arrived (the net
/// below only stops a hang).
#[tokio::test]
async fn a_claim_of_a_held_item_is_refused_without_waiting_for_its_row_lock() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_claim_of_a_held_item_is_refused_without_waiting_for_its_row_lock: {} is not set",
            common::ENV
        );
    };
    let store = Arc::new(PgStore::open_with(&db.url, 4).await.unwrap());
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();
    let item = store.create_item(&ws, owner, &NewItem { title: "one".into(), ..Default::default() }).await.unwrap();
    let r = item.item_ref.clone();
    store.claim(&ws, &r, &common::claim(owner, "first", true)).await.unwrap();

    let mut locker = lock_row(&db, &r).await;

    let refused =
        tokio::time::timeout(Duration::from_secs(60), store.claim(&ws, &r, &common::claim(owner, "second", true)))
            .await
            .expect("the claim waited for the row lock");
    match refused {
        Err(StoreError::LeaseHeld { lease, .. }) => assert_eq!(lease.holder, "first"),
        other => panic!("expected lease_held naming the first holder, got {other:?}"),
    }
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();

    // With the lock gone, a claim that may win still decides under the lock.
    let mut release = release_by(owner, "first");
    assert!(store.release(&ws, &r, &release).await.unwrap().released());
    assert_eq!(store.claim(&ws, &r, &common::claim(owner, "second", true)).await.unwrap().lease.holder, "second");
    release.holder = "second".into();
    assert!(store.release(&ws, &r, &release).await.unwrap().released());
}

/// Waits until the store reports `waiting` claims queued for the next read
/// and `paused` reads held after running: signals from the code, not sleeps.
async fn reads_reach(store: &PgStore, waiting: usize, paused: u64) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while store.claim_reads_waiting() != (waiting, paused) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("never reached {waiting} waiting, {paused} paused: {:?}", store.claim_reads_waiting()));
}

async fn one_item(db: &common::ScratchDb) -> (Arc<PgStore>, Actor, pad_core::Workspace, pad_core::ItemRef) {
    let store = Arc::new(PgStore::open_with(&db.url, 4).await.unwrap());
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();
    let item = store.create_item(&ws, owner, &NewItem { title: "one".into(), ..Default::default() }).await.unwrap();
    (store, owner, ws, item.item_ref)
}

/// Twenty claims of a held item: the first one's read is held after it
/// ran, the other nineteen arrive meanwhile and queue, and one more read
/// answers all nineteen. Every claim is refused; two reads were made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_one_held_item_share_one_read() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED claims_of_one_held_item_share_one_read: {} is not set", common::ENV);
    };
    let (store, owner, ws, r) = one_item(&db).await;
    store.claim(&ws, &r, &common::claim(owner, "first", true)).await.unwrap();
    let before = store.claim_reads();

    store.hold_claim_reads(true);
    let claim = |i: usize| {
        let (store, ws, r) = (Arc::clone(&store), ws.clone(), r.clone());
        tokio::spawn(async move { store.claim(&ws, &r, &common::claim(owner, &format!("racer-{i}"), true)).await })
    };
    let mut claims = vec![claim(0)];
    reads_reach(&store, 0, 1).await;
    claims.extend((1..20).map(claim));
    reads_reach(&store, 19, 1).await;
    store.hold_claim_reads(false);

    for (i, answer) in futures::future::join_all(claims).await.into_iter().enumerate() {
        match answer.unwrap() {
            Err(StoreError::LeaseHeld { lease, .. }) => assert_eq!(lease.holder, "first", "claim {i}"),
            other => panic!("claim {i}: expected lease_held, got {other:?}"),
        }
    }
    assert_eq!(store.claim_reads(), before + 2, "one read for the first claim, one for the nineteen after it");
    assert_eq!(store.claim_reads_waiting(), (0, 0));
}

/// A claim never gets a read that began before it arrived: the first
/// claim's read sees the item held, the lease is released while that read
/// is held from answering, and a claim arriving then is answered by a new
/// read, which finds the item free: the first is refused, the second wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_decided_on_a_read_that_began_after_it_arrived() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_claim_is_decided_on_a_read_that_began_after_it_arrived: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, r) = one_item(&db).await;
    store.claim(&ws, &r, &common::claim(owner, "first", true)).await.unwrap();

    store.hold_claim_reads(true);
    let early = {
        let (store, ws, r) = (Arc::clone(&store), ws.clone(), r.clone());
        tokio::spawn(async move { store.claim(&ws, &r, &common::claim(owner, "early", true)).await })
    };
    reads_reach(&store, 0, 1).await;
    let release = release_by(owner, "first");
    assert!(store.release(&ws, &r, &release).await.unwrap().released());
    let late = {
        let (store, ws, r) = (Arc::clone(&store), ws.clone(), r.clone());
        tokio::spawn(async move { store.claim(&ws, &r, &common::claim(owner, "late", true)).await })
    };
    reads_reach(&store, 1, 1).await;
    store.hold_claim_reads(false);

    match early.await.unwrap() {
        Err(StoreError::LeaseHeld { lease, .. }) => assert_eq!(lease.holder, "first"),
        other => panic!("the early claim read before the release: expected lease_held, got {other:?}"),
    }
    assert_eq!(late.await.unwrap().unwrap().lease.holder, "late", "the late claim read after the release");
}

/// Ten claims of a free item whose row another transaction has locked:
/// one claim waits for the row lock in the database, the other nine wait
/// in the instance for its turn (counted by the store, and seen in
/// `pg_stat_activity`: one session waits for a lock, not ten). Once the lock goes, the first
/// is granted and the nine, reading again, are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_that_may_win_one_item_take_its_row_lock_one_at_a_time() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED claims_that_may_win_one_item_take_its_row_lock_one_at_a_time: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, r) = one_item(&db).await;
    let mut locker = lock_row(&db, &r).await;

    let claims: Vec<_> = (0..10)
        .map(|i| {
            let (store, ws, r) = (Arc::clone(&store), ws.clone(), r.clone());
            tokio::spawn(async move { store.claim(&ws, &r, &common::claim(owner, &format!("racer-{i}"), true)).await })
        })
        .collect();
    let mut watcher = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let lock_waits = || {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let waits = lock_waits().fetch_one(&mut watcher).await.unwrap();
            if store.claim_turns_waiting() == 9 && waits >= 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("nine claims never waited for the first one's turn: {}", store.claim_turns_waiting()));
    assert_eq!(lock_waits().fetch_one(&mut watcher).await.unwrap(), 1, "one claim waits for the row lock");
    sqlx::query("COMMIT").execute(&mut locker).await.unwrap();

    let answers: Vec<_> = futures::future::join_all(claims).await.into_iter().map(|a| a.unwrap()).collect();
    let winners: Vec<_> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one claim wins: {answers:?}");
    let holder = &winners[0].lease.holder;
    for answer in &answers {
        match answer {
            Ok(_) => {}
            Err(StoreError::LeaseHeld { lease, .. }) => assert_eq!(&lease.holder, holder),
            other => panic!("expected lease_held naming the winner, got {other:?}"),
        }
    }
    assert_eq!(store.claim_turns_waiting(), 0);
}

/// A claim of an item that does not exist, or is deleted, is answered
/// `not_found` from its read: it never joins a shared transaction (the
/// group is held here, so one that did would not be answered), and the
/// answer is the locking statement's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_no_item_is_refused_from_its_read() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_claim_of_no_item_is_refused_from_its_read: {} is not set", common::ENV);
    };
    let (store, owner, ws, r) = one_item(&db).await;
    store.delete_item(&ws, owner, &r, Default::default()).await.unwrap();
    let missing = pad_core::ItemRef { prefix: r.prefix.clone(), number: r.number + 1 };

    store.hold_group();
    for (r, what) in [(&r, format!("item {r} (deleted)")), (&missing, format!("item {missing}"))] {
        let answer =
            tokio::time::timeout(Duration::from_secs(60), store.claim(&ws, r, &common::claim(owner, "x", true)))
                .await
                .expect("the claim waited for the held group");
        match answer {
            Err(StoreError::NotFound { what: got }) => assert_eq!(got, what),
            other => panic!("expected not_found for {r}, got {other:?}"),
        }
    }
    assert_eq!(store.queued_calls(), 0, "no claim reached the shared transaction");
    store.unhold_group();
}

/// A drain's writes lock no row its neighbours share (docs/operations.md,
/// "References PostgreSQL does not check"). Another transaction holds the
/// workspace's row and the worker's user row `FOR UPDATE`, as a settings
/// change would, while an item is created, edited, claimed by claim-next,
/// renewed and completed, and another claimed, failed, claimed and
/// released: every call is answered while those locks are still held.
/// Before, each write's foreign-key checks took `FOR KEY SHARE` on both
/// rows, so the first write waited for the other transaction to end (the
/// net below only stops a hang).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_calls_and_item_writes_lock_no_workspace_or_user_row() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED lease_calls_and_item_writes_lock_no_workspace_or_user_row: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, second) = one_item(&db).await;
    let mut locker = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    let lock_workspace = "SELECT id FROM workspaces WHERE id = $1 FOR UPDATE";
    let lock_user = "SELECT id FROM users WHERE id = $1 FOR UPDATE";
    for (lock, id) in [(lock_workspace, ws.id), (lock_user, owner.user_id)] {
        let locked = sqlx::query(lock).bind(id).execute(&mut locker).await.unwrap();
        assert_eq!(locked.rows_affected(), 1, "{lock}");
    }

    let writes = async {
        let new = NewItem { title: "first".into(), priority: Some(pad_core::Priority::Critical), ..Default::default() };
        let first = store.create_item(&ws, owner, &new).await.unwrap().item_ref;
        let patch = pad_core::ItemPatch { title: Some("first, edited".into()), ..Default::default() };
        store.update_item(&ws, owner, &first, &patch).await.unwrap();
        let claim = common::claim(owner, "worker", false);
        let (item, granted) =
            store.claim_next(&ws, &pad_core::FrontierFilter::default(), &claim).await.unwrap().expect("a ready item");
        assert_eq!(item.item_ref, first, "the critical item comes first");
        let handle = pad_core::lease::LeaseHandle { epoch: Some(granted.lease.epoch), lease_id: None };
        let renew =
            pad_store::RenewRequest { actor: owner, holder: "worker".into(), handle, ttl_seconds: None, note: None };
        store.renew(&ws, &first, &renew).await.unwrap();
        let done = pad_store::CompleteRequest {
            actor: owner,
            holder: "worker".into(),
            handle,
            status: pad_core::Status::Done,
        };
        assert_eq!(store.complete(&ws, &first, &done).await.unwrap().status, pad_core::Status::Done);

        let epoch = store.claim(&ws, &second, &claim).await.unwrap().lease.epoch;
        let fail = pad_store::FailRequest {
            actor: owner,
            holder: "worker".into(),
            handle: pad_core::lease::LeaseHandle { epoch: Some(epoch), lease_id: None },
            note: Some("try again".into()),
            max_failures: None,
        };
        store.fail(&ws, &second, &fail).await.unwrap();
        store.claim(&ws, &second, &claim).await.unwrap();
        assert!(store.release(&ws, &second, &release_by(owner, "worker")).await.unwrap().released());
    };
    tokio::time::timeout(Duration::from_secs(60), writes)
        .await
        .expect("a write waited for the workspace's or the user's row lock");
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
}
