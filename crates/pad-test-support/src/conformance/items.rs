//! Items as content (docs/api.md, "Items", "Text"): create, refs, list and
//! its filters, update with history and conflicts, delete and restore,
//! parents and blockers with the cycle check, comments, and bad input.

use std::sync::Arc;

use pad_core::lease::LeaseHandle;
use pad_core::{Item, ItemFilter, ItemPatch, ItemRef, NewItem, Priority, Role, Status};
use pad_store::{Store, StoreError};

use super::{Fixture, refs, rf};

pub async fn items_create_get_and_refs(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let new = NewItem {
        title: "Fix the thing".into(),
        body: "# Steps\n\n1. do\n\tit".into(),
        kind: Some("bug".into()),
        priority: Some(Priority::High),
        labels: vec!["backend".into(), "backend".into(), "p1".into()],
        assignee: Some("editor@example.com".into()),
        ..Default::default()
    };
    let item = f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    assert_eq!(item.item_ref.to_string(), "BUG-1");
    assert_eq!((item.kind.as_str(), item.status, item.priority), ("bug", Status::Open, Priority::High));
    assert_eq!(item.labels, vec!["backend", "p1"]);
    assert_eq!(item.assignee.as_deref(), Some("editor@example.com"));
    assert_eq!(item.created_by, "owner@example.com");
    assert_eq!(item.created_at, item.updated_at);
    assert_eq!(f.get("bug-1").await, item);
    assert_eq!(f.item("t").await.item_ref.to_string(), "TASK-1");
    assert!(matches!(f.store.get_item(&f.ws, &rf("TASK-9")).await, Err(StoreError::NotFound { .. })));
    let unknown_kind = NewItem { title: "x".into(), kind: Some("epic".into()), ..Default::default() };
    assert!(
        matches!(f.store.create_item(&f.ws, f.owner, &unknown_kind).await, Err(StoreError::Validation(e)) if e.field == "kind")
    );
    let stranger = NewItem { title: "x".into(), assignee: Some("nobody@example.com".into()), ..Default::default() };
    assert!(
        matches!(f.store.create_item(&f.ws, f.owner, &stranger).await, Err(StoreError::Validation(e)) if e.field == "assignee")
    );
    // Owners add kinds with their own prefix.
    f.store.add_kind(&f.ws, "epic", "EPIC").await.unwrap();
    let epic = f.store.create_item(&f.ws, f.owner, &unknown_kind).await.unwrap();
    assert_eq!(epic.item_ref.to_string(), "EPIC-1");
    assert!(matches!(f.store.add_kind(&f.ws, "epic2", "EPIC").await, Err(StoreError::Validation(_))));
    assert!(
        matches!(f.store.add_kind(&f.ws, "x", "lower").await, Err(StoreError::Validation(e)) if e.field == "prefix")
    );
}

pub async fn refs_are_never_reused(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    f.store.delete_item(&f.ws, f.owner, &rf("TASK-2"), LeaseHandle::default()).await.unwrap();
    assert_eq!(f.item("c").await.item_ref.to_string(), "TASK-3");
    // Numbering is per workspace.
    let other = f.store.create_workspace("other", "Other", f.owner).await.unwrap();
    let it = f.store.create_item(&other, f.owner, &NewItem { title: "x".into(), ..Default::default() }).await.unwrap();
    assert_eq!(it.item_ref.to_string(), "TASK-1");
    assert!(matches!(f.store.get_item(&other, &rf("TASK-2")).await, Err(StoreError::NotFound { .. })));
}

pub async fn items_list_filters_and_pages(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for i in 0..7 {
        let new = NewItem {
            title: format!("item {i}"),
            body: if i == 3 { "needle here".into() } else { String::new() },
            kind: Some(if i % 2 == 0 { "task" } else { "bug" }.into()),
            priority: Some(if i < 2 { Priority::High } else { Priority::Low }),
            labels: if i % 3 == 0 { vec!["x".into(), "y".into()] } else { vec!["x".into()] },
            assignee: (i == 5).then(|| "editor@example.com".to_string()),
            ..Default::default()
        };
        f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    }
    let list = |filter: ItemFilter| {
        let f = &f;
        async move {
            f.store
                .list_items(&f.ws, &filter, 100, None)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|i| i.item_ref.to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(ItemFilter::default()).await.len(), 7);
    assert_eq!(list(ItemFilter { kind: vec!["bug".into()], ..Default::default() }).await, ["BUG-1", "BUG-2", "BUG-3"]);
    assert_eq!(
        list(ItemFilter { labels: vec!["x".into(), "y".into()], ..Default::default() }).await,
        ["TASK-1", "BUG-2", "TASK-4"]
    );
    assert_eq!(list(ItemFilter { priority: vec![Priority::High], ..Default::default() }).await, ["TASK-1", "BUG-1"]);
    assert_eq!(list(ItemFilter { assignee: Some("editor@example.com".into()), ..Default::default() }).await, ["BUG-3"]);
    assert_eq!(list(ItemFilter { q: Some("NEEDLE".into()), ..Default::default() }).await, ["BUG-2"]);
    assert_eq!(list(ItemFilter { q: Some("item 6".into()), ..Default::default() }).await, ["TASK-4"]);
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-2"), &ItemPatch { status: Some(Status::Done), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(list(ItemFilter { status: vec![Status::Done], ..Default::default() }).await, ["TASK-2"]);
    f.store.claim(&f.ws, &rf("BUG-1"), &f.claim("runner-a", 60)).await.unwrap();
    assert_eq!(list(ItemFilter { leased: Some(true), ..Default::default() }).await, ["BUG-1"]);
    assert_eq!(list(ItemFilter { leased: Some(false), ..Default::default() }).await.len(), 6);
    // Pages of 3 walk everything once, in order.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = f.store.list_items(&f.ws, &ItemFilter::default(), 3, cursor.as_deref()).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|i| i.item_ref.to_string()));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, list(ItemFilter::default()).await);
    assert!(
        matches!(f.store.list_items(&f.ws, &ItemFilter::default(), 3, Some("garbage")).await, Err(StoreError::Validation(e)) if e.field == "cursor")
    );
}

pub async fn items_update_history_and_conflict(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let item = f.item("one").await;
    let patch = ItemPatch {
        title: Some("two".into()),
        status: Some(Status::InProgress),
        add_labels: vec!["a".into(), "b".into()],
        expected_updated_at: Some(item.updated_at),
        ..Default::default()
    };
    let updated = f.store.update_item(&f.ws, f.editor, &rf("TASK-1"), &patch).await.unwrap();
    assert_eq!((updated.title.as_str(), updated.status), ("two", Status::InProgress));
    assert_eq!(updated.labels, ["a", "b"]);
    assert!(updated.updated_at > item.updated_at);
    // A second writer with the old timestamp loses, and nothing is written.
    let stale =
        ItemPatch { title: Some("three".into()), expected_updated_at: Some(item.updated_at), ..Default::default() };
    match f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &stale).await {
        Err(StoreError::UpdateConflict { expected, actual }) => {
            assert_eq!(expected, item.updated_at);
            assert_eq!(actual, updated.updated_at);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get("TASK-1").await, updated);
    let rm = ItemPatch { remove_labels: vec!["a".into()], ..Default::default() };
    assert_eq!(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &rm).await.unwrap().labels, ["b"]);
    let history = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(history.len(), 3, "{history:?}");
    assert_eq!(history.iter().map(|v| v.version).collect::<Vec<_>>(), [3, 2, 1], "newest first");
    assert_eq!(history[1].actor, "editor@example.com");
    assert_eq!(history[1].changes["title"]["from"], "one");
    assert_eq!(history[1].changes["title"]["to"], "two");
    assert_eq!(history[1].changes["status"]["to"], "in-progress");
    // A patch that changes nothing adds no version.
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-1"), &ItemPatch { title: Some("two".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 3);
}

pub async fn items_soft_delete_and_restore(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    f.item("two").await;
    let deleted = f.store.delete_item(&f.ws, f.owner, &rf("TASK-1"), LeaseHandle::default()).await.unwrap();
    assert!(deleted.deleted_at.is_some());
    let refs: Vec<_> = f
        .store
        .list_items(&f.ws, &ItemFilter::default(), 50, None)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.item_ref.to_string())
        .collect();
    assert_eq!(refs, ["TASK-2"]);
    assert!(f.get("TASK-1").await.deleted_at.is_some());
    let restored = f.store.restore_item(&f.ws, f.owner, &rf("TASK-1")).await.unwrap();
    assert!(restored.deleted_at.is_none());
    assert_eq!(f.store.list_items(&f.ws, &ItemFilter::default(), 50, None).await.unwrap().items.len(), 2);
    let history = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(history.len(), 3);
}

pub async fn items_links_parent_and_blockers(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("epic").await;
    f.item("blocker").await;
    let child = NewItem {
        title: "child".into(),
        parent: Some("task-1".into()),
        blocked_by: vec!["TASK-2".into()],
        ..Default::default()
    };
    let c = f.store.create_item(&f.ws, f.owner, &child).await.unwrap();
    assert_eq!(c.parent.as_ref().map(ToString::to_string).as_deref(), Some("TASK-1"));
    assert_eq!(c.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-2"]);
    let missing = NewItem { title: "x".into(), blocked_by: vec!["TASK-99".into()], ..Default::default() };
    assert!(
        matches!(f.store.create_item(&f.ws, f.owner, &missing).await, Err(StoreError::Validation(e)) if e.field == "blocked_by[0]")
    );
    let own_parent = ItemPatch { parent: Some(Some("TASK-3".into())), ..Default::default() };
    assert!(
        matches!(f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &own_parent).await, Err(StoreError::Validation(e)) if e.field == "parent")
    );
    let cleared = ItemPatch { parent: Some(None), blocked_by: Some(vec![]), ..Default::default() };
    let c = f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &cleared).await.unwrap();
    assert_eq!((c.parent, c.blocked_by.len()), (None, 0));
}

/// A `blocked_by` cycle would keep every item in it off the frontier for
/// ever, so an update that would close one is refused, naming the cycle,
/// and writes nothing (docs/api.md, "Items").
pub async fn items_blocker_cycles_are_refused_naming_the_cycle(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["one", "two", "three", "four"] {
        f.item(t).await;
    }
    let block = |refs: &[&str]| ItemPatch {
        blocked_by: Some(refs.iter().map(|r| r.to_string()).collect()),
        ..Default::default()
    };
    // A chain and a diamond are fine: TASK-1 → TASK-2 → TASK-3, TASK-1 → TASK-3.
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &block(&["TASK-2", "TASK-3"])).await.unwrap();
    f.store.update_item(&f.ws, f.owner, &rf("TASK-2"), &block(&["TASK-3"])).await.unwrap();
    // A new item may be blocked by anything that exists: it cannot close a cycle.
    let new = NewItem { title: "five".into(), blocked_by: vec!["TASK-1".into()], ..Default::default() };
    f.store.create_item(&f.ws, f.owner, &new).await.unwrap();

    let refused = |r: Result<Item, StoreError>| match r {
        Err(StoreError::Validation(e)) => {
            assert_eq!(e.field, "blocked_by");
            e.message
        }
        other => panic!("expected a blocked_by cycle to be refused, got {other:?}"),
    };
    let m = refused(f.store.update_item(&f.ws, f.owner, &rf("TASK-2"), &block(&["TASK-1"])).await);
    assert!(m.contains("would create a cycle: TASK-2 → TASK-1 → TASK-2"), "{m}");
    let m = refused(f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &block(&["TASK-4", "TASK-1"])).await);
    assert!(m.contains("TASK-3 → TASK-1 → TASK-3"), "the shortest cycle is named: {m}");
    let m = refused(f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &block(&["TASK-5"])).await);
    assert!(m.contains("TASK-3 → TASK-5 → TASK-1 → TASK-3"), "{m}");

    // Nothing was written by the refusals.
    assert!(f.get("TASK-3").await.blocked_by.is_empty());
    assert_eq!(f.get("TASK-2").await.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-3"]);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-3")).await.unwrap().len(), 1);
    // Breaking the chain first makes the same link acceptable.
    f.store.update_item(&f.ws, f.owner, &rf("TASK-2"), &block(&[])).await.unwrap();
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &block(&["TASK-2"])).await.unwrap();
    f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &block(&["TASK-2"])).await.unwrap();
}

/// Two updates that each add one half of a cycle, at once: at most one wins.
pub async fn items_concurrent_blocker_links_never_close_a_cycle(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    let pairs = 16;
    for i in 0..pairs * 2 {
        f.item(&format!("item {i}")).await;
    }
    let mut tasks = Vec::new();
    for p in 0..pairs {
        let (a, b) = (format!("TASK-{}", 2 * p + 1), format!("TASK-{}", 2 * p + 2));
        for (from, to) in [(a.clone(), b.clone()), (b, a)] {
            let f = f.clone();
            tasks.push(tokio::spawn(async move {
                let patch = ItemPatch { blocked_by: Some(vec![to]), ..Default::default() };
                f.store.update_item(&f.ws, f.owner, &rf(&from), &patch).await
            }));
        }
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(StoreError::Validation(e)) => assert_eq!(e.field, "blocked_by"),
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(won, pairs, "exactly one link of each pair is accepted");
    for p in 0..pairs {
        let a = f.get(&format!("TASK-{}", 2 * p + 1)).await;
        let b = f.get(&format!("TASK-{}", 2 * p + 2)).await;
        assert_eq!(a.blocked_by.len() + b.blocked_by.len(), 1, "{a:?} {b:?}");
    }
}

/// Zero-width and bidirectional control characters can make one holder or
/// label look like another; every one-line field refuses them, naming the
/// character, before anything is written (docs/api.md, "Text").
pub async fn invisible_characters_are_refused_in_one_line_fields(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("target").await;
    let named = |r: Result<(), StoreError>, field: &str, code: &str| match r {
        Err(StoreError::Validation(e)) => {
            assert_eq!(e.field, field);
            assert!(e.message.contains(code), "{field}: {}", e.message);
        }
        other => panic!("{field}: expected a refusal, got {other:?}"),
    };
    let base = || NewItem { title: "ok".into(), ..Default::default() };
    let ok = |r: Result<Item, StoreError>| r.map(|_| ());
    named(
        ok(f.store.create_item(&f.ws, f.owner, &NewItem { title: "pay \u{202E}fdp.exe".into(), ..base() }).await),
        "title",
        "U+202E RIGHT-TO-LEFT OVERRIDE",
    );
    named(
        ok(f.store.create_item(&f.ws, f.owner, &NewItem { labels: vec!["urgent\u{200B}".into()], ..base() }).await),
        "labels[0]",
        "U+200B ZERO WIDTH SPACE",
    );
    let patch = ItemPatch { add_labels: vec!["\u{FEFF}ops".into()], ..Default::default() };
    named(ok(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &patch).await), "add_labels[0]", "U+FEFF");
    named(
        f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner\u{200D}-a", 60)).await.map(|_| ()),
        "holder",
        "U+200D ZERO WIDTH JOINER",
    );
    let mut req = f.claim("runner-a", 60);
    req.session_id = Some("s\u{2066}1".into());
    named(f.store.claim(&f.ws, &rf("TASK-1"), &req).await.map(|_| ()), "session_id", "U+2066 LEFT-TO-RIGHT ISOLATE");
    named(f.store.create_workspace("ops", "Ops\u{2028}", f.owner).await.map(|_| ()), "name", "U+2028 LINE SEPARATOR");
    named(f.store.set_member(&f.ws, "own\u{200B}er@example.com", Role::Viewer).await.map(|_| ()), "email", "U+200B");
    // Nothing was written; visible text of any script still passes.
    assert_eq!(f.store.list_items(&f.ws, &ItemFilter::default(), 50, None).await.unwrap().items.len(), 1);
    assert_eq!(f.get("TASK-1").await.lease, None);
    assert_eq!(f.store.list_workspaces(f.owner).await.unwrap().len(), 1);
    let fine = NewItem { title: "مرحبا 日本語 Zoë".into(), labels: vec!["équipe".into()], ..base() };
    f.store.create_item(&f.ws, f.owner, &fine).await.unwrap();
    f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("runner-ü", 60)).await.unwrap();
}

pub async fn comments_are_append_only(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let item = f.item("one").await;
    f.store.add_comment(&f.ws, f.editor, &rf("TASK-1"), "first").await.unwrap();
    f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "second\nline").await.unwrap();
    let comments = f.store.list_comments(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(
        comments.iter().map(|c| (c.author.as_str(), c.body.as_str())).collect::<Vec<_>>(),
        [("editor@example.com", "first"), ("owner@example.com", "second\nline")]
    );
    let got = f.get("TASK-1").await;
    assert_eq!(got.comments_count, 2);
    assert_eq!(got.updated_at, item.updated_at, "a comment is not an edit of the item");
    assert!(
        matches!(f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "  ").await, Err(StoreError::Validation(e)) if e.field == "body")
    );
}

pub async fn bad_input_names_the_field_and_writes_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let field_of = |r: Result<Item, StoreError>| match r {
        Err(StoreError::Validation(e)) => e.field,
        other => panic!("expected a validation error, got {other:?}"),
    };
    let base = || NewItem { title: "ok".into(), ..Default::default() };
    let cases: Vec<(NewItem, &str)> = vec![
        (NewItem { title: "a\0b".into(), ..base() }, "title"),
        (NewItem { title: "a\u{1b}[31m".into(), ..base() }, "title"),
        (NewItem { title: "x".repeat(501), ..base() }, "title"),
        (NewItem { title: "".into(), ..base() }, "title"),
        (NewItem { body: "a\0".into(), ..base() }, "body"),
        (NewItem { body: "x".repeat(256 * 1024 + 1), ..base() }, "body"),
        (NewItem { labels: vec!["ok".into(), "bad\u{7}".into()], ..base() }, "labels[1]"),
        (NewItem { labels: vec!["l".repeat(65)], ..base() }, "labels[0]"),
        (NewItem { labels: (0..51).map(|i| i.to_string()).collect(), ..base() }, "labels"),
        (NewItem { parent: Some("TASK".into()), ..base() }, "parent"),
        (NewItem { blocked_by: vec!["-1".into()], ..base() }, "blocked_by[0]"),
        (NewItem { kind: Some("Bad Kind".into()), ..base() }, "kind"),
        (NewItem { assignee: Some("not-an-email".into()), ..base() }, "assignee"),
    ];
    for (new, field) in cases {
        assert_eq!(field_of(f.store.create_item(&f.ws, f.owner, &new).await), field);
    }
    assert!(
        f.store
            .list_items(&f.ws, &ItemFilter { include_deleted: true, ..Default::default() }, 50, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Refused creates consumed no ref number.
    assert_eq!(f.item("first").await.item_ref.to_string(), "TASK-1");

    let patch = ItemPatch { title: Some("x\0".into()), ..Default::default() };
    assert_eq!(field_of(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &patch).await), "title");
    // Refs are parsed once, before the store is called (the server's edge).
    for bad in ["TASK-1-2", "TASK-\0"] {
        assert_eq!(ItemRef::parse_field("ref", bad).unwrap_err().field, "ref", "{bad:?}");
    }
    assert_eq!(f.get("TASK-1").await.title, "first");
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 1);

    for (holder, session, field) in [
        ("a\0", None, "holder"),
        ("", None, "holder"),
        (&"h".repeat(201) as &str, None, "holder"),
        ("ok", Some("s\n"), "session_id"),
    ] {
        let mut req = f.claim(holder, 60);
        req.session_id = session.map(str::to_string);
        match f.store.claim(&f.ws, &rf("TASK-1"), &req).await {
            Err(StoreError::Validation(e)) => assert_eq!(e.field, field),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(f.get("TASK-1").await.lease, None);
    assert!(
        matches!(f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "x\0").await, Err(StoreError::Validation(e)) if e.field == "body")
    );
    assert!(f.store.list_comments(&f.ws, &rf("TASK-1")).await.unwrap().is_empty());

    for slug in ["Bad", "-x", "a_b", "", "x\0"] {
        assert!(
            matches!(f.store.create_workspace(slug, "n", f.owner).await, Err(StoreError::Validation(e)) if e.field == "slug"),
            "{slug}"
        );
    }
    assert!(
        matches!(f.store.create_workspace("ok", "n\0", f.owner).await, Err(StoreError::Validation(e)) if e.field == "name")
    );
    assert!(
        matches!(f.store.create_workspace("acme", "again", f.owner).await, Err(StoreError::Validation(e)) if e.field == "slug")
    );
    assert_eq!(f.store.list_workspaces(f.owner).await.unwrap().len(), 1);
    assert!(matches!(f.store.ensure_user("bad\0@x").await, Err(StoreError::Validation(e)) if e.field == "email"));
}

/// Ref allocation under concurrency: 32 creates at once get 32 distinct refs.
pub async fn concurrent_creates_allocate_distinct_refs(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let f = f.clone();
            tokio::spawn(async move {
                f.store
                    .create_item(&f.ws, f.owner, &NewItem { title: format!("c{i}"), ..Default::default() })
                    .await
                    .unwrap()
                    .item_ref
                    .number
            })
        })
        .collect();
    let mut numbers: Vec<i64> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    numbers.sort();
    assert_eq!(numbers, (1..=32).collect::<Vec<_>>());
}

/// `parent` on list, `blocked_by_open`, and atomic blocker edits.
pub async fn items_list_by_parent_and_open_blockers(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("epic").await;
    for title in ["child 1", "child 2"] {
        let new = NewItem { title: title.into(), parent: Some("TASK-1".into()), ..Default::default() };
        f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    }
    f.item("loose").await;
    let children = ItemFilter { parent: Some("TASK-1".parse().unwrap()), ..Default::default() };
    let page = f.store.list_items(&f.ws, &children, 50, None).await.unwrap();
    assert_eq!(refs(&page.items), ["TASK-2", "TASK-3"]);
    let add = |refs: &[&str]| ItemPatch {
        add_blocked_by: refs.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    };
    f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["TASK-2"])).await.unwrap();
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["task-3", "TASK-2"])).await.unwrap();
    assert_eq!(item.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-2", "TASK-3"]);
    assert_eq!(item.blocked_by_open, item.blocked_by);
    let l = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    f.store.complete(&f.ws, &rf("TASK-2"), &f.complete("w", LeaseHandle::epoch(l.epoch))).await.unwrap();
    let item = f.get("TASK-4").await;
    assert_eq!(item.blocked_by_open.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-3"]);
    let remove = ItemPatch { remove_blocked_by: vec!["TASK-3".into()], ..Default::default() };
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &remove).await.unwrap();
    assert_eq!(item.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-2"]);
    assert!(item.blocked_by_open.is_empty());
    let e = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["TASK-4"])).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "add_blocked_by"), "{e:?}");
    let e = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["TASK-99"])).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(_)), "{e:?}");
    assert_eq!(f.get("TASK-4").await.blocked_by.len(), 1);
}
