//! The authorization matrix, generated from the route table: every operation
//! of the OpenAPI spec (which is generated from the handlers) × no token, a
//! bad token, and callers whose roles differ between two workspaces (none,
//! viewer, editor, owner in each, with unscoped tokens and with tokens scoped
//! to the first), × the workspace the target lives in. A route added without
//! a rule here fails the test. Runs on SQLite and, when
//! `PAD_TEST_DATABASE_URL` is set, on PostgreSQL.

use crate::common;

use common::{TestServer, backends};
use reqwest::Method;
use serde_json::{Value, json};

/// Who may call a route: `Public` needs no token; `Anyone` any valid token
/// (not workspace-scoped); the roles are minimums inside the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Min {
    Public,
    Anyone,
    Viewer,
    Editor,
    Owner,
}

/// The rule and a valid body for each operation.
fn rule(method: &str, path: &str) -> Option<(Min, Option<Value>)> {
    use Min::*;
    let item = "/api/v1/workspaces/{ws}/items/{ref}";
    let ws = "/api/v1/workspaces/{ws}";
    Some(match (method, path) {
        ("POST", "/api/v1/session") | ("DELETE", "/api/v1/session") => (Public, Some(json!({"token": "pad_x"}))),
        ("GET", "/api/v1/me") | ("GET", "/api/v1/workspaces") => (Anyone, None),
        ("POST", "/api/v1/workspaces") => (Anyone, Some(json!({"slug": "ws-by-matrix"}))),
        ("GET", p) if p == ws || p == format!("{ws}/me") => (Viewer, None),
        ("GET", p)
            if ["/events", "/events/stream", "/frontier", "/items", "/kinds", "/members", "/tokens"]
                .iter()
                .any(|s| p == format!("{ws}{s}")) =>
        {
            (Viewer, None)
        }
        ("GET", p)
            if p == item || ["/body.html", "/comments", "/history"].iter().any(|s| p == format!("{item}{s}")) =>
        {
            (Viewer, None)
        }
        ("POST", p) if p == format!("{ws}/render") => (Viewer, Some(json!({"markdown": "**hi**"}))),
        ("POST", p) if p == format!("{ws}/items") => (Editor, Some(json!({"title": "made by the matrix"}))),
        ("PATCH", p) if p == item => (Editor, Some(json!({"body": "edited by the matrix"}))),
        ("DELETE", p) if p == item => (Editor, None),
        ("POST", p) if p == format!("{item}/restore") => (Editor, None),
        ("POST", p) if p == format!("{item}/comments") => (Editor, Some(json!({"body": "hi"}))),
        ("POST", p) if p == format!("{item}/claim") => (Editor, Some(json!({"holder": "matrix", "ttl_seconds": 5}))),
        ("POST", p) if p == format!("{item}/renew") => (Editor, Some(json!({"epoch": 1, "holder": "matrix"}))),
        ("POST", p) if p == format!("{item}/release") => (Editor, Some(json!({"holder": "matrix"}))),
        ("POST", p) if p == format!("{item}/complete") => (Editor, Some(json!({"epoch": 1, "holder": "matrix"}))),
        ("POST", p) if p == format!("{item}/fail") => (Editor, Some(json!({"epoch": 1, "holder": "matrix"}))),
        ("POST", p) if p == format!("{item}/requeue") => (Owner, None),
        ("POST", p) if p == format!("{ws}/claim-next") => (Editor, Some(json!({"holder": "matrix", "ttl_seconds": 5}))),
        // docs/api.md, "Import": editors into existing kinds.
        ("POST", p) if p == format!("{ws}/import") => (
            Editor,
            Some(
                json!({"import_key": "matrix", "items": [{"ref": "OLD-1", "item": {"title": "imported by the matrix"}}]}),
            ),
        ),
        ("POST", p) if p == format!("{ws}/leases/renew") => {
            (Editor, Some(json!({"leases": [{"ref": "TASK-1", "epoch": 1, "holder": "matrix"}]})))
        }
        // Creating a token for oneself is anyone's; for another member, owners'.
        ("POST", p) if p == format!("{ws}/tokens") => (Owner, Some(json!({"name": "m", "email": "owner@localhost"}))),
        ("DELETE", p) if p == format!("{ws}/tokens/{{id}}") => (Owner, None),
        ("POST", p) if p == format!("{ws}/members") => {
            (Owner, Some(json!({"email": "new@example.com", "role": "viewer"})))
        }
        ("DELETE", p) if p == format!("{ws}/members/{{email}}") => (Owner, None),
        ("POST", p) if p == format!("{ws}/kinds") => (Owner, Some(json!({"name": "epic", "prefix": "EPIC"}))),
        // docs/webhooks.md: all owners'.
        ("GET", p) if p == format!("{ws}/webhooks") || p == format!("{ws}/webhooks/{{id}}/deliveries") => (Owner, None),
        ("POST", p) if p == format!("{ws}/webhooks") => (Owner, Some(json!({"url": "http://127.0.0.1:9/matrix"}))),
        ("DELETE", p) if p == format!("{ws}/webhooks/{{id}}") => (Owner, None),
        ("POST", p) if p == format!("{ws}/webhooks/{{id}}/test") => (Owner, None),
        ("POST", p) if p == format!("{ws}/webhooks/{{id}}/resume") => (Owner, None),
        // docs/api.md, "Workspace settings".
        ("PATCH", p) if p == ws => (Owner, Some(json!({"quarantine_after_expiries": 4}))),
        _ => return None,
    })
}

/// Sends and answers the status, without reading the body (event streams
/// never end).
async fn status(s: &TestServer, token: Option<&str>, method: &Method, path: &str, body: &Option<Value>) -> u16 {
    let mut req = s.http.request(method.clone(), format!("{}{path}", s.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    req.send().await.unwrap().status().as_u16()
}

const WORKSPACES: [&str; 2] = ["default", "elsewhere"];

/// A caller: its role in each workspace (`None`: no member) and whether its
/// token is scoped to `default`.
struct Caller {
    label: String,
    token: String,
    roles: [Option<Min>; 2],
    scoped: bool,
}

impl Caller {
    /// The role this caller acts with in workspace `i`.
    fn role_in(&self, i: usize) -> Option<Min> {
        if self.scoped && i != 0 { None } else { self.roles[i] }
    }
}

fn role_name(r: Min) -> &'static str {
    match r {
        Min::Viewer => "viewer",
        Min::Editor => "editor",
        _ => "owner",
    }
}

/// Users with every pair of roles (default: viewer/editor/owner; elsewhere:
/// none/viewer/editor/owner), each with an unscoped token; and the owners of
/// `elsewhere` once more with a token scoped to `default`.
async fn callers(s: &TestServer) -> Vec<Caller> {
    assert_eq!(s.post(&s.owner, "/api/v1/workspaces", json!({"slug": "elsewhere"})).await.status, 201);
    let mut all = Vec::new();
    for d in [Min::Viewer, Min::Editor, Min::Owner] {
        for e in [None, Some(Min::Viewer), Some(Min::Editor), Some(Min::Owner)] {
            let email = format!("{}-{}@example.com", role_name(d), e.map_or("none", role_name));
            for (ws, role) in [("default", Some(d)), ("elsewhere", e)] {
                if let Some(r) = role {
                    let path = format!("/api/v1/workspaces/{ws}/members");
                    let a = s.post(&s.owner, &path, json!({"email": email, "role": role_name(r)})).await;
                    assert_eq!(a.status, 200, "{:?}", a.body);
                }
            }
            let token = s.unscoped_token(&email).await;
            if e == Some(Min::Owner) {
                let scoped = s.post(
                    &token,
                    "/api/v1/workspaces/default/tokens",
                    json!({"name": "scoped", "scope": "workspace"}),
                );
                let scoped = scoped.await;
                assert_eq!(scoped.status, 201, "{:?}", scoped.body);
                all.push(Caller {
                    label: format!("{email} (scoped to default)"),
                    token: scoped.body["token"].as_str().unwrap().to_string(),
                    roles: [Some(d), e],
                    scoped: true,
                });
            }
            all.push(Caller { label: email, token, roles: [Some(d), e], scoped: false });
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_authorized_per_role_and_workspace() {
    for b in backends().await {
        // The matrix invents many users: the per-account budgets are another test's (access.rs).
        let s = TestServer::start_on_with(&b.url, |st| st.accounts = pad_server::limits::AccountLimiter::off()).await;
        let checked = matrix(&s).await;
        println!("{}: authorization matrix: {checked} route x caller x workspace checks, 0 leaks", b.name);
    }
}

async fn matrix(s: &TestServer) -> usize {
    let callers = callers(s).await;
    for ws in WORKSPACES {
        s.create_item(&s.owner, ws, "the target").await;
    }
    // A webhook of workspace `ws`: the one there, or a new one (the
    // workspace's cap stays far away).
    let hook = |ws: &'static str| async move {
        let path = format!("/api/v1/workspaces/{ws}/webhooks");
        let listed = s.get(&s.owner, &path).await;
        if let Some(id) = listed.body["webhooks"].as_array().and_then(|h| h.first()).map(|h| h["id"].clone()) {
            return id.as_i64().unwrap().to_string();
        }
        let made = s.post(&s.owner, &path, json!({"url": "http://127.0.0.1:9/matrix"})).await;
        assert_eq!(made.status, 201, "{:?}", made.body);
        made.body["id"].as_i64().unwrap().to_string()
    };
    // A token of the owner's scoped to workspace `ws`, to be revoked.
    let victim = |ws: &'static str| async move {
        let path = format!("/api/v1/workspaces/{ws}/tokens");
        let t = s.post(&s.owner, &path, json!({"name": "victim", "scope": "workspace"})).await;
        assert_eq!(t.status, 201, "{:?}", t.body);
        t.body["id"].as_i64().unwrap().to_string()
    };
    // A fresh viewer of workspace `ws`, to be removed.
    let fresh = std::sync::atomic::AtomicUsize::new(0);
    let fresh = &fresh;
    let member = |ws: &'static str| async move {
        let n = fresh.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let email = format!("gone-{n}@example.com");
        let path = format!("/api/v1/workspaces/{ws}/members");
        let a = s.post(&s.owner, &path, json!({"email": email, "role": "viewer"})).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        email
    };
    let spec = serde_json::to_value(pad_server::openapi::spec()).unwrap();
    let mut checked = 0;
    let mut unruled = Vec::new();
    for (path, ops) in spec["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let upper = method.to_uppercase();
            let Some((min, body)) = rule(&upper, path) else {
                unruled.push(format!("{upper} {path}"));
                continue;
            };
            let m = Method::from_bytes(upper.as_bytes()).unwrap();
            let concrete = |ws: &str, id: &str| {
                path.replace("{ws}", ws).replace("{ref}", "TASK-1").replace("{id}", id).replace("{email}", id)
            };
            let has_id = path.contains("{id}");
            let webhook_id = path.contains("/webhooks/");
            let has_email = path.contains("{email}");
            if min != Min::Public {
                let url = concrete("default", "1");
                assert_eq!(status(s, None, &m, &url, &body).await, 401, "no token: {upper} {path}");
                assert_eq!(status(s, Some("pad_bogus"), &m, &url, &body).await, 401, "bad token: {upper} {path}");
            }
            if min == Min::Public {
                // Signing in takes the token in the body; anyone's works.
                for c in &callers {
                    let got = status(s, None, &m, path, &Some(json!({ "token": c.token }))).await;
                    assert!(got < 400, "{}: {upper} {path}: {got}", c.label);
                    checked += 1;
                }
                continue;
            }
            if !path.contains("{ws}") {
                for c in &callers {
                    let got = status(s, Some(&c.token), &m, path, &body).await;
                    // A scoped token may not create workspaces; the rest answers anyone.
                    if c.scoped && upper == "POST" {
                        assert_eq!(got, 403, "{}: {upper} {path}", c.label);
                    } else {
                        assert!(![401, 403, 404].contains(&got), "{}: {upper} {path}: {got}", c.label);
                    }
                    checked += 1;
                }
                continue;
            }
            for (i, ws) in WORKSPACES.into_iter().enumerate() {
                for c in &callers {
                    // Earlier routes may have deleted the target; every call starts from a live item.
                    s.call(
                        Some(&s.owner),
                        Method::POST,
                        &format!("/api/v1/workspaces/{ws}/items/TASK-1/restore"),
                        None,
                    )
                    .await;
                    let id = if webhook_id {
                        hook(ws).await
                    } else if has_id {
                        victim(ws).await
                    } else if has_email {
                        member(ws).await
                    } else {
                        String::new()
                    };
                    let got = status(s, Some(&c.token), &m, &concrete(ws, &id), &body).await;
                    let at = format!("{} in {ws} ({:?}): {upper} {path}", c.label, c.role_in(i));
                    match c.role_in(i) {
                        None => assert_eq!(got, 404, "{at}: a non-member learns nothing"),
                        Some(r) if r >= min => assert!(![401, 403, 404].contains(&got), "{at}: allowed, got {got}"),
                        Some(_) => assert_eq!(got, 403, "{at}: must be refused"),
                    }
                    checked += 1;
                    if has_id {
                        // A token or webhook that lives in the other workspace,
                        // addressed through this one. Webhook routes refuse a
                        // role below owner before looking anything up.
                        let other =
                            if webhook_id { hook(WORKSPACES[1 - i]).await } else { victim(WORKSPACES[1 - i]).await };
                        let got = status(s, Some(&c.token), &m, &concrete(ws, &other), &body).await;
                        let expected = if webhook_id && c.role_in(i).is_some_and(|r| r < min) { 403 } else { 404 };
                        assert_eq!(got, expected, "{at}: another workspace's token or webhook");
                        checked += 1;
                    }
                    if has_email {
                        // A member of the other workspace only, removed through this one.
                        let other = member(WORKSPACES[1 - i]).await;
                        let got = status(s, Some(&c.token), &m, &concrete(ws, &other), &body).await;
                        let expected = if c.role_in(i).is_some_and(|r| r < Min::Owner) { 403 } else { 404 };
                        assert_eq!(got, expected, "{at}: another workspace's member");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(unruled.is_empty(), "routes without an authorization rule in this test: {unruled:?}");
    // Listing reaches only what a token may reach.
    for c in &callers {
        let listed = s.get(&c.token, "/api/v1/workspaces").await;
        let slugs = listed.body["workspaces"].as_array().unwrap().iter().map(|w| w["slug"].as_str().unwrap());
        // The one a caller created during the matrix aside.
        let slugs: Vec<&str> = slugs.filter(|w| WORKSPACES.contains(w)).collect();
        let expected: Vec<&str> = (0..2).filter(|i| c.role_in(*i).is_some()).map(|i| WORKSPACES[i]).collect();
        assert_eq!(slugs, expected, "{}: GET /workspaces", c.label);
    }
    assert!(checked >= 25 * 15 * 2);
    checked
}
