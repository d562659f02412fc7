//! Lease calls that share a transaction (docs/leases.md, "Lease calls that
//! share a transaction"): concurrent claim-next, complete, fail, renew and
//! release calls at this instance queue here; one task runs the queue as one
//! transaction, the calls one after another, and commits once. A
//! transaction's cost on this database is mostly its commit and its round
//! trips, not its statements, so a drain's workers share them. Completes
//! of distinct items that meet in a batch are written together
//! (docs/leases.md, "Completes written together"), and claim-nexts with the
//! same terms but the holder are made by one statement (docs/leases.md,
//! "Claim-nexts made together").
//!
//! Isolation: when every call of a batch succeeded, the batch commits and
//! each caller gets its answer after that commit. When any call failed (a
//! refusal, a rule, the database), the batch rolls back and every call runs
//! again alone, as it would without the group (`Call::alone`): one
//! call never fails or changes its neighbours, and a failing call's partial
//! writes never commit. A failed commit answers every call with its error:
//! whether it committed is then unknown, as for a single call.
//!
//! Deadlocks: calls on named items run in item order, so two batches (of
//! this instance or another) lock shared rows in the same order. Claim-next
//! takes only rows no one holds (`SKIP LOCKED`).

use std::sync::{Arc, Mutex, MutexGuard};

use pad_core::{FrontierFilter, Item, ItemRef, Lease, Workspace};
use pad_store::steps::WriteTx;
use pad_store::{
    ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ReleaseOutcome, ReleaseRequest,
    RenewRequest, StoreError, StoreResult, steps,
};
use sqlx::PgPool;
use tokio::sync::oneshot;

use crate::{Tx, db};

/// The most calls one transaction carries; a longer queue is the next batch.
pub(crate) const MAX_BATCH: usize = 64;

/// A lease call, owned, with where its answer goes.
pub(crate) enum Call {
    ClaimNext {
        ws: Workspace,
        filter: FrontierFilter,
        req: ClaimRequest,
        count: u32,
        reply: Reply<Vec<(Item, ClaimOutcome)>>,
    },
    Complete {
        ws: Workspace,
        r: ItemRef,
        req: CompleteRequest,
        reply: Reply<Item>,
        /// The claim-next the end carries, made once it succeeded.
        next: Option<Box<Next>>,
    },
    Fail {
        ws: Workspace,
        r: ItemRef,
        req: FailRequest,
        reply: Reply<FailOutcome>,
        /// As a complete's.
        next: Option<Box<Next>>,
    },
    Renew {
        ws: Workspace,
        r: ItemRef,
        req: RenewRequest,
        reply: Reply<Lease>,
    },
    Release {
        ws: Workspace,
        r: ItemRef,
        req: ReleaseRequest,
        reply: Reply<ReleaseOutcome>,
        /// As a complete's.
        next: Option<Box<Next>>,
    },
}

/// The claim-next a lease end (a complete, a fail, a release) carries
/// (docs/api.md, "The next item in the same call"): in a shared
/// transaction it is made there, after every named call of the batch;
/// alone, after the end succeeded. Never when the end failed: its caller
/// would not learn of the lease.
pub(crate) struct Next {
    pub(crate) filter: FrontierFilter,
    pub(crate) req: ClaimRequest,
    pub(crate) count: u32,
    pub(crate) reply: Reply<Vec<(Item, ClaimOutcome)>>,
}

/// A reply and where its answer arrives.
pub(crate) fn reply<T>() -> (Reply<T>, oneshot::Receiver<StoreResult<T>>) {
    let (to, answer) = oneshot::channel();
    (Reply { to, kept: None }, answer)
}

/// The answer that arrives at `answer`.
pub(crate) async fn answered<T>(answer: oneshot::Receiver<StoreResult<T>>) -> StoreResult<T> {
    answer.await.map_err(|_| StoreError::Unavailable("the lease call was dropped before it was answered".into()))?
}

/// A call's answer, kept until its transaction commits.
pub(crate) struct Reply<T> {
    to: oneshot::Sender<StoreResult<T>>,
    kept: Option<StoreResult<T>>,
}

impl<T> Reply<T> {
    /// Keeps `answer`; whether the call succeeded.
    fn keep(&mut self, answer: StoreResult<T>) -> bool {
        let ok = answer.is_ok();
        self.kept = Some(answer);
        ok
    }

    /// Keeps the answer of a call made without a transaction; `false` when
    /// it handed the call back (`Ok(None)`) to run in one.
    fn keep_unless_handed_back(&mut self, answer: StoreResult<Option<T>>) -> bool {
        answer.transpose().is_some_and(|answer| {
            self.keep(answer);
            true
        })
    }

    /// Whether the caller has gone (its future dropped: a request deadline,
    /// a closed connection), so no one would get the answer.
    fn gone(&self) -> bool {
        self.to.is_closed()
    }

    fn send(self, answer: Option<StoreError>) {
        let answer = match (answer, self.kept) {
            (Some(e), _) => Err(e),
            (None, Some(kept)) => kept,
            (None, None) => Err(StoreError::Internal("a lease call was answered before it ran".into())),
        };
        // The caller may have gone (a closed connection): its answer is then lost.
        let _ = self.to.send(answer);
    }
}

impl Call {
    /// The item a call names, which orders a batch; claim-next names none and goes first.
    fn order_key(&self) -> Option<(i64, &str, i64)> {
        match self {
            Call::ClaimNext { .. } => None,
            Call::Complete { ws, r, .. }
            | Call::Fail { ws, r, .. }
            | Call::Renew { ws, r, .. }
            | Call::Release { ws, r, .. } => Some((ws.id, r.prefix.as_str(), r.number)),
        }
    }

    /// Whether the call's caller has gone: such a call is not run, or a
    /// claim-next would grant a lease to a caller already answered
    /// `unavailable` (docs/leases.md, "Lease calls that share a transaction").
    fn gone(&self) -> bool {
        match self {
            Call::ClaimNext { reply, .. } => reply.gone(),
            Call::Complete { reply, .. } => reply.gone(),
            Call::Fail { reply, .. } => reply.gone(),
            Call::Renew { reply, .. } => reply.gone(),
            Call::Release { reply, .. } => reply.gone(),
        }
    }

    /// Runs the call's statements in `tx`, keeping the answer; whether it succeeded.
    async fn run(&mut self, tx: &mut Tx) -> bool {
        match self {
            Call::ClaimNext { ws, filter, req, count, reply } => {
                reply.keep(steps::claim_next_in(tx, ws, filter, req, *count).await)
            }
            Call::Complete { ws, r, req, reply, .. } => reply.keep(tx.complete(ws, r, req).await),
            Call::Fail { ws, r, req, reply, .. } => reply.keep(steps::fail_in(tx, ws, r, req).await),
            Call::Renew { ws, r, req, reply } => reply.keep(tx.renew(ws, r, req).await),
            Call::Release { ws, r, req, reply, .. } => reply.keep(tx.release(ws, r, req).await),
        }
    }

    /// Sends the kept answer, or `error` for every call of a failed commit.
    fn answer(mut self, error: Option<StoreError>) {
        if let Some((_, next)) = self.take_next() {
            next.reply.send(error.clone());
        }
        match self {
            Call::ClaimNext { reply, .. } => reply.send(error),
            Call::Complete { reply, .. } => reply.send(error),
            Call::Fail { reply, .. } => reply.send(error),
            Call::Renew { reply, .. } => reply.send(error),
            Call::Release { reply, .. } => reply.send(error),
        }
    }

    /// The claim-next an end carries, taken out of it.
    fn take_next(&mut self) -> Option<(Workspace, Box<Next>)> {
        match self {
            Call::Complete { ws, next, .. } | Call::Fail { ws, next, .. } | Call::Release { ws, next, .. } => {
                next.take().map(|next| (ws.clone(), next))
            }
            Call::ClaimNext { .. } | Call::Renew { .. } => None,
        }
    }

    /// Whether an end succeeded, once answered alone ([`Call::alone`]).
    fn succeeded(&self) -> bool {
        match self {
            Call::Complete { reply, .. } => matches!(reply.kept, Some(Ok(_))),
            Call::Fail { reply, .. } => matches!(reply.kept, Some(Ok(_))),
            Call::Release { reply, .. } => matches!(reply.kept, Some(Ok(_))),
            Call::ClaimNext { .. } | Call::Renew { .. } => false,
        }
    }

    /// Runs the call alone and answers it: a renew and a release, one
    /// statement each, need no transaction, nor do a claim-next and a
    /// complete that one statement can make (docs/leases.md, "One call, one
    /// statement"); a fail, and the calls a statement hands back, run in a
    /// transaction of their own.
    async fn alone(mut self, group: &Group) {
        let next = self.take_next();
        let Some((call, error)) = self.alone_answered(group).await else { return };
        let succeeded = error.is_none() && call.succeeded();
        call.answer(error);
        let Some((ws, next)) = next else { return };
        // The end is answered (and committed); its next claim follows it,
        // alone too, only if it succeeded.
        if succeeded {
            let Next { filter, req, count, reply } = *next;
            Box::pin(Call::ClaimNext { ws, filter, req, count, reply }.alone(group)).await;
        }
    }

    /// Runs the call alone ([`Call::alone`]) and keeps its answer: the call,
    /// to be answered with its transaction's error if any; `None` when its
    /// caller had gone.
    async fn alone_answered(mut self, group: &Group) -> Option<(Call, Option<StoreError>)> {
        if self.gone() {
            group.state().stats.dropped += 1;
            return None;
        }
        let pool = &group.pool;
        let answered = match &mut self {
            Call::Renew { ws, r, req, reply } => {
                reply.keep(crate::leases::renew_alone(pool, ws, r, req).await);
                true
            }
            Call::ClaimNext { ws, filter, req, count, reply } => {
                reply.keep_unless_handed_back(crate::leases::claim_next_alone(pool, ws, filter, req, *count).await)
            }
            Call::Complete { ws, r, req, reply, .. } => {
                reply.keep_unless_handed_back(crate::leases::complete_alone(pool, ws, r, req).await)
            }
            Call::Release { ws, r, req, reply, .. } => {
                reply.keep_unless_handed_back(crate::leases::release_alone(pool, ws, r, req).await)
            }
            Call::Fail { .. } => false,
        };
        {
            let mut s = group.state();
            if answered {
                s.stats.one_statement += 1;
            } else if !matches!(self, Call::Fail { .. }) {
                s.stats.to_transaction += 1;
            }
        }
        if answered {
            return Some((self, None));
        }
        let error = match Tx::begin_on(pool).await {
            Err(e) => Some(e),
            Ok(mut tx) => {
                if self.run(&mut tx).await {
                    tx.commit().await.err()
                } else {
                    tx.rollback().await.err()
                }
            }
        };
        Some((self, error))
    }
}

/// A claim-next a batch makes: a call's own, or the one a complete carries.
struct Claim<'a> {
    ws: &'a Workspace,
    filter: &'a FrontierFilter,
    req: &'a ClaimRequest,
    count: u32,
    reply: &'a mut Reply<Vec<(Item, ClaimOutcome)>>,
}

impl Claim<'_> {
    /// Makes the claim-next on its own in `tx`; whether it succeeded.
    async fn run(&mut self, tx: &mut Tx) -> bool {
        self.reply.keep(steps::claim_next_in(tx, self.ws, self.filter, self.req, self.count).await)
    }
}

/// The claim-next calls among `calls`.
fn claims_of(calls: &mut [Call]) -> Vec<Claim<'_>> {
    calls
        .iter_mut()
        .filter_map(|call| match call {
            Call::ClaimNext { ws, filter, req, count, reply } => Some(Claim { ws, filter, req, count: *count, reply }),
            _ => None,
        })
        .collect()
}

/// The claim-nexts the ends among `calls` carry.
fn carried(calls: &mut [Call]) -> Vec<Claim<'_>> {
    calls
        .iter_mut()
        .filter_map(|call| match call {
            Call::Complete { ws, next: Some(next), .. }
            | Call::Fail { ws, next: Some(next), .. }
            | Call::Release { ws, next: Some(next), .. } => {
                let Next { filter, req, count, reply } = &mut **next;
                Some(Claim { ws, filter, req, count: *count, reply })
            }
            _ => None,
        })
        .collect()
}

/// How many claims from the start of `claims` are for one item each and
/// one statement can make: the same workspace, filter and terms but the
/// holder (docs/leases.md, "Claim-nexts made together").
fn claim_nexts_from(claims: &[Claim<'_>]) -> usize {
    let Some(first) = claims.first().filter(|c| c.count == 1) else { return 0 };
    claims
        .iter()
        .take_while(|c| c.count == 1 && c.ws == first.ws && c.filter == first.filter && c.req.same_terms(first.req))
        .count()
}

/// Makes `claims` in `tx`, in their order, each run of them that one
/// statement can make ([`claim_nexts_from`]) together. How many were
/// granted together, or `None` when one failed.
async fn run_claims(claims: &mut [Claim<'_>], tx: &mut Tx) -> Option<u64> {
    let (mut at, mut together) = (0, 0);
    while at < claims.len() {
        let run = claim_nexts_from(&claims[at..]);
        if run > 1 {
            together += claim_together(&mut claims[at..at + run], tx).await?;
        } else if !claims[at].run(tx).await {
            return None;
        }
        at += run.max(1);
    }
    Some(together)
}

/// Makes a run of claim-nexts ([`claim_nexts_from`]) in `tx` with one
/// statement; a claim-next it found no item for, or all of them when a
/// candidate's lease had expired, runs on its own after it. How many the
/// statement granted, or `None` when a claim failed.
async fn claim_together(claims: &mut [Claim<'_>], tx: &mut Tx) -> Option<u64> {
    let made = {
        let Some(first) = claims.first() else { return Some(0) };
        let reqs: Vec<_> = claims.iter().map(|c| c.req).collect();
        tx.claim_next_together(first.ws, first.filter, &reqs).await
    };
    let grants = match made {
        Ok(Some(grants)) => grants,
        Ok(None) => vec![None; claims.len()],
        Err(_) => return None,
    };
    let granted = grants.iter().filter(|g| g.is_some()).count() as u64;
    for (claim, grant) in claims.iter_mut().zip(grants) {
        let ok = match grant {
            Some(grant) => claim.reply.keep(Ok(vec![grant])),
            None => claim.run(tx).await,
        };
        if !ok {
            return None;
        }
    }
    Some(granted)
}

/// How many calls from the start of `calls` are completes of distinct
/// items, which one pair of statements writes (`Tx::complete_many`). The
/// batch is in item order, so those are consecutive and a repeat is the
/// one before.
fn completes_from(calls: &[Call]) -> usize {
    let mut run = 0;
    for call in calls {
        let Call::Complete { .. } = call else { break };
        if run > 0 && calls[run - 1].order_key() == call.order_key() {
            break;
        }
        run += 1;
    }
    run
}

/// Runs a run of completes ([`completes_from`]) in `tx` as one; whether
/// they all succeeded. On a refusal the batch runs again call by call, so
/// only success is kept here.
async fn complete_together(calls: &mut [Call], tx: &mut Tx) -> bool {
    let named: Vec<_> = calls
        .iter()
        .filter_map(|call| match call {
            Call::Complete { ws, r, req, .. } => Some((ws, r, req)),
            _ => None,
        })
        .collect();
    let Ok(items) = tx.complete_many(&named).await else { return false };
    for (call, item) in calls.iter_mut().zip(items) {
        if let Call::Complete { reply, .. } = call {
            reply.keep(Ok(item));
        }
    }
    true
}

/// What the group has done, for tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GroupStats {
    /// Transactions that carried more than one call and committed.
    pub shared: u64,
    /// Calls those transactions carried.
    pub shared_calls: u64,
    /// Batches rolled back because a call failed: their calls ran alone.
    pub rerun: u64,
    /// Calls not run because their caller had gone (a request deadline, a
    /// closed connection) before they ran (docs/leases.md, "Lease calls
    /// that share a transaction").
    pub dropped: u64,
    /// Completes those transactions wrote with others, two statements for
    /// the lot (`Tx::complete_many`).
    pub completed_together: u64,
    /// Claim-nexts those transactions granted together, one statement for
    /// the lot (`Tx::claim_next_together`).
    pub claimed_together: u64,
    /// Renews, releases, claim-nexts and completes that ran alone and were
    /// answered without a transaction.
    pub one_statement: u64,
    /// Releases, claim-nexts and completes that ran alone and that their
    /// statement handed to a transaction: an expired lease to record, a
    /// refusal to explain, a row changed since it was read.
    pub to_transaction: u64,
}

#[derive(Default)]
struct State {
    queue: Vec<Call>,
    /// Tasks running the queue, each a transaction at a time: up to `lanes`.
    leaders: usize,
    /// Tests hold the queue to make a batch of a known size.
    held: bool,
    stats: GroupStats,
}

pub(crate) struct Group {
    pool: PgPool,
    lanes: usize,
    state: Mutex<State>,
}

impl Group {
    pub(crate) fn new(pool: PgPool, lanes: usize) -> Arc<Group> {
        Arc::new(Group { pool, lanes: lanes.max(1), state: Mutex::new(State::default()) })
    }

    /// Whether a new leader should start, counting it if so.
    fn new_leader(&self, s: &mut State) -> bool {
        let lead = !s.held && !s.queue.is_empty() && s.leaders < self.lanes;
        s.leaders += usize::from(lead);
        lead
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held; recover the data if it ever did.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a call made by `make` and waits for its answer.
    pub(crate) async fn call<T>(self: &Arc<Self>, make: impl FnOnce(Reply<T>) -> Call) -> StoreResult<T> {
        let (reply, answer) = reply();
        self.queue(make(reply));
        answered(answer).await
    }

    /// Queues `call`, whose caller waits for its replies.
    pub(crate) fn queue(self: &Arc<Self>, call: Call) {
        let lead = {
            let mut s = self.state();
            s.queue.push(call);
            self.new_leader(&mut s)
        };
        if lead {
            tokio::spawn(Arc::clone(self).lead());
        }
    }

    /// Runs batches until the queue is empty. A spawned task, so no caller
    /// waits for others' calls to be answered before its own.
    async fn lead(self: Arc<Self>) {
        // Should a batch panic, its callers are told `unavailable` (their
        // replies drop) and the queue gets a new leader.
        struct Leading(Option<Arc<Group>>);
        impl Drop for Leading {
            fn drop(&mut self) {
                if let Some(group) = self.0.take() {
                    group.state().leaders -= 1;
                    group.unhold_if_queued();
                }
            }
        }
        let mut leading = Leading(Some(Arc::clone(&self)));
        loop {
            let batch = {
                let mut s = self.state();
                let queued = s.queue.len();
                s.queue.retain(|call| !call.gone());
                s.stats.dropped += (queued - s.queue.len()) as u64;
                if s.queue.is_empty() || s.held {
                    // Under the lock that queues calls: a call queued after
                    // this sees no leader and starts one.
                    s.leaders -= 1;
                    leading.0 = None;
                    return;
                }
                let n = s.queue.len().min(MAX_BATCH);
                s.queue.drain(..n).collect::<Vec<_>>()
            };
            self.run_batch(batch).await;
        }
    }

    async fn run_batch(&self, mut batch: Vec<Call>) {
        if batch.len() == 1 {
            batch.pop().expect("one call").alone(self).await;
            return;
        }
        // Stable: calls on one item keep their arrival order.
        batch.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        let mut tx = match Tx::begin_on(&self.pool).await {
            Ok(tx) => tx,
            Err(e) => {
                for call in batch {
                    call.answer(Some(e.clone()));
                }
                return;
            }
        };
        // Claim-nexts sort first; the items they take are free, so the
        // order of the locks the named calls take is unchanged.
        let leading = batch.iter().take_while(|call| matches!(call, Call::ClaimNext { .. })).count();
        let mut claimed = run_claims(&mut claims_of(&mut batch[..leading]), &mut tx).await;
        let (mut all_ok, mut at, mut together) = (claimed.is_some(), leading, 0);
        while all_ok && at < batch.len() {
            let run = completes_from(&batch[at..]);
            all_ok = if run > 1 {
                together += run as u64;
                complete_together(&mut batch[at..at + run], &mut tx).await
            } else {
                batch[at].run(&mut tx).await
            };
            at += run.max(1);
        }
        if all_ok {
            // The claims the ends carry, once every end is written.
            let next = run_claims(&mut carried(&mut batch[leading..]), &mut tx).await;
            claimed = claimed.zip(next).map(|(a, b)| a + b);
            all_ok = claimed.is_some();
        }
        if all_ok {
            let error = tx.commit().await.err();
            if error.is_none() {
                let mut s = self.state();
                s.stats.shared += 1;
                s.stats.shared_calls += batch.len() as u64;
                s.stats.completed_together += together;
                s.stats.claimed_together += claimed.unwrap_or(0);
            }
            for call in batch {
                call.answer(error.clone());
            }
            return;
        }
        // Nothing of the batch is answered: every call runs again alone.
        let _ = tx.rollback().await;
        self.state().stats.rerun += 1;
        futures::future::join_all(batch.into_iter().map(|call| call.alone(self))).await;
    }

    /// The lease calls' connections.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the lease calls' connections.
    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }

    pub(crate) fn stats(&self) -> GroupStats {
        self.state().stats
    }

    /// Tests: while held, calls queue and none runs.
    pub(crate) fn hold(&self) {
        self.state().held = true;
    }

    /// Tests: the calls queued while held.
    pub(crate) fn queued(&self) -> usize {
        self.state().queue.len()
    }

    /// Tests: runs what queued while held, as batches of up to [`MAX_BATCH`].
    pub(crate) fn unhold(self: &Arc<Self>) {
        self.state().held = false;
        self.unhold_if_queued();
    }

    /// Starts a leader if calls wait and none runs them.
    fn unhold_if_queued(self: &Arc<Self>) {
        let lead = {
            let mut s = self.state();
            self.new_leader(&mut s)
        };
        if lead {
            tokio::spawn(Arc::clone(self).lead());
        }
    }
}

impl Tx {
    pub(crate) async fn begin_on(pool: &PgPool) -> StoreResult<Tx> {
        Ok(Tx { conn: pool.begin().await.map_err(db)?, locked: Vec::new() })
    }
}
