//! `POST /workspaces/{ws}/render`: the editor's markdown preview
//! (docs/api.md). Sanitized like `body.html`, bounded like an item body,
//! open to any member of the workspace and to no one else.

use crate::common;

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

/// One HTTP/1.1 request on its own connection, from a plain thread (so the
/// server's runtime being busy cannot stall the client): the status line and
/// when the answer came, or `None` if none came within `wait`.
fn raw_request(addr: &str, request: String, wait: std::time::Duration) -> Option<(String, std::time::Instant)> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(wait)).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut first = [0u8; 12];
    conn.read_exact(&mut first).ok()?;
    let answered = std::time::Instant::now();
    Some((String::from_utf8_lossy(&first).into_owned(), answered))
}

/// Rendering runs off the async workers and is bounded by nesting depth
/// (docs/api.md, "Markdown"): while four requests render the most hostile
/// bodies allowed, `/healthz` is answered, before those renders are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_hostile_bodies_render() {
    let s = TestServer::start().await;
    let addr = s.url.strip_prefix("http://").unwrap().to_string();
    let renders: Vec<_> = (0..4)
        .map(|i| {
            // Distinct bodies, so none is answered from the renderer's memory.
            let shape = if i % 2 == 0 { ">" } else { "> - " };
            let mut md = shape.repeat(pad_core::BODY_MAX_BYTES / shape.len());
            md.truncate(pad_core::BODY_MAX_BYTES - 2);
            md.push_str(&i.to_string());
            let json = json!({ "markdown": md }).to_string();
            let request = format!(
                "POST /api/v1/workspaces/default/render HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
                s.owner,
                json.len()
            );
            let addr = addr.clone();
            std::thread::spawn(move || raw_request(&addr, request, std::time::Duration::from_secs(120)))
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let health = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_string();
    let (status, healthy_at) =
        raw_request(&addr, health, std::time::Duration::from_secs(5)).expect("/healthz answers within 5 s");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let done: Vec<_> = renders.into_iter().map(|t| t.join().unwrap().expect("each render is answered")).collect();
    for (status, _) in &done {
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    }
    let last = done.iter().map(|(_, at)| *at).max().unwrap();
    assert!(healthy_at < last, "/healthz waited for the renders");
}
