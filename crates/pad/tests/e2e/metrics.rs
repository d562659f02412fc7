//! Lease metrics on `/metrics` (docs/operations.md, "Metrics"): the counters
//! move as leases are claimed, refused, expire, fail and are quarantined, on
//! a real `pad serve` over SQLite and (with `PAD_TEST_DATABASE_URL`) PostgreSQL,
//! and only its metrics token (`PAD_METRICS_TOKEN`) may read them.

use crate::common;

use std::time::Duration;

use common::pg::ScratchDb;
use common::server::TestServer;
use pad_client::Client;
use pad_core::NewItem;
use pad_core::api::{ClaimBody, FailBody};

const WS: &str = "default";

/// The value of the sample `name{workspace="default"}`, 0 when absent.
fn sample(text: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{workspace=\"{WS}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0.0, |v| v.parse().unwrap())
}

fn claim(holder: &str, ttl: u64) -> ClaimBody {
    ClaimBody { holder: Some(holder.into()), ttl_seconds: Some(ttl.into()), ..Default::default() }
}

async fn counters_move(s: &TestServer) {
    let c = Client::new(s.url.parse().unwrap(), &s.token).unwrap();
    let before = s.scrape();
    assert!(before.contains("# TYPE pad_lease_claims_total counter"), "{before}");
    assert!(before.contains("# TYPE pad_leases_live gauge"), "{before}");
    let mut refs = Vec::new();
    for title in ["one", "two", "three"] {
        let item = c.create_item(WS, &NewItem { title: title.into(), ..Default::default() }).await.unwrap();
        refs.push(item.item_ref.to_string());
    }

    // Two claims and a refused one.
    let a = c.claim(WS, &refs[0], &claim("worker-a", 60)).await.unwrap().lease;
    // 3 s: still live at the scrape below, also on a busy machine.
    c.claim(WS, &refs[1], &claim("worker-b", 3)).await.unwrap();
    assert!(c.claim(WS, &refs[0], &claim("worker-c", 60)).await.is_err());
    let m = s.scrape();
    assert_eq!(sample(&m, "pad_lease_claims_total"), 2.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_conflicts_total"), 1.0, "{m}");
    assert_eq!(sample(&m, "pad_leases_live"), 2.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_claim_duration_seconds_count"), 3.0, "{m}");

    // worker-b's lease expires; the server's observer records it (within a
    // second or so; 30 s is only a net against a hang on a loaded machine).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let m = loop {
        let m = s.scrape();
        if sample(&m, "pad_lease_expiries_total") >= 1.0 || std::time::Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(sample(&m, "pad_lease_expiries_total"), 1.0, "{m}");
    assert_eq!(sample(&m, "pad_leases_live"), 1.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_hold_seconds_count"), 1.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_hold_seconds_sum"), 3.0, "the expired lease was held its 3 s ttl: {m}");

    // A failure that quarantines (threshold 1).
    let fail = FailBody {
        epoch: Some(a.epoch),
        holder: Some("worker-a".into()),
        note: Some("flaky".into()),
        max_failures: Some(1),
        ..Default::default()
    };
    assert!(c.fail(WS, &refs[0], &fail).await.unwrap().quarantined);
    let m = s.scrape();
    assert_eq!(sample(&m, "pad_lease_failures_total"), 1.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_quarantines_total"), 1.0, "{m}");
    assert_eq!(sample(&m, "pad_leases_live"), 0.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_hold_seconds_count"), 2.0, "{m}");
    assert_eq!(sample(&m, "pad_lease_claims_total"), 2.0, "nothing else counted as a claim: {m}");

    // Only the metrics token scrapes: no credential and the owner's API
    // token both get 401, naming no series.
    for auth in [String::new(), format!("Authorization: Bearer {}\r\n", s.token)] {
        let answer = get_metrics(s, &auth);
        assert!(answer.starts_with("HTTP/1.1 401") || answer.starts_with("HTTP/1.0 401"), "{answer}");
        assert!(answer.contains("\"unauthorized\"") && !answer.contains("pad_lease"), "{answer}");
    }
}

/// `GET /metrics` over a plain socket with the extra header lines `headers`:
/// the whole answer, status line first.
fn get_metrics(s: &TestServer, headers: &str) -> String {
    use std::io::{Read, Write};
    let addr = s.url.strip_prefix("http://").expect("an http URL");
    let mut conn = std::net::TcpStream::connect(addr).expect("connect to the server");
    write!(conn, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n{headers}\r\n").expect("send the scrape");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("read the answer");
    answer
}

#[tokio::test]
async fn lease_counters_move_on_sqlite() {
    let s = TestServer::start();
    counters_move(&s).await;
}

#[tokio::test]
async fn lease_counters_move_on_postgres() {
    let Some(db) = ScratchDb::create_blocking() else {
        eprintln!("SKIPPED: set PAD_TEST_DATABASE_URL=postgres://… to run the metrics test on PostgreSQL");
        return;
    };
    let s = TestServer::start_with_db(&db.url);
    counters_move(&s).await;
}
