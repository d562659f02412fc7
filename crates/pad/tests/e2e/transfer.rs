//! `pad export` → `pad import` between two real servers (docs/operations.md,
//! "Export and import"): every item's title, status, priority, labels,
//! parent and blockers come back; refs are kept when free and mapped when
//! not; a failing import leaves no live item behind.

use crate::common;

use std::collections::BTreeMap;
use std::process::Output;

use common::server::TestServer;
use pad_client::{Client, Url};
use pad_core::api::{ListQuery, NewComment};
use pad_core::{Item, ItemPatch, NewItem, Priority, Status};

const WS: &str = "default";

fn client(server: &TestServer) -> Client {
    Client::new(Url::parse(&server.url).unwrap(), server.token.clone()).unwrap()
}

fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// What must survive the trip, with links as refs.
type Shape = (String, Status, Priority, Vec<String>, Option<String>, Vec<String>);

fn shape(i: &Item) -> Shape {
    (
        i.title.clone(),
        i.status,
        i.priority,
        i.labels.clone(),
        i.parent.as_ref().map(ToString::to_string),
        i.blocked_by.iter().map(ToString::to_string).collect(),
    )
}

async fn live_items(c: &Client) -> BTreeMap<String, Item> {
    let page = c.list_items(WS, &ListQuery { limit: Some(500), ..Default::default() }).await.unwrap();
    assert!(page.next_cursor.is_none());
    page.items.into_iter().map(|i| (i.item_ref.to_string(), i)).collect()
}

async fn fill(c: &Client) {
    let new = |title: String| NewItem { title, ..Default::default() };
    let mut refs: Vec<String> = Vec::new();
    for i in 0..12 {
        let item = NewItem {
            kind: Some(if i % 4 == 3 { "bug" } else { "task" }.into()),
            priority: Some([Priority::Low, Priority::Medium, Priority::High, Priority::Critical][i % 4]),
            labels: (0..i % 3).map(|l| format!("label-{l}")).collect(),
            parent: (i > 2).then(|| refs[i % 3].clone()),
            blocked_by: if i > 5 { vec![refs[i - 1].clone(), refs[i - 4].clone()] } else { vec![] },
            ..new(format!("item {i}: ünïcode & \"quotes\""))
        };
        refs.push(c.create_item(WS, &item).await.unwrap().item_ref.to_string());
    }
    // A parent that comes later in number order than its child.
    c.update_item(WS, &refs[0], &ItemPatch { parent: Some(Some(refs[11].clone())), ..Default::default() })
        .await
        .unwrap();
    for (i, status) in [(1, Status::Done), (2, Status::InProgress), (4, Status::Cancelled)] {
        c.update_item(WS, &refs[i], &ItemPatch { status: Some(status), ..Default::default() }).await.unwrap();
    }
    c.add_comment(WS, &refs[1], &NewComment { body: "first".into() }).await.unwrap();
    c.delete_item(WS, &refs[9], &Default::default()).await.unwrap();
}

#[test]
fn export_then_import_round_trips_items_and_maps_taken_refs() {
    let source = TestServer::start();
    let target = TestServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let exported = rt.block_on(async {
        fill(&client(&source)).await;
        live_items(&client(&source)).await
    });
    let file = source.home.parent().unwrap().join("export.jsonl");
    let out = source.pad_output(["export", "--output", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 12, "the deleted item is exported too");

    // Into a fresh workspace: every ref is free, so every ref is kept.
    let out = target.pad_output(["import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("12 kept their refs, 0 got new ones"), "{}", text(&out));
    let imported = rt.block_on(live_items(&client(&target)));
    let expect: BTreeMap<&String, Shape> = exported.iter().map(|(r, i)| (r, shape(i))).collect();
    let got: BTreeMap<&String, Shape> = imported.iter().map(|(r, i)| (r, shape(i))).collect();
    assert_eq!(got, expect);
    let comments = rt.block_on(client(&target).comments(WS, "TASK-2")).unwrap().comments;
    assert!(comments[0].body.ends_with("\n\nfirst") && comments[0].body.contains("owner@localhost"), "{comments:?}");

    // The same file again: its key is known, so nothing is written.
    let out = target.pad_output(["import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing written now"), "{}", text(&out));
    assert_eq!(rt.block_on(live_items(&client(&target))).len(), imported.len());

    // A changed file (one more byte) is another import: the refs are taken
    // now, so all are mapped, and links follow.
    let changed = file.with_extension("changed.jsonl");
    std::fs::write(&changed, std::fs::read_to_string(&file).unwrap() + "\n").unwrap();
    let out = target.pad_output(["--format", "json", "import", changed.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mapping: BTreeMap<String, String> = report["mapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["from"].as_str().unwrap().to_string(), m["to"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(mapping.len(), 12, "{report}");
    let all = rt.block_on(live_items(&client(&target)));
    for (old, item) in &exported {
        let copy = &all[&mapping[old]];
        let (title, status, priority, labels, parent, blockers) = shape(item);
        let mapped = (
            title,
            status,
            priority,
            labels,
            parent.map(|p| mapping[&p].clone()),
            blockers.iter().map(|b| mapping[b].clone()).collect::<Vec<_>>(),
        );
        assert_eq!(shape(copy), mapped, "{old} → {}", mapping[old]);
    }
}

#[test]
fn a_failing_import_leaves_nothing_behind() {
    let server = TestServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = server.home.parent().unwrap();
    rt.block_on(fill(&client(&server)));
    let file = dir.join("export.jsonl");
    assert!(server.pad_output(["export", "-o", file.to_str().unwrap()]).status.success());
    let lines: Vec<String> = std::fs::read_to_string(&file).unwrap().lines().map(str::to_string).collect();
    let before = rt.block_on(live_items(&client(&server)));

    // Caught before writing: a link out of the file, an invalid title, junk.
    let mut first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    first["parent"] = "TASK-99".into();
    let mut empty_title: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    empty_title["title"] = "  ".into();
    for (name, bad) in [
        ("outside", format!("{first}\n{}", lines[1..].join("\n"))),
        ("title", format!("{}\n{empty_title}", lines[0])),
        ("junk", format!("{}\nnot json", lines[0])),
    ] {
        let path = dir.join(format!("{name}.jsonl"));
        std::fs::write(&path, bad).unwrap();
        let out = server.pad_output(["import", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out));
    }
    // Caught by the server half-way (an item blocked by itself): its one
    // transaction wrote nothing, deleted items and used numbers included.
    let mut own: serde_json::Value = serde_json::from_str(&lines[5]).unwrap();
    own["blocked_by"] = serde_json::json!([own["ref"].clone()]);
    let mut bad = lines.clone();
    bad[5] = own.to_string();
    let path = dir.join("self-blocked.jsonl");
    std::fs::write(&path, bad.join("\n")).unwrap();
    let out = server.pad_output(["import", path.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was written"), "{}", text(&out));
    assert_eq!(rt.block_on(live_items(&client(&server))).keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    let next = rt.block_on(client(&server).create_item(WS, &NewItem { title: "after".into(), ..Default::default() }));
    assert_eq!(next.unwrap().item_ref.to_string(), "TASK-10", "the failed import used up numbers");
}

#[test]
fn a_github_issue_list_imports_as_tasks_with_the_mapping_printed() {
    let server = TestServer::start();
    let issues = r#"[
        {"number": 41, "title": "Crash on start", "body": "boom", "state": "CLOSED",
         "labels": [{"name": "bug"}, {"name": "good first issue"}],
         "comments": [{"author": {"login": "ann"}, "createdAt": "2026-01-02T03:04:05Z", "body": "fixed in #42"}]},
        {"number": 45, "title": "Dark mode", "body": "", "state": "OPEN", "labels": [], "comments": []}
    ]"#;
    let path = server.home.parent().unwrap().join("issues.json");
    std::fs::write(&path, issues).unwrap();
    let out = server.pad_output(["import", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("#41 -> TASK-1") && stdout.contains("#45 -> TASK-2"), "{stdout}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = client(&server);
    let items = rt.block_on(live_items(&c));
    let crash = &items["TASK-1"];
    assert_eq!((crash.status, crash.labels.clone()), (Status::Done, vec!["bug".into(), "good first issue".into()]));
    assert_eq!(items["TASK-2"].status, Status::Open);
    let comments = rt.block_on(c.comments(WS, "TASK-1")).unwrap().comments;
    assert_eq!(comments[0].body, "_ann, 2026-01-02T03:04:05Z:_\n\nfixed in #42");
}
