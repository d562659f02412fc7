//! `pad import` killed with SIGKILL at many points, then run again
//! (docs/operations.md, "Export and import"): after every kill the workspace
//! holds none of the file's items or all of them, and after the re-run it
//! holds each exactly once; a further run writes nothing.

use crate::common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use common::server::TestServer;
use pad_client::{Client, Url};
use pad_core::api::ListQuery;

const WS: &str = "default";
const ITEMS: usize = 400;

/// A GitHub issue list of `ITEMS` issues with bodies of a few KiB, so the
/// one request takes a while to send and to write.
fn issues() -> String {
    let body = "lorem ipsum dolor sit amet ".repeat(150);
    let list: Vec<serde_json::Value> = (1..=ITEMS)
        .map(|n| {
            serde_json::json!({"number": n, "title": format!("issue {n}"), "body": body, "state": "OPEN",
                "labels": [{"name": "imported"}],
                "comments": [{"author": {"login": "ann"}, "createdAt": "2026-01-02T03:04:05Z", "body": "a comment"}]})
        })
        .collect();
    serde_json::to_string(&list).unwrap()
}

/// Titles of the workspace's items, with how often each occurs.
async fn titles(c: &Client) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut cursor = None;
    loop {
        let q = ListQuery { limit: Some(500), cursor: cursor.take(), ..Default::default() };
        let page = c.list_items(WS, &q).await.unwrap();
        for i in page.items {
            *out.entry(i.title).or_default() += 1;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
}

#[test]
fn a_killed_import_leaves_nothing_or_everything_and_a_rerun_imports_once() {
    let server = TestServer::start();
    let client = Client::new(Url::parse(&server.url).unwrap(), server.token.clone()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let path = server.home.parent().unwrap().join("issues.json");
    std::fs::write(&path, issues()).unwrap();

    // Kill points spread from before the request is sent to after it could
    // have been answered; which of them land mid-request varies with the
    // machine, and every outcome must be nothing or everything.
    let mut whole = 0;
    for delay_ms in [0, 5, 10, 20, 40, 80, 160, 400, 1000, 2500, 5000] {
        let mut child = server.pad().args(["import", path.to_str().unwrap()]).stdout(Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let seen = rt.block_on(titles(&client));
        let total: usize = seen.values().sum();
        assert!(total == 0 || total == ITEMS, "killed after {delay_ms} ms: {total} of {ITEMS} items exist");
        assert!(seen.values().all(|n| *n == 1), "killed after {delay_ms} ms: an item exists twice");
        if total == ITEMS {
            whole += 1;
        }
    }
    println!("killed `pad import` 11 times: {whole} runs had committed whole, {} wrote nothing", 11 - whole);

    let out = server.pad_output(["--format", "json", "import", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen = rt.block_on(titles(&client));
    assert_eq!(seen.len(), ITEMS);
    assert!(seen.values().all(|n| *n == 1), "an item exists twice after the re-run");

    // Once more: the key is known, nothing is written.
    let out = server.pad_output(["--format", "json", "import", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["replayed"], true, "{report}");
    assert_eq!(rt.block_on(titles(&client)).values().sum::<usize>(), ITEMS);
}
