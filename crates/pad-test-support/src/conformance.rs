//! The conformance suite: one set of behaviours, written once against
//! [`Store`](pad_store::Store), that every backend must pass. Each test names the docs/leases.md rule it
//! proves. A backend runs it with [`conformance_suite!`](crate::conformance_suite):
//!
//! ```ignore
//! pad_test_support::conformance_suite!(my_backend_factory());
//! ```
//!
//! where the factory is an `async` expression yielding
//! `Option<TestStore>` (`None` skips, loudly, e.g. when no database is configured).

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pad_core::{
    FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, NEEDS_HUMAN, NewItem, Priority, Role, Status, Workspace,
};

use pad_core::lease::{LeaseEnd, LeaseHandle};

use crate::TestClock;

mod batch;
pub use batch::*;
use pad_store::{Actor, ClaimRequest, CompleteRequest, FailRequest, ReleaseRequest, RenewRequest, Store, StoreError};

/// A fresh, empty store for one test, and whatever keeps it alive (a temp
/// directory, a scratch database) until the test ends.
pub struct TestStore {
    pub store: Arc<dyn Store>,
    pub guard: Box<dyn Any + Send + Sync>,
    /// The store's clock, when the test can move it (SQLite); `None` makes
    /// [`pass`] sleep instead (PostgreSQL's clock is the database's).
    pub clock: Option<Arc<TestClock>>,
}

tokio::task_local! {
    static CLOCK: Option<Arc<TestClock>>;
}

/// Lets `d` pass on the store's clock: moves the test clock when the store
/// has one, else sleeps.
pub async fn pass(d: Duration) {
    match CLOCK.try_with(Clone::clone) {
        Ok(Some(clock)) => clock.advance(d),
        _ => tokio::time::sleep(d).await,
    }
}

/// Generates one `#[tokio::test]` per conformance test, each on a fresh store.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@each $make;
            l1_grant_sets_times_and_first_epoch,
            l1_concurrent_claimers_have_exactly_one_winner,
            l2_contention_names_the_live_lease,
            l3_refresh_keeps_acquired_at_and_epoch,
            l3_same_holder_other_session_is_contention,
            l4_renew_extends_only_a_live_lease_with_its_epoch,
            l4_renew_after_expiry_is_lost,
            l5_expired_lease_is_absent_and_claimable,
            l6_release_is_idempotent_and_refuses_others,
            l7_other_user_with_same_holder_is_refused,
            l7_owner_breaks_a_lease_with_a_reason,
            l7_a_broken_lease_tells_its_holder_why,
            l8_bad_ttl_is_refused_before_any_write,
            l9_leases_never_touch_content,
            l10_fenced_writes_need_the_live_epoch,
            epochs_are_never_reused,
            items_create_get_and_refs,
            refs_are_never_reused,
            items_list_filters_and_pages,
            items_update_history_and_conflict,
            items_soft_delete_and_restore,
            items_links_parent_and_blockers,
            items_blocker_cycles_are_refused_naming_the_cycle,
            items_concurrent_blocker_links_never_close_a_cycle,
            invisible_characters_are_refused_in_one_line_fields,
            comments_are_append_only,
            bad_input_names_the_field_and_writes_nothing,
            workspaces_members_and_tokens,
            concurrent_creates_allocate_distinct_refs,
            l11_frontier_is_ready_work_best_first,
            l11_claim_next_gives_concurrent_callers_distinct_items,
            l11_claim_next_with_nothing_ready_is_none,
            l12_handoff_note_reaches_the_next_claimant,
            l13_quarantine_after_repeated_expiries,
            events_record_changes_in_order,
            expiry_is_observed_exactly_once,
            scoped_tokens_and_the_live_token_cap,
            bootstrap_is_whole_and_once,
            sessions_end_on_sign_out_revocation_and_expiry,
            removing_a_member_revokes_their_scoped_tokens,
            l14_fail_counts_backs_off_and_hands_the_note_over,
            l14_fail_with_a_stale_handle_is_lost_and_changes_nothing,
            l14_failures_quarantine_at_the_threshold,
            l15_complete_sets_status_and_releases_in_one_step,
            l15_complete_on_an_expired_lease_is_lost,
            l16_not_before_defers_claim_next_and_frontier,
            l17_lease_ids_name_one_grant_in_the_workspace,
            l17_claim_without_refresh_is_contention,
            l18_last_lease_shows_how_each_lease_ended,
            l11_claim_next_skips_excluded_refs,
            l11_claim_next_skips_a_sessions_own_work,
            l14_a_success_clears_the_failure_handoff,
            removing_an_owner_revokes_the_tokens_they_minted_for_others,
            l19_renewals_cannot_extend_a_lease_past_its_max_hold,
            l19_a_capped_lease_ends_as_an_expiry_that_names_the_cap,
            l19_bad_max_hold_is_refused_and_changes_nothing,
            items_list_by_parent_and_open_blockers,
            events_filter_by_ref_and_type,
            events_are_gap_free_under_concurrent_writers,
            requeue_clears_quarantine_counts_and_backoff,
            workspace_settings_change_whole_or_not_at_all,
            webhooks_outbox_is_claimed_in_order_and_retried,
            l11_claim_next_many_grants_each_item_its_own_lease,
            l11_concurrent_batch_claimers_never_share_an_item,
            l4_renew_many_renews_or_refuses_each_lease_alone,
            import_is_all_or_nothing,
            import_with_a_seen_key_writes_nothing,
            webhooks_a_given_up_event_pauses_its_subscription_until_resumed,
            webhooks_a_full_queue_drops_its_oldest_and_counts_them
        );
    };
    (@each $make:expr; $($name:ident),+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                match $make.await {
                    Some(ts) => {
                        let $crate::conformance::TestStore { store, guard, clock } = ts;
                        $crate::conformance::scoped(clock, $crate::conformance::$name(store)).await;
                        drop(guard);
                    }
                    None => eprintln!("SKIPPED {}: no store configured", stringify!($name)),
                }
            }
        )+
    };
}

/// Runs a test with its store's clock in reach of [`pass`].
pub async fn scoped(clock: Option<Arc<TestClock>>, test: impl std::future::Future<Output = ()>) {
    CLOCK.scope(clock, test).await
}

/// A workspace with an owner, an editor and a viewer.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    pub ws: Workspace,
    pub owner: Actor,
    pub editor: Actor,
}

impl Fixture {
    pub async fn new(store: Arc<dyn Store>) -> Self {
        let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
        let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();
        store.set_member(&ws, "editor@example.com", Role::Editor).await.unwrap();
        let editor = Actor { user_id: store.ensure_user("editor@example.com").await.unwrap().id };
        Fixture { store, ws, owner, editor }
    }

    pub async fn item(&self, title: &str) -> Item {
        self.store
            .create_item(&self.ws, self.owner, &NewItem { title: title.into(), ..Default::default() })
            .await
            .unwrap()
    }

    pub fn claim(&self, holder: &str, ttl: i64) -> ClaimRequest {
        ClaimRequest {
            actor: self.owner,
            holder: holder.into(),
            session_id: None,
            ttl_seconds: Some(ttl),
            note: None,
            refresh: true,
            max_hold_seconds: None,
        }
    }

    pub fn renew(&self, holder: &str, epoch: i64) -> RenewRequest {
        RenewRequest {
            actor: self.owner,
            holder: holder.into(),
            handle: LeaseHandle::epoch(epoch),
            ttl_seconds: None,
            note: None,
        }
    }

    pub fn release(&self, holder: &str) -> ReleaseRequest {
        ReleaseRequest {
            actor: self.owner,
            holder: holder.into(),
            handle: LeaseHandle::default(),
            force: false,
            reason: None,
            succeeded: false,
        }
    }

    pub fn complete(&self, holder: &str, handle: LeaseHandle) -> CompleteRequest {
        CompleteRequest { actor: self.owner, holder: holder.into(), handle, status: pad_core::Status::Done }
    }

    pub fn fail(&self, holder: &str, handle: LeaseHandle, note: Option<&str>) -> FailRequest {
        FailRequest {
            actor: self.owner,
            holder: holder.into(),
            handle,
            note: note.map(str::to_string),
            max_failures: None,
        }
    }

    pub(crate) async fn get(&self, r: &str) -> Item {
        self.store.get_item(&self.ws, &rf(r)).await.unwrap()
    }
}

/// A ref as the server hands it to the store: parsed once, at the edge.
pub(crate) fn rf(s: &str) -> ItemRef {
    ItemRef::parse_field("ref", s).unwrap()
}

fn held_by(e: StoreError) -> String {
    match e {
        StoreError::LeaseHeld { lease, .. } => lease.holder,
        other => panic!("expected lease_held, got {other:?}"),
    }
}

pub async fn l1_grant_sets_times_and_first_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let out = f.store.claim(&f.ws, &rf("task-1"), &f.claim("runner-a", 60)).await.unwrap();
    assert!(!out.refreshed);
    let l = out.lease;
    assert_eq!((l.holder.as_str(), l.epoch, l.ttl_seconds), ("runner-a", 1, 60));
    assert_eq!(l.acquired_at, l.renewed_at);
    assert_eq!(l.expires_at, l.acquired_at + chrono::Duration::seconds(60));
    let now = f.store.now().await.unwrap();
    assert!(l.acquired_at <= now && now - l.acquired_at < chrono::Duration::seconds(5), "store clock");
    assert_eq!(f.get("TASK-1").await.lease, Some(l));
}

/// L1: 64 concurrent claimers on one item, 50 rounds, exactly one winner each.
pub async fn l1_concurrent_claimers_have_exactly_one_winner(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    for round in 0..50 {
        let item = f.item(&format!("race {round}")).await;
        let r = item.item_ref.clone();
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let f = f.clone();
                let r = r.clone();
                tokio::spawn(async move { f.store.claim(&f.ws, &r, &f.claim(&format!("w{i}"), 60)).await })
            })
            .collect();
        let mut winners = Vec::new();
        let mut named = HashSet::new();
        for t in futures::future::join_all(tasks).await {
            match t.unwrap() {
                Ok(out) => {
                    assert!(!out.refreshed);
                    winners.push(out.lease.holder);
                }
                Err(e) => {
                    named.insert(held_by(e));
                }
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        assert!(named.iter().all(|h| *h == winners[0]), "round {round}: losers saw {named:?}, winner {}", winners[0]);
        assert_eq!(f.get(&r.to_string()).await.lease.unwrap().holder, winners[0]);
    }
}

pub async fn l2_contention_names_the_live_lease(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut req = f.claim("runner-a", 120);
    req.session_id = Some("s-1".into());
    let won = f.store.claim(&f.ws, &rf("TASK-1"), &req).await.unwrap().lease;
    match f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await {
        Err(StoreError::LeaseHeld { lease, now }) => {
            assert_eq!(*lease, won);
            assert_eq!(lease.session_id.as_deref(), Some("s-1"));
            let secs = lease.expires_in_seconds(now);
            assert!((118..=120).contains(&secs), "{secs}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get("TASK-1").await.lease, Some(won));
}

pub async fn l3_refresh_keeps_acquired_at_and_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let first = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    pass(Duration::from_millis(20)).await;
    let out = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 300)).await.unwrap();
    assert!(out.refreshed);
    let l = out.lease;
    assert_eq!((l.epoch, l.acquired_at), (first.epoch, first.acquired_at));
    assert!(l.renewed_at > first.renewed_at);
    assert_eq!(l.expires_at, l.renewed_at + chrono::Duration::seconds(300));
    assert_eq!(l.ttl_seconds, 300);
}

pub async fn l3_same_holder_other_session_is_contention(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut a = f.claim("runner-a", 60);
    a.session_id = Some("run-1".into());
    f.store.claim(&f.ws, &rf("TASK-1"), &a).await.unwrap();
    a.session_id = Some("run-2".into());
    assert_eq!(held_by(f.store.claim(&f.ws, &rf("TASK-1"), &a).await.unwrap_err()), "runner-a");
    // No session id against one that has one is another worker too.
    a.session_id = None;
    assert!(matches!(f.store.claim(&f.ws, &rf("TASK-1"), &a).await, Err(StoreError::LeaseHeld { .. })));
}

pub async fn l4_renew_extends_only_a_live_lease_with_its_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    let mut req = f.renew("runner-a", l.epoch);
    req.ttl_seconds = Some(600);
    let renewed = f.store.renew(&f.ws, &rf("TASK-1"), &req).await.unwrap();
    assert_eq!((renewed.epoch, renewed.acquired_at, renewed.ttl_seconds), (l.epoch, l.acquired_at, 600));
    assert_eq!(renewed.expires_at, renewed.renewed_at + chrono::Duration::seconds(600));
    // A stale epoch: lease_lost with the current lease, nothing changed.
    match f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch + 1)).await {
        Err(StoreError::LeaseLost { current, .. }) => assert_eq!(current.as_deref(), Some(&renewed)),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get("TASK-1").await.lease, Some(renewed));
    // Renewing without a TTL keeps the lease's own.
    let again = f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch)).await.unwrap();
    assert_eq!(again.ttl_seconds, 600);
}

pub async fn l4_renew_after_expiry_is_lost(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 1)).await.unwrap().lease;
    pass(Duration::from_millis(1100)).await;
    match f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch)).await {
        Err(StoreError::LeaseLost { current: None, .. }) => {}
        other => panic!("{other:?}"),
    }
    // Never revived.
    assert_eq!(f.get("TASK-1").await.lease, None);
}

pub async fn l5_expired_lease_is_absent_and_claimable(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 1)).await.unwrap();
    let leased = ItemFilter { leased: Some(true), ..Default::default() };
    assert_eq!(f.store.list_items(&f.ws, &leased, 50, None).await.unwrap().items.len(), 1);
    pass(Duration::from_millis(1100)).await;
    // Nothing ran in between: expiry alone made it absent everywhere.
    assert_eq!(f.get("TASK-1").await.lease, None);
    assert!(f.store.list_items(&f.ws, &leased, 50, None).await.unwrap().items.is_empty());
    let all = f.store.list_items(&f.ws, &ItemFilter::default(), 50, None).await.unwrap();
    assert_eq!(all.items[0].lease, None);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap().lease;
    assert_eq!((l.holder.as_str(), l.epoch), ("runner-b", 2));
}

pub async fn l6_release_is_idempotent_and_refuses_others(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let none = f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    assert!(!none.released);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    assert_eq!(held_by(f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-b")).await.unwrap_err()), "runner-a");
    let mut wrong_epoch = f.release("runner-a");
    wrong_epoch.handle = LeaseHandle::epoch(l.epoch + 5);
    assert!(matches!(f.store.release(&f.ws, &rf("TASK-1"), &wrong_epoch).await, Err(StoreError::LeaseLost { .. })));
    assert!(f.get("TASK-1").await.lease.is_some());
    let mut ours = f.release("runner-a");
    ours.handle = LeaseHandle::epoch(l.epoch);
    let out = f.store.release(&f.ws, &rf("TASK-1"), &ours).await.unwrap();
    assert!(out.released);
    assert_eq!(f.get("TASK-1").await.lease, None);
    let again = f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    assert!(!again.released);
    // Released means claimable by anyone at once.
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap();
}

pub async fn l7_other_user_with_same_holder_is_refused(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("bot", 60)).await.unwrap().lease;
    let mut claim = f.claim("bot", 60);
    claim.actor = f.editor;
    assert_eq!(held_by(f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap_err()), "bot");
    let mut renew = f.renew("bot", l.epoch);
    renew.actor = f.editor;
    assert_eq!(held_by(f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap_err()), "bot");
    let mut release = f.release("bot");
    release.actor = f.editor;
    assert_eq!(held_by(f.store.release(&f.ws, &rf("TASK-1"), &release).await.unwrap_err()), "bot");
    assert_eq!(f.get("TASK-1").await.lease, Some(l));
}

pub async fn l7_owner_breaks_a_lease_with_a_reason(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut claim = f.claim("runner-e", 60);
    claim.actor = f.editor;
    f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap();
    let mut brk = f.release("owner@example.com");
    brk.force = true;
    assert!(
        matches!(f.store.release(&f.ws, &rf("TASK-1"), &brk).await, Err(StoreError::Validation(e)) if e.field == "reason")
    );
    brk.reason = Some("stuck".into());
    let out = f.store.release(&f.ws, &rf("TASK-1"), &brk).await.unwrap();
    assert!(out.released);
    assert_eq!(out.reason, pad_store::ReleaseReason::Broken);
    assert_eq!(out.lease.unwrap().holder, "runner-e");
    assert_eq!(f.get("TASK-1").await.lease, None);
}

/// L7, "Told why": the break's reason and breaker stay with the lease they
/// ended, and the holder's next renew, complete or fail under it is refused
/// with them.
pub async fn l7_a_broken_lease_tells_its_holder_why(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut claim = f.claim("runner-e", 60);
    claim.actor = f.editor;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap().lease;
    let mut brk = f.release("owner@example.com");
    brk.force = true;
    brk.reason = Some("deploy freeze".into());
    f.store.release(&f.ws, &rf("TASK-1"), &brk).await.unwrap();
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.ended, last.lease_id), (LeaseEnd::Broken, l.lease_id));
    assert_eq!((last.reason.as_deref(), last.broken_by.as_deref()), (Some("deploy freeze"), Some("owner@example.com")));

    let told = |e: StoreError| match e {
        StoreError::LeaseLost { ended, .. } => {
            let ended = ended.expect("the caller's lease, as it ended");
            assert_eq!((ended.ended, ended.lease_id), (LeaseEnd::Broken, l.lease_id));
            assert_eq!(ended.reason.as_deref(), Some("deploy freeze"));
            assert_eq!(ended.broken_by.as_deref(), Some("owner@example.com"));
        }
        other => panic!("expected lease_lost, got {other:?}"),
    };
    let mut renew = f.renew("runner-e", l.epoch);
    renew.actor = f.editor;
    let e = f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap_err();
    assert!(e.to_string().contains("broken by owner@example.com: deploy freeze"), "{e}");
    told(e);
    let mut complete = f.complete("runner-e", LeaseHandle::epoch(l.epoch));
    complete.actor = f.editor;
    told(f.store.complete(&f.ws, &rf("TASK-1"), &complete).await.unwrap_err());
    let mut fail = f.fail("runner-e", LeaseHandle::lease_id(l.lease_id), Some("gave up"));
    fail.actor = f.editor;
    told(f.store.fail(&f.ws, &rf("TASK-1"), &fail).await.unwrap_err());
    assert_eq!(f.get("TASK-1").await.failures, 0, "a refused fail writes nothing");

    // While someone else holds the item the broken lease is still the last
    // one; once that lease ends, the caller's lease is history and no longer
    // described, and no later ending carries the old reason.
    let next = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-f", 60)).await.unwrap().lease;
    match f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap_err() {
        StoreError::LeaseLost { current, ended, .. } => {
            assert_eq!(current.unwrap().holder, "runner-f");
            assert_eq!(ended.unwrap().lease_id, l.lease_id);
        }
        other => panic!("expected lease_lost, got {other:?}"),
    }
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-f")).await.unwrap();
    assert!(matches!(
        f.store.renew(&f.ws, &rf("TASK-1"), &renew).await,
        Err(StoreError::LeaseLost { ended: None, .. })
    ));
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.lease_id, last.reason, last.broken_by), (next.lease_id, None, None));
}

pub async fn l8_bad_ttl_is_refused_before_any_write(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    for ttl in [0, 86_401, -1, -86_400, i64::MAX] {
        assert!(
            matches!(
                f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", ttl)).await,
                Err(StoreError::InvalidTtl(_))
            ),
            "{ttl}"
        );
    }
    assert_eq!(f.get("TASK-1").await.lease, None);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 86_400)).await.unwrap().lease;
    assert_eq!(l.epoch, 1, "refused claims must not consume epochs");
    let mut renew = f.renew("runner-a", 1);
    renew.ttl_seconds = Some(0);
    assert!(matches!(f.store.renew(&f.ws, &rf("TASK-1"), &renew).await, Err(StoreError::InvalidTtl(_))));
    assert_eq!(f.get("TASK-1").await.lease, Some(l));
    // No TTL: the workspace default of 15 minutes.
    f.item("two").await;
    let mut req = f.claim("runner-a", 1);
    req.ttl_seconds = None;
    assert_eq!(f.store.claim(&f.ws, &rf("TASK-2"), &req).await.unwrap().lease.ttl_seconds, 900);
}

pub async fn l9_leases_never_touch_content(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let item = f.item("one").await;
    let versions = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len();
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap();
    f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch)).await.unwrap();
    assert_eq!(f.get("TASK-1").await.updated_at, item.updated_at);
    // An editor who read the item before the claim can still write.
    let patch =
        ItemPatch { title: Some("edited".into()), expected_updated_at: Some(item.updated_at), ..Default::default() };
    let edited = f.store.update_item(&f.ws, f.editor, &rf("TASK-1"), &patch).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    let after = f.get("TASK-1").await;
    assert_eq!(after.updated_at, edited.updated_at);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), versions + 1);
}

pub async fn l10_fenced_writes_need_the_live_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 1)).await.unwrap().lease;
    let fenced =
        |epoch, title: &str| ItemPatch { title: Some(title.into()), lease_epoch: Some(epoch), ..Default::default() };
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(l.epoch, "by a")).await.unwrap();
    pass(Duration::from_millis(1100)).await;
    let b = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap().lease;
    match f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(l.epoch, "stale a")).await {
        Err(StoreError::LeaseLost { current, .. }) => assert_eq!(current.unwrap().holder, "runner-b"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.store.delete_item(&f.ws, f.owner, &rf("TASK-1"), LeaseHandle::epoch(l.epoch)).await,
        Err(StoreError::LeaseLost { .. })
    ));
    let now = f.get("TASK-1").await;
    assert_eq!(now.title, "by a");
    assert!(now.deleted_at.is_none());
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(b.epoch, "by b")).await.unwrap();
}

pub async fn epochs_are_never_reused(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    for expected in 1..=5 {
        let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim(&format!("w{expected}"), 60)).await.unwrap().lease;
        assert_eq!(l.epoch, expected);
        let mut rel = f.release(&l.holder);
        rel.handle = LeaseHandle::epoch(l.epoch);
        assert!(f.store.release(&f.ws, &rf("TASK-1"), &rel).await.unwrap().released);
    }
}

pub async fn items_create_get_and_refs(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let new = NewItem {
        title: "Fix the thing".into(),
        body: "# Steps\n\n1. do\n\tit".into(),
        kind: Some("bug".into()),
        priority: Some(Priority::High),
        labels: vec!["backend".into(), "backend".into(), "p1".into()],
        assignee: Some("editor@example.com".into()),
        ..Default::default()
    };
    let item = f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    assert_eq!(item.item_ref.to_string(), "BUG-1");
    assert_eq!((item.kind.as_str(), item.status, item.priority), ("bug", Status::Open, Priority::High));
    assert_eq!(item.labels, vec!["backend", "p1"]);
    assert_eq!(item.assignee.as_deref(), Some("editor@example.com"));
    assert_eq!(item.created_by, "owner@example.com");
    assert_eq!(item.created_at, item.updated_at);
    assert_eq!(f.get("bug-1").await, item);
    assert_eq!(f.item("t").await.item_ref.to_string(), "TASK-1");
    assert!(matches!(f.store.get_item(&f.ws, &rf("TASK-9")).await, Err(StoreError::NotFound { .. })));
    let unknown_kind = NewItem { title: "x".into(), kind: Some("epic".into()), ..Default::default() };
    assert!(
        matches!(f.store.create_item(&f.ws, f.owner, &unknown_kind).await, Err(StoreError::Validation(e)) if e.field == "kind")
    );
    let stranger = NewItem { title: "x".into(), assignee: Some("nobody@example.com".into()), ..Default::default() };
    assert!(
        matches!(f.store.create_item(&f.ws, f.owner, &stranger).await, Err(StoreError::Validation(e)) if e.field == "assignee")
    );
    // Owners add kinds with their own prefix.
    f.store.add_kind(&f.ws, "epic", "EPIC").await.unwrap();
    let epic = f.store.create_item(&f.ws, f.owner, &unknown_kind).await.unwrap();
    assert_eq!(epic.item_ref.to_string(), "EPIC-1");
    assert!(matches!(f.store.add_kind(&f.ws, "epic2", "EPIC").await, Err(StoreError::Validation(_))));
    assert!(
        matches!(f.store.add_kind(&f.ws, "x", "lower").await, Err(StoreError::Validation(e)) if e.field == "prefix")
    );
}

pub async fn refs_are_never_reused(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    f.store.delete_item(&f.ws, f.owner, &rf("TASK-2"), LeaseHandle::default()).await.unwrap();
    assert_eq!(f.item("c").await.item_ref.to_string(), "TASK-3");
    // Numbering is per workspace.
    let other = f.store.create_workspace("other", "Other", f.owner).await.unwrap();
    let it = f.store.create_item(&other, f.owner, &NewItem { title: "x".into(), ..Default::default() }).await.unwrap();
    assert_eq!(it.item_ref.to_string(), "TASK-1");
    assert!(matches!(f.store.get_item(&other, &rf("TASK-2")).await, Err(StoreError::NotFound { .. })));
}

pub async fn items_list_filters_and_pages(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for i in 0..7 {
        let new = NewItem {
            title: format!("item {i}"),
            body: if i == 3 { "needle here".into() } else { String::new() },
            kind: Some(if i % 2 == 0 { "task" } else { "bug" }.into()),
            priority: Some(if i < 2 { Priority::High } else { Priority::Low }),
            labels: if i % 3 == 0 { vec!["x".into(), "y".into()] } else { vec!["x".into()] },
            assignee: (i == 5).then(|| "editor@example.com".to_string()),
            ..Default::default()
        };
        f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    }
    let list = |filter: ItemFilter| {
        let f = &f;
        async move {
            f.store
                .list_items(&f.ws, &filter, 100, None)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|i| i.item_ref.to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(ItemFilter::default()).await.len(), 7);
    assert_eq!(list(ItemFilter { kind: vec!["bug".into()], ..Default::default() }).await, ["BUG-1", "BUG-2", "BUG-3"]);
    assert_eq!(
        list(ItemFilter { labels: vec!["x".into(), "y".into()], ..Default::default() }).await,
        ["TASK-1", "BUG-2", "TASK-4"]
    );
    assert_eq!(list(ItemFilter { priority: vec![Priority::High], ..Default::default() }).await, ["TASK-1", "BUG-1"]);
    assert_eq!(list(ItemFilter { assignee: Some("editor@example.com".into()), ..Default::default() }).await, ["BUG-3"]);
    assert_eq!(list(ItemFilter { q: Some("NEEDLE".into()), ..Default::default() }).await, ["BUG-2"]);
    assert_eq!(list(ItemFilter { q: Some("item 6".into()), ..Default::default() }).await, ["TASK-4"]);
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-2"), &ItemPatch { status: Some(Status::Done), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(list(ItemFilter { status: vec![Status::Done], ..Default::default() }).await, ["TASK-2"]);
    f.store.claim(&f.ws, &rf("BUG-1"), &f.claim("runner-a", 60)).await.unwrap();
    assert_eq!(list(ItemFilter { leased: Some(true), ..Default::default() }).await, ["BUG-1"]);
    assert_eq!(list(ItemFilter { leased: Some(false), ..Default::default() }).await.len(), 6);
    // Pages of 3 walk everything once, in order.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = f.store.list_items(&f.ws, &ItemFilter::default(), 3, cursor.as_deref()).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|i| i.item_ref.to_string()));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, list(ItemFilter::default()).await);
    assert!(
        matches!(f.store.list_items(&f.ws, &ItemFilter::default(), 3, Some("garbage")).await, Err(StoreError::Validation(e)) if e.field == "cursor")
    );
}

pub async fn items_update_history_and_conflict(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let item = f.item("one").await;
    let patch = ItemPatch {
        title: Some("two".into()),
        status: Some(Status::InProgress),
        add_labels: vec!["a".into(), "b".into()],
        expected_updated_at: Some(item.updated_at),
        ..Default::default()
    };
    let updated = f.store.update_item(&f.ws, f.editor, &rf("TASK-1"), &patch).await.unwrap();
    assert_eq!((updated.title.as_str(), updated.status), ("two", Status::InProgress));
    assert_eq!(updated.labels, ["a", "b"]);
    assert!(updated.updated_at > item.updated_at);
    // A second writer with the old timestamp loses, and nothing is written.
    let stale =
        ItemPatch { title: Some("three".into()), expected_updated_at: Some(item.updated_at), ..Default::default() };
    match f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &stale).await {
        Err(StoreError::UpdateConflict { expected, actual }) => {
            assert_eq!(expected, item.updated_at);
            assert_eq!(actual, updated.updated_at);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get("TASK-1").await, updated);
    let rm = ItemPatch { remove_labels: vec!["a".into()], ..Default::default() };
    assert_eq!(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &rm).await.unwrap().labels, ["b"]);
    let history = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(history.len(), 3, "{history:?}");
    assert_eq!(history.iter().map(|v| v.version).collect::<Vec<_>>(), [3, 2, 1], "newest first");
    assert_eq!(history[1].actor, "editor@example.com");
    assert_eq!(history[1].changes["title"]["from"], "one");
    assert_eq!(history[1].changes["title"]["to"], "two");
    assert_eq!(history[1].changes["status"]["to"], "in-progress");
    // A patch that changes nothing adds no version.
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-1"), &ItemPatch { title: Some("two".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 3);
}

pub async fn items_soft_delete_and_restore(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    f.item("two").await;
    let deleted = f.store.delete_item(&f.ws, f.owner, &rf("TASK-1"), LeaseHandle::default()).await.unwrap();
    assert!(deleted.deleted_at.is_some());
    let refs: Vec<_> = f
        .store
        .list_items(&f.ws, &ItemFilter::default(), 50, None)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.item_ref.to_string())
        .collect();
    assert_eq!(refs, ["TASK-2"]);
    assert!(f.get("TASK-1").await.deleted_at.is_some());
    let restored = f.store.restore_item(&f.ws, f.owner, &rf("TASK-1")).await.unwrap();
    assert!(restored.deleted_at.is_none());
    assert_eq!(f.store.list_items(&f.ws, &ItemFilter::default(), 50, None).await.unwrap().items.len(), 2);
    let history = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(history.len(), 3);
}

pub async fn items_links_parent_and_blockers(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("epic").await;
    f.item("blocker").await;
    let child = NewItem {
        title: "child".into(),
        parent: Some("task-1".into()),
        blocked_by: vec!["TASK-2".into()],
        ..Default::default()
    };
    let c = f.store.create_item(&f.ws, f.owner, &child).await.unwrap();
    assert_eq!(c.parent.as_ref().map(ToString::to_string).as_deref(), Some("TASK-1"));
    assert_eq!(c.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-2"]);
    let missing = NewItem { title: "x".into(), blocked_by: vec!["TASK-99".into()], ..Default::default() };
    assert!(
        matches!(f.store.create_item(&f.ws, f.owner, &missing).await, Err(StoreError::Validation(e)) if e.field == "blocked_by[0]")
    );
    let own_parent = ItemPatch { parent: Some(Some("TASK-3".into())), ..Default::default() };
    assert!(
        matches!(f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &own_parent).await, Err(StoreError::Validation(e)) if e.field == "parent")
    );
    let cleared = ItemPatch { parent: Some(None), blocked_by: Some(vec![]), ..Default::default() };
    let c = f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &cleared).await.unwrap();
    assert_eq!((c.parent, c.blocked_by.len()), (None, 0));
}

/// A `blocked_by` cycle would keep every item in it off the frontier for
/// ever, so an update that would close one is refused, naming the cycle,
/// and writes nothing (docs/api.md, "Items").
pub async fn items_blocker_cycles_are_refused_naming_the_cycle(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["one", "two", "three", "four"] {
        f.item(t).await;
    }
    let block = |refs: &[&str]| ItemPatch {
        blocked_by: Some(refs.iter().map(|r| r.to_string()).collect()),
        ..Default::default()
    };
    // A chain and a diamond are fine: TASK-1 → TASK-2 → TASK-3, TASK-1 → TASK-3.
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &block(&["TASK-2", "TASK-3"])).await.unwrap();
    f.store.update_item(&f.ws, f.owner, &rf("TASK-2"), &block(&["TASK-3"])).await.unwrap();
    // A new item may be blocked by anything that exists: it cannot close a cycle.
    let new = NewItem { title: "five".into(), blocked_by: vec!["TASK-1".into()], ..Default::default() };
    f.store.create_item(&f.ws, f.owner, &new).await.unwrap();

    let refused = |r: Result<Item, StoreError>| match r {
        Err(StoreError::Validation(e)) => {
            assert_eq!(e.field, "blocked_by");
            e.message
        }
        other => panic!("expected a blocked_by cycle to be refused, got {other:?}"),
    };
    let m = refused(f.store.update_item(&f.ws, f.owner, &rf("TASK-2"), &block(&["TASK-1"])).await);
    assert!(m.contains("would create a cycle: TASK-2 → TASK-1 → TASK-2"), "{m}");
    let m = refused(f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &block(&["TASK-4", "TASK-1"])).await);
    assert!(m.contains("TASK-3 → TASK-1 → TASK-3"), "the shortest cycle is named: {m}");
    let m = refused(f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &block(&["TASK-5"])).await);
    assert!(m.contains("TASK-3 → TASK-5 → TASK-1 → TASK-3"), "{m}");

    // Nothing was written by the refusals.
    assert!(f.get("TASK-3").await.blocked_by.is_empty());
    assert_eq!(f.get("TASK-2").await.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-3"]);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-3")).await.unwrap().len(), 1);
    // Breaking the chain first makes the same link acceptable.
    f.store.update_item(&f.ws, f.owner, &rf("TASK-2"), &block(&[])).await.unwrap();
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &block(&["TASK-2"])).await.unwrap();
    f.store.update_item(&f.ws, f.owner, &rf("TASK-3"), &block(&["TASK-2"])).await.unwrap();
}

/// Two updates that each add one half of a cycle, at once: at most one wins.
pub async fn items_concurrent_blocker_links_never_close_a_cycle(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    let pairs = 16;
    for i in 0..pairs * 2 {
        f.item(&format!("item {i}")).await;
    }
    let mut tasks = Vec::new();
    for p in 0..pairs {
        let (a, b) = (format!("TASK-{}", 2 * p + 1), format!("TASK-{}", 2 * p + 2));
        for (from, to) in [(a.clone(), b.clone()), (b, a)] {
            let f = f.clone();
            tasks.push(tokio::spawn(async move {
                let patch = ItemPatch { blocked_by: Some(vec![to]), ..Default::default() };
                f.store.update_item(&f.ws, f.owner, &rf(&from), &patch).await
            }));
        }
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(StoreError::Validation(e)) => assert_eq!(e.field, "blocked_by"),
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(won, pairs, "exactly one link of each pair is accepted");
    for p in 0..pairs {
        let a = f.get(&format!("TASK-{}", 2 * p + 1)).await;
        let b = f.get(&format!("TASK-{}", 2 * p + 2)).await;
        assert_eq!(a.blocked_by.len() + b.blocked_by.len(), 1, "{a:?} {b:?}");
    }
}

/// Zero-width and bidirectional control characters can make one holder or
/// label look like another; every one-line field refuses them, naming the
/// character, before anything is written (docs/api.md, "Text").
pub async fn invisible_characters_are_refused_in_one_line_fields(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("target").await;
    let named = |r: Result<(), StoreError>, field: &str, code: &str| match r {
        Err(StoreError::Validation(e)) => {
            assert_eq!(e.field, field);
            assert!(e.message.contains(code), "{field}: {}", e.message);
        }
        other => panic!("{field}: expected a refusal, got {other:?}"),
    };
    let base = || NewItem { title: "ok".into(), ..Default::default() };
    let ok = |r: Result<Item, StoreError>| r.map(|_| ());
    named(
        ok(f.store.create_item(&f.ws, f.owner, &NewItem { title: "pay \u{202E}fdp.exe".into(), ..base() }).await),
        "title",
        "U+202E RIGHT-TO-LEFT OVERRIDE",
    );
    named(
        ok(f.store.create_item(&f.ws, f.owner, &NewItem { labels: vec!["urgent\u{200B}".into()], ..base() }).await),
        "labels[0]",
        "U+200B ZERO WIDTH SPACE",
    );
    let patch = ItemPatch { add_labels: vec!["\u{FEFF}ops".into()], ..Default::default() };
    named(ok(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &patch).await), "add_labels[0]", "U+FEFF");
    named(
        f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner\u{200D}-a", 60)).await.map(|_| ()),
        "holder",
        "U+200D ZERO WIDTH JOINER",
    );
    let mut req = f.claim("runner-a", 60);
    req.session_id = Some("s\u{2066}1".into());
    named(f.store.claim(&f.ws, &rf("TASK-1"), &req).await.map(|_| ()), "session_id", "U+2066 LEFT-TO-RIGHT ISOLATE");
    named(f.store.create_workspace("ops", "Ops\u{2028}", f.owner).await.map(|_| ()), "name", "U+2028 LINE SEPARATOR");
    named(f.store.set_member(&f.ws, "own\u{200B}er@example.com", Role::Viewer).await.map(|_| ()), "email", "U+200B");
    // Nothing was written; visible text of any script still passes.
    assert_eq!(f.store.list_items(&f.ws, &ItemFilter::default(), 50, None).await.unwrap().items.len(), 1);
    assert_eq!(f.get("TASK-1").await.lease, None);
    assert_eq!(f.store.list_workspaces(f.owner).await.unwrap().len(), 1);
    let fine = NewItem { title: "مرحبا 日本語 Zoë".into(), labels: vec!["équipe".into()], ..base() };
    f.store.create_item(&f.ws, f.owner, &fine).await.unwrap();
    f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("runner-ü", 60)).await.unwrap();
}

pub async fn comments_are_append_only(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let item = f.item("one").await;
    f.store.add_comment(&f.ws, f.editor, &rf("TASK-1"), "first").await.unwrap();
    f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "second\nline").await.unwrap();
    let comments = f.store.list_comments(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(
        comments.iter().map(|c| (c.author.as_str(), c.body.as_str())).collect::<Vec<_>>(),
        [("editor@example.com", "first"), ("owner@example.com", "second\nline")]
    );
    let got = f.get("TASK-1").await;
    assert_eq!(got.comments_count, 2);
    assert_eq!(got.updated_at, item.updated_at, "a comment is not an edit of the item");
    assert!(
        matches!(f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "  ").await, Err(StoreError::Validation(e)) if e.field == "body")
    );
}

pub async fn bad_input_names_the_field_and_writes_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let field_of = |r: Result<Item, StoreError>| match r {
        Err(StoreError::Validation(e)) => e.field,
        other => panic!("expected a validation error, got {other:?}"),
    };
    let base = || NewItem { title: "ok".into(), ..Default::default() };
    let cases: Vec<(NewItem, &str)> = vec![
        (NewItem { title: "a\0b".into(), ..base() }, "title"),
        (NewItem { title: "a\u{1b}[31m".into(), ..base() }, "title"),
        (NewItem { title: "x".repeat(501), ..base() }, "title"),
        (NewItem { title: "".into(), ..base() }, "title"),
        (NewItem { body: "a\0".into(), ..base() }, "body"),
        (NewItem { body: "x".repeat(256 * 1024 + 1), ..base() }, "body"),
        (NewItem { labels: vec!["ok".into(), "bad\u{7}".into()], ..base() }, "labels[1]"),
        (NewItem { labels: vec!["l".repeat(65)], ..base() }, "labels[0]"),
        (NewItem { labels: (0..51).map(|i| i.to_string()).collect(), ..base() }, "labels"),
        (NewItem { parent: Some("TASK".into()), ..base() }, "parent"),
        (NewItem { blocked_by: vec!["-1".into()], ..base() }, "blocked_by[0]"),
        (NewItem { kind: Some("Bad Kind".into()), ..base() }, "kind"),
        (NewItem { assignee: Some("not-an-email".into()), ..base() }, "assignee"),
    ];
    for (new, field) in cases {
        assert_eq!(field_of(f.store.create_item(&f.ws, f.owner, &new).await), field);
    }
    assert!(
        f.store
            .list_items(&f.ws, &ItemFilter { include_deleted: true, ..Default::default() }, 50, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Refused creates consumed no ref number.
    assert_eq!(f.item("first").await.item_ref.to_string(), "TASK-1");

    let patch = ItemPatch { title: Some("x\0".into()), ..Default::default() };
    assert_eq!(field_of(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &patch).await), "title");
    // Refs are parsed once, before the store is called (the server's edge).
    for bad in ["TASK-1-2", "TASK-\0"] {
        assert_eq!(ItemRef::parse_field("ref", bad).unwrap_err().field, "ref", "{bad:?}");
    }
    assert_eq!(f.get("TASK-1").await.title, "first");
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 1);

    for (holder, session, field) in [
        ("a\0", None, "holder"),
        ("", None, "holder"),
        (&"h".repeat(201) as &str, None, "holder"),
        ("ok", Some("s\n"), "session_id"),
    ] {
        let mut req = f.claim(holder, 60);
        req.session_id = session.map(str::to_string);
        match f.store.claim(&f.ws, &rf("TASK-1"), &req).await {
            Err(StoreError::Validation(e)) => assert_eq!(e.field, field),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(f.get("TASK-1").await.lease, None);
    assert!(
        matches!(f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "x\0").await, Err(StoreError::Validation(e)) if e.field == "body")
    );
    assert!(f.store.list_comments(&f.ws, &rf("TASK-1")).await.unwrap().is_empty());

    for slug in ["Bad", "-x", "a_b", "", "x\0"] {
        assert!(
            matches!(f.store.create_workspace(slug, "n", f.owner).await, Err(StoreError::Validation(e)) if e.field == "slug"),
            "{slug}"
        );
    }
    assert!(
        matches!(f.store.create_workspace("ok", "n\0", f.owner).await, Err(StoreError::Validation(e)) if e.field == "name")
    );
    assert!(
        matches!(f.store.create_workspace("acme", "again", f.owner).await, Err(StoreError::Validation(e)) if e.field == "slug")
    );
    assert_eq!(f.store.list_workspaces(f.owner).await.unwrap().len(), 1);
    assert!(matches!(f.store.ensure_user("bad\0@x").await, Err(StoreError::Validation(e)) if e.field == "email"));
}

pub async fn workspaces_members_and_tokens(store: Arc<dyn Store>) {
    assert!(!store.has_users().await.unwrap());
    let f = Fixture::new(store).await;
    assert!(f.store.has_users().await.unwrap());
    let s = &f.store;
    let (ws, role) = s.membership(f.owner, "acme").await.unwrap();
    assert_eq!((ws.slug.as_str(), role), ("acme", Role::Owner));
    assert_eq!(ws.settings.default_ttl_seconds, 900);
    assert_eq!(s.membership(f.editor, "acme").await.unwrap().1, Role::Editor);
    let outsider = Actor { user_id: s.ensure_user("out@example.com").await.unwrap().id };
    assert!(matches!(s.membership(outsider, "acme").await, Err(StoreError::NotFound { .. })));
    assert!(matches!(s.membership(f.owner, "nope").await, Err(StoreError::NotFound { .. })));
    assert!(s.list_workspaces(outsider).await.unwrap().is_empty());
    // Changing a role.
    s.set_member(&f.ws, "editor@example.com", Role::Viewer).await.unwrap();
    assert_eq!(s.membership(f.editor, "acme").await.unwrap().1, Role::Viewer);
    let members = s.list_members(&f.ws).await.unwrap();
    assert_eq!(
        members.iter().map(|m| (m.email.as_str(), m.role)).collect::<Vec<_>>(),
        [("owner@example.com", Role::Owner), ("editor@example.com", Role::Viewer)]
    );
    // Tokens are found by hash, listed without it, and stop working when revoked.
    let t = s.create_token(f.editor, "ci", "hash-1").await.unwrap();
    let p = s.authenticate("hash-1").await.unwrap().unwrap();
    assert_eq!((p.user.id, p.token_id, p.scope), (f.editor.user_id, t.id, None));
    assert_eq!(s.authenticate("hash-2").await.unwrap(), None);
    let listed = s.list_tokens(&f.ws, f.editor).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| (t.name.as_str(), t.email.as_str(), t.workspace.as_deref())).collect::<Vec<_>>(),
        [("ci", "editor@example.com", None)]
    );
    // Another user's unscoped token is not the workspace's to list.
    assert!(s.list_tokens(&f.ws, f.owner).await.unwrap().is_empty());
    assert_eq!(s.get_token(t.id).await.unwrap().id, t.id);
    s.revoke_token(t.id).await.unwrap();
    assert_eq!(s.authenticate("hash-1").await.unwrap(), None);
    assert!(s.list_tokens(&f.ws, f.editor).await.unwrap().is_empty());
    assert!(matches!(s.get_token(t.id).await, Err(StoreError::NotFound { .. })));
    assert_eq!(s.user_by_email("EDITOR@example.com").await.unwrap().map(|u| u.id), Some(f.editor.user_id));
    assert_eq!(s.user_by_email("nobody@example.com").await.unwrap(), None);
}

/// A scoped token carries its workspace and role cap; the workspace lists
/// it for anyone, and the per-user cap counts live tokens only.
pub async fn scoped_tokens_and_the_live_token_cap(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let s = &f.store;
    let t = s.create_scoped_token(f.editor, "agent", "hash-s", &f.ws, Role::Viewer, f.editor).await.unwrap();
    assert_eq!((t.workspace.as_deref(), t.role), (Some("acme"), Some(Role::Viewer)));
    let p = s.authenticate("hash-s").await.unwrap().unwrap();
    assert_eq!(p.scope, Some(pad_core::TokenScope { workspace_id: f.ws.id, role: Role::Viewer }));
    // The owner's listing of acme has the editor's scoped token.
    let listed = s.list_tokens(&f.ws, f.owner).await.unwrap();
    assert_eq!(listed.iter().map(|t| t.id).collect::<Vec<_>>(), [t.id]);
    // The scoped one above is the first of the editor's live tokens.
    for i in 1..pad_core::authz::TOKENS_PER_USER_MAX {
        s.create_token(f.editor, "many", &format!("cap-{i}")).await.unwrap();
    }
    let refused = s.create_token(f.editor, "one too many", "cap-over").await;
    assert!(matches!(&refused, Err(StoreError::Validation(e)) if e.field == "tokens"), "{refused:?}");
    assert!(matches!(
        s.create_scoped_token(f.editor, "over", "cap-over", &f.ws, Role::Viewer, f.editor).await,
        Err(StoreError::Validation(_))
    ));
    assert_eq!(s.authenticate("cap-over").await.unwrap(), None);
    // Revoking one makes room; other users are not affected.
    s.revoke_token(t.id).await.unwrap();
    s.create_token(f.editor, "room again", "cap-over").await.unwrap();
    s.create_token(f.owner, "owner's", "cap-owner").await.unwrap();
}

/// The first start is one transaction: it happens once, whole.
pub async fn bootstrap_is_whole_and_once(store: Arc<dyn Store>) {
    assert!(store.bootstrap("first@example.com", "home", "Home", "boot-1").await.unwrap());
    let p = store.authenticate("boot-1").await.unwrap().expect("the bootstrap token works");
    assert_eq!((p.user.email.as_str(), p.scope), ("first@example.com", None));
    let (ws, role) = store.membership(Actor { user_id: p.user.id }, "home").await.unwrap();
    assert_eq!(role, Role::Owner);
    assert!(!store.list_kinds(&ws).await.unwrap().is_empty());
    // A second start (or another instance) writes nothing.
    assert!(!store.bootstrap("second@example.com", "other", "Other", "boot-2").await.unwrap());
    assert_eq!(store.authenticate("boot-2").await.unwrap(), None);
    assert_eq!(store.user_by_email("second@example.com").await.unwrap(), None);
    // Bad input is refused before anything is read or written.
    let empty_check = store.bootstrap("x@example.com", "Bad Slug!", "x", "boot-3").await;
    assert!(empty_check.is_err());
}

/// Web sessions act as their token, end on revocation of the session or of
/// the token, and on expiry.
pub async fn sessions_end_on_sign_out_revocation_and_expiry(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let s = &f.store;
    let t = s.create_scoped_token(f.editor, "web", "tok-web", &f.ws, Role::Editor, f.editor).await.unwrap();
    s.create_session(t.id, "sess-1", 3600).await.unwrap();
    let p = s.authenticate_session("sess-1").await.unwrap().unwrap();
    assert_eq!((p.user.id, p.token_id, p.scope.map(|x| x.role)), (f.editor.user_id, t.id, Some(Role::Editor)));
    assert_eq!(s.authenticate_session("tok-web").await.unwrap(), None, "a token hash is no session");
    assert_eq!(s.authenticate("sess-1").await.unwrap(), None, "a session hash is no token");
    s.revoke_session("sess-1").await.unwrap();
    assert_eq!(s.authenticate_session("sess-1").await.unwrap(), None);
    s.create_session(t.id, "sess-2", 3600).await.unwrap();
    s.create_session(t.id, "sess-3", 1).await.unwrap();
    s.revoke_token(t.id).await.unwrap();
    assert_eq!(s.authenticate_session("sess-2").await.unwrap(), None);
    let u = s.create_token(f.editor, "web2", "tok-web2").await.unwrap();
    s.create_session(u.id, "sess-4", 1).await.unwrap();
    assert!(s.authenticate_session("sess-4").await.unwrap().is_some());
    pass(Duration::from_millis(1100)).await;
    assert_eq!(s.authenticate_session("sess-4").await.unwrap(), None, "expired");
}

/// Removal ends a membership and the member's tokens scoped to the
/// workspace; their unscoped tokens live on; the last owner stays.
pub async fn removing_a_member_revokes_their_scoped_tokens(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let s = &f.store;
    s.create_scoped_token(f.editor, "here", "rm-scoped", &f.ws, Role::Editor, f.editor).await.unwrap();
    s.create_token(f.editor, "mine", "rm-unscoped").await.unwrap();
    s.remove_member(&f.ws, "EDITOR@example.com").await.unwrap();
    assert!(matches!(s.membership(f.editor, "acme").await, Err(StoreError::NotFound { .. })));
    assert_eq!(s.authenticate("rm-scoped").await.unwrap(), None);
    assert!(s.authenticate("rm-unscoped").await.unwrap().is_some());
    assert!(matches!(s.remove_member(&f.ws, "editor@example.com").await, Err(StoreError::NotFound { .. })));
    let last = s.remove_member(&f.ws, "owner@example.com").await;
    assert!(matches!(&last, Err(StoreError::Validation(e)) if e.field == "email"), "{last:?}");
    assert_eq!(s.membership(f.owner, "acme").await.unwrap().1, Role::Owner);
}

/// Tokens know who minted them (docs/api.md, "Tokens"): an owner who mints
/// a token for an editor and is then removed takes that token with them, in
/// the same transaction; the editor's own token stays, and so does a token
/// another owner minted.
pub async fn removing_an_owner_revokes_the_tokens_they_minted_for_others(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let s = &f.store;
    s.set_member(&f.ws, "second@example.com", Role::Owner).await.unwrap();
    let second = Actor { user_id: s.ensure_user("second@example.com").await.unwrap().id };
    let minted = s.create_scoped_token(f.editor, "ci", "by-second", &f.ws, Role::Editor, second).await.unwrap();
    assert_eq!(minted.minted_by.as_deref(), Some("second@example.com"));
    s.create_scoped_token(f.editor, "ci2", "by-owner", &f.ws, Role::Editor, f.owner).await.unwrap();
    let own = s.create_token(f.editor, "own", "by-self").await.unwrap();
    assert_eq!(own.minted_by.as_deref(), Some("editor@example.com"));
    s.remove_member(&f.ws, "second@example.com").await.unwrap();
    assert_eq!(s.authenticate("by-second").await.unwrap(), None, "the removed owner's mint is revoked");
    assert!(s.authenticate("by-owner").await.unwrap().is_some());
    assert!(s.authenticate("by-self").await.unwrap().is_some());
    let listed = s.list_tokens(&f.ws, f.editor).await.unwrap();
    assert!(listed.iter().all(|t| t.name != "ci"), "{listed:?}");
}

/// Ref allocation under concurrency: 32 creates at once get 32 distinct refs.
pub async fn concurrent_creates_allocate_distinct_refs(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let f = f.clone();
            tokio::spawn(async move {
                f.store
                    .create_item(&f.ws, f.owner, &NewItem { title: format!("c{i}"), ..Default::default() })
                    .await
                    .unwrap()
                    .item_ref
                    .number
            })
        })
        .collect();
    let mut numbers: Vec<i64> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    numbers.sort();
    assert_eq!(numbers, (1..=32).collect::<Vec<_>>());
}

fn refs(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| i.item_ref.to_string()).collect()
}

async fn event_types(f: &Fixture) -> Vec<String> {
    f.store.events_after(&f.ws, 0, 1000).await.unwrap().into_iter().map(|e| e.kind).collect()
}

pub async fn l11_frontier_is_ready_work_best_first(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let mk = |title: &str, priority: Priority, labels: &[&str]| NewItem {
        title: title.into(),
        priority: Some(priority),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Default::default()
    };
    for new in [
        mk("low", Priority::Low, &[]),                        // TASK-1
        mk("high old", Priority::High, &["web"]),             // TASK-2
        mk("high new", Priority::High, &[]),                  // TASK-3
        mk("crit human", Priority::Critical, &[NEEDS_HUMAN]), // TASK-4
        mk("leased", Priority::Critical, &[]),                // TASK-5
        mk("done", Priority::Critical, &[]),                  // TASK-6
    ] {
        f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    }
    let blocked = NewItem {
        title: "blocked".into(),
        priority: Some(Priority::Critical),
        blocked_by: vec!["TASK-1".into()],
        parent: Some("TASK-2".into()),
        ..Default::default()
    };
    f.store.create_item(&f.ws, f.owner, &blocked).await.unwrap(); // TASK-7
    f.store.claim(&f.ws, &rf("TASK-5"), &f.claim("w", 60)).await.unwrap();
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-6"), &ItemPatch { status: Some(Status::Done), ..Default::default() })
        .await
        .unwrap();
    let frontier = |filter: FrontierFilter| {
        let f = &f;
        async move { refs(&f.store.frontier(&f.ws, &filter, 50).await.unwrap()) }
    };
    assert_eq!(frontier(FrontierFilter::default()).await, ["TASK-4", "TASK-2", "TASK-3", "TASK-1"]);
    assert_eq!(
        frontier(FrontierFilter { autonomous: true, ..Default::default() }).await,
        ["TASK-2", "TASK-3", "TASK-1"]
    );
    assert_eq!(frontier(FrontierFilter { labels: vec!["web".into()], ..Default::default() }).await, ["TASK-2"]);
    assert_eq!(
        frontier(FrontierFilter { without_labels: vec!["web".into()], autonomous: true, ..Default::default() }).await,
        ["TASK-3", "TASK-1"]
    );
    assert_eq!(
        frontier(FrontierFilter { min_priority: Some(Priority::High), autonomous: true, ..Default::default() }).await,
        ["TASK-2", "TASK-3"]
    );
    assert_eq!(
        frontier(FrontierFilter { kinds: vec!["bug".into()], ..Default::default() }).await,
        Vec::<String>::new()
    );
    // Finishing the blocker unblocks TASK-7, a child of TASK-2.
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-1"), &ItemPatch { status: Some(Status::Done), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(frontier(FrontierFilter { parent: Some("TASK-2".into()), ..Default::default() }).await, ["TASK-7"]);
    assert!(
        matches!(f.store.frontier(&f.ws, &FrontierFilter { parent: Some("x".into()), ..Default::default() }, 5).await, Err(StoreError::Validation(e)) if e.field == "parent")
    );
}

/// L11: 16 concurrent claim-next callers over 200 items: each item granted
/// exactly once, every caller served.
pub async fn l11_claim_next_gives_concurrent_callers_distinct_items(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    for i in 0..200 {
        f.item(&format!("job {i}")).await;
    }
    let tasks: Vec<_> = (0..16)
        .map(|w| {
            let f = f.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let req = f.claim(&format!("worker-{w}"), 300);
                while let Some((item, out)) = f.store.claim_next(&f.ws, &FrontierFilter::default(), &req).await.unwrap()
                {
                    assert_eq!(out.lease.holder, format!("worker-{w}"));
                    assert!(!out.refreshed);
                    assert_eq!(item.lease.as_ref(), Some(&out.lease));
                    got.push(item.item_ref.to_string());
                }
                got
            })
        })
        .collect();
    let per_worker: Vec<Vec<String>> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    let all: Vec<&String> = per_worker.iter().flatten().collect();
    let distinct: HashSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), 200, "every item granted");
    assert_eq!(distinct.len(), 200, "no item granted twice");
    assert!(
        per_worker.iter().all(|w| !w.is_empty()),
        "a caller starved: {:?}",
        per_worker.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

pub async fn l11_claim_next_with_nothing_ready_is_none(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    assert!(f.store.claim_next(&f.ws, &FrontierFilter::default(), &f.claim("w", 60)).await.unwrap().is_none());
    f.item("a").await;
    let human = NewItem {
        title: "h".into(),
        labels: vec![NEEDS_HUMAN.into()],
        priority: Some(Priority::Critical),
        ..Default::default()
    };
    f.store.create_item(&f.ws, f.owner, &human).await.unwrap();
    let auto = FrontierFilter { autonomous: true, ..Default::default() };
    let (item, _) = f.store.claim_next(&f.ws, &auto, &f.claim("w", 60)).await.unwrap().unwrap();
    assert_eq!(item.item_ref.to_string(), "TASK-1");
    assert!(f.store.claim_next(&f.ws, &auto, &f.claim("w", 60)).await.unwrap().is_none());
    let mut bad = f.claim("w", 0);
    bad.ttl_seconds = Some(0);
    assert!(matches!(
        f.store.claim_next(&f.ws, &FrontierFilter::default(), &bad).await,
        Err(StoreError::InvalidTtl(_))
    ));
    assert_eq!(f.get("TASK-2").await.lease, None, "a refused claim-next grants nothing");
}

pub async fn l12_handoff_note_reaches_the_next_claimant(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    let first = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 1)).await.unwrap();
    assert_eq!((first.previous_note, first.previous_holder), (None, None));
    let mut renew = f.renew("runner-a", first.lease.epoch);
    renew.note = Some("migrated 3 of 7 tables".into());
    f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap();
    // While the lease lives, its note is readable on the item.
    assert_eq!(f.get("TASK-1").await.lease_note.as_deref(), Some("migrated 3 of 7 tables"));
    pass(Duration::from_millis(1100)).await;
    // Expired: no live lease, so no live note (the handoff below still has it).
    assert_eq!(f.get("TASK-1").await.lease_note, None);
    let second = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap();
    assert_eq!(f.get("TASK-1").await.lease_note, None, "a new grant starts without a note");
    assert_eq!(second.previous_note.as_deref(), Some("migrated 3 of 7 tables"));
    assert_eq!(second.previous_holder.as_deref(), Some("runner-a"));
    let mut refresh = f.claim("runner-b", 60);
    refresh.note = Some("resumed at table 4".into());
    f.store.claim(&f.ws, &rf("TASK-1"), &refresh).await.unwrap();
    assert_eq!(f.get("TASK-1").await.lease_note.as_deref(), Some("resumed at table 4"));
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-b")).await.unwrap();
    assert_eq!(f.get("TASK-1").await.lease_note, None);
    let third = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-c", 60)).await.unwrap();
    assert_eq!(third.previous_note.as_deref(), Some("resumed at table 4"));
    assert_eq!(third.previous_holder.as_deref(), Some("runner-b"));
}

/// L13: three expiries quarantine an item: `needs-human`, out of the
/// autonomous frontier, and an event that says why.
pub async fn l13_quarantine_after_repeated_expiries(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("crashy").await;
    f.item("fine").await;
    let auto = FrontierFilter { autonomous: true, ..Default::default() };
    for round in 0..3 {
        let (item, _) =
            f.store.claim_next(&f.ws, &auto, &f.claim(&format!("crasher-{round}"), 1)).await.unwrap().unwrap();
        assert_eq!(item.item_ref.to_string(), "TASK-1", "round {round}");
        pass(Duration::from_millis(1100)).await;
    }
    // The next claim-next observes the third expiry, quarantines TASK-1 and moves on.
    let (item, _) = f.store.claim_next(&f.ws, &auto, &f.claim("next", 60)).await.unwrap().unwrap();
    assert_eq!(item.item_ref.to_string(), "TASK-2");
    let crashy = f.get("TASK-1").await;
    assert!(crashy.labels.iter().any(|l| l == NEEDS_HUMAN), "{:?}", crashy.labels);
    assert_eq!(crashy.lease, None);
    assert!(refs(&f.store.frontier(&f.ws, &auto, 10).await.unwrap()).is_empty());
    assert_eq!(refs(&f.store.frontier(&f.ws, &FrontierFilter::default(), 10).await.unwrap()), ["TASK-1"]);
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap();
    let q: Vec<_> = events.iter().filter(|e| e.kind == "item.quarantined").collect();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].item_ref.as_deref(), Some("TASK-1"));
    assert!(q[0].data["reason"].as_str().unwrap().contains("expired 3 times"), "{}", q[0].data);
    assert_eq!(events.iter().filter(|e| e.kind == "lease.expired").count(), 3);
}

pub async fn events_record_changes_in_order(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-1"), &ItemPatch { title: Some("b".into()), ..Default::default() })
        .await
        .unwrap();
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
    f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("w", l.epoch)).await.unwrap();
    f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "hi").await.unwrap();
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    f.store.delete_item(&f.ws, f.owner, &rf("TASK-1"), LeaseHandle::default()).await.unwrap();
    f.store.restore_item(&f.ws, f.owner, &rf("TASK-1")).await.unwrap();
    assert_eq!(
        event_types(&f).await,
        [
            "item.created",
            "item.updated",
            "lease.claimed",
            "comment.created",
            "lease.released",
            "item.deleted",
            "item.restored"
        ]
    );
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap();
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(events[2].data["holder"], "w");
    assert_eq!(events[2].actor.as_deref(), Some("owner@example.com"));
    let after = f.store.events_after(&f.ws, events[4].id, 10).await.unwrap();
    assert_eq!(after.iter().map(|e| e.id).collect::<Vec<_>>(), [events[5].id, events[6].id]);
    // Events are per workspace.
    let other = f.store.create_workspace("other", "Other", f.owner).await.unwrap();
    assert!(f.store.events_after(&other, 0, 10).await.unwrap().is_empty());
}

/// Ids become visible in increasing order (docs/api.md, Events), so a
/// reader paging with `after = the last id it saw` (an SSE stream resuming
/// from `Last-Event-ID`) while many transactions write events at once ends
/// with exactly the whole log: nothing skipped, nothing twice.
pub async fn events_are_gap_free_under_concurrent_writers(store: Arc<dyn Store>) {
    const WRITERS: usize = 16;
    const CYCLES: usize = 12;
    // Each cycle writes `lease.claimed` and `lease.released`.
    const EXPECTED: usize = WRITERS * CYCLES * 2;
    let f = Arc::new(Fixture::new(store).await);
    let mut refs = Vec::new();
    for i in 0..WRITERS {
        refs.push(f.item(&format!("w{i}")).await.item_ref.to_string());
    }
    let start = f.store.events_after(&f.ws, 0, 1000).await.unwrap().last().map_or(0, |e| e.id);
    let reader = {
        let f = f.clone();
        tokio::spawn(async move {
            let (mut seen, mut cursor) = (Vec::new(), start);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while seen.len() < EXPECTED && tokio::time::Instant::now() < deadline {
                let page = f.store.events_after(&f.ws, cursor, 1000).await.unwrap();
                for e in page {
                    assert!(e.id > cursor, "event {} after cursor {cursor}", e.id);
                    cursor = e.id;
                    seen.push(e.id);
                }
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    let writers: Vec<_> = refs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let f = f.clone();
            tokio::spawn(async move {
                for _ in 0..CYCLES {
                    f.store.claim(&f.ws, &rf(&r), &f.claim(&format!("w{i}"), 60)).await.unwrap();
                    f.store.release(&f.ws, &rf(&r), &f.release(&format!("w{i}"))).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let seen = reader.await.unwrap();
    let all: Vec<i64> = f.store.events_after(&f.ws, start, 1000).await.unwrap().iter().map(|e| e.id).collect();
    assert_eq!(all.len(), EXPECTED, "every cycle's two events are in the log");
    let missed: Vec<_> = all.iter().filter(|id| !seen.contains(id)).collect();
    assert!(missed.is_empty(), "the paging reader skipped {} events: {missed:?}", missed.len());
    assert_eq!(seen, all, "the reader saw the log in id order, each event once");
}

pub async fn expiry_is_observed_exactly_once(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 1)).await.unwrap();
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 0, "a live lease is not expired");
    assert_eq!(f.store.live_leases().await.unwrap(), [(f.ws.slug.clone(), 1)]);
    pass(Duration::from_millis(1100)).await;
    assert!(f.store.live_leases().await.unwrap().is_empty(), "an expired lease is not live, recorded or not");
    let observed = f.store.observe_expiries().await.unwrap();
    assert_eq!(observed.len(), 1);
    assert_eq!((observed[0].workspace.as_str(), observed[0].quarantined), (f.ws.slug.as_str(), false));
    assert_eq!(observed[0].held, chrono::Duration::seconds(1));
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 0);
    assert!(!f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap().released);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("v", 60)).await.unwrap().lease;
    assert_eq!(l.epoch, 2);
    let types = event_types(&f).await;
    assert_eq!(types.iter().filter(|t| *t == "lease.expired").count(), 1, "{types:?}");
    assert_eq!(types.last().map(String::as_str), Some("lease.claimed"));
}

fn lost(e: StoreError) {
    assert!(matches!(e, StoreError::LeaseLost { .. }), "expected lease_lost, got {e:?}");
}

pub(crate) async fn events_of(f: &Fixture, kind: pad_core::EventKind) -> Vec<pad_core::Event> {
    let filter = pad_core::EventFilter { item_ref: None, kinds: vec![kind] };
    f.store.events_where(&f.ws, 0, 1000, &filter).await.unwrap()
}

/// L14: a failure ends the lease, counts, keeps the note for the next
/// claimant, and keeps the item from claim-next and the frontier until
/// `retry_at`; a claim by ref still works.
pub async fn l14_fail_counts_backs_off_and_hands_the_note_over(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("flaky").await;
    f.item("other").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    let out =
        f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("runner-a", LeaseHandle::epoch(l.epoch), Some("disk full"))).await;
    let out = out.unwrap();
    assert!(!out.quarantined);
    let item = f.get("TASK-1").await;
    assert_eq!(out.item, item);
    assert_eq!((item.failures, item.lease.as_ref()), (1, None));
    assert_eq!(item.last_failure_note.as_deref(), Some("disk full"));
    let now = f.store.now().await.unwrap();
    let wait = item.retry_at.expect("retry_at is set") - now;
    assert!(wait > chrono::Duration::seconds(25) && wait <= chrono::Duration::seconds(30), "{wait}");
    let last = item.last_lease.expect("the failed lease is the last lease");
    assert_eq!((last.ended, last.epoch, last.lease_id), (LeaseEnd::Failed, l.epoch, l.lease_id));
    assert_eq!(last.note.as_deref(), Some("disk full"));
    // Lease is not content (L9): no version, `updated_at` unchanged.
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 1);
    assert_eq!(item.updated_at, f.get("TASK-1").await.updated_at);
    assert_eq!(refs(&f.store.frontier(&f.ws, &FrontierFilter::default(), 10).await.unwrap()), ["TASK-2"]);
    let (next, _) = f.store.claim_next(&f.ws, &FrontierFilter::default(), &f.claim("b", 60)).await.unwrap().unwrap();
    assert_eq!(next.item_ref.to_string(), "TASK-2");
    assert!(f.store.claim_next(&f.ws, &FrontierFilter::default(), &f.claim("c", 60)).await.unwrap().is_none());
    let again = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap();
    assert_eq!(again.previous_note.as_deref(), Some("disk full"));
    assert_eq!(again.previous_holder.as_deref(), Some("runner-a"));
    // The second failure doubles the wait.
    let l2 = again.lease;
    let out = f
        .store
        .fail(&f.ws, &rf("TASK-1"), &f.fail("runner-b", LeaseHandle::lease_id(l2.lease_id), None))
        .await
        .unwrap();
    assert_eq!(out.item.failures, 2);
    let wait = out.item.retry_at.unwrap() - f.store.now().await.unwrap();
    assert!(wait > chrono::Duration::seconds(55) && wait <= chrono::Duration::seconds(60), "{wait}");
    assert_eq!(out.item.last_failure_note, None);
    let failed = events_of(&f, pad_core::EventKind::LeaseFailed).await;
    assert_eq!(failed.len(), 2);
    assert_eq!((failed[0].data["note"].as_str(), failed[0].data["failures"].as_i64()), (Some("disk full"), Some(1)));
}

/// L14 bad input: a stale epoch, another item's lease id, another holder,
/// or no handle at all: refused, and nothing changed.
pub async fn l14_fail_with_a_stale_handle_is_lost_and_changes_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let a = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let b = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    let before = f.get("TASK-1").await;
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    lost(
        f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::epoch(a.epoch + 1), Some("x"))).await.unwrap_err(),
    );
    lost(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::lease_id(b.lease_id), None)).await.unwrap_err());
    let mixed = LeaseHandle { epoch: Some(a.epoch), lease_id: Some(b.lease_id) };
    lost(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", mixed, None)).await.unwrap_err());
    assert_eq!(
        held_by(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("v", LeaseHandle::epoch(a.epoch), None)).await.unwrap_err()),
        "w"
    );
    let e = f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::default(), None)).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "epoch"), "{e:?}");
    let mut zero = f.fail("w", LeaseHandle::epoch(a.epoch), None);
    zero.max_failures = Some(0);
    let e = f.store.fail(&f.ws, &rf("TASK-1"), &zero).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "max_failures"), "{e:?}");
    assert_eq!(f.get("TASK-1").await, before);
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events);
    // Released, the old handle is lost too.
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    lost(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::lease_id(a.lease_id), None)).await.unwrap_err());
    assert_eq!(f.get("TASK-1").await.failures, 0);
}

/// L14: at the threshold (here a per-request `max_failures`) the item is
/// quarantined with `needs-human` and an event that says why; a claim by
/// ref still works during the backoff.
pub async fn l14_failures_quarantine_at_the_threshold(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("doomed").await;
    for round in 1..=2 {
        let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
        let mut req = f.fail("w", LeaseHandle::epoch(l.epoch), Some("exit 1"));
        req.max_failures = Some(2);
        let out = f.store.fail(&f.ws, &rf("TASK-1"), &req).await.unwrap();
        assert_eq!(out.quarantined, round == 2, "round {round}");
    }
    let item = f.get("TASK-1").await;
    assert!(item.labels.iter().any(|l| l == NEEDS_HUMAN), "{:?}", item.labels);
    let q = events_of(&f, pad_core::EventKind::ItemQuarantined).await;
    assert_eq!(q.len(), 1);
    assert!(q[0].data["reason"].as_str().unwrap().contains("failed 2 times"), "{}", q[0].data);
    // The workspace default (3) applies without an override.
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let out = f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::epoch(l.epoch), None)).await.unwrap();
    assert!(!out.quarantined, "already labelled");
    assert_eq!(out.item.failures, 3);
}

/// Requeue (docs/leases.md): `needs-human`, the failure and expiry counts and
/// the backoff go in one recorded version; a second requeue changes nothing.
pub async fn requeue_clears_quarantine_counts_and_backoff(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("doomed").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 1)).await.unwrap();
    pass(Duration::from_millis(1100)).await;
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 1);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let mut req = f.fail("w", LeaseHandle::epoch(l.epoch), Some("exit 1"));
    req.max_failures = Some(1);
    let out = f.store.fail(&f.ws, &rf("TASK-1"), &req).await.unwrap();
    assert!(out.quarantined && out.item.retry_at.is_some());
    let versions = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len();

    let item = f.store.requeue(&f.ws, f.owner, &rf("task-1")).await.unwrap();
    assert!(!item.labels.iter().any(|l| l == NEEDS_HUMAN), "{:?}", item.labels);
    assert_eq!((item.failures, item.retry_at), (0, None));
    assert_eq!(item, f.get("TASK-1").await);
    assert_eq!(item.last_failure_note.as_deref(), Some("exit 1"), "the note stays for the next worker");
    let history = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(history.len(), versions + 1);
    let last = history.iter().max_by_key(|v| v.version).unwrap();
    assert_eq!(last.changes["requeued"], serde_json::json!({ "expiries": 1, "failures": 1 }), "{}", last.changes);
    assert_eq!(last.actor, "owner@example.com");
    // Nothing left to clear: the expiry count went too.
    assert_eq!(f.store.requeue(&f.ws, f.owner, &rf("TASK-1")).await.unwrap(), item);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), versions + 1);
    assert!(matches!(f.store.requeue(&f.ws, f.owner, &rf("TASK-99")).await, Err(StoreError::NotFound { .. })));
}

/// L15: status and release in one step: one version for the status change,
/// events `item.updated` then `lease.released` (ended: completed).
pub async fn l15_complete_sets_status_and_releases_in_one_step(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let after = f.store.events_after(&f.ws, 0, 1000).await.unwrap().last().unwrap().id;
    let item =
        f.store.complete(&f.ws, &rf("TASK-1"), &f.complete("w", LeaseHandle::lease_id(l.lease_id))).await.unwrap();
    assert_eq!((item.status, item.lease.as_ref()), (Status::Done, None));
    assert_eq!(item, f.get("TASK-1").await);
    let last = item.last_lease.unwrap();
    assert_eq!((last.ended, last.lease_id, last.holder.as_str()), (LeaseEnd::Completed, l.lease_id, "w"));
    let versions = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0].changes["status"]["to"], "done");
    let events = f.store.events_after(&f.ws, after, 100).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["item.updated", "lease.released"]);
    assert_eq!(events[1].data["ended"], "completed");
    // Another status, by epoch; an already-ended lease is lost.
    let l = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    let mut cancel = f.complete("w", LeaseHandle::epoch(l.epoch));
    cancel.status = Status::Cancelled;
    assert_eq!(f.store.complete(&f.ws, &rf("TASK-2"), &cancel).await.unwrap().status, Status::Cancelled);
    lost(f.store.complete(&f.ws, &rf("TASK-2"), &cancel).await.unwrap_err());
}

/// L15 bad input: an expired lease cannot be completed; nothing changes.
pub async fn l15_complete_on_an_expired_lease_is_lost(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 1)).await.unwrap().lease;
    pass(Duration::from_millis(1100)).await;
    lost(f.store.complete(&f.ws, &rf("TASK-1"), &f.complete("w", LeaseHandle::epoch(l.epoch))).await.unwrap_err());
    let item = f.get("TASK-1").await;
    assert_eq!(item.status, Status::Open);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 1);
    // A live lease of another item, named by its own handle, does not help.
    f.item("b").await;
    let b = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    lost(
        f.store.complete(&f.ws, &rf("TASK-1"), &f.complete("w", LeaseHandle::lease_id(b.lease_id))).await.unwrap_err(),
    );
    assert_eq!(f.get("TASK-1").await.status, Status::Open);
}

/// L16: `not_before` keeps an item off claim-next and the frontier until
/// then; `null` clears it; a past time does not defer.
pub async fn l16_not_before_defers_claim_next_and_frontier(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let now = f.store.now().await.unwrap();
    let later = now + chrono::Duration::hours(1);
    let new = |title: &str, at| NewItem { title: title.into(), not_before: Some(at), ..Default::default() };
    let deferred = f.store.create_item(&f.ws, f.owner, &new("later", later)).await.unwrap();
    assert_eq!(deferred.not_before, Some(later));
    f.store.create_item(&f.ws, f.owner, &new("past", now - chrono::Duration::seconds(1))).await.unwrap();
    let all = FrontierFilter::default();
    assert_eq!(refs(&f.store.frontier(&f.ws, &all, 10).await.unwrap()), ["TASK-2"]);
    let (got, _) = f.store.claim_next(&f.ws, &all, &f.claim("w", 60)).await.unwrap().unwrap();
    assert_eq!(got.item_ref.to_string(), "TASK-2");
    assert!(f.store.claim_next(&f.ws, &all, &f.claim("w", 60)).await.unwrap().is_none());
    // Clearing it is a content change with a version.
    let clear = ItemPatch { not_before: Some(None), ..Default::default() };
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &clear).await.unwrap();
    assert_eq!(item.not_before, None);
    assert!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap()[0].changes.get("not_before").is_some());
    assert_eq!(refs(&f.store.frontier(&f.ws, &all, 10).await.unwrap()), ["TASK-1"]);
    let defer = ItemPatch { not_before: Some(Some(later)), ..Default::default() };
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &defer).await.unwrap();
    assert!(f.store.frontier(&f.ws, &all, 10).await.unwrap().is_empty());
    // A claim by ref is not deferred: a person asked for that item.
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
}

/// L17: every grant has its own lease id in the workspace; renew, release
/// and fenced writes accept it, and another item's or an ended lease's id
/// is `lease_lost`.
pub async fn l17_lease_ids_name_one_grant_in_the_workspace(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let a = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let b = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    assert_eq!((a.epoch, b.epoch), (1, 1));
    assert_ne!(a.lease_id, b.lease_id);
    // A refresh keeps the handle.
    let refreshed = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
    assert!(refreshed.refreshed);
    assert_eq!(refreshed.lease.lease_id, a.lease_id);
    let by_id = |id| RenewRequest { handle: LeaseHandle::lease_id(id), ..f.renew("w", 0) };
    // Item A's handle does not renew item B, though both are at epoch 1.
    lost(f.store.renew(&f.ws, &rf("TASK-2"), &by_id(a.lease_id)).await.unwrap_err());
    assert_eq!(f.store.renew(&f.ws, &rf("TASK-2"), &by_id(b.lease_id)).await.unwrap().lease_id, b.lease_id);
    // Fenced writes.
    let fenced = |id| ItemPatch { title: Some("x".into()), lease_id: Some(id), ..Default::default() };
    lost(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(b.lease_id)).await.unwrap_err());
    assert_eq!(f.get("TASK-1").await.title, "a");
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(a.lease_id)).await.unwrap();
    let both_wrong = ItemPatch { lease_epoch: Some(1), ..fenced(b.lease_id) };
    lost(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &both_wrong).await.unwrap_err());
    lost(f.store.delete_item(&f.ws, f.owner, &rf("TASK-2"), LeaseHandle::lease_id(a.lease_id)).await.unwrap_err());
    assert_eq!(f.get("TASK-2").await.deleted_at, None);
    // Release by handle; the handle then names an ended lease.
    let release = |id| ReleaseRequest { handle: LeaseHandle::lease_id(id), ..f.release("w") };
    lost(f.store.release(&f.ws, &rf("TASK-1"), &release(b.lease_id)).await.unwrap_err());
    assert!(f.store.release(&f.ws, &rf("TASK-1"), &release(a.lease_id)).await.unwrap().released);
    lost(f.store.renew(&f.ws, &rf("TASK-1"), &by_id(a.lease_id)).await.unwrap_err());
    let again = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    assert!(again.lease_id != a.lease_id && again.lease_id != b.lease_id);
    lost(f.store.renew(&f.ws, &rf("TASK-1"), &by_id(a.lease_id)).await.unwrap_err());
    // Unique across many grants.
    let mut seen = HashSet::from([a.lease_id, b.lease_id, again.lease_id]);
    for _ in 0..5 {
        f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
        assert!(seen.insert(f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease.lease_id));
    }
}

/// L17: `refresh: false` makes even the live holder's claim `lease_held`.
pub async fn l17_claim_without_refresh_is_contention(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let once = ClaimRequest { refresh: false, ..f.claim("w", 60) };
    assert_eq!(held_by(f.store.claim(&f.ws, &rf("TASK-1"), &once).await.unwrap_err()), "w");
    assert_eq!(f.get("TASK-1").await.lease, Some(l.clone()));
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    let granted = f.store.claim(&f.ws, &rf("TASK-1"), &once).await.unwrap();
    assert!(!granted.refreshed);
    assert_eq!(granted.lease.epoch, 2);
}

/// L18: the last lease after a release, a break and an expiry, with the
/// note written under it; an expiry reads as ended at `expires_at` before
/// and after anything records it.
pub async fn l18_last_lease_shows_how_each_lease_ended(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    assert_eq!(f.get("TASK-1").await.last_lease, None);
    let mut claim = f.claim("w", 60);
    claim.session_id = Some("s1".into());
    claim.note = Some("step 1".into());
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap().lease;
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.ended, last.lease_id, last.epoch), (LeaseEnd::Released, l.lease_id, 1));
    assert_eq!((last.holder.as_str(), last.session_id.as_deref(), last.acquired_at), ("w", Some("s1"), l.acquired_at));
    assert_eq!(last.note.as_deref(), Some("step 1"));
    // A lease that wrote no note shows none, not its predecessor's.
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("v", 60)).await.unwrap();
    // While a lease is live, the previous ending still shows.
    assert_eq!(f.get("TASK-1").await.last_lease.unwrap().lease_id, l.lease_id);
    let mut force = f.release("owner-tool");
    force.force = true;
    force.reason = Some("stuck".into());
    f.store.release(&f.ws, &rf("TASK-1"), &force).await.unwrap();
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.ended, last.holder.as_str(), last.note.as_deref()), (LeaseEnd::Broken, "v", None));
    // Expiry, with no reaper: derived at once, the same once recorded.
    let e = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("x", 1)).await.unwrap().lease;
    pass(Duration::from_millis(1100)).await;
    let derived = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((derived.ended, derived.ended_at, derived.lease_id), (LeaseEnd::Expired, e.expires_at, e.lease_id));
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 1);
    assert_eq!(f.get("TASK-1").await.last_lease.unwrap(), derived);
    // A grant over an unrecorded expiry records it too.
    let y = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("y", 1)).await.unwrap().lease;
    pass(Duration::from_millis(1100)).await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("z", 60)).await.unwrap();
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.ended, last.ended_at, last.holder.as_str()), (LeaseEnd::Expired, y.expires_at, "y"));
}

/// L11: claim-next passes over excluded refs.
pub async fn l11_claim_next_skips_excluded_refs(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let skip_first = FrontierFilter { exclude: vec!["task-1".into()], ..Default::default() };
    assert_eq!(refs(&f.store.frontier(&f.ws, &skip_first, 10).await.unwrap()), ["TASK-2"]);
    let (got, _) = f.store.claim_next(&f.ws, &skip_first, &f.claim("w", 60)).await.unwrap().unwrap();
    assert_eq!(got.item_ref.to_string(), "TASK-2");
    assert!(f.store.claim_next(&f.ws, &skip_first, &f.claim("w", 60)).await.unwrap().is_none());
    // No churn: the excluded item was never claimed.
    assert_eq!(f.get("TASK-1").await.last_lease, None);
    assert_eq!(events_of(&f, pad_core::EventKind::LeaseClaimed).await.len(), 1);
    let bad = FrontierFilter { exclude: vec!["nope".into()], ..Default::default() };
    let e = f.store.frontier(&f.ws, &bad, 10).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "exclude[0]"), "{e:?}");
}

/// L11: with `skip_session`, claim-next and frontier pass over items whose
/// last lease had that session id, however it ended (released, expired):
/// a drain's finished work, without a list that grows with it. Other
/// sessions still see them. `exclude` takes up to 500 refs, not one more.
pub async fn l11_claim_next_skips_a_sessions_own_work(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["a", "b", "c"] {
        f.item(t).await;
    }
    let mine = FrontierFilter { skip_session: Some("drain-1".into()), ..Default::default() };
    let req = ClaimRequest { session_id: Some("drain-1".into()), ..f.claim("w", 60) };
    let (a, _) = f.store.claim_next(&f.ws, &mine, &req).await.unwrap().unwrap();
    assert_eq!(a.item_ref.to_string(), "TASK-1");
    f.store.release(&f.ws, &a.item_ref, &f.release("w")).await.unwrap();
    let short = ClaimRequest { ttl_seconds: Some(1), ..req.clone() };
    let (b, _) = f.store.claim_next(&f.ws, &mine, &short).await.unwrap().unwrap();
    assert_eq!(b.item_ref.to_string(), "TASK-2", "the released item is this session's done work");
    // TASK-2's lease runs out unrecorded: still this session's.
    pass(Duration::from_millis(1100)).await;
    assert_eq!(refs(&f.store.frontier(&f.ws, &mine, 10).await.unwrap()), ["TASK-3"]);
    let (c, _) = f.store.claim_next(&f.ws, &mine, &req).await.unwrap().unwrap();
    assert_eq!(c.item_ref.to_string(), "TASK-3");
    f.store.release(&f.ws, &c.item_ref, &f.release("w")).await.unwrap();
    assert!(f.store.claim_next(&f.ws, &mine, &req).await.unwrap().is_none());
    let other = FrontierFilter { skip_session: Some("drain-2".into()), ..Default::default() };
    assert_eq!(refs(&f.store.frontier(&f.ws, &other, 10).await.unwrap()), ["TASK-1", "TASK-2", "TASK-3"]);
    // One limit for exclude: 500 is taken, 501 is refused and names the field.
    let refs_of = |n: usize| (1..=n).map(|i| format!("TASK-{}", i + 10)).collect::<Vec<_>>();
    let at_limit = FrontierFilter { exclude: refs_of(pad_core::EXCLUDE_MAX), ..Default::default() };
    assert_eq!(f.store.frontier(&f.ws, &at_limit, 10).await.unwrap().len(), 3);
    let past = FrontierFilter { exclude: refs_of(pad_core::EXCLUDE_MAX + 1), ..Default::default() };
    let e = f.store.claim_next(&f.ws, &past, &req).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "exclude" && v.message.contains("500")), "{e:?}");
    let bad = FrontierFilter { skip_session: Some(String::new()), ..Default::default() };
    assert!(
        matches!(f.store.frontier(&f.ws, &bad, 10).await, Err(StoreError::Validation(v)) if v.field == "skip_session")
    );
}

/// L14 (docs/leases.md, "News that is true"): a success — a release that
/// says so, or a complete — clears the failure's handoff note and backoff,
/// and records when; the failure count and last failure note stay as
/// history, older than the success.
pub async fn l14_a_success_clears_the_failure_handoff(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["released after success", "completed after success"] {
        f.item(t).await;
    }
    for (r, complete) in [("TASK-1", false), ("TASK-2", true)] {
        let l = f.store.claim(&f.ws, &rf(r), &f.claim("w", 60)).await.unwrap().lease;
        f.store.fail(&f.ws, &rf(r), &f.fail("w", LeaseHandle::epoch(l.epoch), Some("`make` exited 2"))).await.unwrap();
        // A claim by ref ignores the backoff; it is told of the failure.
        let again = f.store.claim(&f.ws, &rf(r), &f.claim("w", 60)).await.unwrap();
        assert_eq!(again.previous_note.as_deref(), Some("`make` exited 2"));
        pass(Duration::from_millis(5)).await;
        if complete {
            f.store.complete(&f.ws, &rf(r), &f.complete("w", LeaseHandle::epoch(again.lease.epoch))).await.unwrap();
            f.store
                .update_item(
                    &f.ws,
                    f.owner,
                    &rf(r),
                    &pad_core::ItemPatch { status: Some(Status::Open), ..Default::default() },
                )
                .await
                .unwrap();
        } else {
            let ok =
                ReleaseRequest { succeeded: true, handle: LeaseHandle::epoch(again.lease.epoch), ..f.release("w") };
            assert!(f.store.release(&f.ws, &rf(r), &ok).await.unwrap().released);
        }
        let item = f.get(r).await;
        let (failed, succeeded) = (item.last_failure_at.unwrap(), item.last_success_at.expect("a success is recorded"));
        assert!(succeeded > failed, "{r}: the success is the news");
        assert_eq!((item.failures, item.retry_at), (1, None), "{r}: the count stays, the backoff goes");
        assert_eq!(item.last_failure_note.as_deref(), Some("`make` exited 2"), "{r}: history kept");
        let next = f.store.claim(&f.ws, &rf(r), &f.claim("v", 60)).await.unwrap();
        assert_eq!(next.previous_note, None, "{r}: no stale handoff after a success");
    }
    // A plain release (not a success) keeps the handoff.
    f.item("plain").await;
    let l = f.store.claim(&f.ws, &rf("TASK-3"), &f.claim("w", 60)).await.unwrap().lease;
    f.store.fail(&f.ws, &rf("TASK-3"), &f.fail("w", LeaseHandle::epoch(l.epoch), Some("flaky"))).await.unwrap();
    f.store.claim(&f.ws, &rf("TASK-3"), &f.claim("w", 60)).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-3"), &f.release("w")).await.unwrap();
    let next = f.store.claim(&f.ws, &rf("TASK-3"), &f.claim("v", 60)).await.unwrap();
    assert_eq!(next.previous_note.as_deref(), Some("flaky"));
    assert_eq!(f.get("TASK-3").await.last_success_at, None);
}

/// L19: a lease claimed with a max hold cannot be renewed past
/// `acquired_at + max_hold`: the renewal that reaches the cap answers with
/// the capped expiry (`hold_until`), and after it the lease is gone. A
/// refresh (L3) is capped the same way. The workspace's cap is the default.
pub async fn l19_renewals_cannot_extend_a_lease_past_its_max_hold(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("stuck in a loop").await;
    let capped = ClaimRequest { max_hold_seconds: Some(3), ..f.claim("w", 2) };
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &capped).await.unwrap().lease;
    let cap = l.acquired_at + chrono::Duration::seconds(3);
    assert_eq!((l.hold_until, l.expires_at), (Some(cap), l.acquired_at + chrono::Duration::seconds(2)));
    assert!(!l.is_capped());
    pass(Duration::from_millis(1500)).await;
    let renewed = f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("w", l.epoch)).await.unwrap();
    assert_eq!(renewed.expires_at, cap, "the renewal stops at the cap, not a TTL on");
    assert!(renewed.is_capped());
    let refreshed = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 2)).await.unwrap();
    assert!(refreshed.refreshed);
    assert_eq!(refreshed.lease.expires_at, cap, "a refresh is capped too");
    assert_eq!(f.get("TASK-1").await.lease.unwrap().hold_until, Some(cap), "the item shows the cap");
    pass(Duration::from_millis(1600)).await;
    let late = f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("w", l.epoch)).await;
    assert!(matches!(late, Err(StoreError::LeaseLost { .. })), "{late:?}");
    // The workspace's cap applies to a claim that names none.
    use pad_core::settings::SettingsPatch;
    let patch = SettingsPatch { default_ttl_seconds: Some(60), max_hold_seconds: Some(120), ..Default::default() };
    let ws = f.store.update_settings(&f.ws, &patch).await.unwrap();
    assert_eq!(ws.settings.max_hold_seconds, Some(120));
    f.item("second").await;
    let l = f.store.claim(&ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    assert_eq!(l.hold_until, Some(l.acquired_at + chrono::Duration::seconds(120)));
    // Without a cap anywhere, none.
    let off = SettingsPatch { max_hold_seconds: Some(0), ..Default::default() };
    let ws = f.store.update_settings(&ws, &off).await.unwrap();
    f.item("third").await;
    let l = f.store.claim(&ws, &rf("TASK-3"), &f.claim("w", 60)).await.unwrap().lease;
    assert_eq!(l.hold_until, None);
}

/// L19: a lease that reaches its cap ends as an expiry does: the next
/// claim records `lease.expired` naming the cap, and it counts toward the
/// expiry quarantine (L13).
pub async fn l19_a_capped_lease_ends_as_an_expiry_that_names_the_cap(store: Arc<dyn Store>) {
    use pad_core::settings::SettingsPatch;
    let f = Fixture::new(store).await;
    f.item("loops").await;
    let once = SettingsPatch { quarantine_after_expiries: Some(1), ..Default::default() };
    let ws = f.store.update_settings(&f.ws, &once).await.unwrap();
    let capped = ClaimRequest { max_hold_seconds: Some(1), ..f.claim("w", 1) };
    let l = f.store.claim(&ws, &rf("TASK-1"), &capped).await.unwrap().lease;
    assert!(l.is_capped(), "a grant whose TTL reaches the cap is capped from the start");
    pass(Duration::from_millis(1100)).await;
    f.store.claim(&ws, &rf("TASK-1"), &f.claim("other", 60)).await.unwrap();
    let expired = events_of(&f, pad_core::EventKind::LeaseExpired).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].data["cause"], "max_hold", "{}", expired[0].data);
    let item = f.get("TASK-1").await;
    assert!(item.labels.iter().any(|l| l == NEEDS_HUMAN), "counted toward quarantine: {:?}", item.labels);
    assert_eq!(item.last_lease.unwrap().ended, LeaseEnd::Expired);
}

/// L19: a max hold below the claim's TTL, negative, or above the
/// workspace's is refused naming the field, and nothing is written; so are
/// workspace caps below the default TTL or above 30 days.
pub async fn l19_bad_max_hold_is_refused_and_changes_nothing(store: Arc<dyn Store>) {
    use pad_core::settings::SettingsPatch;
    let f = Fixture::new(store).await;
    f.item("one").await;
    for bad in [Some(30), Some(-5), Some(0)] {
        let req = ClaimRequest { max_hold_seconds: bad, ..f.claim("w", 60) };
        let e = f.store.claim(&f.ws, &rf("TASK-1"), &req).await.unwrap_err();
        assert!(matches!(&e, StoreError::Validation(v) if v.field == "max_hold_seconds"), "{bad:?}: {e:?}");
        let e = f.store.claim_next(&f.ws, &FrontierFilter::default(), &req).await.unwrap_err();
        assert!(matches!(&e, StoreError::Validation(v) if v.field == "max_hold_seconds"), "{bad:?}: {e:?}");
    }
    assert_eq!(f.get("TASK-1").await.lease, None, "nothing was granted");
    let patch = SettingsPatch { max_hold_seconds: Some(3600), ..Default::default() };
    let ws = f.store.update_settings(&f.ws, &patch).await.unwrap();
    let above = ClaimRequest { max_hold_seconds: Some(7200), ..f.claim("w", 60) };
    let e = f.store.claim(&ws, &rf("TASK-1"), &above).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Validation(v) if v.field == "max_hold_seconds" && v.message.contains("workspace")),
        "{e:?}"
    );
    for bad in [60, 31 * 86_400] {
        let patch = SettingsPatch { max_hold_seconds: Some(bad), ..Default::default() };
        let e = f.store.update_settings(&ws, &patch).await.unwrap_err();
        assert!(matches!(&e, StoreError::Validation(v) if v.field == "max_hold_seconds"), "{bad}: {e:?}");
    }
    let (after, _) = f.store.membership(f.owner, &ws.slug).await.unwrap();
    assert_eq!(after.settings.max_hold_seconds, Some(3600), "refused patches changed nothing");
    assert_eq!(f.get("TASK-1").await.lease, None);
}

/// `parent` on list, `blocked_by_open`, and atomic blocker edits.
pub async fn items_list_by_parent_and_open_blockers(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("epic").await;
    for title in ["child 1", "child 2"] {
        let new = NewItem { title: title.into(), parent: Some("TASK-1".into()), ..Default::default() };
        f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    }
    f.item("loose").await;
    let children = ItemFilter { parent: Some("TASK-1".parse().unwrap()), ..Default::default() };
    let page = f.store.list_items(&f.ws, &children, 50, None).await.unwrap();
    assert_eq!(refs(&page.items), ["TASK-2", "TASK-3"]);
    let add = |refs: &[&str]| ItemPatch {
        add_blocked_by: refs.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    };
    f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["TASK-2"])).await.unwrap();
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["task-3", "TASK-2"])).await.unwrap();
    assert_eq!(item.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-2", "TASK-3"]);
    assert_eq!(item.blocked_by_open, item.blocked_by);
    let l = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    f.store.complete(&f.ws, &rf("TASK-2"), &f.complete("w", LeaseHandle::epoch(l.epoch))).await.unwrap();
    let item = f.get("TASK-4").await;
    assert_eq!(item.blocked_by_open.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-3"]);
    let remove = ItemPatch { remove_blocked_by: vec!["TASK-3".into()], ..Default::default() };
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &remove).await.unwrap();
    assert_eq!(item.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-2"]);
    assert!(item.blocked_by_open.is_empty());
    let e = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["TASK-4"])).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "add_blocked_by"), "{e:?}");
    let e = f.store.update_item(&f.ws, f.owner, &rf("TASK-4"), &add(&["TASK-99"])).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(_)), "{e:?}");
    assert_eq!(f.get("TASK-4").await.blocked_by.len(), 1);
}

/// `events?ref=&type=`.
pub async fn events_filter_by_ref_and_type(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
    f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-2"), &f.release("w")).await.unwrap();
    let r = |s: &str| Some(s.parse().unwrap());
    let only = |item_ref, kinds| pad_core::EventFilter { item_ref, kinds };
    let f = &f;
    let kinds = |filter| async move {
        let events = f.store.events_where(&f.ws, 0, 100, &filter).await.unwrap();
        events.iter().map(|e| format!("{} {}", e.item_ref.clone().unwrap_or_default(), e.kind)).collect::<Vec<_>>()
    };
    assert_eq!(
        kinds(only(r("task-2"), vec![])).await,
        ["TASK-2 item.created", "TASK-2 lease.claimed", "TASK-2 lease.released"]
    );
    use pad_core::EventKind::{LeaseClaimed, LeaseReleased};
    assert_eq!(kinds(only(None, vec![LeaseClaimed])).await, ["TASK-1 lease.claimed", "TASK-2 lease.claimed"]);
    assert_eq!(
        kinds(only(r("TASK-2"), vec![LeaseClaimed, LeaseReleased])).await,
        ["TASK-2 lease.claimed", "TASK-2 lease.released"]
    );
    assert!(kinds(only(r("TASK-9"), vec![])).await.is_empty());
}

/// docs/api.md, "Workspace settings": a patch changes only what it names, is
/// checked against the stored settings, writes nothing when refused, and the
/// next claim obeys the new TTL bounds (L8).
pub async fn workspace_settings_change_whole_or_not_at_all(store: Arc<dyn Store>) {
    use pad_core::settings::SettingsPatch;
    let f = Fixture::new(store).await;
    let patch = SettingsPatch {
        default_ttl_seconds: Some(1800),
        max_ttl_seconds: Some(3600),
        quarantine_after_expiries: Some(5),
        quarantine_after_failures: Some(0),
        max_hold_seconds: None,
    };
    let ws = f.store.update_settings(&f.ws, &patch).await.unwrap();
    let s = &ws.settings;
    assert_eq!(
        (s.default_ttl_seconds, s.max_ttl_seconds, s.quarantine_after_expiries, s.quarantine_after_failures),
        (1800, 3600, 5, 0)
    );
    assert_eq!(s.retry_backoff_base_seconds, f.ws.settings.retry_backoff_base_seconds, "unnamed settings stay");
    let (stored, _) = f.store.membership(f.owner, "acme").await.unwrap();
    assert_eq!(stored.settings, ws.settings);

    // Checked against the stored settings, not the caller's stale copy: the
    // maximum is now 1h, so a 2h default is refused and nothing changes.
    let bad =
        SettingsPatch { default_ttl_seconds: Some(7200), quarantine_after_expiries: Some(9), ..Default::default() };
    match f.store.update_settings(&f.ws, &bad).await {
        Err(StoreError::Validation(e)) => {
            assert_eq!(e.field, "default_ttl_seconds");
            assert!(e.to_string().contains("maximum (1h); got 2h"), "{e}");
        }
        other => panic!("expected validation_failed, got {other:?}"),
    }
    let lower_max = SettingsPatch { max_ttl_seconds: Some(600), ..Default::default() };
    assert!(
        matches!(f.store.update_settings(&ws, &lower_max).await, Err(StoreError::Validation(e)) if e.field == "max_ttl_seconds")
    );
    assert!(matches!(f.store.update_settings(&ws, &SettingsPatch::default()).await, Err(StoreError::Validation(_))));
    assert_eq!(f.store.membership(f.owner, "acme").await.unwrap().0.settings, ws.settings);

    // Claims follow the new bounds.
    f.item("one").await;
    assert!(matches!(
        f.store.claim(&ws, &rf("TASK-1"), &f.claim("runner-a", 3601)).await,
        Err(StoreError::InvalidTtl(_))
    ));
    let mut req = f.claim("runner-a", 1);
    req.ttl_seconds = None;
    assert_eq!(f.store.claim(&ws, &rf("TASK-1"), &req).await.unwrap().lease.ttl_seconds, 1800);
}

/// docs/webhooks.md: an event queues one outbox row per matching subscription;
/// only a subscription's oldest pending event is claimable, once; a failed
/// attempt waits for its backoff, a 2xx ends the row; every attempt is logged.
pub async fn webhooks_outbox_is_claimed_in_order_and_retried(store: Arc<dyn Store>) {
    use pad_core::webhook::{CreateWebhook, DeliveryOutcome, WEBHOOKS_PER_WORKSPACE_MAX};
    use pad_store::AttemptResult;
    let f = Fixture::new(store).await;
    let new = |url: &str, events| CreateWebhook { url: url.into(), events };
    let bad = f.store.create_webhook(&f.ws, f.owner, &new("ftp://x/y", vec![]), "s").await.unwrap_err();
    assert!(matches!(&bad, StoreError::Validation(v) if v.field == "url"), "{bad:?}");
    let hook = f
        .store
        .create_webhook(&f.ws, f.owner, &new("http://127.0.0.1:9/a", vec![pad_core::EventKind::ItemCreated]), "sekrit")
        .await
        .unwrap();
    assert_eq!(f.store.webhook_target(&f.ws, hook.id).await.unwrap().secret, "sekrit");
    f.item("one").await;
    f.item("two").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap(); // not subscribed
    assert_eq!(f.store.list_webhooks(&f.ws).await.unwrap()[0].pending, 2);

    let due = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!(due.len(), 1, "only the oldest pending event of a subscription");
    assert_eq!((due[0].event.item_ref.as_deref(), due[0].attempts), (Some("TASK-1"), 0));
    assert_eq!(due[0].secret, "sekrit");
    assert!(f.store.claim_webhook_deliveries(10, 30).await.unwrap().is_empty(), "claimed once");

    let failed = AttemptResult { status_code: Some(500), error: Some("HTTP 500".into()), duration_ms: 3 };
    f.store.finish_webhook_delivery(&due[0], &failed).await.unwrap();
    assert!(f.store.claim_webhook_deliveries(10, 30).await.unwrap().is_empty(), "waits for its backoff");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!((again.len(), again[0].event.id, again[0].attempts), (1, due[0].event.id, 1));
    let ok = AttemptResult { status_code: Some(204), error: None, duration_ms: 2 };
    f.store.finish_webhook_delivery(&again[0], &ok).await.unwrap();
    // A stale claim (the first) only logs: it does not end the next row.
    f.store.finish_webhook_delivery(&due[0], &ok).await.unwrap();
    let next = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].event.item_ref.as_deref(), Some("TASK-2"));
    f.store.finish_webhook_delivery(&next[0], &ok).await.unwrap();
    assert_eq!(f.store.list_webhooks(&f.ws).await.unwrap()[0].pending, 0);

    let log = f.store.webhook_deliveries(&f.ws, hook.id, 10).await.unwrap();
    let seen: Vec<_> = log.iter().map(|d| (d.attempt, d.status_code, d.outcome)).collect();
    use DeliveryOutcome::{Delivered, Retrying};
    assert_eq!(
        seen,
        [(1, Some(204), Delivered), (1, Some(204), Delivered), (2, Some(204), Delivered), (1, Some(500), Retrying)]
    );

    for i in 1..WEBHOOKS_PER_WORKSPACE_MAX {
        f.store.create_webhook(&f.ws, f.owner, &new(&format!("http://h/{i}"), vec![]), "s").await.unwrap();
    }
    let full = f.store.create_webhook(&f.ws, f.owner, &new("http://h/last", vec![]), "s").await.unwrap_err();
    assert!(matches!(&full, StoreError::Validation(v) if v.field == "webhooks"), "{full:?}");
    f.store.delete_webhook(&f.ws, hook.id).await.unwrap();
    assert!(matches!(f.store.delete_webhook(&f.ws, hook.id).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(f.store.webhook_deliveries(&f.ws, hook.id, 10).await, Err(StoreError::NotFound { .. })));
}

/// An import of `n` tasks `T-1`…, each blocked by the one before, the last
/// also a child of the first, with a new kind for the first.
fn import_request(key: &str, n: usize) -> pad_core::api::ImportRequest {
    use pad_core::api::{CreateKind, ImportItem, ImportRequest};
    let items = (1..=n)
        .map(|i| ImportItem {
            file_ref: format!("T-{i}"),
            item: NewItem {
                title: format!("imported {i}"),
                kind: Some(if i == 1 { "spike" } else { "task" }.into()),
                ..Default::default()
            },
            status: if i == 2 { Status::Done } else { Status::Open },
            parent: (i == n && n > 1).then(|| "T-1".to_string()),
            blocked_by: if i > 1 { vec![format!("T-{}", i - 1)] } else { vec![] },
            comments: if i == 1 { vec!["from the old tracker".into()] } else { vec![] },
            deleted: i == 3,
        })
        .collect();
    ImportRequest {
        import_key: key.into(),
        kinds: vec![CreateKind { name: "spike".into(), prefix: "SPK".into() }],
        items,
    }
}

async fn all_items(f: &Fixture) -> Vec<Item> {
    let filter = ItemFilter { include_deleted: true, ..Default::default() };
    f.store.list_items(&f.ws, &filter, 500, None).await.unwrap().items
}

/// docs/api.md, "Import": an item that fails half-way (here a blocker
/// cycle, found only when the links are written) undoes the whole import:
/// no item, kind, comment or event stays, no number is used up, and the key
/// is not taken.
pub async fn import_is_all_or_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let mut req = import_request("k1", 6);
    req.items[1].blocked_by = vec!["T-5".into()]; // T-2 → T-5 → T-4 → T-3 → T-2
    let events_before = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    let err = f.store.import(&f.ws, f.owner, &req).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field.starts_with("items[")), "{err:?}");
    assert!(all_items(&f).await.is_empty(), "a failed import left items behind");
    assert!(!f.store.list_kinds(&f.ws).await.unwrap().iter().any(|k| k.name == "spike"), "the kind stayed");
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events_before, "events stayed");
    // A bad request is refused before the store is touched, naming the place.
    let mut bad = import_request("k1", 3);
    bad.items[2].item.title = String::new();
    let err = f.store.import(&f.ws, f.owner, &bad).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field == "items[2].item.title"), "{err:?}");
    // An assignee who is not a member fails at the write, naming the item.
    let mut stranger = import_request("k1", 3);
    stranger.items[2].item.assignee = Some("nobody@example.com".into());
    let err = f.store.import(&f.ws, f.owner, &stranger).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field == "items[2].item.assignee"), "{err:?}");
    assert!(all_items(&f).await.is_empty());

    // The same key, fixed: imported whole, with the numbers the failed
    // attempts never used.
    let done = f.store.import(&f.ws, f.owner, &import_request("k1", 6)).await.unwrap();
    assert!(!done.replayed);
    let refs: Vec<(&str, &str)> = done.refs.iter().map(|r| (r.from.as_str(), r.to.as_str())).collect();
    assert_eq!(
        refs,
        [
            ("T-1", "SPK-1"),
            ("T-2", "TASK-1"),
            ("T-3", "TASK-2"),
            ("T-4", "TASK-3"),
            ("T-5", "TASK-4"),
            ("T-6", "TASK-5")
        ]
    );
    let items = all_items(&f).await;
    assert_eq!(items.len(), 6);
    let get = |r: &str| {
        let (store, ws, r) = (f.store.clone(), f.ws.clone(), rf(r));
        async move { store.get_item(&ws, &r).await }
    };
    let last = get("TASK-5").await.unwrap();
    assert_eq!(last.parent.map(|p| p.to_string()).as_deref(), Some("SPK-1"));
    assert_eq!(last.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-4"]);
    assert_eq!(get("TASK-1").await.unwrap().status, Status::Done);
    assert!(get("TASK-2").await.unwrap().deleted_at.is_some());
    let comments = f.store.list_comments(&f.ws, &rf("SPK-1")).await.unwrap();
    assert_eq!(comments.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(), ["from the old tracker"]);
}

/// docs/api.md, "Import": a key the workspace has imported before answers
/// the first import's result and writes nothing; another workspace's key
/// space is its own.
pub async fn import_with_a_seen_key_writes_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let first = f.store.import(&f.ws, f.owner, &import_request("sha256:abc", 4)).await.unwrap();
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    let again = f.store.import(&f.ws, f.editor, &import_request("sha256:abc", 4)).await.unwrap();
    assert!(again.replayed);
    assert_eq!((again.refs.clone(), again.imported, again.created_at), (first.refs.clone(), 4, first.created_at));
    assert_eq!(all_items(&f).await.len(), 4, "a replay created items");
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events, "a replay wrote events");
    // Concurrent imports of one key: one writes, the others replay it.
    let runs = (0..4).map(|_| {
        let (store, ws, owner) = (f.store.clone(), f.ws.clone(), f.owner);
        tokio::spawn(async move { store.import(&ws, owner, &import_request("sha256:def", 4)).await.unwrap() })
    });
    let results: Vec<_> = futures_join(runs).await;
    assert_eq!(results.iter().filter(|r| !r.replayed).count(), 1, "{results:?}");
    assert_eq!(all_items(&f).await.len(), 8);
    // The same key in another workspace is another import.
    let other = f.store.create_workspace("other", "Other", f.owner).await.unwrap();
    let there = f.store.import(&other, f.owner, &import_request("sha256:abc", 4)).await.unwrap();
    assert!(!there.replayed);
}

async fn futures_join<T: Send + 'static>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.unwrap());
    }
    out
}

/// docs/webhooks.md, "Paused subscriptions": an event given up pauses its
/// subscription: its queue stays (and is not claimed), other subscriptions
/// go on, the list shows it paused, and resume makes its queue due again.
pub async fn webhooks_a_given_up_event_pauses_its_subscription_until_resumed(store: Arc<dyn Store>) {
    use pad_core::webhook::{CreateWebhook, DeliveryOutcome, WEBHOOK_MAX_ATTEMPTS};
    use pad_store::AttemptResult;
    let f = Fixture::new(store).await;
    let new = |url: &str| CreateWebhook { url: url.into(), events: vec![pad_core::EventKind::ItemCreated] };
    let dead = f.store.create_webhook(&f.ws, f.owner, &new("http://127.0.0.1:9/dead"), "s").await.unwrap();
    let live = f.store.create_webhook(&f.ws, f.owner, &new("http://127.0.0.1:9/live"), "s").await.unwrap();
    assert!(!dead.paused && dead.paused_at.is_none() && dead.dropped == 0, "{dead:?}");
    f.item("one").await;
    f.item("two").await;
    let due = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!(due.len(), 2, "one head per subscription");
    let ok = AttemptResult { status_code: Some(204), error: None, duration_ms: 1 };
    let refused = AttemptResult { status_code: None, error: Some("could not connect".into()), duration_ms: 1 };
    for d in &due {
        if d.webhook_id == dead.id {
            // Its last attempt.
            let last = pad_store::DueDelivery { attempts: WEBHOOK_MAX_ATTEMPTS - 1, ..d.clone() };
            f.store.finish_webhook_delivery(&last, &refused).await.unwrap();
        } else {
            f.store.finish_webhook_delivery(d, &ok).await.unwrap();
        }
    }
    let listed = f.store.list_webhooks(&f.ws).await.unwrap();
    let shown = |id: i64| listed.iter().find(|w| w.id == id).unwrap().clone();
    assert!(shown(dead.id).paused && shown(dead.id).paused_at.is_some(), "{listed:?}");
    assert_eq!(shown(dead.id).pending, 1, "the next event stays queued");
    assert!(!shown(live.id).paused, "{listed:?}");
    let log = f.store.webhook_deliveries(&f.ws, dead.id, 1).await.unwrap();
    assert_eq!((log[0].attempt, log[0].outcome), (WEBHOOK_MAX_ATTEMPTS, DeliveryOutcome::Failed));

    let next = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!(next.iter().map(|d| d.webhook_id).collect::<Vec<_>>(), [live.id], "a paused queue is not claimed");
    f.store.finish_webhook_delivery(&next[0], &ok).await.unwrap();
    assert!(f.store.claim_webhook_deliveries(10, 30).await.unwrap().is_empty());

    let resumed = f.store.resume_webhook(&f.ws, dead.id).await.unwrap();
    assert!(!resumed.paused && resumed.paused_at.is_none() && resumed.pending == 1, "{resumed:?}");
    let again = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].webhook_id, again[0].event.item_ref.as_deref(), again[0].attempts),
        (dead.id, Some("TASK-2"), 0)
    );
    // Resuming an active one changes nothing; an unknown one is not found.
    assert!(!f.store.resume_webhook(&f.ws, live.id).await.unwrap().paused);
    let missing = f.store.resume_webhook(&f.ws, dead.id + 100).await.unwrap_err();
    assert!(matches!(missing, StoreError::NotFound { .. }), "{missing:?}");
}

/// docs/webhooks.md, "A full queue": past the cap a subscription's oldest
/// queued deliveries are dropped, never the one being sent, and counted.
pub async fn webhooks_a_full_queue_drops_its_oldest_and_counts_them(store: Arc<dyn Store>) {
    use pad_core::webhook::CreateWebhook;
    use pad_store::AttemptResult;
    let f = Fixture::new(store).await;
    let new = CreateWebhook { url: "http://127.0.0.1:9/full".into(), events: vec![pad_core::EventKind::ItemCreated] };
    let hook = f.store.create_webhook(&f.ws, f.owner, &new, "s").await.unwrap();
    for i in 1..=5 {
        f.item(&format!("item {i}")).await;
    }
    assert_eq!(f.store.trim_webhook_queues(5).await.unwrap(), 0, "at the cap, nothing goes");
    let head = f.store.claim_webhook_deliveries(10, 30).await.unwrap().remove(0);
    assert_eq!(head.event.item_ref.as_deref(), Some("TASK-1"));
    // Keep 3: TASK-1 is being sent, so only TASK-2 goes.
    assert_eq!(f.store.trim_webhook_queues(3).await.unwrap(), 1);
    let shown = &f.store.list_webhooks(&f.ws).await.unwrap()[0];
    assert_eq!((shown.pending, shown.dropped), (4, 1), "{shown:?}");
    let ok = AttemptResult { status_code: Some(204), error: None, duration_ms: 1 };
    f.store.finish_webhook_delivery(&head, &ok).await.unwrap();
    assert_eq!(f.store.trim_webhook_queues(3).await.unwrap(), 0);
    f.item("item 6").await;
    assert_eq!(f.store.trim_webhook_queues(3).await.unwrap(), 1, "TASK-3 goes");
    let shown = &f.store.list_webhooks(&f.ws).await.unwrap()[0];
    assert_eq!((shown.id, shown.pending, shown.dropped), (hook.id, 3, 2), "{shown:?}");
    let next = f.store.claim_webhook_deliveries(10, 30).await.unwrap();
    assert_eq!(next[0].event.item_ref.as_deref(), Some("TASK-4"), "the oldest kept is next");
}
