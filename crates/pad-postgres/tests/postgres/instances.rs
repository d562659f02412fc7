//! Several pad servers on one PostgreSQL database (docs/operations.md), driven over
//! HTTP as real workers would be: exactly one winner per claim race across
//! instances, non-overlapping leases, recovery from a database outage, and a
//! safe bootstrap when instances start together.
//!
//! The servers run in-process (`pad_server::serve`, each over its own
//! `PgStore` and pool), which is what `pad serve --database-url postgres://…`
//! runs. Skipped (loudly) unless `PAD_TEST_DATABASE_URL` is set; the outage
//! test runs its own private cluster instead.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pad_core::NewItem;
use pad_store::{Actor, Store};
use pad_test_support::pg::{PG_BIN, PrivateCluster};
use serde_json::{Value, json};

/// One `pad serve` instance.
struct Instance {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Instance {
    async fn start(database_url: &str) -> Instance {
        let store = pad_backends::open_store(database_url).await.expect("open the shared database");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            pad_server::serve(store, listener, std::future::pending()).await.unwrap();
        });
        Instance { url, task }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A workspace `acme` and an owner token, written straight to the database
/// before any instance starts (so none of them bootstraps).
async fn seed(database_url: &str) -> String {
    let store = pad_backends::open_store(database_url).await.unwrap();
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    store.create_workspace("acme", "Acme", owner).await.unwrap();
    let token = pad_server::auth::new_token();
    store.create_token(owner, "test", &pad_server::auth::hash_token(&token)).await.unwrap();
    token
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    token: String,
}

impl Client {
    fn new(token: &str) -> Client {
        let http = reqwest::Client::builder().pool_max_idle_per_host(64).timeout(Duration::from_secs(30));
        Client { http: http.build().unwrap(), token: token.into() }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<(u16, Value), reqwest::Error> {
        let resp = req.bearer_auth(&self.token).send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    async fn post(&self, base: &str, path: &str, body: Value) -> (u16, Value) {
        self.send(self.http.post(format!("{base}/api/v1/workspaces/acme{path}")).json(&body)).await.unwrap()
    }

    async fn get(&self, base: &str, path: &str) -> Result<(u16, Value), reqwest::Error> {
        self.send(self.http.get(format!("{base}/api/v1/workspaces/acme{path}"))).await
    }

    async fn create(&self, base: &str, title: &str) -> String {
        let (status, body) = self.post(base, "/items", json!({ "title": title })).await;
        assert_eq!(status, 201, "{body}");
        body["ref"].as_str().unwrap().to_string()
    }
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap_or_else(|| panic!("not a time: {v}")).parse().unwrap()
}

/// L1 across instances: 64 claimers spread over three instances race on one
/// item, 50 rounds; exactly one wins each, and every loser's `lease_held`
/// names the winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claim_races_across_instances_have_one_winner() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED claim_races_across_instances_have_one_winner: {} is not set", common::ENV);
    };
    let client = Client::new(&seed(&db.url).await);
    let instances = [Instance::start(&db.url).await, Instance::start(&db.url).await, Instance::start(&db.url).await];
    let bases: Vec<String> = instances.iter().map(|i| i.url.clone()).collect();
    for round in 0..50 {
        let r = client.create(&bases[round % 3], &format!("race {round}")).await;
        let claims = (0..64).map(|i| {
            let (client, base, r) = (client.clone(), bases[i % 3].clone(), r.clone());
            tokio::spawn(async move {
                client
                    .post(&base, &format!("/items/{r}/claim"), json!({ "holder": format!("w{i}"), "ttl_seconds": 60 }))
                    .await
            })
        });
        let mut winners = Vec::new();
        let mut named = HashSet::new();
        for answer in futures::future::join_all(claims).await {
            match answer.unwrap() {
                (200, body) => winners.push(body["lease"]["holder"].as_str().unwrap().to_string()),
                (409, body) => {
                    assert_eq!(body["error"]["code"], "lease_held", "{body}");
                    named.insert(body["error"]["details"]["holder"].as_str().unwrap().to_string());
                }
                (status, body) => panic!("round {round}: unexpected {status} {body}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        assert!(named.iter().all(|h| *h == winners[0]), "round {round}: losers saw {named:?}, winner {}", winners[0]);
    }
}

/// One grant as a worker saw it: its lease and when the worker asked to
/// release it (the lease ended at or after that moment).
struct Grant {
    holder: String,
    epoch: i64,
    acquired_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    release_sent: DateTime<Utc>,
}

/// Eight workers on three instances claim and release 500 items, all in the
/// same order so they contend on every item. Per item: epochs are 1..n with
/// no gaps or repeats, grants follow each other in epoch order, and no lease
/// starts before the previous holder asked to give it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_across_instances_never_overlap() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED leases_across_instances_never_overlap: {} is not set", common::ENV);
    };
    let client = Client::new(&seed(&db.url).await);
    {
        // Items go in directly: the HTTP path is not what this test measures.
        let store = pad_postgres::PgStore::open_with(&db.url, 4).await.unwrap();
        let (ws, _) = store.membership(Actor { user_id: 1 }, "acme").await.unwrap();
        for i in 0..500 {
            let new = NewItem { title: format!("job {i}"), ..Default::default() };
            store.create_item(&ws, Actor { user_id: 1 }, &new).await.unwrap();
        }
    }
    let instances = [Instance::start(&db.url).await, Instance::start(&db.url).await, Instance::start(&db.url).await];
    let workers = (0..8).map(|w| {
        let (client, base) = (client.clone(), instances[w % 3].url.clone());
        tokio::spawn(async move {
            let holder = format!("worker-{w}");
            let mut grants = Vec::new();
            for n in 1..=500 {
                let r = format!("TASK-{n}");
                let (status, body) = client
                    .post(&base, &format!("/items/{r}/claim"), json!({ "holder": holder, "ttl_seconds": 60 }))
                    .await;
                match status {
                    200 => {}
                    409 if body["error"]["code"] == "lease_held" => continue,
                    _ => panic!("{holder} claiming {r}: {status} {body}"),
                }
                let lease = &body["lease"];
                let epoch = lease["epoch"].as_i64().unwrap();
                let release_sent = Utc::now();
                let (status, out) = client
                    .post(&base, &format!("/items/{r}/release"), json!({ "holder": holder, "epoch": epoch }))
                    .await;
                assert_eq!((status, &out["released"]), (200, &json!(true)), "{holder} releasing {r}: {out}");
                let grant = Grant {
                    holder: holder.clone(),
                    epoch,
                    acquired_at: time(&lease["acquired_at"]),
                    expires_at: time(&lease["expires_at"]),
                    release_sent,
                };
                grants.push((r, grant));
            }
            grants
        })
    });
    let mut per_item: HashMap<String, Vec<Grant>> = HashMap::new();
    for w in futures::future::join_all(workers).await {
        for (r, g) in w.unwrap() {
            per_item.entry(r).or_default().push(g);
        }
    }
    assert_eq!(per_item.len(), 500, "every item was granted at least once");
    let mut total = 0;
    for (r, grants) in &mut per_item {
        grants.sort_by_key(|g| g.epoch);
        total += grants.len();
        let epochs: Vec<i64> = grants.iter().map(|g| g.epoch).collect();
        assert_eq!(epochs, (1..=grants.len() as i64).collect::<Vec<_>>(), "{r}: epochs");
        for pair in grants.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let a_end = a.expires_at.min(a.release_sent);
            assert!(
                b.acquired_at >= a_end,
                "{r}: epoch {} ({}) acquired at {} while epoch {} ({}) held it until at least {a_end}",
                b.epoch,
                b.holder,
                b.acquired_at,
                a.epoch,
                a.holder
            );
        }
    }
    eprintln!("{total} grants over 500 items");
    assert!(total > 500, "the workers never contended: {total} grants");
}

/// docs/operations.md: instances starting together on an empty database bootstrap it
/// once; the others see that someone else did.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_starts_bootstrap_once() {
    for round in 0..3 {
        let Some(db) = common::ScratchDb::create().await else {
            return eprintln!("SKIPPED concurrent_starts_bootstrap_once: {} is not set", common::ENV);
        };
        let starts = (0..4).map(|_| {
            let url = db.url.clone();
            tokio::spawn(async move {
                // Opening also migrates: this races the migrator too.
                let store = pad_backends::open_store(&url).await.unwrap();
                pad_server::bootstrap(store.as_ref()).await.unwrap()
            })
        });
        let boots: Vec<_> = futures::future::join_all(starts).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(boots.iter().filter(|b| b.is_some()).count(), 1, "round {round}: {boots:?}");
        let store = pad_postgres::PgStore::open_with(&db.url, 1).await.unwrap();
        let owner = store.ensure_user(pad_server::BOOTSTRAP_EMAIL).await.unwrap();
        assert_eq!(store.list_workspaces(Actor { user_id: owner.id }).await.unwrap().len(), 1);
    }
}

/// While the database is down, requests answer `unavailable` (503) rather
/// than hanging or failing otherwise; once it is back, the same pad instance
/// serves again with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn database_outage_is_unavailable_then_recovers() {
    let Some(cluster) = tokio::task::spawn_blocking(PrivateCluster::init).await.unwrap() else {
        return eprintln!("SKIPPED database_outage_is_unavailable_then_recovers: no {PG_BIN}/initdb or runuser");
    };
    let cluster = Arc::new(cluster);
    let client = Client::new(&seed(&cluster.url()).await);
    let pad = Instance::start(&cluster.url()).await;
    let r = client.create(&pad.url, "survives").await;
    let (status, body) = client.post(&pad.url, &format!("/items/{r}/claim"), json!({ "holder": "a" })).await;
    assert_eq!(status, 200, "{body}");
    let epoch = body["lease"]["epoch"].as_i64().unwrap();

    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.stop()).await.unwrap();
    for path in [format!("/items/{r}"), "/items".to_string()] {
        let (status, body) = client.get(&pad.url, &path).await.unwrap();
        assert_eq!((status, body["error"]["code"].as_str()), (503, Some("unavailable")), "GET {path}: {body}");
    }
    let (status, body) =
        client.post(&pad.url, &format!("/items/{r}/renew"), json!({ "holder": "a", "epoch": epoch })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("unavailable")), "renew: {body}");

    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.start()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match client.get(&pad.url, &format!("/items/{r}")).await {
            Ok((200, body)) => {
                assert_eq!(body["lease"]["holder"], "a", "the lease survived the outage: {body}");
                break;
            }
            other if tokio::time::Instant::now() > deadline => panic!("pad did not recover: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let (status, body) =
        client.post(&pad.url, &format!("/items/{r}/renew"), json!({ "holder": "a", "epoch": epoch })).await;
    assert_eq!(status, 200, "renew after recovery: {body}");
    let (status, body) = client.post(&pad.url, &format!("/items/{r}/release"), json!({ "holder": "a" })).await;
    assert_eq!((status, &body["released"]), (200, &json!(true)), "{body}");
}
