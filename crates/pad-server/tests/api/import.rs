//! `POST …/import` (docs/api.md, "Import"; "Limits"): what one import may
//! write in all, on every backend.

use crate::common;

use common::{TestServer, backends};
use pad_core::api::{IMPORT_ITEMS_MAX, IMPORT_WRITES_MAX};
use serde_json::{Value, json};

const IMPORT: &str = "/api/v1/workspaces/default/import";

/// `items` tasks, each with `comments` one-character comments.
fn import(key: &str, items: usize, comments: usize) -> Value {
    let items: Vec<Value> = (1..=items)
        .map(|i| json!({"ref": format!("T-{i}"), "item": {"title": format!("t{i}")}, "comments": vec!["c"; comments]}))
        .collect();
    json!({"import_key": key, "items": items})
}

/// Finding: one import could hold SQLite's only writer for minutes (2000
/// items of 500 comments each), stalling every other workspace's writes.
/// An import past the total cap is refused before anything is written,
/// with a message that says how to split it; its key stays free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_past_the_total_cap_is_refused_and_writes_nothing() {
    // Within the per-item caps, over the total.
    let per_item = IMPORT_WRITES_MAX / IMPORT_ITEMS_MAX + 1;
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let a = s.post(&s.owner, IMPORT, import("big", IMPORT_ITEMS_MAX, per_item)).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{}: {}", b.name, a.body["error"]);
        assert_eq!(a.body["error"]["details"]["field"], "items", "{}", b.name);
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&IMPORT_WRITES_MAX.to_string()) && message.contains("split"), "{}: {message}", b.name);
        let listed = s.get(&s.owner, "/api/v1/workspaces/default/items").await;
        assert_eq!(listed.body["items"], json!([]), "{}: a refused import wrote items", b.name);
        // The key was not taken: a smaller import under it writes.
        let a = s.post(&s.owner, IMPORT, import("big", 2, 1)).await;
        assert_eq!(a.status, 201, "{}: {:?}", b.name, a.body);
    }
}
