//! Webhook targets (docs/webhooks.md, "Where deliveries go"): URLs that can
//! never be delivered are refused when subscribed, and unless the operator
//! allows private targets, a delivery or test to a loopback, private,
//! link-local or unspecified address is refused after the name resolves,
//! in every spelling, without contacting it.

use crate::common;

use common::TestServer;
use serde_json::json;

const HOOKS: &str = "/api/v1/workspaces/default/webhooks";

#[tokio::test]
async fn undeliverable_urls_are_refused_naming_the_field() {
    let s = TestServer::start().await;
    for url in [
        "http://:18901/",
        "http://example.com:99999/",
        "http://%zz/",
        "http://xn--zz/",
        "ftp://example.com/",
        "gopher://example.com/",
        "http://[::1/",
    ] {
        let a = s.post(&s.owner, HOOKS, json!({ "url": url })).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{url}: {:?}", a.body);
        assert_eq!(a.body["error"]["details"]["field"], "url", "{url}");
        assert!(a.body["error"]["message"].as_str().unwrap().contains("url"), "{url}: {:?}", a.body);
    }
}

#[tokio::test]
async fn private_targets_are_refused_in_every_spelling_without_revealing_ports() {
    let s = TestServer::start_with(|state| state.webhook_targets.allow_private = false).await;
    // A receiver that would answer, and a port nothing listens on.
    let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let open_port = open.local_addr().unwrap().port();
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut answers = Vec::new();
    for port in [open_port, closed_port] {
        for host in [
            "127.0.0.1",
            "[::ffff:127.0.0.1]",
            "0x7f.0.0.1",
            "2130706433",
            "127.1",
            "localhost",
            "[::1]",
            "0.0.0.0",
            "10.0.0.1",
            "192.168.0.1",
            "169.254.169.254",
            "[fd00::1]",
            "[fe80::1]",
        ] {
            let url = format!("http://{host}:{port}/hook");
            let a = s.post(&s.owner, HOOKS, json!({ "url": url })).await;
            assert_eq!(a.status, 201, "{url}: {:?}", a.body);
            let id = a.body["id"].as_i64().unwrap();
            let t = s.post(&s.owner, &format!("{HOOKS}/{id}/test"), json!({})).await;
            assert_eq!(t.status, 200, "{url}: {:?}", t.body);
            assert_eq!(t.body["status_code"], serde_json::Value::Null, "{url}: {:?}", t.body);
            answers.push((url, t.body["error"].as_str().unwrap_or_default().to_string()));
            let gone = s.call(Some(&s.owner), reqwest::Method::DELETE, &format!("{HOOKS}/{id}"), None).await;
            assert_eq!(gone.status, 204);
        }
    }
    for (url, error) in &answers {
        assert_eq!(error, pad_server::webhooks::REFUSED, "{url}");
    }
    // Nothing was contacted.
    let accepted = tokio::time::timeout(std::time::Duration::from_millis(200), open.accept()).await;
    assert!(accepted.is_err(), "a refused target was connected to");
}

#[tokio::test]
async fn the_allow_switch_lets_deliveries_reach_loopback() {
    let s = TestServer::start().await;
    let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/hook", open.local_addr().unwrap().port());
    let a = s.post(&s.owner, HOOKS, json!({ "url": url })).await;
    let id = a.body["id"].as_i64().unwrap();
    let path = format!("{HOOKS}/{id}/test");
    let test = s.post(&s.owner, &path, json!({}));
    let receive = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut conn, _) = open.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let _ = conn.read(&mut buf).await.unwrap();
        conn.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n").await.unwrap();
    };
    let (t, ()) = tokio::join!(test, receive);
    assert_eq!(t.body["status_code"], 204, "{:?}", t.body);
}
