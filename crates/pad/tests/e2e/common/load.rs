//! A concurrent lease workload for the fault tests, recorded for the
//! [history checker](super::history).
//!
//! Each worker loops until stopped: it takes an item (claim-next, or a claim
//! of a random known item, so workers contend), renews it a few times, writes
//! a unique title fenced by its epoch (L10), and releases it, or now and then
//! abandons it to expire. Now and then it creates an item. A request without
//! an answer is retried (on the next server, when there are several) until it
//! has one or the load stops; every attempt is recorded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pad_client::Client;

use super::history::{Outcome, Recorder};

const WS: &str = "default";

/// A running workload.
pub struct Load {
    pub recorder: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

/// The servers a worker may use, and which one it is using.
struct Servers {
    clients: Vec<Client>,
    at: usize,
}

impl Servers {
    fn client(&self) -> &Client {
        &self.clients[self.at % self.clients.len()]
    }

    /// After a lost answer: try the next server, as a load balancer would.
    fn fail_over(&mut self) {
        self.at += 1;
    }
}

struct Worker {
    name: String,
    servers: Servers,
    recorder: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    items: Arc<Mutex<Vec<String>>>,
    writes: u64,
}

impl Load {
    /// Creates `items` items (through the recorder), then starts `workers`
    /// workers spread over `urls`.
    pub async fn start(urls: &[String], token: &str, workers: usize, items: usize, recorder: Arc<Recorder>) -> Load {
        let clients: Vec<Client> = urls.iter().map(|u| Client::new(u.parse().unwrap(), token).unwrap()).collect();
        let mut refs = Vec::new();
        for i in 0..items {
            match recorder.create(&clients[0], WS, "seed", &format!("seed-{i}")).await {
                Outcome::Written { item, .. } => refs.push(item),
                other => panic!("creating seed item {i}: {other:?}"),
            }
        }
        let items = Arc::new(Mutex::new(refs));
        let stop = Arc::new(AtomicBool::new(false));
        let workers = (0..workers)
            .map(|w| {
                let worker = Worker {
                    name: format!("w{w}"),
                    servers: Servers { clients: clients.clone(), at: w },
                    recorder: recorder.clone(),
                    stop: stop.clone(),
                    items: items.clone(),
                    writes: 0,
                };
                tokio::spawn(worker.run())
            })
            .collect();
        Load { recorder, stop, workers }
    }

    /// Stops the workers after their current request (and its retries).
    pub async fn stop(self) -> Arc<Recorder> {
        self.stop.store(true, Ordering::SeqCst);
        for w in self.workers {
            w.await.expect("a worker panicked");
        }
        self.recorder
    }
}

impl Worker {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    async fn pause(ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    async fn run(mut self) {
        while !self.stopped() {
            let ttl = [2, 3, 5][rand::random_range(0..3)];
            let outcome = if rand::random_bool(0.05) {
                self.create().await;
                continue;
            } else if rand::random_bool(0.5) {
                self.retry(|r, c, w| Box::pin(r.claim_next(c, WS, w, ttl))).await
            } else {
                let item = {
                    let items = self.items.lock().unwrap();
                    items[rand::random_range(0..items.len())].clone()
                };
                self.retry(|r, c, w| {
                    let item = item.clone();
                    Box::pin(async move { r.claim(c, WS, w, &item, ttl).await })
                })
                .await
            };
            match outcome {
                Outcome::Lease { item, lease, .. } => self.work(&item, lease.epoch, ttl).await,
                _ => Self::pause(20).await,
            }
        }
    }

    /// Holds `item` under `epoch`: renews, writes, releases or abandons it.
    async fn work(&mut self, item: &str, epoch: i64, ttl: u32) {
        for _ in 0..rand::random_range(0..3) {
            Self::pause(rand::random_range(5..60)).await;
            let renewed = self
                .retry(|r, c, w| {
                    let item = item.to_string();
                    Box::pin(async move { r.renew(c, WS, w, &item, epoch, ttl).await })
                })
                .await;
            if !matches!(renewed, Outcome::Lease { .. }) {
                return;
            }
        }
        self.writes += 1;
        let title = format!("{}-e{epoch}-{}", self.name, self.writes);
        let written = self
            .retry(|r, c, w| {
                let (item, title) = (item.to_string(), title.clone());
                Box::pin(async move { r.update_title(c, WS, w, &item, &title, Some(epoch)).await })
            })
            .await;
        if !matches!(written, Outcome::Written { .. }) || rand::random_bool(0.1) {
            return; // lost it, or abandon it: it expires.
        }
        self.retry(|r, c, w| {
            let item = item.to_string();
            Box::pin(async move { r.release(c, WS, w, &item, epoch).await })
        })
        .await;
    }

    async fn create(&mut self) {
        self.writes += 1;
        let title = format!("{}-c{}", self.name, self.writes);
        let created = self
            .retry(|r, c, w| {
                let title = title.clone();
                Box::pin(async move { r.create(c, WS, w, &title).await })
            })
            .await;
        if let Outcome::Written { item, .. } = created {
            self.items.lock().unwrap().push(item);
        }
    }

    /// Sends until answered (or stopped), failing over after each lost answer.
    async fn retry<F>(&mut self, send: F) -> Outcome
    where
        F: for<'a> Fn(
            &'a Recorder,
            &'a Client,
            &'a str,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send + 'a>>,
    {
        loop {
            let outcome = send(&self.recorder, self.servers.client(), &self.name).await;
            if !outcome.is_unknown() || self.stopped() {
                return outcome;
            }
            self.servers.fail_over();
            Self::pause(50).await;
        }
    }
}
