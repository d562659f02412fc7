//! How a lease ends and what it leaves behind (docs/leases.md L15, L18,
//! L19): complete in one step, the last lease of an item, the max hold cap,
//! and an expiry recorded exactly once.

use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::{LeaseEnd, LeaseHandle};
use pad_core::{FrontierFilter, NEEDS_HUMAN, Status};
use pad_store::{ClaimRequest, Store, StoreError};

use super::{Fixture, event_types, events_of, lost, pass, rf};

pub async fn expiry_is_observed_exactly_once(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    // 3 s: the two reads below must see the lease live, also on a busy machine.
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 3)).await.unwrap();
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 0, "a live lease is not expired");
    assert_eq!(f.store.live_leases().await.unwrap(), [(f.ws.slug.clone(), 1)]);
    pass(Duration::from_millis(3100)).await;
    assert!(f.store.live_leases().await.unwrap().is_empty(), "an expired lease is not live, recorded or not");
    let observed = f.store.observe_expiries().await.unwrap();
    assert_eq!(observed.len(), 1);
    assert_eq!((observed[0].workspace.as_str(), observed[0].quarantined), (f.ws.slug.as_str(), false));
    assert_eq!(observed[0].held, chrono::Duration::seconds(3));
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 0);
    assert!(!f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap().released());
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("v", 60)).await.unwrap().lease;
    assert_eq!(l.epoch, 2);
    let types = event_types(&f).await;
    assert_eq!(types.iter().filter(|t| *t == "lease.expired").count(), 1, "{types:?}");
    assert_eq!(types.last().map(String::as_str), Some("lease.claimed"));
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

/// L19: a lease claimed with a max hold cannot be renewed past
/// `acquired_at + max_hold`: the renewal that reaches the cap answers with
/// the capped expiry (`hold_until`), and after it the lease is gone. A
/// refresh (L3) is capped the same way. The workspace's cap is the default.
pub async fn l19_renewals_cannot_extend_a_lease_past_its_max_hold(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("stuck in a loop").await;
    // Each step has 1.5 s to spare before the lease it needs ends: on
    // PostgreSQL `pass` is real time, and a commit on a busy machine is slow.
    let capped = ClaimRequest { max_hold_seconds: Some(6), ..f.claim("w", 4) };
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &capped).await.unwrap().lease;
    let cap = l.acquired_at + chrono::Duration::seconds(6);
    assert_eq!((l.hold_until, l.expires_at), (Some(cap), l.acquired_at + chrono::Duration::seconds(4)));
    assert!(!l.is_capped());
    pass(Duration::from_millis(2500)).await;
    let renewed = f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("w", l.epoch)).await.unwrap();
    assert_eq!(renewed.expires_at, cap, "the renewal stops at the cap, not a TTL on");
    assert!(renewed.is_capped());
    let refreshed = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 4)).await.unwrap();
    assert!(refreshed.refreshed);
    assert_eq!(refreshed.lease.expires_at, cap, "a refresh is capped too");
    assert_eq!(f.get("TASK-1").await.lease.unwrap().hold_until, Some(cap), "the item shows the cap");
    pass(Duration::from_millis(3600)).await;
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
