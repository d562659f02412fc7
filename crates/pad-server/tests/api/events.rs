//! The event stream (docs/api.md, Events): its `ref` and `type` filters are
//! applied by the server, as on `GET …/events`, and only a committed event
//! wakes the open streams.

use crate::common;

use std::time::Duration;

use common::{TestServer, backends};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::TryRecvError;

const WS: &str = "/api/v1/workspaces/default";

/// An open SSE response, read into events (the `data:` of each message).
struct Sse {
    resp: reqwest::Response,
    text: String,
}

impl Sse {
    async fn open(s: &TestServer, query: &str) -> Sse {
        let resp = s
            .http
            .get(format!("{}{WS}/events/stream?{query}", s.url))
            .bearer_auth(&s.owner)
            .header("last-event-id", "0")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{query}");
        Sse { resp, text: String::new() }
    }

    /// Every event the stream sends until (and with) the first that `last`
    /// matches; fails after 10 s.
    async fn until(&mut self, last: impl Fn(&Value) -> bool) -> Vec<Value> {
        let read = async {
            loop {
                let events: Vec<Value> = self
                    .text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| serde_json::from_str(d.trim()).unwrap())
                    .collect();
                if let Some(n) = events.iter().position(&last) {
                    return events[..=n].to_vec();
                }
                let chunk = self.resp.chunk().await.unwrap().expect("the stream ended");
                self.text.push_str(&String::from_utf8_lossy(&chunk));
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.unwrap_or_else(|_| panic!("stalled: {}", self.text))
    }
}

fn is(kind: &str, item_ref: &str) -> impl Fn(&Value) -> bool {
    let (kind, item_ref) = (kind.to_string(), item_ref.to_string());
    move |e| e["type"] == kind && e["ref"] == item_ref
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_filtered_by_ref_gets_only_that_items_events() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let one = s.create_item(&s.owner, "default", "one").await;
        let two = s.create_item(&s.owner, "default", "two").await;
        // Lower case: a ref is read in any case, as on `GET …/events`.
        let mut stream = Sse::open(&s, &format!("ref={}", one.to_lowercase())).await;
        let path = format!("{WS}/items/{two}");
        let a = s.call(Some(&s.owner), reqwest::Method::PATCH, &path, Some(json!({"title": "2"}))).await;
        assert_eq!(a.status, 200, "{}: {:?}", b.name, a.body);
        assert_eq!(s.post(&s.owner, &format!("{WS}/items/{two}/comments"), json!({"body": "hi"})).await.status, 201);
        assert_eq!(s.post(&s.owner, &format!("{WS}/items/{two}/claim"), json!({"holder": "w"})).await.status, 200);
        assert_eq!(s.post(&s.owner, &format!("{WS}/items/{one}/claim"), json!({"holder": "w"})).await.status, 200);
        let got = stream.until(is("lease.claimed", &one)).await;
        let seen: Vec<(&str, &str)> =
            got.iter().map(|e| (e["type"].as_str().unwrap(), e["ref"].as_str().unwrap())).collect();
        assert_eq!(seen, [("item.created", one.as_str()), ("lease.claimed", one.as_str())], "{}", b.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_filtered_by_type_gets_only_those_events() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let one = s.create_item(&s.owner, "default", "one").await;
        let two = s.create_item(&s.owner, "default", "two").await;
        let mut stream = Sse::open(&s, "type=lease.claimed").await;
        assert_eq!(s.post(&s.owner, &format!("{WS}/items/{two}/claim"), json!({"holder": "w"})).await.status, 200);
        assert_eq!(s.post(&s.owner, &format!("{WS}/items/{two}/comments"), json!({"body": "hi"})).await.status, 201);
        let released = s.post(&s.owner, &format!("{WS}/items/{two}/release"), json!({"holder": "w", "epoch": 1})).await;
        assert_eq!(released.status, 200, "{}: {:?}", b.name, released.body);
        assert_eq!(s.post(&s.owner, &format!("{WS}/items/{one}/claim"), json!({"holder": "w"})).await.status, 200);
        let got = stream.until(is("lease.claimed", &one)).await;
        let seen: Vec<(&str, &str)> =
            got.iter().map(|e| (e["type"].as_str().unwrap(), e["ref"].as_str().unwrap())).collect();
        assert_eq!(seen, [("lease.claimed", two.as_str()), ("lease.claimed", one.as_str())], "{}", b.name);
    }
}

/// The stream checks its filters as the page does: an unknown type is
/// `validation_failed` naming `type`, before any stream opens.
#[tokio::test]
async fn a_stream_with_an_unknown_type_is_refused_naming_type() {
    let s = TestServer::start().await;
    // An open stream's body never ends: a stream where a refusal was due is
    // a failure, not a hang.
    let get = |query: &'static str| {
        let s = &s;
        async move {
            let path = format!("{WS}/events/stream?{query}");
            tokio::time::timeout(Duration::from_secs(5), s.get(&s.owner, &path)).await.expect("a stream opened")
        }
    };
    let bad = get("type=lease.exploded").await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "validation_failed"), "{:?}", bad.body);
    assert_eq!(bad.body["error"]["details"]["field"], "type");
    let bad = get("ref=not%20a%20ref").await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "validation_failed"), "{:?}", bad.body);
    assert_eq!(bad.body["error"]["details"]["field"], "ref");
}

/// Streams and the webhook loop are woken by a committed event only: a
/// render preview, a claim-next that finds nothing and a sign-in write no
/// event and wake nothing; a create does. The wake-ups are read from the
/// server's own channel, subscribed before it starts, so nothing is timed.
#[tokio::test]
async fn only_a_committed_event_wakes_the_streams() {
    let mut wakes = None;
    let s = TestServer::start_with(|st| wakes = Some(st.wakes.subscribe())).await;
    let mut wakes = wakes.unwrap();
    let a = s.post(&s.owner, &format!("{WS}/render"), json!({"markdown": "**hi**"})).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w"})).await;
    assert_eq!((a.status.as_u16(), a.body["item"].clone()), (200, Value::Null), "{:?}", a.body);
    let a = s.call(None, reqwest::Method::POST, "/api/v1/session", Some(json!({"token": s.owner}))).await;
    assert!(a.status.is_success(), "{:?}", a.body);
    assert_eq!(wakes.try_recv(), Err(TryRecvError::Empty), "a request that wrote no event woke the streams");

    let r = s.create_item(&s.owner, "default", "wakes").await;
    assert_eq!(wakes.try_recv(), Ok(()), "creating {r} woke no stream");
    assert_eq!(s.post(&s.owner, &format!("{WS}/items/{r}/claim"), json!({"holder": "w"})).await.status, 200);
    assert_eq!(wakes.try_recv(), Ok(()), "claiming {r} woke no stream");
    // A refresh (L3) writes no event (docs/api.md, Events).
    assert_eq!(s.post(&s.owner, &format!("{WS}/items/{r}/claim"), json!({"holder": "w"})).await.status, 200);
    assert_eq!(wakes.try_recv(), Err(TryRecvError::Empty), "a refresh woke the streams");
}
