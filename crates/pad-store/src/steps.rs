//! The store operations whose control flow does not depend on the backend,
//! written once over the steps each backend provides: the flows live in
//! `steps/` (`accounts.rs`, `items.rs`, `leases.rs`, `import.rs`), the steps
//! they need are the traits here. A backend implements [`AccountSteps`],
//! [`ItemSteps`], [`LeaseSteps`], [`EventSteps`] and [`ImportSteps`] for its
//! write transaction (in its `accounts.rs`, `items.rs`, `leases.rs`,
//! `events.rs` and `imports.rs`), and [`Begin`] for itself. What differs
//! between backends — the SQL, the clock, how a row is locked — stays in the
//! steps; what an operation decides and records, and in which order, lives
//! here only.

use async_trait::async_trait;
use pad_core::lease::{LeaseEnd, LeaseSlot, Terms};
use pad_core::model::ValidNewItem;
use pad_core::{
    EventKind, Item, ItemRef, Lease, Role, Status, Timestamp, TokenInfo, User, ValidFrontierFilter, Workspace,
    WorkspaceSettings,
};
use serde_json::{Map, Value};

mod accounts;
mod import;
mod items;
mod leases;
pub use accounts::{
    bootstrap, create_workspace, ensure_user, insert_token, remove_member, set_member, update_settings,
};
pub use import::{ImportSteps, import};
pub use items::{add_comment, create_item, requeue, set_deleted, update_item};
pub use leases::{
    claim, claim_next_in, claim_next_many, complete, expire, explain_lost, fail, fail_in, observe_expiries,
    record_expiry,
};

use crate::{Actor, ClaimOutcome, ClaimRequest, StoreError, StoreResult};

/// A backend that can open a write transaction.
#[async_trait]
pub trait Begin: Send + Sync {
    type Tx: WriteTx;
    /// Opens a write transaction. On SQLite it holds the write lock and has
    /// read the store's clock; on PostgreSQL rows are locked as they are read.
    async fn begin(&self) -> StoreResult<Self::Tx>;
}

/// A backend's write transaction: everything the flows need. Dropping it
/// without [`commit`](WriteTx::commit) rolls back.
#[async_trait]
pub trait WriteTx: AccountSteps + ItemSteps + LeaseSteps + EventSteps + ImportSteps {
    async fn commit(self) -> StoreResult<()>;
    /// Rolls back now, releasing any locks at once, and returns once what
    /// the transaction read may be told to a caller. A refusal answered
    /// from it must go through here: on SQLite it may have read what
    /// earlier writes of its batch kept, uncommitted until the batch
    /// commits (docs/operations.md, "SQLite writes: group commit"); an
    /// error says that batch failed, so what was read does not stand.
    async fn rollback(self) -> StoreResult<()>;
}

/// Ends a flow by its answer: a change to keep (`true`) commits; anything
/// else — a refusal, a change that changed nothing — rolls back, answered
/// once what the flow read may be told ([`WriteTx::rollback`]).
pub async fn finish<T: WriteTx, R>(tx: T, answer: StoreResult<(R, bool)>) -> StoreResult<R> {
    match answer {
        Ok((r, true)) => {
            tx.commit().await?;
            Ok(r)
        }
        Ok((r, false)) => {
            tx.rollback().await?;
            Ok(r)
        }
        Err(e) => {
            tx.rollback().await?;
            Err(e)
        }
    }
}

/// An item row under this transaction's lock, with the clock read after
/// taking it.
#[derive(Debug, Clone)]
pub struct Locked {
    pub id: i64,
    pub deleted: bool,
    pub slot: LeaseSlot,
    pub now: Timestamp,
}

impl Locked {
    /// The row, unless its item is deleted: deleted items take no leases and
    /// no edits. (Not "live", which in pad means an unexpired lease.)
    pub fn undeleted(self, r: &ItemRef) -> StoreResult<Self> {
        if self.deleted { Err(StoreError::not_found(format!("item {r} (deleted)"))) } else { Ok(self) }
    }
}

/// The steps of account writes (each backend's `accounts.rs`).
#[async_trait]
pub trait AccountSteps: Send {
    /// Holds off other first starts until commit.
    async fn lock_first_start(&mut self) -> StoreResult<()>;
    async fn any_user(&mut self) -> StoreResult<bool>;
    /// The user with this email (stored lower-case), created if needed.
    async fn ensure_user(&mut self, email: &str) -> StoreResult<User>;
    /// `None` when the slug is taken. `charged_to`: the account its creation
    /// is charged to (docs/webhooks.md, "Isolation").
    async fn insert_workspace(&mut self, slug: &str, name: &str, charged_to: i64) -> StoreResult<Option<Workspace>>;
    async fn insert_kind(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<()>;
    /// Serializes membership changes of a workspace until commit.
    async fn lock_members(&mut self, ws: i64) -> StoreResult<()>;
    /// Adds a member or changes its role; returns when it was added.
    async fn put_member(&mut self, ws: i64, user: i64, role: Role) -> StoreResult<Timestamp>;
    async fn member_role(&mut self, ws: i64, user: i64) -> StoreResult<Option<Role>>;
    /// The member with this email: its user id and role.
    async fn member_by_email(&mut self, ws: i64, email: &str) -> StoreResult<Option<(i64, Role)>>;
    async fn owners(&mut self, ws: i64) -> StoreResult<i64>;
    /// Removes the member and revokes its own tokens scoped to `ws`.
    async fn delete_member(&mut self, ws: i64, user: i64) -> StoreResult<()>;
    /// Revokes the live tokens `user` minted for other users in `ws` (its
    /// own stay).
    async fn revoke_minted_for_others(&mut self, ws: i64, user: i64) -> StoreResult<()>;
    /// Serializes token mints of one user until commit.
    async fn lock_tokens(&mut self, user: i64) -> StoreResult<()>;
    async fn live_tokens(&mut self, user: i64) -> StoreResult<i64>;
    /// The workspace's settings, its row locked until commit (docs/api.md,
    /// "Workspace settings": two owners' changes never interleave).
    async fn lock_settings(&mut self, ws: i64) -> StoreResult<WorkspaceSettings>;
    async fn write_settings(&mut self, ws: i64, next: &WorkspaceSettings) -> StoreResult<Workspace>;
    /// `charged_to`: the account the token's limits are charged to
    /// (docs/api.md, "Limits").
    async fn insert_token(
        &mut self, user: i64, name: &str, hash: &str, scope: Option<(i64, Role)>, minted_by: i64, charged_to: i64,
    ) -> StoreResult<TokenInfo>;
}

/// The steps of item writes (each backend's `items.rs`).
#[async_trait]
pub trait ItemSteps: Send {
    /// Locks the item's row for this transaction (`NotFound` if none).
    async fn lock_item(&mut self, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked>;
    /// Blocker changes in a workspace take turns where writers are not
    /// already serialized, so two updates cannot each add half of a cycle.
    /// Taken before any row lock.
    async fn lock_blockers(&mut self, ws: &Workspace) -> StoreResult<()>;
    async fn load_item(&mut self, id: i64, now: Timestamp) -> StoreResult<Item>;
    /// Takes the kind's next number: its prefix, the number, and the clock
    /// once the kind's counter is held. `None`: no such kind.
    async fn next_number(&mut self, ws: &Workspace, kind: &str) -> StoreResult<Option<(String, i64, Timestamp)>>;
    async fn insert_item(&mut self, ws: &Workspace, new: &NewRow<'_>) -> StoreResult<i64>;
    async fn kind_exists(&mut self, ws: &Workspace, kind: &str) -> StoreResult<bool>;
    /// The id of a live item, or a validation error on `field`.
    async fn item_id(&mut self, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64>;
    /// The user id of a member, or a validation error on `field`.
    async fn member_id(&mut self, ws: &Workspace, field: &str, email: &str) -> StoreResult<i64>;
    /// Whether `item` is `parent` or one of its ancestors.
    async fn is_ancestor(&mut self, item: i64, parent: i64) -> StoreResult<bool>;
    async fn replace_blockers(&mut self, item: i64, blockers: &[i64]) -> StoreResult<()>;
    /// The `(item, blocker)` links reachable from `item` through blockers,
    /// for [`shared::check_blockers_acyclic`].
    async fn blocker_edges(&mut self, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>>;
    /// Writes `new`'s content; returns the new `updated_at`.
    async fn write_content(
        &mut self, id: i64, new: &Item, parent: Option<i64>, assignee: Option<i64>, now: Timestamp,
    ) -> StoreResult<Timestamp>;
    async fn write_status(&mut self, id: i64, status: Status, now: Timestamp) -> StoreResult<Timestamp>;
    async fn write_deleted(&mut self, id: i64, deleted: bool, now: Timestamp) -> StoreResult<Timestamp>;
    async fn lease_expiries(&mut self, id: i64) -> StoreResult<i64>;
    /// Clears the expiry and failure counts and the backoff, sets `labels`.
    async fn write_requeue(&mut self, id: i64, labels: &[String], now: Timestamp) -> StoreResult<Timestamp>;
    async fn add_label(&mut self, id: i64, label: &str) -> StoreResult<()>;
    /// Appends one history version. The item's row is locked (or new).
    async fn add_version(
        &mut self, id: i64, actor: Actor, changes: Map<String, Value>, at: Timestamp,
    ) -> StoreResult<()>;
    /// Returns the comment's id and its author's email.
    async fn insert_comment(
        &mut self, item: i64, actor: Actor, body: &str, at: Timestamp,
    ) -> StoreResult<(i64, String)>;
}

/// A new item's row, for [`ItemSteps::insert_item`].
pub struct NewRow<'a> {
    pub v: &'a ValidNewItem,
    pub prefix: &'a str,
    pub number: i64,
    pub parent: Option<i64>,
    pub assignee: Option<i64>,
    pub actor: Actor,
    pub now: Timestamp,
}

/// What [`LeaseSteps::claim_item`] did.
#[derive(Debug)]
pub struct Claimed {
    pub outcome: ClaimOutcome,
    /// The clock the claim was decided on.
    pub now: Timestamp,
    /// The item as the claim left it, when the dialect's claim statement
    /// returned it at no cost (PostgreSQL, on a row it had locked already);
    /// `None`: read it with [`ItemSteps::load_item`].
    pub item: Option<Item>,
}

/// A frontier item claim-next may take, locked by this transaction.
#[derive(Debug)]
pub struct Candidate {
    pub id: i64,
    pub item_ref: ItemRef,
    /// The recorded lease, which on the frontier has expired.
    pub expired: Option<Lease>,
    pub now: Timestamp,
    /// The grant already made, with the item as it left it, when the
    /// dialect claims the items with no lease in the statement that finds
    /// them (PostgreSQL: docs/leases.md, "Claim-next in one statement");
    /// `None`: the flow claims it.
    pub granted: Option<(Item, ClaimOutcome)>,
}

/// One expired lease, counted, to be recorded by [`record_expiry`].
#[derive(Debug)]
pub struct Expiry {
    pub ws: i64,
    pub threshold: u32,
    pub item: i64,
    pub item_ref: ItemRef,
    pub lease: Lease,
    /// The count and labels after the expiry was counted.
    pub expiries: i64,
    pub labels: Vec<String>,
}

/// The steps of lease writes (each backend's `leases.rs`).
#[async_trait]
pub trait LeaseSteps: Send {
    /// L1-L3, L12, L13 on one item: grant or refresh, with the expiry of a
    /// lease found expired recorded first. Returns the clock it decided on.
    async fn claim_item(
        &mut self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest, terms: Terms,
    ) -> StoreResult<Claimed>;
    /// L11: the best ready items, locked, in frontier order; empty when none.
    /// A dialect may grant `req` the ones with no lease on the way
    /// ([`Candidate::granted`]); one with an expired lease is left to the flow.
    async fn claim_candidates(
        &mut self, ws: &Workspace, f: &ValidFrontierFilter, limit: usize, req: &ClaimRequest, terms: Terms,
    ) -> StoreResult<Vec<Candidate>>;
    /// L5/L13 on a locked row whose lease has expired: the lease becomes the
    /// last lease (ended `expired` at its expiry, L18) and is forgotten, and
    /// the expiry is counted. Returns the count and labels after.
    async fn count_expiry(&mut self, id: i64, now: Timestamp) -> StoreResult<(i64, Vec<String>)>;
    /// Takes up to a batch of expired leases no one has observed, counted
    /// as by [`count_expiry`](Self::count_expiry), each with its workspace's
    /// slug and the clock it was taken at.
    async fn take_expired(&mut self) -> StoreResult<Vec<(Expiry, String, Timestamp)>>;
    /// L18: ends the live lease `how` at `at`; it becomes the last lease.
    async fn end_lease(&mut self, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()>;
    /// L14: the next failure count of a locked row.
    async fn next_failures(&mut self, id: i64) -> StoreResult<i64>;
    /// L12, L14: records a failure (count, backoff, note, `at`); returns the labels.
    async fn write_failure(
        &mut self, id: i64, failures: i64, retry_at: Timestamp, note: Option<&str>, at: Timestamp,
    ) -> StoreResult<Vec<String>>;
    /// L14: records a success at `at`, after the lease ended: the handoff
    /// note (a failure's, or stale progress) is cleared and any backoff
    /// with it; the failure count and last failure note stay as history.
    async fn record_success(&mut self, id: i64, at: Timestamp) -> StoreResult<()>;
}

/// The event log (each backend's `events.rs`).
#[async_trait]
pub trait EventSteps: Send {
    /// Appends one event, in this transaction.
    async fn event(
        &mut self, ws: i64, kind: EventKind, r: &ItemRef, actor: Option<Actor>, at: Timestamp, data: Value,
    ) -> StoreResult<()>;
}
