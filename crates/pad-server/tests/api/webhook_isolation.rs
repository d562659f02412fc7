//! One member's receivers cannot hurt everyone (docs/webhooks.md,
//! "Isolation"): receivers that accept a connection and never answer hold
//! back only their own subscriptions' queues and their own account's share
//! of deliveries in flight, on both backends.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use common::{TestServer, backends};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Hostile workspaces × their subscriptions (the most one may hold).
const HOSTILE_WORKSPACES: usize = 6;
const HOOKS_EACH: usize = 20;

/// A socket that accepts every connection, reads, and never answers. Counts
/// the connections, and notes when the sender gave up on one (closed it).
struct Hanging {
    url: String,
    accepted: Arc<AtomicUsize>,
    gave_up: Arc<AtomicBool>,
}

async fn hanging() -> Hanging {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let (accepted, gave_up) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let (a, g) = (accepted.clone(), gave_up.clone());
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = l.accept().await.unwrap();
            a.fetch_add(1, Ordering::SeqCst);
            let g = g.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        g.store(true, Ordering::SeqCst);
                        return;
                    }
                }
                g.store(true, Ordering::SeqCst);
            });
        }
    });
    Hanging { url, accepted, gave_up }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hanging_receivers_hold_back_only_their_own_queues() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let hang = hanging().await;
        for w in 0..HOSTILE_WORKSPACES {
            let ws = format!("hostile-{w}");
            assert_eq!(s.post(&s.owner, "/api/v1/workspaces", json!({ "slug": ws })).await.status, 201);
            for _ in 0..HOOKS_EACH {
                let a =
                    s.post(&s.owner, &format!("/api/v1/workspaces/{ws}/webhooks"), json!({ "url": hang.url })).await;
                assert_eq!(a.status, 201, "{:?}", a.body);
            }
        }
        // Another account's workspace and receiver, which answers at once
        // (the hostile account's own other workspaces share its cap of
        // deliveries in flight: docs/webhooks.md, "Isolation").
        let (other, good) = s.other_account_with_receiver().await;

        // Everything is set up before the flood: from its first event the
        // hanging sends' 10 s bound runs, and only the wanted item's few
        // requests come after it.
        for w in 0..HOSTILE_WORKSPACES {
            s.create_item(&s.owner, &format!("hostile-{w}"), "flood").await;
        }
        // The hanging deliveries are in flight (the old loop's first round
        // of 32 at least).
        while hang.accepted.load(Ordering::SeqCst) < 32 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        s.create_item(&other, "other", "wanted").await;
        let (mut conn, _) = good.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let n = conn.read(&mut buf).await.unwrap();
        let took = started.elapsed();
        let gave_up_first = hang.gave_up.load(Ordering::SeqCst);
        conn.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n").await.unwrap();
        let head = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(head.contains("x-pad-workspace: other"), "{head}");
        eprintln!(
            "{}: with {} hanging receivers, another account's delivery arrived after {:.3} s",
            b.name,
            HOSTILE_WORKSPACES * HOOKS_EACH,
            took.as_secs_f64()
        );
        // A hanging delivery ends only at its 10 s bound: the wanted one
        // came before any did, so it waited for none of them.
        assert!(!gave_up_first, "{}: the delivery waited for hanging receivers to time out ({took:?})", b.name);
    }
}

/// docs/webhooks.md, "Paused subscriptions": the JSON shows a paused
/// subscription and its dropped count; `POST …/resume` (owners only)
/// resumes it and answers it; an unknown id is `404`, a bad one `400`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_subscription_shows_and_resumes() {
    use pad_store::AttemptResult;
    let s = TestServer::start().await;
    let hooks = "/api/v1/workspaces/default/webhooks";
    let a = s.post(&s.owner, hooks, json!({ "url": "http://127.0.0.1:9/dead", "events": ["item.created"] })).await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    assert_eq!((&a.body["paused"], &a.body["paused_at"], &a.body["dropped"]), (&json!(false), &json!(null), &json!(0)));
    let id = a.body["id"].as_i64().unwrap();
    // The server's own loop may be sending it: wait for the store to hand
    // it out, then give it up as its last attempt would.
    s.create_item(&s.owner, "default", "lost").await;
    let due = loop {
        let mut due = s.store.claim_webhook_deliveries(10, 30).await.unwrap();
        if let Some(d) = due.pop() {
            break d;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let last = pad_store::DueDelivery { attempts: pad_core::webhook::WEBHOOK_MAX_ATTEMPTS - 1, ..due };
    let refused = AttemptResult { status_code: None, error: Some("could not connect".into()), duration_ms: 1 };
    s.store.finish_webhook_delivery(&last, &refused).await.unwrap();
    let listed = s.get(&s.owner, hooks).await;
    assert_eq!(listed.body["webhooks"][0]["paused"], true, "{:?}", listed.body);
    assert!(listed.body["webhooks"][0]["paused_at"].is_string(), "{:?}", listed.body);

    let editor = s.member("default", "ed@example.com", "editor").await;
    let refused = s.post(&editor, &format!("{hooks}/{id}/resume"), json!({})).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (403, "forbidden"));
    let resumed = s.post(&s.owner, &format!("{hooks}/{id}/resume"), json!({})).await;
    assert_eq!(resumed.status, 200, "{:?}", resumed.body);
    assert_eq!((&resumed.body["id"], &resumed.body["paused"]), (&json!(id), &json!(false)));
    let missing = s.post(&s.owner, &format!("{hooks}/{}/resume", id + 100), json!({})).await;
    assert_eq!((missing.status.as_u16(), missing.code()), (404, "not_found"));
    let bad = s.post(&s.owner, &format!("{hooks}/x/resume"), json!({})).await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "bad_request"));
}
