//! Bounds on what one user may hold open or send. They are keyed by user,
//! not token, so minting more tokens buys nothing (docs/api.md, "Limits").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open SSE streams per user, across all of the user's tokens.
pub const STREAMS_PER_USER: usize = 8;

#[derive(Default, Clone)]
pub struct StreamLimiter {
    open: Arc<Mutex<HashMap<i64, usize>>>,
}

/// Held by a stream while it is open; closing the stream frees the slots.
pub struct StreamPermit {
    open: Arc<Mutex<HashMap<i64, usize>>>,
    users: Vec<i64>,
}

impl StreamLimiter {
    /// A slot for one more of `user_id`'s streams, or `None` at the cap. The
    /// map holds only users with a stream open.
    pub fn open(&self, user_id: i64) -> Option<StreamPermit> {
        self.open_charged(user_id, None)
    }

    /// Like [`StreamLimiter::open`], also taking a slot of `charged_to`, the
    /// account at the root of the caller's token's minting chain, or `None`
    /// when either is at the cap.
    pub fn open_charged(&self, user_id: i64, charged_to: Option<i64>) -> Option<StreamPermit> {
        let users: Vec<i64> = std::iter::once(user_id).chain(charged_to.filter(|m| *m != user_id)).collect();
        let mut open = self.open.lock().expect("stream limiter lock");
        if users.iter().any(|u| open.get(u).is_some_and(|n| *n >= STREAMS_PER_USER)) {
            return None;
        }
        for u in &users {
            *open.entry(*u).or_default() += 1;
        }
        Some(StreamPermit { open: self.open.clone(), users })
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.open.lock().expect("stream limiter lock");
        for u in &self.users {
            if let Some(n) = open.get_mut(u) {
                *n -= 1;
                if *n == 0 {
                    open.remove(u);
                }
            }
        }
    }
}

/// Per-user request rate: a token bucket of `burst` requests refilled at
/// `per_second`, shared by all of a user's tokens. `PAD_RATE_LIMIT` sets it
/// (`500`, meaning 500/s with a burst of twice that, or `off`); the default
/// is generous enough for a fleet sharing one user and still stops a
/// runaway loop.
///
/// Memory stays bounded: a bucket that has refilled is the same as no
/// bucket, so such buckets are swept out whenever the map has doubled since
/// the last sweep. What remains are users active within the last
/// `burst / per_second` seconds (2 s).
#[derive(Clone)]
pub struct RateLimiter<K = i64> {
    limit: Option<(f64, f64)>,
    buckets: Arc<Mutex<Buckets<K>>>,
}

struct Buckets<K> {
    by_user: HashMap<K, (f64, std::time::Instant)>,
    sweep_at: usize,
    /// When the last sweep ran: a map held at its cap sweeps again at most
    /// once per [`CAPPED_SWEEP_EVERY`], not on every new key.
    swept_at: Option<std::time::Instant>,
}

impl<K> Default for Buckets<K> {
    fn default() -> Self {
        Buckets { by_user: HashMap::new(), sweep_at: 0, swept_at: None }
    }
}

/// How often a map at its cap looks again for idle buckets to drop.
const CAPPED_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

pub const DEFAULT_RATE_PER_SECOND: f64 = 5000.0;
/// The map is never swept below this size: sweeping a small map buys nothing.
const SWEEP_MIN: usize = 1024;

impl RateLimiter {
    pub fn new(per_second: Option<f64>) -> Self {
        Self::keyed(per_second.map(|r| (r, r * 2.0)))
    }

    /// A bucket of `burst` requests refilled at `per_second`, for a burst
    /// other than `PAD_RATE_LIMIT`'s twice the rate. Tests pick a refill too
    /// slow to matter, so what they count does not depend on how fast the
    /// machine runs them.
    pub fn with_burst(per_second: f64, burst: f64) -> Self {
        Self::keyed(Some((per_second, burst)))
    }

    pub fn from_env() -> Self {
        match std::env::var("PAD_RATE_LIMIT").ok().as_deref().map(str::trim) {
            Some("off" | "0") => Self::new(None),
            Some(v) => match v.parse::<f64>() {
                Ok(r) if r > 0.0 => Self::new(Some(r)),
                _ => {
                    tracing::warn!(value = v, "PAD_RATE_LIMIT is not a number or `off`; using the default");
                    Self::new(Some(DEFAULT_RATE_PER_SECOND))
                }
            },
            None => Self::new(Some(DEFAULT_RATE_PER_SECOND)),
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy> RateLimiter<K> {
    fn keyed(limit: Option<(f64, f64)>) -> Self {
        RateLimiter { limit, buckets: Arc::new(Mutex::new(Buckets::default())) }
    }

    /// Takes one request from `user_id`'s bucket, or says how many seconds until one is free.
    pub fn check(&self, user_id: K) -> Result<(), u64> {
        self.check_capped(user_id, None)
    }

    /// [`RateLimiter::check`], with at most `cap` buckets held: once that
    /// many are busy, a key without one draws on `spill`'s bucket instead,
    /// so keys anyone can make up (client addresses) cannot grow the map
    /// without bound.
    fn check_capped(&self, key: K, overflow: Option<(usize, K)>) -> Result<(), u64> {
        self.check_capped_at(key, overflow, std::time::Instant::now())
    }

    /// [`check_capped`](Self::check_capped) at `now`, which tests set.
    fn check_capped_at(&self, key: K, overflow: Option<(usize, K)>, now: std::time::Instant) -> Result<(), u64> {
        let Some((rate, burst)) = self.limit else { return Ok(()) };
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        let cap = overflow.as_ref().map_or(usize::MAX, |(cap, _)| *cap);
        let len = buckets.by_user.len();
        // The next sweep is due at twice what the last one left, but never
        // past the cap: a map at its cap would otherwise never sweep again,
        // and every new key would share the spill bucket for good. At the
        // cap, a sweep runs at most once per CAPPED_SWEEP_EVERY.
        let due = len >= buckets.sweep_at.max(SWEEP_MIN).min(cap)
            && (len < cap || buckets.swept_at.is_none_or(|t| now.duration_since(t) >= CAPPED_SWEEP_EVERY));
        if due {
            buckets
                .by_user
                .retain(|_, (tokens, last)| *tokens + now.duration_since(*last).as_secs_f64() * rate < burst);
            buckets.sweep_at = (buckets.by_user.len() * 2).min(cap);
            buckets.swept_at = Some(now);
        }
        let key = match overflow {
            Some((cap, spill)) if buckets.by_user.len() >= cap && !buckets.by_user.contains_key(&key) => spill,
            _ => key,
        };
        let (tokens, last) = buckets.by_user.entry(key).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / rate).ceil().max(1.0) as u64)
        }
    }

    /// How many buckets are held (for tests of the bound).
    pub fn tracked(&self) -> usize {
        self.buckets.lock().expect("rate limiter lock").by_user.len()
    }
}

/// What one connection may take (docs/api.md, "Limits"). `PAD_REQUEST_TIMEOUT`
/// (seconds) and `PAD_MAX_CONNECTIONS` set them.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Headers, body and handler of one request together, from its first
    /// byte. Event streams are exempt once their headers are sent.
    pub request_timeout: std::time::Duration,
    /// Connections served at once; further ones are answered 503 and closed.
    /// Also kept below the process's file-descriptor limit.
    pub max_connections: usize,
}

pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
pub const DEFAULT_MAX_OPEN_CONNECTIONS: usize = 10_000;
/// File descriptors kept free for the store, logs and the listener.
const FD_RESERVE: u64 = 256;

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits { request_timeout: DEFAULT_REQUEST_TIMEOUT, max_connections: DEFAULT_MAX_OPEN_CONNECTIONS }
    }
}

impl ConnectionLimits {
    pub fn from_env() -> Self {
        let mut limits = Self::default();
        if let Ok(v) = std::env::var("PAD_REQUEST_TIMEOUT") {
            match v.trim().parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => limits.request_timeout = std::time::Duration::from_secs_f64(s),
                _ => tracing::warn!(value = v, "PAD_REQUEST_TIMEOUT is not a number of seconds; using the default"),
            }
        }
        if let Ok(v) = std::env::var("PAD_MAX_CONNECTIONS") {
            match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => limits.max_connections = n,
                _ => tracing::warn!(value = v, "PAD_MAX_CONNECTIONS is not a positive number; using the default"),
            }
        }
        limits
    }

    /// The connection cap in force: the configured one, lowered to fit the
    /// file-descriptor limit (raised first to its hard maximum), so the
    /// process never runs out of descriptors for its store.
    pub fn effective_max_connections(&self) -> usize {
        let Some(fds) = raise_fd_limit() else { return self.max_connections };
        let fit = usize::try_from(fds.saturating_sub(FD_RESERVE).max(16)).unwrap_or(usize::MAX);
        if fit < self.max_connections {
            tracing::warn!(
                configured = self.max_connections,
                serving = fit,
                "the file-descriptor limit allows fewer connections than configured"
            );
        }
        self.max_connections.min(fit)
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one; returns the soft limit now in force.
#[cfg(unix)]
fn raise_fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not on every unix
    Some(lim.rlim_cur as u64)
}

#[cfg(not(unix))]
fn raise_fd_limit() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_with_a_wait() {
        let r = RateLimiter::new(Some(1.0));
        assert!(r.check(1).is_ok());
        assert!(r.check(1).is_ok());
        assert_eq!(r.check(1), Err(1));
        assert!(r.check(2).is_ok(), "buckets are per user");
        assert!(RateLimiter::new(None).check(1).is_ok());
    }

    #[test]
    fn idle_buckets_are_swept_so_memory_stays_bounded() {
        // Full again 2 ms after a single use; 100 batches of 1000 users, each
        // batch idle (full) by the time the next one comes.
        let r = RateLimiter::new(Some(1000.0));
        let mut most = 0;
        for batch in 0..100i64 {
            for user in 0..1000 {
                r.check(batch * 1000 + user).unwrap();
            }
            most = most.max(r.tracked());
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
        // Without the sweep the map would end with 100 000 users.
        assert!(most < 10_000, "{most} buckets held at once");
        // A user mid-burst is never forgotten (that would hand them a fresh burst).
        let slow = RateLimiter::new(Some(1.0));
        slow.check(7).unwrap();
        slow.check(7).unwrap();
        for user in 0..(4 * SWEEP_MIN as i64) {
            let _ = slow.check(100 + user);
        }
        assert!(slow.check(7).is_err(), "the exhausted bucket survived the sweeps");
    }

    #[test]
    fn a_map_held_at_its_cap_still_sweeps_idle_buckets() {
        // One token a second, so a bucket drawn once is busy for a second.
        let limiter = RateLimiter::<i64>::keyed(Some((1.0, 2.0)));
        let cap = 3 * SWEEP_MIN;
        let spill = -1;
        let t0 = std::time::Instant::now();
        // Every bucket busy when the sweeps run: the map fills to its cap.
        for key in 0..(cap as i64 + 10) {
            let _ = limiter.check_capped_at(key, Some((cap, spill)), t0);
        }
        // The cap's buckets, and the spill bucket the last ten shared.
        assert_eq!(limiter.buckets.lock().unwrap().by_user.len(), cap + 1);
        // A minute later all of them are idle: a new key is worth a sweep,
        // and gets a bucket of its own, not the spill one.
        let later = t0 + std::time::Duration::from_secs(60);
        let _ = limiter.check_capped_at(1_000_000, Some((cap, spill)), later);
        let buckets = limiter.buckets.lock().unwrap();
        assert!(buckets.by_user.contains_key(&1_000_000), "a new key went to the spill bucket");
        assert!(buckets.by_user.len() < 10, "{} buckets kept", buckets.by_user.len());
    }

    #[test]
    fn streams_are_bounded_per_user() {
        let l = StreamLimiter::default();
        let held: Vec<_> = (0..STREAMS_PER_USER).map(|_| l.open(1).unwrap()).collect();
        assert!(l.open(1).is_none());
        assert!(l.open(2).is_some());
        drop(held);
        assert!(l.open(1).is_some());
        assert!(l.open.lock().unwrap().is_empty(), "closed streams leave nothing behind");
    }

    #[test]
    fn streams_of_minted_tokens_count_for_the_minter_too() {
        let l = StreamLimiter::default();
        // Users 2..=9, each with a token minted by 1: one stream each.
        let held: Vec<_> = (2..2 + STREAMS_PER_USER as i64).map(|u| l.open_charged(u, Some(1)).unwrap()).collect();
        assert!(l.open_charged(100, Some(1)).is_none(), "a ninth invented user's stream");
        assert!(l.open(1).is_none(), "the minter's own stream");
        assert!(l.open_charged(100, None).is_some(), "an unrelated user");
        assert!(l.open_charged(5, Some(5)).is_some(), "one's own token charges once");
        drop(held);
        assert!(l.open(1).is_some());
    }
}

/// What one account may do that makes more of what the other limits count
/// (docs/api.md, "Limits"): workspaces created, users created by inviting
/// new emails, and members added. Each has a budget per hour and a total
/// (since this instance started). Without them, an account could invent
/// users (each with its own stream and rate limits) and workspaces faster
/// than anything else here bounds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    Workspaces,
    InvitedUsers,
    MembersAdded,
}

impl Budget {
    const ALL: [Budget; 3] = [Budget::Workspaces, Budget::InvitedUsers, Budget::MembersAdded];

    /// The defaults: (per account and hour, per account in all). Invited
    /// users' hourly bound is no lower than their total, so a burst meets
    /// the total, "in all", and the 36th invented user is the one refused
    /// (docs/api.md, "Limits").
    pub fn default_bounds(self) -> Bounds {
        match self {
            Budget::Workspaces => Bounds { per_hour: 10, total: 50 },
            Budget::InvitedUsers => Bounds { per_hour: 35, total: 35 },
            Budget::MembersAdded => Bounds { per_hour: 60, total: 500 },
        }
    }

    /// The name `PAD_ACCOUNT_LIMITS` uses.
    fn key(self) -> &'static str {
        match self {
            Budget::Workspaces => "workspaces",
            Budget::InvitedUsers => "invited_users",
            Budget::MembersAdded => "members_added",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Budget::Workspaces => "workspaces created",
            Budget::InvitedUsers => "new users invited",
            Budget::MembersAdded => "members added",
        }
    }
}

/// One budget's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub per_hour: usize,
    pub total: usize,
}

const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

/// A sliding hour per account and [`Budget`] (the times of the last uses,
/// at most the hourly bound, so memory is bounded by the accounts active
/// within the hour; an account whose uses all expired is dropped at its
/// next charge or by the sweep when the map has doubled), and a running
/// total per account and budget.
#[derive(Clone)]
pub struct AccountLimiter {
    used: Arc<Mutex<AccountUses>>,
    bounds: [Bounds; 3],
    off: bool,
}

#[derive(Default)]
struct AccountUses {
    map: HashMap<(i64, Budget), std::collections::VecDeque<std::time::Instant>>,
    totals: HashMap<(i64, Budget), usize>,
    swept_at: usize,
}

impl Default for AccountLimiter {
    fn default() -> Self {
        AccountLimiter { used: Default::default(), bounds: Budget::ALL.map(Budget::default_bounds), off: false }
    }
}

impl AccountLimiter {
    /// No budgets: for a single-tenant server that provisions many users or
    /// workspaces on purpose (`PAD_ACCOUNT_LIMITS=off`), and for tests of
    /// other things that do.
    pub fn off() -> Self {
        AccountLimiter { off: true, ..Default::default() }
    }

    /// `PAD_ACCOUNT_LIMITS`: `off`, or bounds to change, as
    /// `invited_users=10/35,workspaces=5/20` (per hour / in all).
    pub fn from_env() -> Self {
        match std::env::var("PAD_ACCOUNT_LIMITS") {
            Ok(v) if v.trim() == "off" => Self::off(),
            Ok(v) => Self::parse(&v).unwrap_or_else(|e| {
                tracing::warn!(value = v, error = e, "PAD_ACCOUNT_LIMITS is not understood; using the defaults");
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }

    /// See [`AccountLimiter::from_env`].
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut l = Self::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("`{part}` is not name=per_hour/total"))?;
            let budget = Budget::ALL
                .into_iter()
                .find(|b| b.key() == key.trim())
                .ok_or_else(|| format!("unknown budget `{key}` (workspaces, invited_users, members_added)"))?;
            let (hour, total) = value.split_once('/').ok_or_else(|| format!("`{value}` is not per_hour/total"))?;
            let n = |s: &str| s.trim().parse::<usize>().map_err(|_| format!("`{s}` is not a number"));
            l = l.with(budget, Bounds { per_hour: n(hour)?, total: n(total)? });
        }
        Ok(l)
    }

    /// These bounds for `budget`.
    pub fn with(mut self, budget: Budget, bounds: Bounds) -> Self {
        self.bounds[budget as usize] = bounds;
        self
    }

    pub fn bounds(&self, budget: Budget) -> Bounds {
        self.bounds[budget as usize]
    }

    /// Charges one use of `budget` to `user_id`, or refuses: the message
    /// and the seconds until one is possible (an hour when the total is
    /// spent: only a restart or another instance frees it).
    pub fn charge(&self, user_id: i64, budget: Budget) -> Result<(), (String, u64)> {
        self.charge_at(&[user_id], budget, std::time::Instant::now())
    }

    /// Charges one use of `budget` to `user_id` and to `charged_to`, the
    /// account at the root of its token's minting chain, if another: both
    /// or neither, so an account's invented users spend its budget too
    /// (docs/api.md, "Limits").
    pub fn charge_chain(&self, user_id: i64, charged_to: i64, budget: Budget) -> Result<(), (String, u64)> {
        let both = [user_id, charged_to];
        let accounts = if charged_to == user_id { &both[..1] } else { &both[..] };
        self.charge_at(accounts, budget, std::time::Instant::now())
    }

    fn charge_at(&self, accounts: &[i64], budget: Budget, now: std::time::Instant) -> Result<(), (String, u64)> {
        if self.off {
            return Ok(());
        }
        let bounds = self.bounds(budget);
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if used.map.len() >= 2 * used.swept_at.max(64) {
            used.map.retain(|_, times| times.back().is_some_and(|t| now.duration_since(*t) < HOUR));
            used.swept_at = used.map.len();
        }
        // Every account is checked before any is charged, so a refusal
        // spends nothing.
        for &account in accounts {
            let total = used.totals.get(&(account, budget)).copied().unwrap_or(0);
            if total >= bounds.total {
                let msg = format!(
                    "at most {} {} per account in all; ask the server's operator (PAD_ACCOUNT_LIMITS)",
                    bounds.total,
                    budget.what()
                );
                return Err((msg, HOUR.as_secs()));
            }
            let times = used.map.entry((account, budget)).or_default();
            while times.front().is_some_and(|t| now.duration_since(*t) >= HOUR) {
                times.pop_front();
            }
            if times.len() >= bounds.per_hour {
                let wait = times
                    .front()
                    .map_or(HOUR, |oldest| HOUR.saturating_sub(now.duration_since(*oldest)))
                    .as_secs()
                    .max(1);
                let msg = format!(
                    "at most {} {} per account in an hour; the next is possible in {}s",
                    bounds.per_hour,
                    budget.what(),
                    wait
                );
                return Err((msg, wait));
            }
        }
        for &account in accounts {
            used.map.entry((account, budget)).or_default().push_back(now);
            *used.totals.entry((account, budget)).or_default() += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod account_tests {
    use super::*;

    #[test]
    fn a_budget_refuses_past_its_size_and_frees_after_the_hour() {
        let l = AccountLimiter::default();
        let t0 = std::time::Instant::now();
        let per_hour = l.bounds(Budget::MembersAdded).per_hour;
        for _ in 0..per_hour {
            l.charge_at(&[1], Budget::MembersAdded, t0).unwrap();
        }
        let (msg, wait) = l.charge_at(&[1], Budget::MembersAdded, t0).unwrap_err();
        assert!(msg.contains("members added per account in an hour") && wait == 3600, "{msg} {wait}");
        // Another account, another budget: untouched.
        l.charge_at(&[2], Budget::MembersAdded, t0).unwrap();
        l.charge_at(&[1], Budget::Workspaces, t0).unwrap();
        l.charge_at(&[1], Budget::MembersAdded, t0 + HOUR).unwrap();
    }

    #[test]
    fn the_36th_invented_user_is_refused_whatever_the_hour() {
        let l = AccountLimiter::default();
        let t0 = std::time::Instant::now();
        // 35 users over two hours, then the total is spent.
        for i in 0..35u32 {
            let at = t0 + HOUR * (i / 20);
            l.charge_at(&[7], Budget::InvitedUsers, at).unwrap_or_else(|e| panic!("user {}: {e:?}", i + 1));
        }
        let (msg, _) = l.charge_at(&[7], Budget::InvitedUsers, t0 + HOUR * 5).unwrap_err();
        assert!(msg.contains("at most 35 new users invited per account in all"), "{msg}");
        let (msg, _) = l.charge_at(&[7], Budget::InvitedUsers, t0 + HOUR * 50).unwrap_err();
        assert!(msg.contains("in all"), "a total does not free with time: {msg}");
        l.charge_at(&[8], Budget::InvitedUsers, t0).unwrap();
    }

    #[test]
    fn a_chain_charges_its_root_too_and_a_refusal_spends_nothing() {
        let l = AccountLimiter::default().with(Budget::InvitedUsers, Bounds { per_hour: 100, total: 2 });
        let t0 = std::time::Instant::now();
        l.charge_at(&[1], Budget::InvitedUsers, t0).unwrap();
        // User 2, charged to 1: spends 1's second use and 2's first.
        l.charge_at(&[2, 1], Budget::InvitedUsers, t0).unwrap();
        assert!(l.charge_at(&[2, 1], Budget::InvitedUsers, t0).is_err(), "the root's total is spent");
        assert!(l.charge_at(&[3, 1], Budget::InvitedUsers, t0).is_err(), "another of its users, too");
        // The refusals spent nothing of 2's or 3's own budgets.
        l.charge_at(&[2], Budget::InvitedUsers, t0).unwrap();
        l.charge_at(&[3], Budget::InvitedUsers, t0).unwrap();
        l.charge_at(&[3], Budget::InvitedUsers, t0).unwrap();
    }

    #[test]
    fn bounds_are_configurable() {
        let l = AccountLimiter::parse("invited_users=2/3, members_added=100/1000").unwrap();
        assert_eq!(l.bounds(Budget::InvitedUsers), Bounds { per_hour: 2, total: 3 });
        assert_eq!(l.bounds(Budget::MembersAdded), Bounds { per_hour: 100, total: 1000 });
        assert_eq!(l.bounds(Budget::Workspaces), Budget::Workspaces.default_bounds());
        let refused = |spec: &str| AccountLimiter::parse(spec).err().unwrap_or_default();
        assert!(refused("users=1/2").contains("unknown budget"));
        assert!(refused("workspaces=1").contains("per_hour/total"));
        assert!(refused("workspaces=x/2").contains("not a number"));
    }
}

/// Requests no user is known for yet: sign-in (`POST /session`), sign-out
/// (`DELETE /session`, which anyone may send with any cookie) and
/// `/metrics`. Each has a bucket per client address, so a flood of them
/// cannot take the server's time from authenticated users, and one client's
/// flood of bad sign-ins does not lock everyone else out of signing in
/// (docs/api.md, "Limits").
///
/// The address is the connection's peer: pad trusts no forwarding header,
/// so behind a proxy every client shares the proxy's buckets. An IPv6
/// address counts by its /64, which one client commonly holds whole. Memory
/// is bounded: a refilled bucket is swept like a user's, and past
/// [`ANONYMOUS_KEYS_MAX`] busy buckets, new addresses share one bucket per
/// kind.
#[derive(Clone)]
pub struct AnonymousLimiter {
    buckets: RateLimiter<(Anonymous, Option<std::net::IpAddr>)>,
}

/// What an anonymous request is for: the bucket it draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Anonymous {
    SignIn = -1,
    Metrics = -2,
    SignOut = -3,
}

/// Per second, for each kind and client; bursts of twice that.
pub const ANONYMOUS_PER_SECOND: f64 = 20.0;
/// Busy buckets held at most (a few MiB); see [`AnonymousLimiter`].
pub const ANONYMOUS_KEYS_MAX: usize = 65_536;

impl Default for AnonymousLimiter {
    fn default() -> Self {
        AnonymousLimiter { buckets: RateLimiter::keyed(Some((ANONYMOUS_PER_SECOND, 2.0 * ANONYMOUS_PER_SECOND))) }
    }
}

impl AnonymousLimiter {
    /// No bound (`PAD_RATE_LIMIT=off` turns this off with the rest).
    pub fn off() -> Self {
        AnonymousLimiter { buckets: RateLimiter::keyed(None) }
    }

    /// Buckets of `burst` refilled at `per_second` (see [`RateLimiter::with_burst`]).
    pub fn with_burst(per_second: f64, burst: f64) -> Self {
        AnonymousLimiter { buckets: RateLimiter::keyed(Some((per_second, burst))) }
    }

    pub fn from_env() -> Self {
        match std::env::var("PAD_RATE_LIMIT").ok().as_deref().map(str::trim) {
            Some("off") => Self::off(),
            _ => Self::default(),
        }
    }

    /// One request of `kind` from `client` (`None`: not known, as for a
    /// request that came through no listener), or the seconds until one is free.
    pub fn check(&self, kind: Anonymous, client: Option<std::net::IpAddr>) -> Result<(), u64> {
        let client = client.map(|ip| match ip {
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => std::net::IpAddr::V4(v4),
                None => std::net::IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
            },
            v4 => v4,
        });
        self.buckets.check_capped((kind, client), Some((ANONYMOUS_KEYS_MAX, (kind, None))))
    }

    /// How many buckets are held (for tests of the bound).
    pub fn tracked(&self) -> usize {
        self.buckets.tracked()
    }
}

#[cfg(test)]
mod anonymous_tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn each_client_has_its_own_bucket_and_the_map_is_capped() {
        let l = AnonymousLimiter::with_burst(1.0 / 3600.0, 2.0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        l.check(Anonymous::SignIn, Some(a)).unwrap();
        l.check(Anonymous::SignIn, Some(a)).unwrap();
        assert!(l.check(Anonymous::SignIn, Some(a)).is_err());
        l.check(Anonymous::SignIn, Some(b)).unwrap();
        l.check(Anonymous::Metrics, Some(a)).unwrap();
        // One /64 is one client.
        let v6 = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        l.check(Anonymous::SignIn, v6("2001:db8::1")).unwrap();
        l.check(Anonymous::SignIn, v6("2001:db8::2")).unwrap();
        assert!(l.check(Anonymous::SignIn, v6("2001:db8::3")).is_err());
        // Made-up addresses past the cap share one bucket, so the map stops growing.
        for i in 0..(ANONYMOUS_KEYS_MAX as u32 + 1000) {
            let _ = l.check(Anonymous::SignOut, Some(IpAddr::V4(i.into())));
        }
        assert!(l.tracked() <= ANONYMOUS_KEYS_MAX + 1, "{} buckets", l.tracked());
    }
}
