//! A short-lived, bounded, in-process cache of the two reads that authorize
//! a request: who a credential stands for, and a user's membership in a
//! workspace. A caller that comes back within [`AuthCache::ttl`] costs no
//! store read before its handler runs (docs/operations.md, "Authentication
//! cache").
//!
//! The rules it keeps (docs/api.md, "Tokens"):
//! - Keyed by the credential's SHA-256 hash, never the secret; only answers
//!   that grant something are kept (an unknown token is read every time).
//! - Every entry ends [`AuthCache::ttl`] after the read that filled it
//!   *started*, so a change committed on another instance is seen here at
//!   most one TTL after it commits.
//! - Each map holds at most `cap` entries; the oldest go first.
//! - A route that revokes a token or changes a membership clears the whole
//!   cache on this instance once its store call is done
//!   ([`AuthCache::invalidation`]); a sign-out drops its session's entry
//!   ([`AuthCache::forgetting`]). A read that started before either is not
//!   stored (the generation check), so it cannot put the old answer back.
//!   Both announce the change to the open event streams, except a sign-out
//!   that revoked nothing ([`Invalidation::unchanged`]).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pad_core::{Principal, Role, Workspace};

use crate::extract::Credential;

/// How long an entry is trusted by default: below the event streams' 2 s
/// recheck (`routes/events.rs`, `RECHECK`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(1);
/// Entries per map by default. An entry is a few hundred bytes (an email, a
/// slug, a workspace's name and settings), so both maps stay under ~4 MiB.
pub const DEFAULT_ENTRIES: usize = 4096;

pub struct AuthCache {
    ttl: Duration,
    cap: usize,
    inner: Mutex<Inner>,
    /// Counts changes of authorization on this instance (revocations,
    /// removals, sign-outs): open event streams watch it and check their
    /// access again before they send anything more (`routes/events.rs`).
    changes: tokio::sync::watch::Sender<u64>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Inner {
    /// Bumped by every invalidation; a read stores its answer only if the
    /// generation is still the one it started under.
    generation: u64,
    principals: Fifo<Credential, Principal>,
    memberships: Fifo<(i64, String), (Workspace, Role)>,
}

impl Default for AuthCache {
    fn default() -> Self {
        AuthCache::new(DEFAULT_TTL, DEFAULT_ENTRIES)
    }
}

impl AuthCache {
    /// A cache keeping entries `ttl` and at most `cap` per map; a zero `ttl`
    /// or `cap` turns it off (every request reads the store).
    pub fn new(ttl: Duration, cap: usize) -> Self {
        AuthCache {
            ttl,
            cap,
            inner: Default::default(),
            changes: tokio::sync::watch::Sender::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// `PAD_AUTH_CACHE_TTL` (seconds, `0` or `off` to turn the cache off),
    /// else [`DEFAULT_TTL`].
    pub fn from_env() -> Self {
        let ttl = match std::env::var("PAD_AUTH_CACHE_TTL").ok().as_deref().map(str::trim) {
            None => DEFAULT_TTL,
            Some("off") => Duration::ZERO,
            Some(v) => match v.parse::<f64>() {
                Ok(s) if (0.0..=60.0).contains(&s) => Duration::from_secs_f64(s),
                _ => {
                    tracing::warn!(value = v, "PAD_AUTH_CACHE_TTL is not 0 to 60 seconds or `off`; using the default");
                    DEFAULT_TTL
                }
            },
        };
        AuthCache::new(ttl, DEFAULT_ENTRIES)
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Who `credential` stands for: the cached answer, or `load`'s (kept
    /// when it is `Some`).
    pub async fn principal<E>(
        &self, credential: &Credential, load: impl Future<Output = Result<Option<Principal>, E>>,
    ) -> Result<Option<Principal>, E> {
        let started = Instant::now();
        let generation = match self.lookup(|i| &mut i.principals, credential, started) {
            Ok(hit) => return Ok(Some(hit)),
            Err(generation) => generation,
        };
        let answer = load.await?;
        if let Some(p) = &answer {
            self.store(|i| &mut i.principals, credential.clone(), p.clone(), started, generation);
        }
        Ok(answer)
    }

    /// The workspace `slug` and `user_id`'s role there: the cached answer,
    /// or `load`'s (kept when it is `Ok`).
    pub async fn membership<E>(
        &self, user_id: i64, slug: &str, load: impl Future<Output = Result<(Workspace, Role), E>>,
    ) -> Result<(Workspace, Role), E> {
        let started = Instant::now();
        let key = (user_id, slug.to_string());
        let generation = match self.lookup(|i| &mut i.memberships, &key, started) {
            Ok(hit) => return Ok(hit),
            Err(generation) => generation,
        };
        let answer = load.await?;
        self.store(|i| &mut i.memberships, key, answer.clone(), started, generation);
        Ok(answer)
    }

    /// Forgets everything this instance holds, now; later reads go to the store.
    pub fn invalidate(&self) {
        {
            let mut inner = self.lock();
            inner.generation += 1;
            inner.principals.clear();
            inner.memberships.clear();
        }
        self.changes.send_modify(|n| *n += 1);
    }

    /// Wakes when authorization changes on this instance (see `changes`).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// A guard that calls [`AuthCache::invalidate`] when dropped: create it
    /// before the store call that changes authorization, so the cache is
    /// cleared once that call is done, also when the request is cut short
    /// (a deadline, a closed connection) while the call runs.
    #[must_use = "the cache is cleared when the guard drops"]
    pub fn invalidation(&self) -> Invalidation<'_> {
        Invalidation { cache: self, only: None, announce: true }
    }

    /// Like [`AuthCache::invalidation`], for a change that concerns only
    /// `credential` (a sign-out, which anyone may send with any cookie, so
    /// it must not empty the cache for everyone).
    #[must_use = "the entry is dropped when the guard drops"]
    pub fn forgetting(&self, credential: Credential) -> Invalidation<'_> {
        Invalidation { cache: self, only: Some(credential), announce: true }
    }

    /// Drops `credential`'s entry; `announce`: tell the open streams.
    fn forget(&self, credential: &Credential, announce: bool) {
        {
            let mut inner = self.lock();
            inner.generation += 1;
            inner.principals.map.remove(credential);
        }
        if announce {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// Entries held now, both maps together (for tests of the bound).
    pub fn len(&self) -> usize {
        let inner = self.lock();
        inner.principals.map.len() + inner.memberships.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `/metrics` series (docs/operations.md, "Metrics").
    pub fn render(&self) -> String {
        let (hits, misses, entries) =
            (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed), self.len());
        format!(
            "# HELP pad_auth_cache_hits_total Credential and membership lookups answered from the cache.\n\
             # TYPE pad_auth_cache_hits_total counter\n\
             pad_auth_cache_hits_total {hits}\n\
             # HELP pad_auth_cache_misses_total Credential and membership lookups that read the store.\n\
             # TYPE pad_auth_cache_misses_total counter\n\
             pad_auth_cache_misses_total {misses}\n\
             # HELP pad_auth_cache_entries Entries held by the authentication cache.\n\
             # TYPE pad_auth_cache_entries gauge\n\
             pad_auth_cache_entries {entries}\n"
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("auth cache lock")
    }

    /// The live entry for `key`, or the generation a miss reads under.
    fn lookup<K: Hash + Eq + Clone, V: Clone>(
        &self, pick: impl Fn(&mut Inner) -> &mut Fifo<K, V>, key: &K, now: Instant,
    ) -> Result<V, u64> {
        let mut inner = self.lock();
        if let Some(v) = pick(&mut inner).get(key, now) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        Err(inner.generation)
    }

    fn store<K: Hash + Eq + Clone, V>(
        &self, pick: impl Fn(&mut Inner) -> &mut Fifo<K, V>, key: K, value: V, started: Instant, generation: u64,
    ) {
        if self.ttl.is_zero() || self.cap == 0 {
            return;
        }
        let mut inner = self.lock();
        // Invalidated while the read ran: its answer may predate the change.
        if inner.generation != generation {
            return;
        }
        let (cap, now) = (self.cap, Instant::now());
        pick(&mut inner).insert(key, value, started + self.ttl, now, cap);
    }
}

/// Clears the cache, or one credential's entry, when dropped
/// ([`AuthCache::invalidation`], [`AuthCache::forgetting`]).
pub struct Invalidation<'a> {
    cache: &'a AuthCache,
    only: Option<Credential>,
    announce: bool,
}

impl Invalidation<'_> {
    /// The store call changed nothing (a sign-out whose cookie names no
    /// live session): the credential's entry is still dropped, but the open
    /// event streams are not told, so a flood of such sign-outs costs them
    /// no store reads (docs/api.md, "Web sessions"). Only for
    /// [`AuthCache::forgetting`]; a whole invalidation always announces.
    pub fn unchanged(mut self) {
        self.announce = false;
    }
}

impl Drop for Invalidation<'_> {
    fn drop(&mut self) {
        match &self.only {
            None => self.cache.invalidate(),
            Some(credential) => self.cache.forget(credential, self.announce),
        }
    }
}

/// A map whose entries expire, with their keys in insertion order, so the
/// expired and the oldest are dropped from the front without a scan.
struct Fifo<K, V> {
    map: HashMap<K, (V, Instant)>,
    order: VecDeque<(K, Instant)>,
}

impl<K, V> Default for Fifo<K, V> {
    fn default() -> Self {
        Fifo { map: HashMap::new(), order: VecDeque::new() }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Fifo<K, V> {
    fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.map.get(key).filter(|(_, expires)| now < *expires).map(|(v, _)| v.clone())
    }
}

impl<K: Hash + Eq + Clone, V> Fifo<K, V> {
    fn insert(&mut self, key: K, value: V, expires: Instant, now: Instant, cap: usize) {
        // `order` has one record per live map entry plus records of entries
        // since replaced, so bounding it bounds the map.
        while let Some((k, at)) = self.order.front() {
            if *at > now && self.order.len() < cap {
                break;
            }
            if self.map.get(k).is_some_and(|(_, e)| e == at) {
                self.map.remove(k);
            }
            self.order.pop_front();
        }
        self.order.push_back((key.clone(), expires));
        self.map.insert(key, (value, expires));
    }

    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pad_core::User;

    fn principal(id: i64) -> Principal {
        Principal {
            user: User { id, email: format!("u{id}@example.com") },
            token_id: id,
            scope: None,
            charged_to: None,
        }
    }

    async fn ask(cache: &AuthCache, n: i64, loads: &AtomicU64) -> Option<Principal> {
        let cred = Credential::Token(format!("hash-{n}"));
        cache
            .principal(&cred, async {
                loads.fetch_add(1, Ordering::Relaxed);
                Ok::<_, ()>(Some(principal(n)))
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_second_lookup_within_the_ttl_reads_nothing() {
        let (cache, loads) = (AuthCache::new(Duration::from_secs(60), 8), AtomicU64::new(0));
        assert_eq!(ask(&cache, 1, &loads).await, Some(principal(1)));
        assert_eq!(ask(&cache, 1, &loads).await, Some(principal(1)));
        assert_eq!(loads.load(Ordering::Relaxed), 1);
        cache.invalidate();
        ask(&cache, 1, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), 2, "an invalidation sends the next lookup to the store");
        ask(&cache, 2, &loads).await;
        drop(cache.forgetting(Credential::Token("hash-1".into())));
        ask(&cache, 2, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), 3, "forgetting one credential keeps the others");
        ask(&cache, 1, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), 4, "the forgotten one is read again");
    }

    #[tokio::test]
    async fn entries_expire_after_the_ttl() {
        let (cache, loads) = (AuthCache::new(Duration::from_millis(50), 8), AtomicU64::new(0));
        ask(&cache, 1, &loads).await;
        tokio::time::sleep(Duration::from_millis(80)).await;
        ask(&cache, 1, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn refusals_are_not_kept() {
        let cache = AuthCache::new(Duration::from_secs(60), 8);
        let cred = Credential::Token("unknown".into());
        assert_eq!(cache.principal(&cred, async { Ok::<_, ()>(None) }).await, Ok(None));
        assert!(cache.is_empty());
        let member = cache.membership(1, "ws", async { Err::<(Workspace, Role), _>("not found") }).await;
        assert_eq!(member.unwrap_err(), "not found");
        assert!(cache.is_empty());
    }

    #[tokio::test]
    async fn many_credentials_never_grow_it_past_the_cap() {
        let (cache, loads) = (AuthCache::new(Duration::from_secs(60), 16), AtomicU64::new(0));
        for n in 0..1000 {
            ask(&cache, n, &loads).await;
            assert!(cache.len() <= 16, "{} entries after {n}", cache.len());
        }
        assert_eq!(cache.lock().principals.order.len(), 16);
        // The newest are kept, the oldest went first.
        let before = loads.load(Ordering::Relaxed);
        ask(&cache, 999, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), before);
        ask(&cache, 0, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), before + 1);
    }

    #[tokio::test]
    async fn a_read_that_started_before_an_invalidation_is_not_kept() {
        let (cache, loads) = (AuthCache::new(Duration::from_secs(60), 8), AtomicU64::new(0));
        let cred = Credential::Token("hash-1".into());
        // The read sees the old answer, then the revoke commits and clears
        // the cache before the read's answer is stored.
        let answer = cache
            .principal(&cred, async {
                cache.invalidate();
                Ok::<_, ()>(Some(principal(1)))
            })
            .await;
        assert_eq!(answer, Ok(Some(principal(1))));
        assert!(cache.is_empty());
        ask(&cache, 1, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_zero_ttl_keeps_nothing() {
        let (cache, loads) = (AuthCache::new(Duration::ZERO, 8), AtomicU64::new(0));
        ask(&cache, 1, &loads).await;
        ask(&cache, 1, &loads).await;
        assert_eq!(loads.load(Ordering::Relaxed), 2);
        assert!(cache.is_empty());
    }
}
