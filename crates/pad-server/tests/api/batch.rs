//! The batch verbs and long polls over HTTP (docs/api.md, "Batches and long
//! polls"): claim-next with `count` and `wait_seconds`, and
//! `POST …/leases/renew`, on every backend.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, backends};
use serde_json::{Value, json};

const WS: &str = "/api/v1/workspaces/default";

/// A server whose waiting claim-nexts never look again on their own, so
/// only a signal can wake one.
async fn signals_only(url: Option<&str>) -> TestServer {
    let adjust = |s: &mut pad_server::AppState| s.relook = Duration::from_secs(3600);
    match url {
        Some(url) => TestServer::start_on_with(url, adjust).await,
        None => TestServer::start_with(adjust).await,
    }
}

/// How many claim-nexts wait on `s` now, from its `/metrics`.
async fn waiting(s: &TestServer) -> u64 {
    let text = s.scrape().await;
    let line = text.lines().find(|l| l.starts_with("pad_claim_next_waiting ")).expect("the gauge is exposed");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Blocks until a claim-next waits on `s`: the server's own signal that the
/// long poll has begun, not a guess at how long that takes.
async fn until_waiting(s: &TestServer) {
    for _ in 0..2000 {
        if waiting(s).await >= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no claim-next began to wait");
}

#[tokio::test]
async fn bad_counts_and_waits_are_refused_and_claim_nothing() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let r = s.create_item(&s.owner, "default", "untouched").await;
        for (body, field) in [
            (json!({"count": 0}), "count"),
            (json!({"count": 33}), "count"),
            (json!({"wait_seconds": 31}), "wait_seconds"),
            (json!({"wait_seconds": -1}), "wait_seconds"),
            (json!({"count": "many"}), "count"),
            (json!({"count": -3}), "count"),
            (json!({"wait_seconds": 2.5}), "wait_seconds"),
            (json!({"wait_seconds": "30s"}), "wait_seconds"),
            // `wait` is `wait_seconds` by its other name, refused alike and
            // named as given.
            (json!({"wait": 31}), "wait"),
            (json!({"wait": -1}), "wait"),
            (json!({"wait": 1.5}), "wait"),
            (json!({"wait": "30s"}), "wait"),
        ] {
            let a = s.post(&s.owner, &format!("{WS}/claim-next"), body.clone()).await;
            assert_eq!(a.status, 400, "{}: {body}: {:?}", b.name, a.body);
            // One code whatever was wrong with the number (docs/api.md, "Batches and long polls").
            assert_eq!(a.body["error"]["code"], "validation_failed", "{}: {body}: {:?}", b.name, a.body);
            assert_eq!(a.body["error"]["details"]["field"], field, "{}: {body}: {:?}", b.name, a.body);
            assert!(a.body["error"]["message"].as_str().unwrap().contains(field), "{:?}", a.body);
        }
        // Both names at once: refused, naming both, rather than one picked.
        let both = json!({"wait": 1, "wait_seconds": 2});
        let a = s.post(&s.owner, &format!("{WS}/claim-next"), both).await;
        assert_eq!(a.status, 400, "{}: {:?}", b.name, a.body);
        assert_eq!(a.code(), "validation_failed", "{}: {:?}", b.name, a.body);
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("`wait`") && message.contains("`wait_seconds`"), "{message}");
        let item = s.get(&s.owner, &format!("{WS}/items/{r}")).await.body;
        assert_eq!(item["lease"], Value::Null, "{}: nothing was claimed", b.name);
        let claimed = s.get(&s.owner, &format!("{WS}/events?type=lease.claimed")).await.body;
        assert_eq!(claimed["events"].as_array().unwrap().len(), 0, "{}", b.name);
    }
}

#[tokio::test]
async fn a_counted_claim_next_grants_each_item_its_own_lease() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        for t in ["a", "b", "c"] {
            s.create_item(&s.owner, "default", t).await;
        }
        let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 2})).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let grants = a.body["grants"].as_array().unwrap();
        assert_eq!(grants.len(), 2, "{}", b.name);
        assert_eq!(a.body["item"], grants[0]["item"], "the single fields repeat the first grant");
        assert_eq!(a.body["lease"], grants[0]["lease"]);
        assert_ne!(grants[0]["lease"]["lease_id"], grants[1]["lease"]["lease_id"]);
        let rest = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 32})).await;
        assert_eq!(rest.body["grants"].as_array().unwrap().len(), 1, "{}: only what is ready", b.name);
        let none = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 5})).await;
        assert_eq!((none.body["item"].clone(), none.body["grants"].clone()), (Value::Null, json!([])));
    }
}

#[tokio::test]
async fn renewing_many_leases_answers_each_alone() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        for t in ["kept", "released"] {
            s.create_item(&s.owner, "default", t).await;
        }
        let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 2})).await;
        let grants = a.body["grants"].as_array().unwrap().clone();
        let (r0, r1) = (grants[0]["item"]["ref"].as_str().unwrap(), grants[1]["item"]["ref"].as_str().unwrap());
        let released = s.post(&s.owner, &format!("{WS}/items/{r1}/release"), json!({"holder": "w"})).await;
        assert_eq!(released.status, 200);
        let body = json!({"leases": [
            {"ref": r0, "epoch": grants[0]["lease"]["epoch"], "holder": "w", "ttl_seconds": 600},
            {"ref": r1, "epoch": grants[1]["lease"]["epoch"], "holder": "w"},
        ]});
        let renewed = s.post(&s.owner, &format!("{WS}/leases/renew"), body).await;
        assert_eq!(renewed.status, 200, "{}: {:?}", b.name, renewed.body);
        let results = renewed.body["results"].as_array().unwrap();
        assert_eq!(results[0]["ref"], r0);
        assert_eq!(results[0]["lease"]["ttl_seconds"], 600, "{:?}", results[0]);
        assert_eq!(results[0]["error"], Value::Null);
        assert_eq!(results[1]["ref"], r1);
        assert_eq!(results[1]["error"]["code"], "lease_lost", "{:?}", results[1]);
        assert_eq!(results[1]["lease"], Value::Null);
        // Bounds: a call names the entry it refuses and renews nothing.
        let many: Vec<Value> = (0..101).map(|_| json!({"ref": r0, "epoch": 1, "holder": "w"})).collect();
        let too_many = s.post(&s.owner, &format!("{WS}/leases/renew"), json!({"leases": many})).await;
        assert_eq!(
            (too_many.status.as_u16(), too_many.body["error"]["details"]["field"].clone()),
            (400, json!("leases"))
        );
        let bad = json!({"leases": [{"ref": r0, "epoch": 1, "holder": "w", "ttl_seconds": 60}, {"ref": "no such", "epoch": 1}]});
        let bad = s.post(&s.owner, &format!("{WS}/leases/renew"), bad).await;
        assert_eq!(bad.status, 400, "{:?}", bad.body);
        assert_eq!(bad.body["error"]["details"]["field"], "leases[1].ref");
        let item = s.get(&s.owner, &format!("{WS}/items/{r0}")).await.body;
        assert_eq!(item["lease"]["ttl_seconds"], 600, "{}: the refused call renewed nothing", b.name);
    }
}

#[tokio::test]
async fn a_waiting_claim_next_takes_an_item_the_moment_it_is_created() {
    for b in backends().await {
        let s = Arc::new(signals_only(Some(&b.url)).await);
        // `wait` is the alias of `wait_seconds` (docs/api.md, "Batches and long polls").
        for name in ["wait_seconds", "wait"] {
            let waiter = {
                let s = s.clone();
                tokio::spawn(async move {
                    s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", name: 25})).await
                })
            };
            until_waiting(&s).await;
            let r = s.create_item(&s.owner, "default", "new work").await;
            let a = waiter.await.unwrap();
            assert_eq!(a.status, 200, "{name}: {:?}", a.body);
            assert_eq!(
                a.body["item"]["ref"],
                r.as_str(),
                "{}, {name}: woken by the creation, not its deadline",
                b.name
            );
            assert_eq!(waiting(&s).await, 0);
        }
    }
}

#[tokio::test]
async fn a_long_poll_with_nothing_to_take_answers_empty_at_its_deadline() {
    let s = TestServer::start().await;
    let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "wait_seconds": 1})).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!((a.body["item"].clone(), a.body["grants"].clone()), (Value::Null, json!([])));
}

/// Across instances on one PostgreSQL database: the waiter's instance
/// commits nothing; only the database's notification can wake it.
#[tokio::test]
async fn a_long_poll_wakes_on_an_item_created_through_another_instance() {
    let Some(db) = common::ScratchDb::create().await else {
        eprintln!("SKIPPED: PAD_TEST_DATABASE_URL is unset");
        return;
    };
    let a = Arc::new(signals_only(Some(&db.url)).await);
    let b = common::TestServer::join(&db.url, &a.owner).await;
    let waiter = {
        let a = a.clone();
        tokio::spawn(async move {
            a.post(&a.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "wait_seconds": 25})).await
        })
    };
    until_waiting(&a).await;
    let r = b.create_item(&b.owner, "default", "made elsewhere").await;
    let got = waiter.await.unwrap();
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["item"]["ref"], r.as_str(), "woken through the database");
}
