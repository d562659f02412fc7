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
    if backend == "sqlite" {
        // The floor server, measured by the same load and compared with pad's http row.
        let floor: Vec<_> = rows.iter().filter(|r| r.via == "floor").collect();
        assert_eq!(floor.len(), 2, "a floor row at 1 and at C clients");
        assert!(floor.iter().all(|r| r.ops > 0 && r.note.contains("pad http/floor = ")), "{floor:?}");
    } else {
        let inst: Vec<_> = rows.iter().filter(|r| r.params.contains("instances=")).collect();
        assert_eq!(inst.len(), 2, "claim+release through 1 and 3 instances");
        assert!(inst.iter().all(|r| r.ops > 0) && inst[1].note.contains("3 instances / 1 = "), "{inst:?}");
        // The drain floor: every drain worker count, each item once (it checks), beside pad's drain.
        let drains = rows.iter().filter(|r| r.scenario == "drain" && r.via == "http").count();
        let floor: Vec<_> = rows.iter().filter(|r| r.scenario == "drain" && r.via == "floor").collect();
        assert_eq!(floor.len(), drains, "a floor row per drain row: {floor:?}");
        assert!(floor.iter().all(|r| r.ops > 0 && r.note.contains("pad drain/floor = ")), "{floor:?}");
        // The same statements behind HTTP, drained by pad's drain load.
        let http: Vec<_> = rows.iter().filter(|r| r.scenario == "drain" && r.via == "http-floor").collect();
        assert_eq!(http.len(), drains, "an HTTP floor row per drain row: {http:?}");
        assert!(http.iter().all(|r| r.ops > 0 && r.note.contains("pad drain/http floor = ")), "{http:?}");
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
    let scenarios = vec![
        Scenario::Contended,
        Scenario::Cycle,
        Scenario::Instances,
        Scenario::Heartbeat,
        Scenario::Drain,
        Scenario::Floor,
        Scenario::Scale,
    ];
    let opts = Options { quick: true, no_sqlite: true, database_url: Some(url), scenarios, ..Options::default() };
    let report = pad_bench::run(&opts).await.expect("bench runs");
    check(&report, "postgres");
}
