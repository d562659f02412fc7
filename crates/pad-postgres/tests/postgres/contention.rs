//! A refusal does not queue (docs/leases.md): a claim of an item another
//! holder's live lease holds is answered `lease_held` from the row as last
//! committed, without waiting for the row's lock.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use pad_core::NewItem;
use pad_postgres::PgStore;
use pad_store::{Actor, Store, StoreError};
use sqlx::Connection;

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

    let mut locker = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut tx = locker.begin().await.unwrap();
    sqlx::query("SELECT id FROM items WHERE prefix = $1 AND number = $2 FOR UPDATE")
        .bind(&r.prefix)
        .bind(r.number)
        .execute(&mut *tx)
        .await
        .unwrap();

    let refused =
        tokio::time::timeout(Duration::from_secs(60), store.claim(&ws, &r, &common::claim(owner, "second", true)))
            .await
            .expect("the claim waited for the row lock");
    match refused {
        Err(StoreError::LeaseHeld { lease, .. }) => assert_eq!(lease.holder, "first"),
        other => panic!("expected lease_held naming the first holder, got {other:?}"),
    }
    tx.rollback().await.unwrap();

    // With the lock gone, a claim that may win still decides under the lock.
    let mut release = pad_store::ReleaseRequest {
        actor: owner,
        holder: "first".into(),
        handle: Default::default(),
        force: false,
        reason: None,
        succeeded: false,
    };
    assert!(store.release(&ws, &r, &release).await.unwrap().released());
    assert_eq!(store.claim(&ws, &r, &common::claim(owner, "second", true)).await.unwrap().lease.holder, "second");
    release.holder = "second".into();
    assert!(store.release(&ws, &r, &release).await.unwrap().released());
}
