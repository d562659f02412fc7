//! The HTTP API against a real server on loopback.

use crate::common;

use common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

const WS: &str = "/api/v1/workspaces/default";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_claims_have_one_winner() {
    let s = std::sync::Arc::new(TestServer::start().await);
    for round in 0..5 {
        let r = s.create_item(&s.owner, "default", &format!("race {round}")).await;
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let s = s.clone();
                let path = format!("{WS}/items/{r}/claim");
                tokio::spawn(async move {
                    s.post(&s.owner, &path, json!({"holder": format!("w{i}"), "ttl_seconds": 60})).await
                })
            })
            .collect();
        let answers: Vec<_> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
        let winners: Vec<_> = answers.iter().filter(|a| a.status == 200).collect();
        assert_eq!(winners.len(), 1, "round {round}");
        let winner = winners[0].body["lease"]["holder"].as_str().unwrap();
        for a in answers.iter().filter(|a| a.status != 200) {
            assert_eq!(a.status, 409);
            assert_eq!(a.code(), "lease_held");
            assert_eq!(a.body["error"]["details"]["holder"], winner);
            assert!(a.body["error"]["message"].as_str().unwrap().contains(winner));
            let retry: i64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&retry));
        }
    }
}

#[tokio::test]
async fn claim_contention_refresh_release_over_http() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "one").await;
    let claim = |holder: &str| json!({"holder": holder, "ttl_seconds": 120, "note": "starting"});
    let a = s.post(&s.owner, &format!("{WS}/items/{r}/claim"), claim("runner-a")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["lease"]["epoch"], 1);
    assert_eq!(a.body["refreshed"], false);
    let b = s.post(&s.owner, &format!("{WS}/items/{r}/claim"), claim("runner-b")).await;
    assert_eq!((b.status.as_u16(), b.code()), (409, "lease_held"));
    let d = &b.body["error"]["details"];
    for key in ["holder", "session_id", "epoch", "acquired_at", "renewed_at", "expires_at", "expires_in_seconds"] {
        assert!(d.get(key).is_some(), "{key} missing from {d}");
    }
    let again = s.post(&s.owner, &format!("{WS}/items/{r}/claim"), claim("runner-a")).await;
    assert_eq!(again.body["refreshed"], true);
    let shown = s.get(&s.owner, &format!("{WS}/items/{}", r.to_lowercase())).await;
    assert_eq!(shown.body["lease"]["holder"], "runner-a");
    let listed = s.get(&s.owner, &format!("{WS}/items?leased=true")).await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
    let renew = s.post(&s.owner, &format!("{WS}/items/{r}/renew"), json!({"epoch": 2, "holder": "runner-a"})).await;
    assert_eq!((renew.status.as_u16(), renew.code()), (409, "lease_lost"));
    let renew = s
        .post(&s.owner, &format!("{WS}/items/{r}/renew"), json!({"epoch": 1, "holder": "runner-a", "ttl_seconds": 30}))
        .await;
    assert_eq!(renew.body["lease"]["ttl_seconds"], 30);
    let rel = s.post(&s.owner, &format!("{WS}/items/{r}/release"), json!({"holder": "runner-a"})).await;
    assert_eq!((rel.body["released"].clone(), rel.body["reason"].clone()), (json!(true), json!("released")));
    let rel = s.post(&s.owner, &format!("{WS}/items/{r}/release"), json!({"holder": "runner-a"})).await;
    assert_eq!((rel.status.as_u16(), rel.body["released"].clone()), (200, json!(false)));
    let shown = s.get(&s.owner, &format!("{WS}/items/{r}")).await;
    assert!(shown.body.get("lease").is_none(), "no lease key once released: {}", shown.body);
    let b = s.post(&s.owner, &format!("{WS}/items/{r}/claim"), claim("runner-b")).await;
    assert_eq!((b.status.as_u16(), b.body["previous_note"].clone()), (200, json!("starting")));
}

/// L14, L15, L17 over HTTP: handles, fail, complete, exclude, and the
/// filters of issue 16, with their refusals.
#[tokio::test]
async fn complete_fail_and_filters_over_http() {
    let s = TestServer::start().await;
    let a = s.create_item(&s.owner, "default", "flaky").await;
    let b = s.create_item(&s.owner, "default", "steady").await;
    let child = s.post(&s.owner, &format!("{WS}/items"), json!({"title": "child", "parent": a})).await;
    assert_eq!(child.status, 201);
    let claim = s.post(&s.owner, &format!("{WS}/items/{a}/claim"), json!({"holder": "w", "ttl_seconds": 60})).await;
    let lease_id = claim.body["lease"]["lease_id"].as_i64().expect("the lease carries its handle");
    let once = s.post(&s.owner, &format!("{WS}/items/{a}/claim"), json!({"holder": "w", "refresh": false})).await;
    assert_eq!((once.status.as_u16(), once.code()), (409, "lease_held"));
    let stale =
        s.post(&s.owner, &format!("{WS}/items/{a}/fail"), json!({"holder": "w", "epoch": 2, "note": "x"})).await;
    assert_eq!((stale.status.as_u16(), stale.code()), (409, "lease_lost"));
    let mixed = json!({"holder": "w", "epoch": 1, "lease_id": lease_id + 1000});
    let mixed = s.post(&s.owner, &format!("{WS}/items/{a}/complete"), mixed).await;
    assert_eq!((mixed.status.as_u16(), mixed.code()), (409, "lease_lost"));
    let none = s.post(&s.owner, &format!("{WS}/items/{a}/renew"), json!({"holder": "w"})).await;
    assert_eq!((none.status.as_u16(), none.code()), (400, "validation_failed"));
    assert_eq!(none.body["error"]["details"]["field"], "epoch");
    let shown = s.get(&s.owner, &format!("{WS}/items/{a}")).await.body;
    assert_eq!((shown["failures"].clone(), shown["lease"]["lease_id"].clone()), (json!(0), json!(lease_id)));
    let failed = json!({"holder": "w", "lease_id": lease_id, "note": "disk full"});
    let failed = s.post(&s.owner, &format!("{WS}/items/{a}/fail"), failed).await;
    assert_eq!(failed.status, 200, "{:?}", failed.body);
    assert_eq!((failed.body["item"]["failures"].clone(), failed.body["quarantined"].clone()), (json!(1), json!(false)));
    assert!(failed.body["item"]["retry_at"].is_string());
    assert_eq!(failed.body["item"]["last_lease"]["ended"], "failed");
    assert_eq!(failed.body["item"]["last_lease"]["note"], "disk full");
    // The failed item waits; excluding the other leaves nothing.
    let next = s
        .post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "filter": {"exclude": [b, "TASK-3"]}}))
        .await;
    assert_eq!((next.status.as_u16(), next.body["item"].clone()), (200, Value::Null));
    let frontier = s.get(&s.owner, &format!("{WS}/frontier?exclude={b}")).await;
    assert_eq!(frontier.body["items"].as_array().unwrap().len(), 1, "{}", frontier.body);
    let next = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w"})).await;
    assert_eq!(next.body["item"]["ref"], b);
    let epoch = next.body["lease"]["epoch"].as_i64().unwrap();
    let done = s.post(&s.owner, &format!("{WS}/items/{b}/complete"), json!({"holder": "w", "epoch": epoch})).await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(
        (done.body["item"]["status"].clone(), done.body["item"]["last_lease"]["ended"].clone()),
        (json!("done"), json!("completed"))
    );
    // Filters.
    let children = s.get(&s.owner, &format!("{WS}/items?parent={}", a.to_lowercase())).await;
    assert_eq!(children.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(children.body["items"][0]["title"], "child");
    let events = s.get(&s.owner, &format!("{WS}/events?ref={a}&type=lease.failed,lease.claimed")).await;
    let kinds: Vec<&str> =
        events.body["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["lease.claimed", "lease.failed"]);
    let bad = s.get(&s.owner, &format!("{WS}/events?type=lease.exploded")).await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "validation_failed"));
    assert_eq!(bad.body["error"]["details"]["field"], "type");
    let bad = s.post(&s.owner, &format!("{WS}/items/{a}/fail"), json!({"epoch": 1, "max_failures": 0})).await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "validation_failed"));
}

/// Every mutating route × every role, and a token of another workspace.
#[tokio::test]
async fn authorization_matrix() {
    let s = TestServer::start().await;
    let editor = s.member("default", "ed@example.com", "editor").await;
    let viewer = s.member("default", "vi@example.com", "viewer").await;
    let other = s.post(&s.owner, "/api/v1/workspaces", json!({"slug": "other"})).await;
    assert_eq!(other.status, 201);
    let outsider = {
        // An owner of `other` only: a member of no item of `default`.
        let a = s
            .post(&s.owner, "/api/v1/workspaces/other/members", json!({"email": "out@example.com", "role": "owner"}))
            .await;
        assert_eq!(a.status, 200);
        let a =
            s.post(&s.owner, "/api/v1/workspaces/other/tokens", json!({"name": "o", "email": "out@example.com"})).await;
        a.body["token"].as_str().unwrap().to_string()
    };
    let victim = s.create_item(&s.owner, "default", "target").await;
    s.post(&s.owner, &format!("{WS}/items/{victim}/claim"), json!({"holder": "keeper", "ttl_seconds": 600})).await;
    // (method, path, body, minimum role: 0 viewer, 1 editor, 2 owner)
    let routes: Vec<(Method, String, Option<Value>, u8)> = vec![
        (Method::POST, format!("{WS}/items"), Some(json!({"title": "x"})), 1),
        (Method::PATCH, format!("{WS}/items/{victim}"), Some(json!({"body": "changed"})), 1),
        (Method::POST, format!("{WS}/items/{victim}/comments"), Some(json!({"body": "hi"})), 1),
        (Method::POST, format!("{WS}/items/{victim}/claim"), Some(json!({"holder": "someone"})), 1),
        (Method::POST, format!("{WS}/items/{victim}/renew"), Some(json!({"epoch": 1, "holder": "someone"})), 1),
        (Method::POST, format!("{WS}/items/{victim}/release"), Some(json!({"holder": "someone"})), 1),
        (Method::POST, format!("{WS}/items/{victim}/complete"), Some(json!({"epoch": 1, "holder": "someone"})), 1),
        (Method::POST, format!("{WS}/items/{victim}/fail"), Some(json!({"epoch": 1, "holder": "someone"})), 1),
        (
            Method::POST,
            format!("{WS}/items/{victim}/release"),
            Some(json!({"force": true, "reason": "r", "holder": "x"})),
            2,
        ),
        (Method::POST, format!("{WS}/members"), Some(json!({"email": "new@example.com", "role": "viewer"})), 2),
        (Method::POST, format!("{WS}/kinds"), Some(json!({"name": "epic", "prefix": "EPIC"})), 2),
        (Method::POST, format!("{WS}/tokens"), Some(json!({"name": "x", "email": "owner@localhost"})), 2),
        (Method::DELETE, format!("{WS}/items/{victim}"), None, 1),
        (Method::POST, format!("{WS}/items/{victim}/restore"), None, 1),
    ];
    let item_path = format!("{WS}/items/{victim}");
    for (method, path, body, min) in &routes {
        for (role, token) in [(0u8, &viewer), (1, &editor)] {
            if role >= *min {
                continue;
            }
            let before = s.get(&s.owner, &item_path).await.body;
            let a = s.call(Some(token), method.clone(), path, body.clone()).await;
            assert_eq!((a.status.as_u16(), a.code()), (403, "forbidden"), "role {role} on {method} {path}");
            assert_eq!(
                s.get(&s.owner, &item_path).await.body,
                before,
                "{method} {path} changed something for role {role}"
            );
        }
        // Another workspace's owner sees nothing here.
        let before = s.get(&s.owner, &item_path).await.body;
        let a = s.call(Some(&outsider), method.clone(), path, body.clone()).await;
        assert_eq!((a.status.as_u16(), a.code()), (404, "not_found"), "outsider on {method} {path}");
        let a = s.call(None, method.clone(), path, body.clone()).await;
        assert_eq!((a.status.as_u16(), a.code()), (401, "unauthorized"), "no token on {method} {path}");
        let a = s.call(Some("pad_wrong"), method.clone(), path, body.clone()).await;
        assert_eq!(a.status, 401, "bad token on {method} {path}");
        assert_eq!(s.get(&s.owner, &item_path).await.body, before);
    }
    // Reads: viewers may, outsiders may not.
    assert_eq!(s.get(&viewer, &format!("{WS}/items/{victim}")).await.status, 200);
    assert_eq!(s.get(&outsider, &format!("{WS}/items/{victim}")).await.status, 404);
    assert_eq!(s.get(&outsider, &format!("{WS}/items")).await.status, 404);
    // And those allowed, succeed (the owner last, since it deletes).
    for (method, path, body, min) in &routes {
        let token = if *min <= 1 { &editor } else { &s.owner };
        let a = s.call(Some(token), method.clone(), path, body.clone()).await;
        assert!(
            a.status.is_success() || a.code() == "lease_held" || a.code() == "lease_lost",
            "{method} {path}: {:?}",
            a.body
        );
    }
}

#[tokio::test]
async fn bad_input_is_refused_with_a_code_and_writes_nothing() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "one").await;
    let raw = |path: String, ct: &'static str, body: Vec<u8>| {
        let req = s.http.post(format!("{}{path}", s.url)).bearer_auth(&s.owner).header("content-type", ct).body(body);
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            (status, body["error"]["code"].as_str().unwrap_or("").to_string(), body)
        }
    };
    let items = format!("{WS}/items");
    let claim = format!("{WS}/items/{r}/claim");
    let cases: Vec<(String, &str, Vec<u8>, u16, &str)> = vec![
        (items.clone(), "application/json", b"{\"title\": ".to_vec(), 400, "bad_request"),
        (items.clone(), "application/json", b"{\"title\": \"x\", \"titel\": 1}".to_vec(), 400, "bad_request"),
        (items.clone(), "application/json", vec![b'x'; 2 * 1024 * 1024], 413, "payload_too_large"),
        (items.clone(), "text/plain", b"{\"title\": \"x\"}".to_vec(), 415, "unsupported_media_type"),
        (items.clone(), "application/json", b"{\"title\": \"a\\u0000b\"}".to_vec(), 400, "validation_failed"),
        (
            items.clone(),
            "application/json",
            b"{\"title\": \"x\", \"parent\": \"nope\"}".to_vec(),
            400,
            "validation_failed",
        ),
        (items.clone(), "application/json", b"\xff\xfe".to_vec(), 400, "bad_request"),
        (claim.clone(), "application/json", b"{\"holder\": \"a\\u0000\"}".to_vec(), 400, "validation_failed"),
        (claim.clone(), "application/json", b"{\"ttl_seconds\": 0}".to_vec(), 400, "invalid_ttl"),
        (claim.clone(), "application/json", b"{\"ttl_seconds\": 86401}".to_vec(), 400, "invalid_ttl"),
        (claim.clone(), "application/json", b"{\"ttl_seconds\": 1.5}".to_vec(), 400, "invalid_ttl"),
        (claim.clone(), "application/json", b"{\"ttl_seconds\": \"x\"}".to_vec(), 400, "invalid_ttl"),
        (claim.clone(), "application/json", b"{\"ttl_seconds\": -5}".to_vec(), 400, "invalid_ttl"),
        (format!("{WS}/items/TASK-x/claim"), "application/json", b"{}".to_vec(), 400, "validation_failed"),
        (format!("{WS}/items/TASK-999/claim"), "application/json", b"{}".to_vec(), 404, "not_found"),
    ];
    for (path, ct, body, status, code) in cases {
        let (got_status, got_code, full) = raw(path.clone(), ct, body).await;
        assert_eq!((got_status, got_code.as_str()), (status, code), "{path}: {full}");
        assert!(full["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // A TTL that is not a whole number is refused by the TTL type itself,
    // with the rule's message and no parser position.
    let (_, _, full) = raw(claim.clone(), "application/json", b"{\"ttl_seconds\": 1.5}".to_vec()).await;
    assert_eq!(full["error"]["message"], "ttl_seconds must be a whole number of seconds from 1 to 86400 (got 1.5)");
    assert_eq!(full["error"]["details"]["field"], "ttl_seconds", "{full}");
    let details = &full["error"]["details"];
    assert_eq!((&details["requested_seconds"], &details["max_seconds"]), (&json!(null), &json!(86400)), "{full}");
    // Out of range: the number asked for and the bound, as numbers.
    let (_, _, full) = raw(claim.clone(), "application/json", b"{\"ttl_seconds\": 86401}".to_vec()).await;
    assert_eq!(full["error"]["message"], "ttl_seconds must be a whole number of seconds from 1 to 86400 (got 86401)");
    let details = &full["error"]["details"];
    assert_eq!((&details["requested_seconds"], &details["max_seconds"]), (&json!(86401), &json!(86400)), "{full}");
    // Unknown fields are named.
    let (_, _, full) = raw(items.clone(), "application/json", b"{\"title\": \"x\", \"titel\": 1}".to_vec()).await;
    assert_eq!(full["error"]["details"]["field"], "titel");
    let (_, _, full) =
        raw(items.clone(), "application/json", b"{\"title\": \"x\", \"labels\": [\"ok\", \"\\u0007\"]}".to_vec()).await;
    assert_eq!(full["error"]["details"]["field"], "labels[1]");
    // Nothing was written, and the server still serves.
    let list = s.get(&s.owner, &format!("{WS}/items")).await;
    assert_eq!(list.body["items"].as_array().unwrap().len(), 1);
    assert!(list.body["items"][0].get("lease").is_none());
    assert_eq!(s.get(&s.owner, &format!("{WS}/items/{r}/history")).await.body["versions"].as_array().unwrap().len(), 1);
    let bad_query = s.get(&s.owner, &format!("{WS}/items?status=nope")).await;
    assert_eq!((bad_query.status.as_u16(), bad_query.code()), (400, "validation_failed"));
    let unknown_query = s.get(&s.owner, &format!("{WS}/items?colour=red")).await;
    assert_eq!(unknown_query.status, 400);
    assert_eq!(s.call(None, Method::GET, "/healthz", None).await.status, 200);
}

#[tokio::test]
async fn items_update_conflict_and_pages_over_http() {
    let s = TestServer::start().await;
    for i in 0..5 {
        s.create_item(&s.owner, "default", &format!("item {i}")).await;
    }
    let page = s.get(&s.owner, &format!("{WS}/items?limit=2")).await;
    assert_eq!(page.body["items"].as_array().unwrap().len(), 2);
    let cursor = page.body["next_cursor"].as_str().unwrap().to_string();
    let next = s.get(&s.owner, &format!("{WS}/items?limit=2&cursor={cursor}")).await;
    assert_eq!(next.body["items"][0]["ref"], "TASK-3");
    let item = s.get(&s.owner, &format!("{WS}/items/TASK-1")).await.body;
    let stamp = item["updated_at"].clone();
    let ok = s
        .call(
            Some(&s.owner),
            Method::PATCH,
            &format!("{WS}/items/TASK-1"),
            Some(json!({"title": "new", "expected_updated_at": stamp})),
        )
        .await;
    assert_eq!(ok.status, 200);
    let stale = s
        .call(
            Some(&s.owner),
            Method::PATCH,
            &format!("{WS}/items/TASK-1"),
            Some(json!({"title": "newer", "expected_updated_at": stamp})),
        )
        .await;
    assert_eq!((stale.status.as_u16(), stale.code()), (409, "update_conflict"));
    assert_eq!(stale.body["error"]["details"]["expected_updated_at"], stamp);
    assert_eq!(s.get(&s.owner, &format!("{WS}/items/TASK-1")).await.body["title"], "new");
}

#[tokio::test]
async fn tokens_are_shown_once_and_revocable() {
    let s = TestServer::start().await;
    let created = s.post(&s.owner, &format!("{WS}/tokens"), json!({"name": "ci"})).await;
    assert_eq!(created.status, 201);
    let token = created.body["token"].as_str().unwrap().to_string();
    let id = created.body["id"].as_i64().unwrap();
    assert_eq!(s.get(&token, "/api/v1/me").await.body["email"], "owner@localhost");
    let listed = s.get(&s.owner, &format!("{WS}/tokens")).await;
    assert!(!listed.body.to_string().contains(&token), "a listing never shows a secret");
    let del = s.call(Some(&s.owner), Method::DELETE, &format!("{WS}/tokens/{id}"), None).await;
    assert_eq!(del.status, 204);
    assert_eq!(s.get(&token, "/api/v1/me").await.status, 401);
}

/// `openapi.json` at the crate root is the committed spec; it must match the code.
/// Regenerate with `PAD_UPDATE_OPENAPI=1 cargo test -p pad-server openapi`.
#[test]
fn openapi_spec_matches_the_committed_copy() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let generated = serde_json::to_string_pretty(&pad_server::openapi::spec()).unwrap() + "\n";
    if std::env::var_os("PAD_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == generated, "openapi.json is stale: run PAD_UPDATE_OPENAPI=1 cargo test -p pad-server openapi");
    let spec: Value = serde_json::from_str(&generated).unwrap();
    for p in ["/api/v1/workspaces/{ws}/items/{ref}/claim", "/api/v1/workspaces/{ws}/items", "/api/v1/me"] {
        assert!(spec["paths"].get(p).is_some(), "{p} missing");
    }
}

/// The web session: a token becomes an HttpOnly cookie; writes need the CSRF echo.
#[tokio::test]
async fn session_cookie_needs_csrf_for_writes() {
    let s = TestServer::start().await;
    let bad = s.call(None, Method::POST, "/api/v1/session", Some(json!({"token": "pad_nope"}))).await;
    assert_eq!(bad.status, 401);
    let ok = s.call(None, Method::POST, "/api/v1/session", Some(json!({"token": s.owner}))).await;
    assert_eq!(ok.status, 204);
    let cookies: Vec<String> =
        ok.headers.get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let session = cookies.iter().find(|c| c.starts_with("pad_session=")).unwrap();
    assert!(session.contains("HttpOnly") && session.contains("SameSite=Strict"), "{session}");
    let csrf = cookies.iter().find(|c| c.starts_with("pad_csrf=")).unwrap();
    let csrf_value = csrf.split(';').next().unwrap().trim_start_matches("pad_csrf=").to_string();
    let session_id = session.split(';').next().unwrap().trim_start_matches("pad_session=").to_string();
    assert!(!session_id.contains(&s.owner) && !s.owner.contains(&session_id), "the cookie is not the token");
    let jar = format!("pad_session={session_id}; pad_csrf={csrf_value}");
    let get = s.http.get(format!("{}{WS}/items", s.url)).header("cookie", &jar).send().await.unwrap();
    assert_eq!(get.status(), 200);
    let post = |csrf: Option<&str>| {
        let mut req =
            s.http.post(format!("{}{WS}/items", s.url)).header("cookie", &jar).json(&json!({"title": "from ui"}));
        if let Some(c) = csrf {
            req = req.header("x-csrf-token", c);
        }
        req.send()
    };
    assert_eq!(post(None).await.unwrap().status(), 403);
    assert_eq!(post(Some("forged")).await.unwrap().status(), 403);
    assert_eq!(post(Some(&csrf_value)).await.unwrap().status(), 201);
    let list = s.get(&s.owner, &format!("{WS}/items")).await;
    assert_eq!(list.body["items"].as_array().unwrap().len(), 1, "only the CSRF-checked write landed");
}

/// The CSRF value is bound to the session (docs/api.md, "Web sessions"): a
/// cookie and header the caller chose themselves (`pad_csrf=evil` with
/// `X-CSRF-Token: evil`) are refused, and signing out needs the echo too.
#[tokio::test]
async fn csrf_is_bound_to_the_session_and_sign_out_needs_it() {
    let s = TestServer::start().await;
    let ok = s.call(None, Method::POST, "/api/v1/session", Some(json!({"token": s.owner}))).await;
    assert_eq!(ok.status, 204);
    let cookie = |name: &str| {
        ok.headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap())
            .find_map(|c| c.strip_prefix(&format!("{name}=")))
            .map(|c| c.split(';').next().unwrap().to_string())
            .unwrap()
    };
    let (session_id, csrf) = (cookie("pad_session"), cookie("pad_csrf"));
    let write = |jar_csrf: &str, header: &str| {
        s.http
            .post(format!("{}{WS}/items", s.url))
            .header("cookie", format!("pad_session={session_id}; pad_csrf={jar_csrf}"))
            .header("x-csrf-token", header)
            .json(&json!({"title": "from ui"}))
            .send()
    };
    let refused = write("evil", "evil").await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden", "{body}");
    assert_eq!(write(&csrf, &csrf).await.unwrap().status(), 201);

    let sign_out = |header: Option<&str>| {
        let mut req = s
            .http
            .delete(format!("{}/api/v1/session", s.url))
            .header("cookie", format!("pad_session={session_id}; pad_csrf={csrf}"));
        if let Some(h) = header {
            req = req.header("x-csrf-token", h);
        }
        req.send()
    };
    assert_eq!(sign_out(None).await.unwrap().status(), 403);
    assert_eq!(sign_out(Some("evil")).await.unwrap().status(), 403);
    assert_eq!(write(&csrf, &csrf).await.unwrap().status(), 201, "the session is still open");
    assert_eq!(sign_out(Some(&csrf)).await.unwrap().status(), 204);
    assert_eq!(write(&csrf, &csrf).await.unwrap().status(), 401, "signed out");
}
