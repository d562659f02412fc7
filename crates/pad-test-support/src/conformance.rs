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
use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::LeaseHandle;
use pad_core::{Item, ItemRef, NewItem, Role, Workspace};

use crate::TestClock;

// The rule groups; each test is named in `conformance_suite!` below and
// reached as `conformance::NAME`, so the groups are re-exported whole.
mod accounts;
mod batch;
mod events;
mod failures;
mod frontier;
mod import;
mod items;
mod lease_ends;
mod leases;
mod webhooks;
pub use accounts::*;
pub use batch::*;
pub use events::*;
pub use failures::*;
pub use frontier::*;
pub use import::*;
pub use items::*;
pub use lease_ends::*;
pub use leases::*;
pub use webhooks::*;

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
            l6_release_says_how_long_the_lease_was_held,
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
            l12_claim_next_many_hands_over_notes_over_free_and_expired_items,
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
            l14_a_quarantined_item_with_fifty_labels_stays_editable,
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
            lowering_a_role_revokes_the_tokens_it_minted_for_others,
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
            import_past_its_deadline_commits_nothing,
            import_refuses_link_cycles_naming_the_item,
            webhooks_a_given_up_event_pauses_its_subscription_until_resumed,
            webhooks_a_full_queue_drops_its_oldest_and_counts_them,
            webhooks_a_workspace_counts_against_the_account_charged_for_its_creation
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

// Helpers the rule groups share.

/// The holder a `lease_held` refusal names.
pub(crate) fn held_by(e: StoreError) -> String {
    match e {
        StoreError::LeaseHeld { lease, .. } => lease.holder,
        other => panic!("expected lease_held, got {other:?}"),
    }
}

pub(crate) fn refs(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| i.item_ref.to_string()).collect()
}

pub(crate) async fn event_types(f: &Fixture) -> Vec<String> {
    f.store.events_after(&f.ws, 0, 1000).await.unwrap().into_iter().map(|e| e.kind.to_string()).collect()
}

pub(crate) fn lost(e: StoreError) {
    assert!(matches!(e, StoreError::LeaseLost { .. }), "expected lease_lost, got {e:?}");
}

pub(crate) async fn events_of(f: &Fixture, kind: pad_core::EventKind) -> Vec<pad_core::Event> {
    let filter = pad_core::EventFilter { item_ref: None, kinds: vec![kind] };
    f.store.events_where(&f.ws, 0, 1000, &filter).await.unwrap()
}
