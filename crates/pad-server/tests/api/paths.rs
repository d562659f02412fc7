//! Path parameters are read once, typed, before the handler runs: an `{id}`
//! that is not a number is `400 bad_request` naming `id` and the thing it
//! identifies; a `{ref}` that is not a ref is `400 validation_failed` naming
//! `ref`, over HTTP and over MCP alike; and the workspace comes first, so a
//! non-member learns nothing from a bad ref (docs/api.md, "Errors").

use crate::common;

use common::TestServer;
use reqwest::Method;
use serde_json::json;

const WS: &str = "/api/v1/workspaces/default";

#[tokio::test]
async fn ids_that_are_not_numbers_are_refused_naming_id() {
    let s = TestServer::start().await;
    for bad in ["abc", "1.5", "99999999999999999999", "%20"] {
        for (method, path, what) in [
            (Method::DELETE, format!("{WS}/tokens/{bad}"), "token"),
            (Method::DELETE, format!("{WS}/webhooks/{bad}"), "webhook"),
            (Method::POST, format!("{WS}/webhooks/{bad}/test"), "webhook"),
            (Method::POST, format!("{WS}/webhooks/{bad}/resume"), "webhook"),
            (Method::GET, format!("{WS}/webhooks/{bad}/deliveries"), "webhook"),
        ] {
            let a = s.call(Some(&s.owner), method.clone(), &path, None).await;
            assert_eq!((a.status.as_u16(), a.code()), (400, "bad_request"), "{method} {path}: {:?}", a.body);
            assert_eq!(a.body["error"]["details"]["field"], "id", "{method} {path}: {:?}", a.body);
            assert_eq!(a.body["error"]["message"], format!("{what} id must be a number"), "{method} {path}");
        }
    }
    // A number that names nothing is the store's answer.
    let a = s.call(Some(&s.owner), Method::DELETE, &format!("{WS}/webhooks/999"), None).await;
    assert_eq!((a.status.as_u16(), a.code()), (404, "not_found"), "{:?}", a.body);
}

#[tokio::test]
async fn the_workspace_is_resolved_before_the_ref() {
    let s = TestServer::start().await;
    for path in ["/api/v1/workspaces/elsewhere/items/TASK-0", "/api/v1/workspaces/elsewhere/items/TASK-1"] {
        let a = s.get(&s.owner, path).await;
        assert_eq!((a.status.as_u16(), a.code()), (404, "not_found"), "{path}: {:?}", a.body);
    }
    let a = s.get(&s.owner, &format!("{WS}/items/TASK-0/history")).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{:?}", a.body);
    assert_eq!(a.body["error"]["details"]["field"], "ref");
    // A member's email is the store's to check: unknown is not found.
    let a = s.call(Some(&s.owner), Method::DELETE, &format!("{WS}/members/nobody@example.com"), None).await;
    assert_eq!((a.status.as_u16(), a.code()), (404, "not_found"), "{:?}", a.body);
    assert_eq!(s.post(&s.owner, &format!("{WS}/items"), json!({"title": "still serving"})).await.status, 201);
}
