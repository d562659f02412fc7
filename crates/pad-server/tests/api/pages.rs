//! History and comments come a page at a time (docs/api.md, "Pages of
//! history and comments"): bounded in entries and in bytes, whatever an
//! item has gathered, and a client that follows `next_cursor` gets every
//! entry once, in order.

use crate::common::{TestServer, backends};

use reqwest::Method;
use serde_json::{Value, json};

/// Follows `next_cursor` from `path` (which has a `?`); every page's
/// `key` entries in order, and the number of pages.
async fn all_pages(s: &TestServer, path: &str, key: &str) -> (Vec<Value>, usize) {
    let (mut all, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}&cursor={c}"),
            None => path.to_string(),
        };
        let a = s.get(&s.owner, &url).await;
        assert_eq!(a.status, 200, "{url}: {:?}", a.body);
        all.extend(a.body[key].as_array().unwrap().iter().cloned());
        pages += 1;
        match a.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (all, pages),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_and_comments_come_in_bounded_pages() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let r = s.create_item(&s.owner, "default", "paged").await;
        let item = format!("/api/v1/workspaces/default/items/{r}");
        for i in 0..60 {
            let a = s.call(Some(&s.owner), Method::PATCH, &item, Some(json!({"title": format!("t{i}")}))).await;
            assert_eq!(a.status, 200, "{}: {:?}", b.name, a.body);
        }
        for i in 0..230 {
            let a = s.post(&s.owner, &format!("{item}/comments"), json!({"body": format!("c{i}")})).await;
            assert_eq!(a.status, 201, "{}: {:?}", b.name, a.body);
        }

        // Defaults: 20 versions, newest first; 100 comments, oldest first.
        let first = s.get(&s.owner, &format!("{item}/history")).await;
        let versions = first.body["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 20, "{}", b.name);
        assert_eq!(versions[0]["version"], 61, "{}", b.name);
        assert!(first.body["next_cursor"].is_string(), "{}", b.name);
        let first = s.get(&s.owner, &format!("{item}/comments")).await;
        assert_eq!(first.body["comments"].as_array().unwrap().len(), 100, "{}", b.name);
        assert_eq!(first.body["comments"][0]["body"], "c0", "{}", b.name);

        // Every page followed: each entry once, in order; limits clamp.
        let (all, pages) = all_pages(&s, &format!("{item}/history?limit=1000"), "versions").await;
        let numbers: Vec<i64> = all.iter().map(|v| v["version"].as_i64().unwrap()).collect();
        assert_eq!(numbers, (1..=61).rev().collect::<Vec<_>>(), "{}", b.name);
        assert_eq!(pages, 2, "{}: at most 50 versions a page", b.name);
        let (all, pages) = all_pages(&s, &format!("{item}/comments?limit=7"), "comments").await;
        let bodies: Vec<String> = all.iter().map(|c| c["body"].as_str().unwrap().to_string()).collect();
        assert_eq!(bodies, (0..230).map(|i| format!("c{i}")).collect::<Vec<_>>(), "{}", b.name);
        assert_eq!(pages, 33, "{}", b.name);

        // Bad input: a clear error, nothing else.
        for bad in ["cursor=x", "cursor=-3", "limit=ten", "page=2"] {
            let a = s.get(&s.owner, &format!("{item}/history?{bad}")).await;
            assert_eq!(a.status, 400, "{}: {bad}: {:?}", b.name, a.body);
        }
        let a = s.get(&s.owner, &format!("{item}/comments?cursor=x")).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{}", b.name);
        assert_eq!(a.body["error"]["details"]["field"], "cursor", "{}", b.name);
    }
}

/// A page stops at 4 MiB of changes: 30 edits of a 200 KB body make
/// versions of 400 KB each (the body before and after), so a page holds
/// about ten of them, not the 50 asked for, and following the pages still
/// gives all 31. Before, one answer held every version (200 edits of a
/// 250 KB body: 143 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_page_is_bounded_in_bytes() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "heavy").await;
    let item = format!("/api/v1/workspaces/default/items/{r}");
    for i in 0..30 {
        let body = format!("{i:03}").repeat(200_000 / 3);
        let a = s.call(Some(&s.owner), Method::PATCH, &item, Some(json!({"body": body}))).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
    }
    let page = s.get(&s.owner, &format!("{item}/history?limit=50")).await;
    let held = page.body["versions"].as_array().unwrap().len();
    let bytes = serde_json::to_string(&page.body).unwrap().len();
    assert!((2..50).contains(&held), "{held} versions in one page");
    assert!(bytes < pad_core::api::PAGE_BYTES_MAX + 500_000, "a page of {bytes} bytes");
    let (all, pages) = all_pages(&s, &format!("{item}/history?limit=50"), "versions").await;
    assert_eq!(all.len(), 31);
    assert!(pages >= 3, "{pages} pages");
    println!("31 versions of ~400 KB: {held} in the first page ({bytes} bytes), {pages} pages");
}
