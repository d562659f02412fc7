//! The authorization matrix, generated from the route table: every operation
//! of the OpenAPI spec (which is generated from the handlers) × no token, a
//! bad token, viewer, editor, owner, and another workspace's owner. A route
//! added without a rule here fails the test.

mod common;

use common::TestServer;
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
        ("POST", p) if p == format!("{ws}/claim-next") => (Editor, Some(json!({"holder": "matrix", "ttl_seconds": 5}))),
        // Creating a token for oneself is anyone's; for another member, owners'.
        ("POST", p) if p == format!("{ws}/tokens") => (Owner, Some(json!({"name": "m", "email": "owner@localhost"}))),
        ("DELETE", p) if p == format!("{ws}/tokens/{{id}}") => (Owner, None),
        ("POST", p) if p == format!("{ws}/members") => {
            (Owner, Some(json!({"email": "new@example.com", "role": "viewer"})))
        }
        ("POST", p) if p == format!("{ws}/kinds") => (Owner, Some(json!({"name": "epic", "prefix": "EPIC"}))),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_authorized_per_role_and_workspace() {
    let s = TestServer::start().await;
    let viewer = s.member("default", "viewer@example.com", "viewer").await;
    let editor = s.member("default", "editor@example.com", "editor").await;
    // An owner of another workspace, and no member of `default`.
    let outsider = {
        let other = s.post(&s.owner, "/api/v1/workspaces", json!({"slug": "elsewhere"})).await;
        assert_eq!(other.status, 201);
        s.post(&s.owner, "/api/v1/workspaces/elsewhere/members", json!({"email": "out@example.com", "role": "owner"}))
            .await;
        let t = s
            .post(&s.owner, "/api/v1/workspaces/elsewhere/tokens", json!({"name": "o", "email": "out@example.com"}))
            .await;
        t.body["token"].as_str().unwrap().to_string()
    };
    s.create_item(&s.owner, "default", "the target").await;

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
            // Earlier routes may have deleted the target; every route starts from a live item.
            s.call(Some(&s.owner), Method::POST, "/api/v1/workspaces/default/items/TASK-1/restore", None).await;
            // A fresh token to revoke each time the route is allowed to succeed.
            let concrete =
                |path: &str, id: &str| path.replace("{ws}", "default").replace("{ref}", "TASK-1").replace("{id}", id);
            let victim = || async {
                let t = s.post(&s.owner, "/api/v1/workspaces/default/tokens", json!({"name": "victim"})).await;
                t.body["id"].as_i64().unwrap().to_string()
            };
            let id = victim().await;
            let url = concrete(path, &id);
            let scoped = path.contains("{ws}");

            if min != Min::Public {
                assert_eq!(status(&s, None, &m, &url, &body).await, 401, "no token: {upper} {path}");
                assert_eq!(status(&s, Some("pad_bogus"), &m, &url, &body).await, 401, "bad token: {upper} {path}");
            }
            let outsider_status = status(&s, Some(&outsider), &m, &url, &body).await;
            if scoped {
                assert_eq!(outsider_status, 404, "another workspace's owner: {upper} {path}");
            } else {
                assert!(outsider_status < 400 || min == Min::Public, "outsider on {upper} {path}: {outsider_status}");
            }
            for (role, token) in [(Min::Viewer, &viewer), (Min::Editor, &editor), (Min::Owner, &s.owner)] {
                let url = if path.contains("{id}") { concrete(path, &victim().await) } else { url.clone() };
                // Signing in takes the token in the body.
                let body = if min == Min::Public { Some(json!({ "token": token })) } else { body.clone() };
                let got = status(&s, Some(token), &m, &url, &body).await;
                if role >= min {
                    assert!(![401, 403, 404].contains(&got), "{role:?} should be allowed {upper} {path}, got {got}");
                } else {
                    assert_eq!(got, 403, "{role:?} must be refused {upper} {path}");
                }
                checked += 1;
            }
        }
    }
    assert!(unruled.is_empty(), "routes without an authorization rule in this test: {unruled:?}");
    println!("authorization matrix: {checked} route x role checks, 0 leaks");
    assert!(checked >= 30 * 3);
}
