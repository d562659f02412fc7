//! A history checker for the lease protocol (docs/leases.md) under faults.
//!
//! Concurrent client tasks send their claim / renew / release / claim-next /
//! create / update requests through a [`Recorder`], which logs each request
//! with the client's send and receive times and what the answer proves
//! ([`Outcome`]). A request without an answer (connection refused or cut, a
//! timeout) or with a 5xx is *unknown* ([`Outcome::is_unknown`]): it may or
//! may not have happened, and proves nothing.
//! Afterwards [`Recorder::check`] verifies, using only facts the answers
//! prove:
//!
//! - **epochs**: per item, one epoch names one grant (one holder, one
//!   `acquired_at`), and epochs strictly increase in acquisition order;
//! - **no overlap**: no lease is acquired while another lease of the same item
//!   was provably live (see [`LeaseFacts`]), and the server never says a lease
//!   is gone while it was provably live;
//! - **fencing** (L10): no write fenced by epoch e is applied after a later
//!   epoch was granted;
//! - **no lost write**: every acknowledged create or update (each writes a
//!   unique title) is in its item's history afterwards, and the item's title is
//!   that of the last acknowledged write or of a write whose answer was lost.
//!
//! Times: the client's clock and the store's are the same host clock (pad's
//! tests run the server and the database locally), truncated to microseconds
//! as the store's are. The checker assumes each worker sends one request at a
//! time, and checks that it did.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use pad_client::{Client, ClientError, HeldLease};
use pad_core::api::{ClaimBody, ClaimNextBody, ErrorCode, ReleaseBody, RenewBody};
use pad_core::{ItemPatch, Lease, NewItem};

pub type Time = DateTime<Utc>;

/// What a worker asked for. `ttl` is in seconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Claim {
        item: String,
        ttl: u32,
    },
    ClaimNext {
        ttl: u32,
    },
    Renew {
        item: String,
        epoch: i64,
        ttl: u32,
    },
    Release {
        item: String,
        epoch: i64,
    },
    /// Create an item with this (unique) title.
    Create {
        title: String,
    },
    /// Set an item's title to this (unique) value, fenced by `lease_epoch`.
    Update {
        item: String,
        title: String,
        lease_epoch: Option<i64>,
    },
}

/// What the answer proves.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Claim, claim-next or renew granted: the lease as the server wrote it.
    Lease {
        item: String,
        lease: Lease,
        refreshed: bool,
    },
    /// Claim-next found nothing ready.
    Empty,
    Released(bool),
    /// A create or update was written at the store's `updated_at`.
    Written {
        item: String,
        updated_at: Time,
    },
    /// `lease_held`: this live lease refused us.
    Held(HeldLease),
    /// `lease_lost`: our epoch is not live; `current` is.
    Lost(Option<Lease>),
    /// Any other refusal (4xx): nothing happened.
    Refused(ErrorCode),
    /// A 5xx: it may or may not have happened.
    ServerError {
        status: u16,
        code: String,
    },
    /// No answer: it may or may not have happened.
    Unknown(String),
}

impl Outcome {
    /// No answer or a 5xx: the request may or may not have taken effect.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Outcome::Unknown(_) | Outcome::ServerError { .. })
    }
}

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The worker that sent it; also the lease holder it used.
    pub worker: String,
    pub op: Op,
    pub sent: Time,
    pub received: Time,
    pub outcome: Outcome,
}

/// The time now, truncated to the store's microseconds.
pub fn now() -> Time {
    Utc::now().duration_trunc(TimeDelta::microseconds(1)).expect("a representable time")
}

/// Collects [`Entry`]s from many tasks. Every request is bounded by `bound`;
/// one that takes longer is abandoned, recorded as unknown, and counted as
/// hung.
pub struct Recorder {
    entries: Mutex<Vec<Entry>>,
    bound: Duration,
    hung: Mutex<Vec<String>>,
}

impl Recorder {
    pub fn new(bound: Duration) -> Recorder {
        Recorder { entries: Mutex::new(Vec::new()), bound, hung: Mutex::new(Vec::new()) }
    }

    /// Adds an entry made elsewhere (the checker's own tests build histories
    /// by hand).
    pub fn push(&self, entry: Entry) {
        self.entries.lock().unwrap().push(entry);
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.entries.lock().unwrap().clone()
    }

    /// Sends one request, times it, and records it.
    async fn run<T, F>(&self, worker: &str, op: Op, request: F, proves: impl FnOnce(T) -> Outcome) -> Outcome
    where
        F: Future<Output = Result<T, ClientError>>,
    {
        let sent = now();
        let outcome = match tokio::time::timeout(self.bound, request).await {
            Ok(Ok(answer)) => proves(answer),
            Ok(Err(e)) => refusal(e),
            Err(_) => {
                self.hung.lock().unwrap().push(format!("{worker}: {op:?} sent at {sent}"));
                Outcome::Unknown(format!("no answer within {:?}", self.bound))
            }
        };
        let entry = Entry { worker: worker.to_string(), op, sent, received: now(), outcome: outcome.clone() };
        self.push(entry);
        outcome
    }

    pub async fn claim(&self, c: &Client, ws: &str, worker: &str, item: &str, ttl: u32) -> Outcome {
        let body = ClaimBody { holder: Some(worker.into()), ttl_seconds: Some(ttl.into()), ..Default::default() };
        let op = Op::Claim { item: item.into(), ttl };
        self.run(worker, op, c.claim(ws, item, &body), |a| Outcome::Lease {
            item: a.item_ref,
            lease: a.lease,
            refreshed: a.refreshed,
        })
        .await
    }

    pub async fn claim_next(&self, c: &Client, ws: &str, worker: &str, ttl: u32) -> Outcome {
        let body = ClaimNextBody { holder: Some(worker.into()), ttl_seconds: Some(ttl.into()), ..Default::default() };
        self.run(worker, Op::ClaimNext { ttl }, c.claim_next(ws, &body), |a| match (a.item, a.lease) {
            (Some(item), Some(lease)) => Outcome::Lease { item: item.item_ref.to_string(), lease, refreshed: false },
            _ => Outcome::Empty,
        })
        .await
    }

    pub async fn renew(&self, c: &Client, ws: &str, worker: &str, item: &str, epoch: i64, ttl: u32) -> Outcome {
        let body = RenewBody {
            epoch: Some(epoch),
            holder: Some(worker.into()),
            ttl_seconds: Some(ttl.into()),
            ..Default::default()
        };
        let op = Op::Renew { item: item.into(), epoch, ttl };
        self.run(worker, op, c.renew(ws, item, &body), |a| Outcome::Lease {
            item: a.item_ref,
            lease: a.lease,
            refreshed: true,
        })
        .await
    }

    pub async fn release(&self, c: &Client, ws: &str, worker: &str, item: &str, epoch: i64) -> Outcome {
        let body = ReleaseBody { holder: Some(worker.into()), epoch: Some(epoch), ..Default::default() };
        let op = Op::Release { item: item.into(), epoch };
        self.run(worker, op, c.release(ws, item, &body), |a| Outcome::Released(a.released)).await
    }

    pub async fn create(&self, c: &Client, ws: &str, worker: &str, title: &str) -> Outcome {
        let body = NewItem { title: title.into(), ..Default::default() };
        let op = Op::Create { title: title.into() };
        self.run(worker, op, c.create_item(ws, &body), |i| Outcome::Written {
            item: i.item_ref.to_string(),
            updated_at: i.updated_at,
        })
        .await
    }

    pub async fn update_title(
        &self, c: &Client, ws: &str, worker: &str, item: &str, title: &str, lease_epoch: Option<i64>,
    ) -> Outcome {
        let patch = ItemPatch { title: Some(title.into()), lease_epoch, ..Default::default() };
        let op = Op::Update { item: item.into(), title: title.into(), lease_epoch };
        self.run(worker, op, c.update_item(ws, item, &patch), |i| Outcome::Written {
            item: i.item_ref.to_string(),
            updated_at: i.updated_at,
        })
        .await
    }

    /// Reads back, through the API, every item an acknowledged write names.
    pub async fn read_back(&self, c: &Client, ws: &str) -> HashMap<String, Final> {
        let items: HashSet<String> = self
            .entries()
            .into_iter()
            .filter_map(|e| match e.outcome {
                Outcome::Written { item, .. } => Some(item),
                _ => None,
            })
            .collect();
        let mut finals = HashMap::new();
        for item in items {
            let read = async {
                let now = c.item(ws, &item).await?;
                let versions = c.history(ws, &item).await?.versions;
                let titles = versions
                    .iter()
                    .filter_map(|v| v.changes.get("title")?.get("to")?.as_str().map(str::to_string))
                    .collect();
                Ok::<_, ClientError>(Final { title: now.title, updated_at: now.updated_at, titles })
            };
            let got = tokio::time::timeout(Duration::from_secs(30), read).await;
            match got {
                Ok(Ok(f)) => finals.insert(item, f),
                other => panic!("reading back {item}: {other:?}"),
            };
        }
        finals
    }

    /// Checks the history against what was read back (see the module doc).
    pub fn check(&self, finals: &HashMap<String, Final>) -> Report {
        let mut report = check(&self.entries(), finals);
        report.hung = self.hung.lock().unwrap().clone();
        report
    }
}

/// The outcome a refusal or a failure proves.
fn refusal(e: ClientError) -> Outcome {
    match &e {
        ClientError::Api { status, code, .. } if *status >= 500 => {
            Outcome::ServerError { status: *status, code: format!("{code:?}") }
        }
        ClientError::Api { code: ErrorCode::LeaseHeld, .. } => match e.held_lease() {
            Some(held) => Outcome::Held(held),
            None => Outcome::Refused(ErrorCode::LeaseHeld),
        },
        ClientError::Api { code: ErrorCode::LeaseLost, .. } => Outcome::Lost(e.current_lease().flatten()),
        ClientError::Api { code, .. } => Outcome::Refused(*code),
        ClientError::Unavailable(m) | ClientError::Protocol(m) => Outcome::Unknown(m.clone()),
    }
}

/// An item as read back after the run: its title now, and every title its
/// history versions ever set.
#[derive(Debug, Clone, Default)]
pub struct Final {
    pub title: String,
    pub updated_at: Time,
    pub titles: HashSet<String>,
}

/// What the checker found. `violations` must be empty.
#[derive(Debug, Default)]
pub struct Report {
    pub requests: usize,
    /// Requests whose answer was lost (or a 5xx).
    pub unknown: usize,
    /// 5xx answers, by status and code (`503 Unavailable`).
    pub server_errors: BTreeMap<String, usize>,
    /// Distinct leases (item, epoch) seen.
    pub leases: usize,
    pub grants: usize,
    pub acked_writes: usize,
    /// Requests that did not finish within the recorder's bound.
    pub hung: Vec<String>,
    /// The longest a request took, answered or not.
    pub slowest: TimeDelta,
    pub violations: Vec<String>,
    /// Every request that named an item with a violation, in send order:
    /// what a rare failure in CI needs to be understood afterwards.
    pub evidence: Vec<String>,
}

impl Report {
    /// Panics, listing what is wrong, unless the history was correct and no
    /// request hung.
    pub fn assert_ok(&self) {
        assert!(
            self.violations.is_empty(),
            "{} violations:\n{}\nthe requests that named those items:\n{}",
            self.violations.len(),
            self.violations.join("\n"),
            self.evidence.join("\n")
        );
        assert!(self.hung.is_empty(), "{} requests hung:\n{}", self.hung.len(), self.hung.join("\n"));
    }

    /// 5xx answers whose status (`"500"`) or status and code start so.
    /// The items the violations name (each violation starts `"{item}: "`).
    pub fn violating_items(&self) -> HashSet<&str> {
        items_named(&self.violations)
    }

    pub fn count_5xx(&self, prefix: &str) -> usize {
        self.server_errors.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, n)| n).sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests checked ({} unknown), {} grants of {} leases, {} acknowledged writes, {} hung (slowest {} ms), 5xx: {:?}, {} violations",
            self.requests,
            self.unknown,
            self.grants,
            self.leases,
            self.acked_writes,
            self.hung.len(),
            self.slowest.num_milliseconds(),
            self.server_errors,
            self.violations.len()
        )
    }
}

/// Everything the history proves about one lease (item, epoch).
///
/// The lease is **provably live** from `acquired_at` until [`Self::live_until`]:
/// the later of
/// - the lowest expiry it can have had and the earliest moment a release may
///   have ended it: a release ends a lease at some point between its send and
///   its answer, so only the *send* time is safe (the answer's arrival is an
///   upper bound, and another worker may legitimately claim in between);
/// - any moment the server itself said the lease was live (another worker's
///   `lease_held` naming it: live when that request was sent, or later).
#[derive(Debug, Default)]
struct LeaseFacts {
    /// Every (holder, acquired_at) the answers gave for this epoch.
    seen: Vec<(String, Time, &'static str)>,
    /// Requests that may have set `expires_at`, in send order: (sent, the
    /// expiry if answered, ttl).
    extends: Vec<(Time, Option<Time>, u32)>,
    /// Send times of releases that may have ended it.
    ends: Vec<Time>,
    /// Times the server proved it live.
    live_at: Vec<Time>,
    /// Answers saying it was not live, at or before this time.
    not_live_by: Vec<(Time, String)>,
}

impl LeaseFacts {
    fn acquired_at(&self) -> Time {
        self.seen[0].1
    }

    fn live_until(&self) -> Time {
        let mut extends = self.extends.clone();
        extends.sort_by_key(|e| e.0);
        // The last answered extension set `expires_at`, unless a later one,
        // unanswered, moved it: then it is at least its send time + ttl.
        let own = extends.iter().rposition(|e| e.1.is_some()).map(|last| {
            let known = extends[last].1.expect("answered");
            let later = extends[last + 1..].iter().map(|(sent, _, ttl)| *sent + TimeDelta::seconds(i64::from(*ttl)));
            let expiry = later.fold(known, Time::min);
            self.ends.iter().copied().fold(expiry, Time::min)
        });
        let witnessed = self.live_at.iter().copied().max();
        own.into_iter().chain(witnessed).max().unwrap_or_else(|| self.acquired_at())
    }
}

/// Collects a lease fact. `seen` needs a holder and `acquired_at`.
fn facts<'a>(leases: &'a mut BTreeMap<(String, i64), LeaseFacts>, item: &str, epoch: i64) -> &'a mut LeaseFacts {
    leases.entry((item.to_string(), epoch)).or_default()
}

/// The checker proper, over any history; see the module doc.
pub fn check(entries: &[Entry], finals: &HashMap<String, Final>) -> Report {
    let mut report = Report { requests: entries.len(), ..Default::default() };
    let mut v = Vec::new();

    // One request at a time per worker: what the expiry reasoning assumes.
    let mut by_worker: HashMap<&str, Vec<&Entry>> = HashMap::new();
    for e in entries {
        by_worker.entry(&e.worker).or_default().push(e);
    }
    for (worker, mut es) in by_worker {
        es.sort_by_key(|e| e.sent);
        for w in es.windows(2) {
            if w[1].sent < w[0].received {
                v.push(format!("harness: {worker} sent {:?} before {:?} was answered", w[1].op, w[0].op));
            }
        }
    }

    // Gather the facts about each lease.
    let mut leases: BTreeMap<(String, i64), LeaseFacts> = BTreeMap::new();
    let mut unknown_claims = Vec::new();
    for e in entries {
        let (sent, received) = (e.sent, e.received);
        report.slowest = report.slowest.max(e.received - e.sent);
        if e.outcome.is_unknown() {
            report.unknown += 1;
        }
        if let Outcome::ServerError { status, code } = &e.outcome {
            *report.server_errors.entry(format!("{status} {code}")).or_default() += 1;
        }
        let unknown = e.outcome.is_unknown();
        match (&e.op, &e.outcome) {
            (
                Op::Claim { ttl, .. } | Op::ClaimNext { ttl } | Op::Renew { ttl, .. },
                Outcome::Lease { item, lease, .. },
            ) => {
                report.grants += 1;
                if lease.holder != e.worker {
                    v.push(format!("{item}: {} was granted epoch {} for {}", e.worker, lease.epoch, lease.holder));
                }
                let f = facts(&mut leases, item, lease.epoch);
                f.seen.push((lease.holder.clone(), lease.acquired_at, "granted"));
                f.extends.push((sent, Some(lease.expires_at), *ttl));
            }
            (Op::Claim { item, ttl }, _) if unknown => unknown_claims.push((item, &e.worker, sent, *ttl)),
            (Op::Renew { item, epoch, ttl }, _) if unknown => {
                facts(&mut leases, item, *epoch).extends.push((sent, None, *ttl));
            }
            (Op::Release { item, epoch }, _) if unknown => facts(&mut leases, item, *epoch).ends.push(sent),
            (Op::Release { item, epoch }, Outcome::Released(true)) => {
                let f = facts(&mut leases, item, *epoch);
                f.ends.push(sent);
                f.live_at.push(sent);
            }
            (Op::Release { item, epoch }, Outcome::Released(false)) => {
                let why = format!("{} releasing it was told: no live lease", e.worker);
                facts(&mut leases, item, *epoch).not_live_by.push((received, why));
            }
            (Op::Renew { item, epoch, .. } | Op::Release { item, epoch }, Outcome::Lost(current)) => {
                let why = format!("{} was told lease_lost by {:?}", e.worker, e.op);
                facts(&mut leases, item, *epoch).not_live_by.push((received, why));
                if let Some(l) = current {
                    let f = facts(&mut leases, item, l.epoch);
                    f.seen.push((l.holder.clone(), l.acquired_at, "current in lease_lost"));
                    f.live_at.push(sent);
                }
            }
            (Op::Claim { item, .. } | Op::Renew { item, .. } | Op::Release { item, .. }, Outcome::Held(h)) => {
                let f = facts(&mut leases, item, h.epoch);
                f.seen.push((h.holder.clone(), h.acquired_at, "named by lease_held"));
                f.live_at.push(sent);
            }
            _ => {}
        }
    }
    // A claim without an answer may have refreshed the worker's lease.
    for (item, worker, sent, ttl) in unknown_claims {
        for ((i, _), f) in leases.iter_mut() {
            if i == item && f.seen.first().is_some_and(|s| s.0 == *worker && s.1 <= sent) {
                f.extends.push((sent, None, ttl));
            }
        }
    }
    // An epoch only ever named by a refused renew or release, whose grant no
    // answer showed, has nothing to check.
    leases.retain(|_, f| !f.seen.is_empty());
    report.leases = leases.len();

    // Epochs: one grant each, increasing with acquisition.
    let mut per_item: BTreeMap<&str, Vec<(i64, &LeaseFacts)>> = BTreeMap::new();
    for ((item, epoch), f) in &leases {
        let (holder, at, first) = &f.seen[0];
        for (h, a, how) in &f.seen[1..] {
            if h != holder || a != at {
                v.push(format!(
                    "{item}: epoch {epoch} names two grants: {holder} acquired at {at} ({first}), and {h} acquired at {a} ({how})"
                ));
            }
        }
        per_item.entry(item).or_default().push((*epoch, f));
    }
    for (item, ls) in &mut per_item {
        ls.sort_by_key(|(epoch, f)| (f.acquired_at(), *epoch));
        for w in ls.windows(2) {
            let ((e1, f1), (e2, f2)) = (w[0], w[1]);
            if e2 <= e1 || f2.acquired_at() == f1.acquired_at() {
                v.push(format!(
                    "{item}: epoch {e2} acquired at {} after epoch {e1} acquired at {}",
                    f2.acquired_at(),
                    f1.acquired_at()
                ));
            }
        }
        // No overlap: a lease is never acquired while another is provably live.
        for (i, (e1, f1)) in ls.iter().enumerate() {
            let until = f1.live_until();
            for (e2, f2) in ls[i + 1..].iter().take_while(|(_, f2)| f2.acquired_at() < until) {
                v.push(format!(
                    "{item}: overlap: epoch {e2} ({}) acquired at {} while epoch {e1} ({}) was live until at least {until}",
                    f2.seen[0].0,
                    f2.acquired_at(),
                    f1.seen[0].0
                ));
            }
            for (by, why) in &f1.not_live_by {
                if *by < until {
                    v.push(format!(
                        "{item}: epoch {e1} ({}) ended early: by {by} {why}, but it was live until at least {until}",
                        f1.seen[0].0
                    ));
                }
            }
        }
    }

    // Writes: fenced ones only inside their lease; acknowledged ones kept.
    let mut acked: HashMap<&str, Vec<(&str, Time)>> = HashMap::new();
    let mut unanswered: HashMap<&str, HashSet<&str>> = HashMap::new();
    for e in entries {
        let (target, title, fence) = match &e.op {
            Op::Create { title } => (None, title, None),
            Op::Update { item, title, lease_epoch } => (Some(item.as_str()), title, *lease_epoch),
            _ => continue,
        };
        match &e.outcome {
            Outcome::Written { item, updated_at } => {
                report.acked_writes += 1;
                acked.entry(item).or_default().push((title, *updated_at));
                // The first later epoch, if any: once granted, `fence` was dead.
                let later = per_item.get(item.as_str()).into_iter().flatten();
                let next = fence.and_then(|fe| later.filter(|(e2, _)| *e2 > fe).min_by_key(|(e2, _)| *e2));
                if let Some((e2, f2)) = next
                    && f2.acquired_at() <= *updated_at
                {
                    v.push(format!(
                        "{item}: write {title:?} fenced by epoch {} applied at {updated_at}, after epoch {e2} was acquired at {}",
                        fence.unwrap_or_default(),
                        f2.acquired_at()
                    ));
                }
            }
            o if o.is_unknown() => {
                if let Some(item) = target {
                    unanswered.entry(item).or_default().insert(title);
                }
            }
            _ => {}
        }
    }
    for (item, writes) in &acked {
        let Some(now) = finals.get(*item) else {
            v.push(format!("{item}: lost: acknowledged writes, but it was not read back"));
            continue;
        };
        for (title, at) in writes {
            if !now.titles.contains(*title) {
                v.push(format!("{item}: lost write: {title:?}, acknowledged at {at}, is not in its history"));
            }
        }
        let (last, at) = writes.iter().max_by_key(|w| w.1).expect("at least one write");
        let may_follow = unanswered.get(item).is_some_and(|t| t.contains(now.title.as_str()));
        if (now.title != *last && !may_follow) || now.updated_at < *at {
            v.push(format!(
                "{item}: lost write: its title is {:?} (updated {}), but {last:?} was acknowledged at {at}",
                now.title, now.updated_at
            ));
        }
    }
    report.evidence = evidence(entries, &v);
    report.violations = v;
    report
}

/// The item an entry's request or answer names, if any.
fn named_item(e: &Entry) -> Option<&str> {
    match (&e.op, &e.outcome) {
        (_, Outcome::Lease { item, .. } | Outcome::Written { item, .. }) => Some(item),
        (Op::Claim { item, .. } | Op::Renew { item, .. } | Op::Release { item, .. } | Op::Update { item, .. }, _) => {
            Some(item)
        }
        _ => None,
    }
}

/// The items violations name: each starts `"{item}: "`.
fn items_named(violations: &[String]) -> HashSet<&str> {
    violations.iter().filter_map(|v| v.split_once(':').map(|(item, _)| item)).collect()
}

/// The entries naming an item that a violation names.
fn evidence(entries: &[Entry], violations: &[String]) -> Vec<String> {
    let items = items_named(violations);
    let mut named: Vec<&Entry> = entries.iter().filter(|e| named_item(e).is_some_and(|i| items.contains(i))).collect();
    named.sort_by_key(|e| e.sent);
    named
        .iter()
        .map(|e| format!("{} sent {} answered {}: {:?} -> {:?}", e.worker, e.sent, e.received, e.op, e.outcome))
        .collect()
}
