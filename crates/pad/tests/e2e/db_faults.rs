//! Database faults under load (issue 9), PostgreSQL only: the database
//! restarted (a private cluster, stopped `-m immediate` like a crash) and
//! connections cut with `pg_terminate_backend`. Meanwhile pad answers
//! `unavailable` (503), never hangs past a bound, and recovers without a
//! restart; the history checker runs afterwards. `PAD_SOAK=N` multiplies the
//! faults by N.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::history::Recorder;
use common::load::Load;
use common::pg::{PrivateCluster, ScratchDb};
use common::server::TestServer;
use pad_client::{Client, ClientError};
use pad_core::api::ErrorCode;

/// No request may take longer, answered or not. A bound, not a speed test.
const BOUND: Duration = Duration::from_secs(15);

fn soak() -> u32 {
    std::env::var("PAD_SOAK").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

/// Waits until `client` is served again (the same `pad serve`, no restart).
async fn recovers(client: &Client, what: &str) -> Duration {
    let start = Instant::now();
    loop {
        match tokio::time::timeout(BOUND, client.me()).await {
            Ok(Ok(_)) => return start.elapsed(),
            Ok(Err(_)) if start.elapsed() < Duration::from_secs(30) => {}
            other => panic!("{what}: pad did not recover within 30 s: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_restart_under_load_is_unavailable_then_recovers() {
    let Some(cluster) = tokio::task::spawn_blocking(PrivateCluster::init).await.unwrap() else {
        return eprintln!(
            "SKIPPED database_restart_under_load_is_unavailable_then_recovers: no PostgreSQL 15 or runuser"
        );
    };
    let cluster = Arc::new(cluster);
    let server = TestServer::start_with_db(&cluster.url());
    let client = Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let load =
        Load::start(std::slice::from_ref(&server.url), &server.token, 4, 6, Arc::new(Recorder::new(BOUND))).await;
    let restarts = 3 * soak();
    let mut slowest_recovery = Duration::ZERO;
    for round in 0..restarts {
        tokio::time::sleep(Duration::from_millis(800)).await;
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || c.stop()).await.unwrap();
        // While the database is down: `unavailable`, promptly.
        let asked = Instant::now();
        let answer = tokio::time::timeout(BOUND, client.item("default", "TASK-1")).await;
        match answer {
            Ok(Err(ClientError::Api { status: 503, code: ErrorCode::Unavailable, .. })) => {}
            other => {
                panic!("round {round}: with the database down, GET answered {other:?} after {:?}", asked.elapsed())
            }
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || c.start()).await.unwrap();
        slowest_recovery = slowest_recovery.max(recovers(&client, &format!("round {round}")).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let recorder = load.stop().await;
    let report = recorder.check(&recorder.read_back(&client, "default").await);
    println!(
        "database restart: {restarts} restarts of PostgreSQL, recovered within {slowest_recovery:.1?} each; {report}"
    );
    report.assert_ok();
    assert!(report.count_5xx("503") > 0, "the load never saw the outage: {report}");
    assert_eq!(report.count_5xx("500"), 0, "internal errors instead of unavailable: {:?}", report.server_errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_under_load_recover() {
    let Some(db) = ScratchDb::create_blocking() else {
        return eprintln!("SKIPPED terminated_connections_under_load_recover: {} is not set", common::pg::ENV);
    };
    let server = TestServer::start_with_db(&db.url);
    let client = Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let load =
        Load::start(std::slice::from_ref(&server.url), &server.token, 4, 6, Arc::new(Recorder::new(BOUND))).await;
    let rounds = 15 * soak();
    let mut terminated = 0;
    for _ in 0..rounds {
        tokio::time::sleep(Duration::from_millis(rand::random_range(100..400))).await;
        let db = &db;
        terminated += tokio::task::block_in_place(|| db.terminate_backends());
    }
    let recovery = recovers(&client, "after pg_terminate_backend").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let recorder = load.stop().await;
    let report = recorder.check(&recorder.read_back(&client, "default").await);
    println!(
        "pg_terminate_backend: {rounds} rounds ended {terminated} connections, recovered within {recovery:.1?}; {report}"
    );
    report.assert_ok();
    assert!(terminated > 0, "no connection was ever terminated");
    assert_eq!(report.count_5xx("500"), 0, "internal errors instead of unavailable: {:?}", report.server_errors);
}
