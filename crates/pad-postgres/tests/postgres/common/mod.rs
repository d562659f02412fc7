//! Scratch databases for the PostgreSQL tests: pad-test-support's, the one
//! home of every crate's (`pad_test_support::pg`); the claim and complete
//! their lease tests make, a store with items to make them on, and a
//! baseline of events.

#![allow(unused_imports)]

pub use pad_test_support::pg::{ENV, ScratchDb};

use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::LeaseHandle;
use pad_core::{ItemRef, NewItem, Status, Workspace};
use pad_postgres::PgStore;
use pad_store::{Actor, ClaimRequest, CompleteRequest, Store};

/// A claim by `holder` for five minutes, refreshing when `refresh`.
pub fn claim(actor: Actor, holder: &str, refresh: bool) -> ClaimRequest {
    ClaimRequest {
        actor,
        holder: holder.into(),
        session_id: None,
        ttl_seconds: Some(300),
        note: None,
        refresh,
        max_hold_seconds: None,
    }
}

/// A complete of `holder`'s lease of `epoch`, to `done`.
pub fn done(actor: Actor, holder: &str, epoch: i64) -> CompleteRequest {
    CompleteRequest {
        actor,
        holder: holder.into(),
        handle: LeaseHandle { epoch: Some(epoch), lease_id: None },
        status: Status::Done,
    }
}

/// A store on `db` (8 connections) with its owner, the workspace `acme` and
/// `items` open items in it.
pub async fn setup(db: &ScratchDb, items: usize) -> (Arc<PgStore>, Actor, Workspace, Vec<ItemRef>) {
    let store = Arc::new(PgStore::open_with(&db.url, 8).await.unwrap());
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();
    let mut refs = Vec::new();
    for i in 0..items {
        let new = NewItem { title: format!("item {i}"), ..Default::default() };
        refs.push(store.create_item(&ws, owner, &new).await.unwrap().item_ref);
    }
    (store, owner, ws, refs)
}

/// The id of the workspace's last event (0: none yet): a baseline for
/// the events a test goes on to write. Every event committed before the
/// read is visible to it (docs/api.md, "Event order on PostgreSQL"): only
/// a transaction of the same database, and each test has its own, holds the
/// horizon back.
pub async fn last_event(store: &PgStore, ws: &Workspace) -> i64 {
    store.events_after(ws, 0, 1000).await.unwrap().last().map_or(0, |e| e.id)
}
