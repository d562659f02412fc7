//! Hostile clients: slow headers, oversized headers, floods. Each is cut off
//! or refused while well-behaved clients keep being served.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn read_status(stream: &mut tokio::net::TcpStream) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.unwrap().unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_refused_and_others_still_served() {
    let s = TestServer::start().await;
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let huge = "x".repeat(200 * 1024);
    let req = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {huge}\r\n\r\n");
    let _ = stream.write_all(req.as_bytes()).await;
    let status = read_status(&mut stream).await;
    assert!(status.is_empty() || status.contains("431"), "oversized headers answered: {status:?}");
    assert_eq!(s.call(None, reqwest::Method::GET, "/healthz", None).await.status, 200);
}

/// A client that never finishes its headers is disconnected after the
/// header-read timeout, and does not block anyone else meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_is_cut_off_without_starving_others() {
    let s = TestServer::start().await;
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut lorises = Vec::new();
    for _ in 0..50 {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.unwrap();
        lorises.push(stream);
    }
    // Everyone else is served while the lorises hang.
    for _ in 0..20 {
        let a = s.get(&s.owner, "/api/v1/me").await;
        assert_eq!(a.status, 200);
    }
    let started = Instant::now();
    let mut first = lorises.remove(0);
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            match first.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue, // a 408 before closing is fine too
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "a slow client was never disconnected");
    assert!(started.elapsed() <= Duration::from_secs(12), "cut off after {:?}", started.elapsed());
}

#[tokio::test]
async fn a_flooding_token_is_rate_limited_with_retry_after() {
    let s = TestServer::start_with(|state| state.rate = pad_server::limits::RateLimiter::new(Some(5.0))).await;
    let mut limited = None;
    for _ in 0..40 {
        let a = s.get(&s.owner, "/api/v1/me").await;
        if a.status == 429 {
            limited = Some(a);
            break;
        }
    }
    let a = limited.expect("40 quick requests on a 5/s limit were never refused");
    assert_eq!(a.code(), "rate_limited");
    assert!(a.headers.get("retry-after").is_some());
    // Health checks are not rate limited, and the server still serves.
    assert_eq!(s.call(None, reqwest::Method::GET, "/healthz", None).await.status, 200);
}
