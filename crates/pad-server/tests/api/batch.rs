//! The batch verbs and long polls over HTTP (docs/api.md, "Batches and long
//! polls"): claim-next with `count` and `wait_seconds`, and
//! `POST …/leases/renew`, on every backend.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, backends};
use serde_json::{Value, json};

const WS: &str = "/api/v1/workspaces/default";

/// A server whose waiting claim-nexts never look again on their own, so
/// only a signal can wake one.
async fn signals_only(url: Option<&str>) -> TestServer {
    let adjust = |s: &mut pad_server::AppState| s.relook = Duration::from_secs(3600);
    match url {
        Some(url) => TestServer::start_on_with(url, adjust).await,
        None => TestServer::start_with(adjust).await,
    }
}

/// How many claim-nexts wait on `s` now, from its `/metrics`.
async fn waiting(s: &TestServer) -> u64 {
    let text = s.scrape().await;
    let line = text.lines().find(|l| l.starts_with("pad_claim_next_waiting ")).expect("the gauge is exposed");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Blocks until a claim-next waits on `s`: the server's own signal that the
/// long poll has begun, not a guess at how long that takes.
async fn until_waiting(s: &TestServer) {
    for _ in 0..2000 {
        if waiting(s).await >= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no claim-next began to wait");
}

#[tokio::test]
async fn bad_counts_and_waits_are_refused_and_claim_nothing() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let r = s.create_item(&s.owner, "default", "untouched").await;
        for (body, field) in [
            (json!({"count": 0}), "count"),
            (json!({"count": 33}), "count"),
            (json!({"wait_seconds": 31}), "wait_seconds"),
            (json!({"wait_seconds": -1}), "wait_seconds"),
            (json!({"count": "many"}), "count"),
            (json!({"count": -3}), "count"),
            (json!({"wait_seconds": 2.5}), "wait_seconds"),
            (json!({"wait_seconds": "30s"}), "wait_seconds"),
            // `wait` is `wait_seconds` by its other name, refused alike and
            // named as given.
            (json!({"wait": 31}), "wait"),
            (json!({"wait": -1}), "wait"),
            (json!({"wait": 1.5}), "wait"),
            (json!({"wait": "30s"}), "wait"),
        ] {
            let a = s.post(&s.owner, &format!("{WS}/claim-next"), body.clone()).await;
            assert_eq!(a.status, 400, "{}: {body}: {:?}", b.name, a.body);
            // One code whatever was wrong with the number (docs/api.md, "Batches and long polls").
            assert_eq!(a.body["error"]["code"], "validation_failed", "{}: {body}: {:?}", b.name, a.body);
            assert_eq!(a.body["error"]["details"]["field"], field, "{}: {body}: {:?}", b.name, a.body);
            assert!(a.body["error"]["message"].as_str().unwrap().contains(field), "{:?}", a.body);
        }
        // Both names at once: refused, naming both, rather than one picked.
        let both = json!({"wait": 1, "wait_seconds": 2});
        let a = s.post(&s.owner, &format!("{WS}/claim-next"), both).await;
        assert_eq!(a.status, 400, "{}: {:?}", b.name, a.body);
        assert_eq!(a.code(), "validation_failed", "{}: {:?}", b.name, a.body);
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("`wait`") && message.contains("`wait_seconds`"), "{message}");
        let item = s.get(&s.owner, &format!("{WS}/items/{r}")).await.body;
        assert_eq!(item["lease"], Value::Null, "{}: nothing was claimed", b.name);
        let claimed = s.get(&s.owner, &format!("{WS}/events?type=lease.claimed")).await.body;
        assert_eq!(claimed["events"].as_array().unwrap().len(), 0, "{}", b.name);
    }
}

#[tokio::test]
async fn a_counted_claim_next_grants_each_item_its_own_lease() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        for t in ["a", "b", "c"] {
            s.create_item(&s.owner, "default", t).await;
        }
        let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 2})).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let grants = a.body["grants"].as_array().unwrap();
        assert_eq!(grants.len(), 2, "{}", b.name);
        assert_eq!(a.body["item"], grants[0]["item"], "the single fields repeat the first grant");
        assert_eq!(a.body["lease"], grants[0]["lease"]);
        assert_ne!(grants[0]["lease"]["lease_id"], grants[1]["lease"]["lease_id"]);
        let rest = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 32})).await;
        assert_eq!(rest.body["grants"].as_array().unwrap().len(), 1, "{}: only what is ready", b.name);
        let none = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 5})).await;
        assert_eq!((none.body["item"].clone(), none.body["grants"].clone()), (Value::Null, json!([])));
    }
}

#[tokio::test]
async fn renewing_many_leases_answers_each_alone() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        for t in ["kept", "released"] {
            s.create_item(&s.owner, "default", t).await;
        }
        let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "count": 2})).await;
        let grants = a.body["grants"].as_array().unwrap().clone();
        let (r0, r1) = (grants[0]["item"]["ref"].as_str().unwrap(), grants[1]["item"]["ref"].as_str().unwrap());
        let released = s.post(&s.owner, &format!("{WS}/items/{r1}/release"), json!({"holder": "w"})).await;
        assert_eq!(released.status, 200);
        let body = json!({"leases": [
            {"ref": r0, "epoch": grants[0]["lease"]["epoch"], "holder": "w", "ttl_seconds": 600},
            {"ref": r1, "epoch": grants[1]["lease"]["epoch"], "holder": "w"},
        ]});
        let renewed = s.post(&s.owner, &format!("{WS}/leases/renew"), body).await;
        assert_eq!(renewed.status, 200, "{}: {:?}", b.name, renewed.body);
        let results = renewed.body["results"].as_array().unwrap();
        assert_eq!(results[0]["ref"], r0);
        assert_eq!(results[0]["lease"]["ttl_seconds"], 600, "{:?}", results[0]);
        assert_eq!(results[0]["error"], Value::Null);
        assert_eq!(results[1]["ref"], r1);
        assert_eq!(results[1]["error"]["code"], "lease_lost", "{:?}", results[1]);
        assert_eq!(results[1]["lease"], Value::Null);
        // Bounds: a call names the entry it refuses and renews nothing.
        let many: Vec<Value> = (0..101).map(|_| json!({"ref": r0, "epoch": 1, "holder": "w"})).collect();
        let too_many = s.post(&s.owner, &format!("{WS}/leases/renew"), json!({"leases": many})).await;
        assert_eq!(
            (too_many.status.as_u16(), too_many.body["error"]["details"]["field"].clone()),
            (400, json!("leases"))
        );
        let bad = json!({"leases": [{"ref": r0, "epoch": 1, "holder": "w", "ttl_seconds": 60}, {"ref": "no such", "epoch": 1}]});
        let bad = s.post(&s.owner, &format!("{WS}/leases/renew"), bad).await;
        assert_eq!(bad.status, 400, "{:?}", bad.body);
        assert_eq!(bad.body["error"]["details"]["field"], "leases[1].ref");
        let item = s.get(&s.owner, &format!("{WS}/items/{r0}")).await.body;
        assert_eq!(item["lease"]["ttl_seconds"], 600, "{}: the refused call renewed nothing", b.name);
    }
}

/// An entry's `ttl_seconds` that is not a whole number makes the body
/// unreadable, as an unparsable `ref` does: the call is refused whole and
/// renews nothing, but with the TTL's own `invalid_ttl` naming the entry's
/// field, as a single renew answers it (docs/api.md, "Batches and long
/// polls"). Before, it was a `bad_request` with serde's words. A whole
/// number out of range is that entry's own refusal.
#[tokio::test]
async fn an_unreadable_ttl_in_one_renewal_is_invalid_ttl_naming_the_entry() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let r = s.create_item(&s.owner, "default", "held").await;
        let a = s.post(&s.owner, &format!("{WS}/items/{r}/claim"), json!({"holder": "w", "ttl_seconds": 600})).await;
        let epoch = a.body["lease"]["epoch"].clone();
        let single = s
            .post(
                &s.owner,
                &format!("{WS}/items/{r}/renew"),
                json!({"epoch": epoch, "holder": "w", "ttl_seconds": 1.5}),
            )
            .await;
        assert_eq!(single.code(), "invalid_ttl", "{:?}", single.body);
        for bad in [json!(1.5), json!("60"), json!(1e20)] {
            let body = json!({"leases": [
                {"ref": r, "epoch": epoch, "holder": "w", "ttl_seconds": 60},
                {"ref": r, "epoch": epoch, "holder": "w", "ttl_seconds": bad},
            ]});
            let refused = s.post(&s.owner, &format!("{WS}/leases/renew"), body).await;
            assert_eq!(
                (refused.status.as_u16(), refused.code()),
                (400, "invalid_ttl"),
                "{}: {:?}",
                b.name,
                refused.body
            );
            let (error, one) = (&refused.body["error"], &single.body["error"]);
            assert_eq!(error["details"]["field"], "leases[1].ttl_seconds", "{error}");
            assert_eq!(error["details"]["requested_seconds"], Value::Null, "{error}");
            assert_eq!(error["details"]["max_seconds"], one["details"]["max_seconds"], "{error}");
            let message = error["message"].as_str().unwrap();
            assert!(message.starts_with("leases[1]: ttl_seconds must be a whole number"), "{message}");
            assert!(message.ends_with(&format!("(got {bad})")), "{message}");
        }
        let item = s.get(&s.owner, &format!("{WS}/items/{r}")).await.body;
        assert_eq!(item["lease"]["ttl_seconds"], 600, "{}: the refused calls renewed nothing", b.name);

        // A whole number out of range: that entry's own refusal, in a 200.
        let body = json!({"leases": [{"ref": r, "epoch": epoch, "holder": "w", "ttl_seconds": 0}]});
        let answered = s.post(&s.owner, &format!("{WS}/leases/renew"), body).await;
        assert_eq!(answered.status, 200, "{:?}", answered.body);
        let error = &answered.body["results"][0]["error"];
        assert_eq!(
            (&error["code"], &error["details"]["requested_seconds"]),
            (&json!("invalid_ttl"), &json!(0)),
            "{error}"
        );
    }
}

/// A field a body does not have is unknown (`bad_request`), whatever its
/// name: a `count` or `wait` where no claim-next is, is not refused as
/// claim-next's (`validation_failed`, "must be a whole number between …").
#[tokio::test]
async fn a_field_a_body_lacks_is_unknown_whatever_its_name() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "held").await;
    let unknown = [
        (format!("{WS}/items/{r}/release"), json!({"holder": "w", "wait": 1.5}), "wait"),
        (format!("{WS}/items/{r}/claim"), json!({"holder": "w", "count": 2}), "count"),
        (format!("{WS}/leases/renew"), json!({"leases": [{"ref": r, "epoch": 1, "count": 2}]}), "leases[0].count"),
    ];
    for (path, body, field) in unknown {
        let a = s.post(&s.owner, &path, body).await;
        assert_eq!((a.code(), &a.body["error"]["details"]["field"]), ("bad_request", &json!(field)), "{:?}", a.body);
    }
}

#[tokio::test]
async fn a_waiting_claim_next_takes_an_item_the_moment_it_is_created() {
    for b in backends().await {
        let s = Arc::new(signals_only(Some(&b.url)).await);
        // `wait` is the alias of `wait_seconds` (docs/api.md, "Batches and long polls").
        for name in ["wait_seconds", "wait"] {
            let waiter = {
                let s = s.clone();
                tokio::spawn(async move {
                    s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", name: 25})).await
                })
            };
            until_waiting(&s).await;
            let r = s.create_item(&s.owner, "default", "new work").await;
            let a = waiter.await.unwrap();
            assert_eq!(a.status, 200, "{name}: {:?}", a.body);
            assert_eq!(
                a.body["item"]["ref"],
                r.as_str(),
                "{}, {name}: woken by the creation, not its deadline",
                b.name
            );
            assert_eq!(waiting(&s).await, 0);
        }
    }
}

#[tokio::test]
async fn a_long_poll_with_nothing_to_take_answers_empty_at_its_deadline() {
    let s = TestServer::start().await;
    let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "wait_seconds": 1})).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!((a.body["item"].clone(), a.body["grants"].clone()), (Value::Null, json!([])));
}

/// Across instances on one PostgreSQL database: the waiter's instance
/// commits nothing; only the database's notification can wake it.
#[tokio::test]
async fn a_long_poll_wakes_on_an_item_created_through_another_instance() {
    let Some(db) = common::ScratchDb::create().await else {
        eprintln!("SKIPPED: PAD_TEST_DATABASE_URL is unset");
        return;
    };
    let a = Arc::new(signals_only(Some(&db.url)).await);
    let b = common::TestServer::join(&db.url, &a.owner).await;
    let waiter = {
        let a = a.clone();
        tokio::spawn(async move {
            a.post(&a.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "wait_seconds": 25})).await
        })
    };
    until_waiting(&a).await;
    let r = b.create_item(&b.owner, "default", "made elsewhere").await;
    let got = waiter.await.unwrap();
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["item"]["ref"], r.as_str(), "woken through the database");
}

/// The kinds of `ref`'s events, oldest first.
async fn kinds_of(s: &TestServer, r: &str) -> Vec<String> {
    let page = s.get(&s.owner, &format!("{WS}/events?ref={r}")).await.body;
    page["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_string()).collect()
}

/// docs/api.md, "The next item in the same call": complete, fail and
/// release each end their lease and then claim the next item, in one call.
#[tokio::test]
async fn an_end_with_next_claims_the_next_item_in_the_same_call() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let refs: Vec<String> = {
            let mut refs = Vec::new();
            for t in ["first", "second", "third", "fourth"] {
                refs.push(s.create_item(&s.owner, "default", t).await);
            }
            refs
        };
        let next = json!({"holder": "w", "ttl_seconds": 60, "filter": {"exclude": [refs[2]]}});
        let first = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w"})).await;
        assert_eq!(first.body["item"]["ref"], refs[0].as_str(), "{}: {:?}", b.name, first.body);
        let epoch = first.body["lease"]["epoch"].clone();

        let done = json!({"holder": "w", "epoch": epoch, "next": next});
        let a = s.post(&s.owner, &format!("{WS}/items/{}/complete", refs[0]), done).await;
        assert_eq!(a.status, 200, "{}: {:?}", b.name, a.body);
        assert_eq!(a.body["item"]["status"], "done", "{}: the end is the complete's", b.name);
        assert_eq!(a.body["item"]["lease"], Value::Null);
        assert_eq!(a.body["next"]["item"]["ref"], refs[1].as_str(), "{}: {:?}", b.name, a.body);
        assert_eq!(a.body["next"]["lease"]["holder"], "w");
        assert_eq!(a.body["next"]["lease"]["ttl_seconds"], 60, "{}: the next claim's own terms", b.name);
        assert_eq!(a.body["next_error"], Value::Null);
        let shown = s.get(&s.owner, &format!("{WS}/items/{}", refs[1])).await.body;
        assert_eq!(shown["lease"]["lease_id"], a.body["next"]["lease"]["lease_id"], "{}: the grant is real", b.name);
        // The end's events come first, then the grant's.
        assert_eq!(kinds_of(&s, &refs[0]).await.last().map(String::as_str), Some("lease.released"));
        let all = s.get(&s.owner, &format!("{WS}/events")).await.body;
        let ids = |kind: &str, r: &str| {
            all["events"].as_array().unwrap().iter().find(|e| e["type"] == kind && e["ref"] == r).unwrap()["id"]
                .as_i64()
                .unwrap()
        };
        assert!(ids("lease.released", &refs[0]) < ids("lease.claimed", &refs[1]), "{}", b.name);

        // A failure takes the next one too, passing over what `next` excludes.
        let lease = &a.body["next"]["lease"];
        let failed = json!({"holder": "w", "lease_id": lease["lease_id"], "note": "flaky", "next": next});
        let a = s.post(&s.owner, &format!("{WS}/items/{}/fail", refs[1]), failed).await;
        assert_eq!(a.status, 200, "{}: {:?}", b.name, a.body);
        assert_eq!(a.body["item"]["failures"], 1);
        assert_eq!(a.body["next"]["item"]["ref"], refs[3].as_str(), "{}: {} is excluded", b.name, refs[2]);

        // A release with nothing left to take (a released item is ready
        // again, so it is excluded too): `next` answers as an empty claim-next.
        let lease = &a.body["next"]["lease"];
        let rest = json!({"holder": "w", "filter": {"exclude": [refs[2], refs[3]]}});
        let released = json!({"holder": "w", "lease_id": lease["lease_id"], "succeeded": true, "next": rest});
        let a = s.post(&s.owner, &format!("{WS}/items/{}/release", refs[3]), released).await;
        assert_eq!(a.status, 200, "{}: {:?}", b.name, a.body);
        assert_eq!(a.body["released"], true);
        assert_eq!((a.body["next"]["item"].clone(), a.body["next"]["grants"].clone()), (Value::Null, json!([])));

        // Without `next`, the answers are as they were: no `next` at all.
        let plain = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "v"})).await;
        assert_eq!(plain.body["item"]["ref"], refs[2].as_str());
        let done = json!({"holder": "v", "lease_id": plain.body["lease"]["lease_id"]});
        let a = s.post(&s.owner, &format!("{WS}/items/{}/complete", refs[2]), done).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert!(a.body.get("next").is_none() && a.body.get("next_error").is_none(), "{:?}", a.body);
    }
}

/// A `next` the claim-next route would refuse is refused before the end is
/// written: nothing changes, and the field is named inside `next`.
#[tokio::test]
async fn a_bad_next_or_a_refused_end_changes_nothing() {
    for b in backends().await {
        let s = TestServer::start_on(&b.url).await;
        let r = s.create_item(&s.owner, "default", "held").await;
        let other = s.create_item(&s.owner, "default", "waiting").await;
        let claimed = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w"})).await;
        assert_eq!(claimed.body["item"]["ref"], r.as_str());
        let lease_id = claimed.body["lease"]["lease_id"].clone();
        let too_many: Vec<String> = (1..=501).map(|n| format!("TASK-{}", n + 1000)).collect();
        for verb in ["complete", "fail", "release"] {
            for (next, code, field) in [
                (json!({"count": 0}), "validation_failed", "next.count"),
                (json!({"count": 33}), "validation_failed", "next.count"),
                (json!({"wait_seconds": 5}), "validation_failed", "next.wait_seconds"),
                (json!({"wait": 1}), "validation_failed", "next.wait"),
                (json!({"wait_seconds": -1}), "validation_failed", "next.wait_seconds"),
                (json!({"ttl_seconds": 0}), "invalid_ttl", "next.ttl_seconds"),
                (json!({"holder": ""}), "validation_failed", "next.holder"),
                (json!({"filter": {"exclude": too_many}}), "validation_failed", "next.exclude"),
                // Values no number field can hold are refused as claim-next refuses them.
                (json!({"count": 1.5}), "validation_failed", "next.count"),
                (json!({"wait_seconds": "soon"}), "validation_failed", "next.wait_seconds"),
                (json!({"ttl_seconds": "x"}), "invalid_ttl", "next.ttl_seconds"),
            ] {
                let body = json!({"holder": "w", "lease_id": lease_id, "next": next});
                let a = s.post(&s.owner, &format!("{WS}/items/{r}/{verb}"), body).await;
                assert_eq!(a.status, 400, "{}: {verb} {next}: {:?}", b.name, a.body);
                assert_eq!(a.code(), code, "{}: {verb} {next}: {:?}", b.name, a.body);
                assert_eq!(a.body["error"]["details"]["field"], field, "{}: {verb} {next}: {:?}", b.name, a.body);
                let message = a.body["error"]["message"].as_str().unwrap();
                assert!(message.starts_with("next: "), "{:?}", a.body);
                let inner = field.trim_start_matches("next.");
                assert!(message.matches(&format!("{inner}:")).count() <= 1, "the field named once: {message}");
            }
        }
        let held = s.get(&s.owner, &format!("{WS}/items/{r}")).await.body;
        assert_eq!(held["lease"]["lease_id"], lease_id, "{}: the lease was not ended", b.name);
        assert_eq!(held["status"], "open");
        assert_eq!(kinds_of(&s, &r).await, ["item.created", "lease.claimed"], "{}", b.name);

        // A refused end (a lease that is not the live one) claims nothing.
        let stale = json!({"holder": "w", "lease_id": lease_id.as_i64().unwrap() + 1000, "next": {"holder": "w"}});
        let a = s.post(&s.owner, &format!("{WS}/items/{r}/complete"), stale).await;
        assert_eq!(a.status, 409, "{}: {:?}", b.name, a.body);
        let waiting = s.get(&s.owner, &format!("{WS}/items/{other}")).await.body;
        assert_eq!(waiting["lease"], Value::Null, "{}: the refused call claimed nothing", b.name);
        assert_eq!(kinds_of(&s, &other).await, ["item.created"], "{}", b.name);
    }
}

/// `pad_claim_next_misses_total` counts claim-next calls that found nothing
/// (docs/operations.md, "Metrics"), not the looks a long poll makes.
#[tokio::test]
async fn a_long_poll_that_finds_nothing_is_one_miss() {
    let s = TestServer::start_with(|st| st.relook = Duration::from_millis(50)).await;
    let a = s.post(&s.owner, &format!("{WS}/claim-next"), json!({"holder": "w", "wait_seconds": 1})).await;
    assert_eq!((a.status.as_u16(), a.body["item"].clone()), (200, Value::Null), "{:?}", a.body);
    let misses = |text: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with("pad_claim_next_misses_total{workspace=\"default\"}"));
        line.map_or(0, |l| l.rsplit(' ').next().unwrap().parse().unwrap())
    };
    assert_eq!(misses(&s.scrape().await), 1, "one call, one miss, however many looks it made");
}
