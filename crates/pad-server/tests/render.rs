//! `POST /workspaces/{ws}/render`: the editor's markdown preview
//! (docs/api.md). Sanitized like `body.html`, bounded like an item body,
//! open to any member of the workspace and to no one else.

mod common;

use common::TestServer;
use serde_json::json;

#[tokio::test]
async fn preview_is_sanitized_bounded_and_per_workspace() {
    let s = TestServer::start().await;
    let viewer = s.member("default", "viewer@example.com", "viewer").await;
    let path = "/api/v1/workspaces/default/render";

    let a = s
        .post(
            &viewer,
            path,
            json!({"markdown": "## Plan\n\n**bold** <script>window.x=1</script> <img src=x onerror=alert(1)> [y](javascript:alert(1))"}),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let html = a.body["html"].as_str().unwrap();
    assert!(html.contains("<h2>Plan</h2>") && html.contains("<strong>bold</strong>"), "{html}");
    for bad in ["<script", "onerror", "javascript:"] {
        assert!(!html.contains(bad), "{bad} survived: {html}");
    }

    // As large as an item body may be, and not a byte more.
    let max = pad_core::BODY_MAX_BYTES;
    assert_eq!(s.post(&viewer, path, json!({"markdown": "a".repeat(max)})).await.status, 200);
    let a = s.post(&viewer, path, json!({"markdown": "a".repeat(max + 1)})).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{:?}", a.body);
    assert_eq!(a.body["error"]["details"]["field"], "markdown");

    let a = s.post(&viewer, path, json!({"markdown": "x", "extra": 1})).await;
    assert_eq!(a.status, 400, "{:?}", a.body);

    // A workspace the caller does not reach answers 404, as every workspace route does.
    assert_eq!(s.post(&s.owner, "/api/v1/workspaces", json!({"slug": "other"})).await.status, 201);
    let a = s.post(&viewer, "/api/v1/workspaces/other/render", json!({"markdown": "x"})).await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    let a = s.call(None, reqwest::Method::POST, path, Some(json!({"markdown": "x"}))).await;
    assert_eq!(a.status, 401);
}
