//! Crash tests (issue 9): `kill -9` of `pad serve` at random moments under a
//! concurrent lease and write load, restarted on the same address and
//! database, then the history checker (`common/history.rs`): epochs unique
//! and increasing, no overlapping leases, no lost acknowledged write.
//!
//! SQLite: one instance, at least 20 kills. PostgreSQL (`PAD_TEST_DATABASE_URL`,
//! a fresh database): two instances, one killed at a time. `PAD_SOAK=N`
//! multiplies the kills by N.
//!
//! The `checker_*` tests feed the checker hand-made histories that must fail,
//! so that it cannot pass vacuously.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::history::{Entry, Final, Op, Outcome, Recorder, Report, Time, check};
use common::load::Load;
use common::server::TestServer;
use pad_client::Client;

/// Every request finishes (answered or not) within this; see db_faults.rs.
const BOUND: Duration = Duration::from_secs(15);

fn soak() -> u32 {
    std::env::var("PAD_SOAK").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

/// Kills `servers[k % n]` (SIGKILL) `kills` times at random moments under
/// load, each time checking the restarted store opens and serves, then runs
/// the checker.
async fn crash_under_load(servers: &mut [TestServer], kills: u32, label: &str) -> Report {
    let urls: Vec<String> = servers.iter().map(|s| s.url.clone()).collect();
    let token = servers[0].token.clone();
    let recorder = Arc::new(Recorder::new(BOUND));
    let load = Load::start(&urls, &token, 6, 8, recorder).await;
    let started = Instant::now();
    let mut killed_at = Vec::new();
    for k in 0..kills {
        tokio::time::sleep(Duration::from_millis(rand::random_range(100..600))).await;
        let server = &mut servers[k as usize % urls.len()];
        killed_at.push(common::history::now());
        // `restart` is SIGKILL, then a new `pad serve` on the same address
        // and database; it panics unless the new one starts listening.
        tokio::task::block_in_place(|| server.restart());
        let client = Client::new(server.url.parse().unwrap(), &token).unwrap();
        let serving = tokio::time::timeout(BOUND, client.me()).await;
        assert!(matches!(serving, Ok(Ok(_))), "{label}: kill {k}: the restarted server does not serve: {serving:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let recorder = load.stop().await;
    let client = Client::new(urls[0].parse().unwrap(), &token).unwrap();
    let finals = recorder.read_back(&client, "default").await;
    let report = recorder.check(&finals);
    println!("{label}: {kills} kills survived in {:.1?}; {report}", started.elapsed());
    if !report.violations.is_empty() || !report.hung.is_empty() {
        println!("{label}: kills sent at {killed_at:?}");
        // What the store kept of those items: whether a grant that was
        // answered is there tells a lost commit from a stale read.
        for item in report.violating_items() {
            let query = pad_core::api::EventsQuery {
                item_ref: Some(item.to_string()),
                limit: Some(1000),
                ..Default::default()
            };
            match client.events_where("default", &query).await {
                Ok(events) => {
                    println!("{label}: the events stored for {item}:");
                    for e in events {
                        println!("  {} {} {:?} {}", e.id, e.at, e.kind, e.data);
                    }
                }
                Err(e) => println!("{label}: the events of {item} could not be read: {e}"),
            }
        }
        for s in servers.iter() {
            println!("{label}: the log of the server at {}:\n{}", s.url, s.log());
        }
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_survives_kill_9_under_load() {
    let mut servers = [TestServer::start()];
    let report = crash_under_load(&mut servers, 20 * soak(), "sqlite crash").await;
    report.assert_ok();
    assert_eq!(report.count_5xx("5"), 0, "5xx answers: {:?}", report.server_errors);
    assert!(report.grants > 100 && report.acked_writes > 50, "too little load to mean anything: {report}");
    assert!(report.unknown > 0, "no request was ever cut: the kills missed the load: {report}");
}

/// Group commit (docs/operations.md, "SQLite writes: group commit"): 32
/// writers at once, so flows share batches, and `kill -9` while they write.
/// Every create that was answered must be in the restarted store, with the
/// ref it was answered with; nothing half-written may appear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_acknowledged_batched_writes_survive_kill_9() {
    let mut server = TestServer::start();
    let client = Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..32)
        .map(|w| {
            let (client, stop) = (client.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let (mut acked, mut cut) = (Vec::new(), 0_u32);
                for n in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let title = format!("w{w}-{n}");
                    let body = pad_core::NewItem { title: title.clone(), ..Default::default() };
                    match tokio::time::timeout(BOUND, client.create_item("default", &body)).await {
                        Ok(Ok(item)) => acked.push((title, item.item_ref.to_string())),
                        // The server is gone: this write's fate is unknown.
                        _ => {
                            cut += 1;
                            break;
                        }
                    }
                }
                (acked, cut)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(rand::random_range(400..800))).await;
    tokio::task::block_in_place(|| server.restart());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut acked, mut cut) = (Vec::new(), 0);
    for w in writers {
        let (a, c) = w.await.unwrap();
        acked.extend(a);
        cut += c;
    }
    let client = Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let mut stored = HashMap::new();
    let mut query = pad_core::api::ListQuery { limit: Some(500), ..Default::default() };
    loop {
        let page = client.list_items("default", &query).await.unwrap();
        stored.extend(page.items.into_iter().map(|i| (i.title, i.item_ref.to_string())));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    let lost: Vec<_> = acked.iter().filter(|(t, r)| stored.get(t) != Some(r)).collect();
    println!("batched writes: {} acknowledged, {} cut by the kill, {} stored", acked.len(), cut, stored.len());
    assert!(lost.is_empty(), "acknowledged writes lost or changed by kill -9: {lost:?}");
    assert!(acked.len() > 100, "too little load to mean anything: {} acknowledged", acked.len());
    assert!(cut > 0, "no write was in flight at the kill");
    let titles: HashSet<_> = stored.keys().collect();
    assert_eq!(titles.len(), stored.len(), "no item was stored twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_instances_survive_kill_9_under_load() {
    let Some(db) = common::pg::ScratchDb::create_blocking() else {
        return eprintln!("SKIPPED postgres_two_instances_survive_kill_9_under_load: {} is not set", common::pg::ENV);
    };
    let first = TestServer::start_with_db(&db.url);
    let second = first.start_sibling();
    let mut servers = [first, second];
    let report = crash_under_load(&mut servers, 20 * soak(), "postgres crash (2 instances)").await;
    report.assert_ok();
    assert_eq!(report.count_5xx("500"), 0, "internal errors: {:?}", report.server_errors);
    assert!(report.grants > 100 && report.acked_writes > 50, "too little load to mean anything: {report}");
}

// --- the checker's own tests -------------------------------------------------

mod checker {
    use super::*;
    use pad_core::Lease;

    /// 2025-01-01T00:00:00Z + `ms` milliseconds.
    fn t(ms: i64) -> Time {
        "2025-01-01T00:00:00Z".parse::<Time>().unwrap() + chrono::TimeDelta::milliseconds(ms)
    }

    fn lease(holder: &str, epoch: i64, acquired: i64, expires: i64) -> Lease {
        Lease {
            lease_id: epoch,
            holder: holder.into(),
            session_id: None,
            epoch,
            acquired_at: t(acquired),
            renewed_at: t(acquired),
            expires_at: t(expires),
            ttl_seconds: 10,
            hold_until: None,
            user_id: 0,
        }
    }

    fn entry(worker: &str, op: Op, sent: i64, received: i64, outcome: Outcome) -> Entry {
        Entry { worker: worker.into(), op, sent: t(sent), received: t(received), outcome }
    }

    fn claim(worker: &str, epoch: i64, sent: i64) -> Entry {
        let l = lease(worker, epoch, sent + 1, sent + 10_000);
        let op = Op::Claim { item: "TASK-1".into(), ttl: 10 };
        entry(worker, op, sent, sent + 2, Outcome::Lease { item: "TASK-1".into(), lease: l, refreshed: false })
    }

    fn release(worker: &str, epoch: i64, sent: i64, outcome: Outcome) -> Entry {
        entry(worker, Op::Release { item: "TASK-1".into(), epoch }, sent, sent + 2, outcome)
    }

    fn write(worker: &str, title: &str, sent: i64, outcome: Outcome) -> Entry {
        let op = Op::Update { item: "TASK-1".into(), title: title.into(), lease_epoch: None };
        entry(worker, op, sent, sent + 2, outcome)
    }

    fn written(at: i64) -> Outcome {
        Outcome::Written { item: "TASK-1".into(), updated_at: t(at) }
    }

    fn finals(title: &str, updated: i64, titles: &[&str]) -> HashMap<String, Final> {
        let titles: HashSet<String> = titles.iter().map(|s| s.to_string()).collect();
        HashMap::from([("TASK-1".to_string(), Final { title: title.into(), updated_at: t(updated), titles })])
    }

    fn violations(entries: &[Entry], finals: &HashMap<String, Final>) -> Vec<String> {
        check(entries, finals).violations
    }

    /// A correct history: a claims, releases; b claims after the release was
    /// sent (even before a heard back: a release ends a lease anywhere
    /// between its send and its answer); one write, kept.
    fn good() -> Vec<Entry> {
        vec![
            claim("a", 1, 0),
            write("a", "x", 10, written(11)),
            entry("a", Op::Release { item: "TASK-1".into(), epoch: 1 }, 100, 300, Outcome::Released(true)),
            claim("b", 2, 150),
        ]
    }

    #[test]
    fn checker_accepts_a_correct_history() {
        let report = check(&good(), &finals("x", 11, &["x"]));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!((report.leases, report.grants, report.acked_writes), (2, 2, 1));
    }

    #[test]
    fn checker_finds_an_overlap() {
        // b is granted while a's lease is live: a never released it.
        let es = vec![claim("a", 1, 0), claim("b", 2, 5_000)];
        let v = violations(&es, &HashMap::new());
        assert!(v.iter().any(|m| m.contains("overlap")), "{v:?}");
        // ...nor did anything a sent after b's grant matter.
        let es = vec![claim("a", 1, 0), claim("b", 2, 5_000), release("a", 1, 6_000, Outcome::Released(false))];
        let v = violations(&es, &HashMap::new());
        assert!(v.iter().any(|m| m.contains("overlap")), "{v:?}");
    }

    #[test]
    fn checker_finds_an_overlap_with_an_unanswered_renew() {
        // a's lease (until 10 s) was renewed at 9 s without an answer: it
        // may live until 19 s, but it is only certain until 10 s, so b's
        // grant at 12 s proves nothing.
        let es = vec![
            claim("a", 1, 0),
            entry(
                "a",
                Op::Renew { item: "TASK-1".into(), epoch: 1, ttl: 10 },
                9_000,
                9_500,
                Outcome::Unknown("cut".into()),
            ),
            claim("b", 2, 12_000),
        ];
        let v = violations(&es, &HashMap::new());
        assert!(v.is_empty(), "an unanswered renew proves nothing: {v:?}");
        // An answered renew to 19 s does.
        let mut renewed = lease("a", 1, 1, 19_001);
        renewed.renewed_at = t(9_001);
        let ok = Outcome::Lease { item: "TASK-1".into(), lease: renewed, refreshed: true };
        let es = vec![
            claim("a", 1, 0),
            entry("a", Op::Renew { item: "TASK-1".into(), epoch: 1, ttl: 10 }, 9_000, 9_002, ok),
            claim("b", 2, 12_000),
        ];
        let v = violations(&es, &HashMap::new());
        assert!(v.iter().any(|m| m.contains("overlap")), "{v:?}");
    }

    #[test]
    fn checker_finds_a_duplicate_or_decreasing_epoch() {
        let es = vec![claim("a", 1, 0), release("a", 1, 100, Outcome::Released(true)), claim("b", 1, 200)];
        let report = check(&es, &HashMap::new());
        assert!(report.violations.iter().any(|m| m.contains("names two grants")), "{report:?}");
        // A failure lists every request that named the item, in send order.
        assert_eq!(report.evidence.len(), 3, "{report:?}");
        assert!(report.evidence[2].starts_with("b sent"), "{report:?}");
        let es = vec![claim("a", 2, 0), release("a", 2, 100, Outcome::Released(true)), claim("b", 1, 200)];
        let v = violations(&es, &HashMap::new());
        assert!(v.iter().any(|m| m.contains("epoch 1 acquired at")), "{v:?}");
    }

    #[test]
    fn checker_finds_a_lease_that_vanished() {
        // The server says a's live lease is gone, with no release or expiry.
        let es = vec![claim("a", 1, 0), release("a", 1, 100, Outcome::Released(false))];
        let v = violations(&es, &HashMap::new());
        assert!(v.iter().any(|m| m.contains("ended early")), "{v:?}");
        // After its expiry, that is the right answer.
        let es = vec![claim("a", 1, 0), release("a", 1, 10_100, Outcome::Released(false))];
        assert!(violations(&es, &HashMap::new()).is_empty());
    }

    #[test]
    fn checker_finds_a_lost_write() {
        let mut es = good();
        // Acknowledged, then gone from the history.
        let v = violations(&es, &finals("seed", 1, &["seed"]));
        assert!(v.iter().any(|m| m.contains("lost write: \"x\"")), "{v:?}");
        // In the history, but the item went back to an older title.
        es.push(write("a", "y", 20, written(21)));
        let v = violations(&es, &finals("x", 11, &["x", "y"]));
        assert!(v.iter().any(|m| m.contains("its title is \"x\"")), "{v:?}");
        // Unless a write whose answer was lost may have come after.
        es.push(write("b", "z", 30, Outcome::Unknown("cut".into())));
        assert!(violations(&es, &finals("z", 31, &["x", "y", "z"])).is_empty());
        // An item never read back at all.
        assert!(violations(&es, &HashMap::new()).iter().any(|m| m.contains("not read back")));
    }

    #[test]
    fn checker_finds_a_write_past_its_fence() {
        let op = Op::Update { item: "TASK-1".into(), title: "late".into(), lease_epoch: Some(1) };
        let mut es = good();
        es.push(entry("a", op, 400, 402, written(401)));
        let v = violations(&es, &finals("late", 401, &["x", "late"]));
        assert!(v.iter().any(|m| m.contains("fenced by epoch 1")), "{v:?}");
    }

    #[test]
    fn checker_finds_a_worker_sending_concurrently() {
        let es = vec![claim("a", 1, 0), entry("a", Op::ClaimNext { ttl: 10 }, 1, 5, Outcome::Empty)];
        let v = violations(&es, &HashMap::new());
        assert!(v.iter().any(|m| m.contains("harness")), "{v:?}");
    }
}
