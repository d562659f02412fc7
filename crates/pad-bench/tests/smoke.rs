//! Runs every pad scenario at `--quick` sizes so the harness keeps working.
//! Checks shape only: no timing is asserted.

use pad_bench::{Options, Scenario};

fn check(report: &pad_bench::Report, backend: &str) {
    let rows: Vec<_> = report.rows.iter().filter(|r| r.backend.name() == backend).collect();
    for scenario in ["contended-claim", "claim+release", "heartbeat", "drain", "scale-claim", "scale-claim-next"] {
        assert!(rows.iter().any(|r| r.scenario == scenario && r.ops > 0), "{backend}: no {scenario} row with ops");
    }
    for via in ["http", "store", "sql"] {
        assert!(rows.iter().any(|r| r.scenario == "claim+release" && r.via == via), "{backend}: no {via} cycle");
    }
    assert!(report.table().contains("claim+release"));
    serde_json::to_string(report).expect("the report serializes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_on_sqlite() {
    let report = pad_bench::run(&Options { quick: true, ..Options::default() }).await.expect("bench runs");
    check(&report, "sqlite");
}

/// With `PAD_TEST_DATABASE_URL` (as `./scripts/test` sets it), on Postgres too:
/// the bench creates and drops a database of its own there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_on_postgres() {
    let Ok(url) = std::env::var("PAD_TEST_DATABASE_URL") else {
        eprintln!("PAD_TEST_DATABASE_URL is not set: skipping the Postgres bench smoke test");
        return;
    };
    let scenarios = vec![Scenario::Contended, Scenario::Cycle, Scenario::Heartbeat, Scenario::Drain, Scenario::Scale];
    let opts = Options { quick: true, no_sqlite: true, database_url: Some(url), scenarios, ..Options::default() };
    let report = pad_bench::run(&opts).await.expect("bench runs");
    check(&report, "postgres");
}
