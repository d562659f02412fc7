//! Unit and property tests of the lease rules.

use super::*;
use chrono::TimeZone;
use proptest::prelude::*;

fn t(secs: i64) -> Timestamp {
    chrono::Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
}
fn ttl(s: i64) -> Ttl {
    Ttl::resolve(Some(s), TTL_DEFAULT_SECONDS, TTL_MAX_SECONDS).unwrap()
}
const A: Claimant<'static> = Claimant { user_id: 1, holder: "runner-a", session_id: None };
const B: Claimant<'static> = Claimant { user_id: 1, holder: "runner-b", session_id: None };

fn granted(slot: &mut LeaseSlot, c: &Claimant<'_>, secs: i64, now: Timestamp) -> Lease {
    match decide_claim(slot, c, ttl(secs).into(), true, slot.last_epoch + 100, now) {
        ClaimDecision::Grant { lease, .. } => {
            slot.last_epoch = lease.epoch;
            slot.current = Some(lease.clone());
            lease
        }
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[test]
fn l8_a_refused_ttl_carries_what_was_asked_and_the_bound() {
    let e = Ttl::resolve(Some(7200), 900, 3600).unwrap_err();
    assert_eq!(e, InvalidTtl { requested: RequestedTtl::Seconds(7200), max: 3600 });
    assert_eq!(e.requested.seconds(), Some(7200));
    assert_eq!(e.to_string(), "ttl_seconds must be a whole number of seconds from 1 to 3600 (got 7200)");
    let e = InvalidTtl { requested: RequestedTtl::NotWhole("1.5".into()), max: TTL_MAX_SECONDS };
    assert_eq!(e.requested.seconds(), None);
    assert_eq!(e.to_string(), "ttl_seconds must be a whole number of seconds from 1 to 86400 (got 1.5)");
}

#[test]
fn l8_ttl_bounds() {
    assert!(Ttl::resolve(Some(0), 900, 86_400).is_err());
    assert!(Ttl::resolve(Some(-1), 900, 86_400).is_err());
    assert!(Ttl::resolve(Some(86_401), 900, 86_400).is_err());
    assert_eq!(Ttl::resolve(Some(86_400), 900, 86_400).unwrap().seconds(), 86_400);
    assert_eq!(Ttl::resolve(None, 900, 86_400).unwrap().seconds(), 900);
    // A workspace may lower the maximum; the default follows it down.
    assert!(Ttl::resolve(Some(600), 900, 300).is_err());
    assert_eq!(Ttl::resolve(None, 900, 300).unwrap().seconds(), 300);
    // On the wire only a JSON integer is a TTL, so a typo never
    // silently becomes a default.
    use crate::api::TtlSeconds;
    let e = serde_json::from_str::<TtlSeconds>("1.5").unwrap_err().to_string();
    assert!(e.starts_with("ttl_seconds must be a whole number of seconds from 1 to 86400 (got 1.5)"), "{e}");
    assert!(serde_json::from_str::<TtlSeconds>("\"x\"").is_err());
    assert_eq!(serde_json::from_str::<TtlSeconds>("30").unwrap(), TtlSeconds(30));
}

#[test]
fn l1_l2_l3_grant_contend_refresh() {
    let mut slot = LeaseSlot::default();
    let l = granted(&mut slot, &A, 60, t(0));
    assert_eq!((l.epoch, l.acquired_at, l.expires_at), (1, t(0), t(60)));
    assert!(
        matches!(decide_claim(&slot, &B, ttl(60).into(), true, slot.last_epoch + 100, t(10)), ClaimDecision::Held(h) if h.holder == "runner-a")
    );
    match decide_claim(&slot, &A, ttl(120).into(), true, slot.last_epoch + 100, t(10)) {
        ClaimDecision::Refresh(r) => {
            assert_eq!((r.epoch, r.acquired_at, r.renewed_at, r.expires_at), (1, t(0), t(10), t(130)));
        }
        other => panic!("{other:?}"),
    }
    // Same holder label, different session: contention.
    let other_session = Claimant { session_id: Some("s2"), ..A };
    assert!(matches!(
        decide_claim(&slot, &other_session, ttl(60).into(), true, slot.last_epoch + 100, t(10)),
        ClaimDecision::Held(_)
    ));
    // Same holder label, other user: contention (L7).
    let impostor = Claimant { user_id: 2, ..A };
    assert!(matches!(
        decide_claim(&slot, &impostor, ttl(60).into(), true, slot.last_epoch + 100, t(10)),
        ClaimDecision::Held(_)
    ));
}

#[test]
fn l5_expiry_is_exact() {
    let mut slot = LeaseSlot::default();
    granted(&mut slot, &A, 60, t(0));
    assert!(matches!(
        decide_claim(&slot, &B, ttl(60).into(), true, slot.last_epoch + 100, t(59)),
        ClaimDecision::Held(_)
    ));
    match decide_claim(&slot, &B, ttl(60).into(), true, slot.last_epoch + 100, t(60)) {
        ClaimDecision::Grant { lease, previous_expired } => {
            assert_eq!(lease.epoch, 2);
            assert!(previous_expired);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn l4_renew_needs_live_lease_and_epoch() {
    let mut slot = LeaseSlot::default();
    granted(&mut slot, &A, 60, t(0));
    assert!(
        matches!(decide_renew(&slot, &A, LeaseHandle::epoch(1), None, t(30)), RenewDecision::Renewed(l) if l.expires_at == t(90) && l.acquired_at == t(0))
    );
    assert_eq!(decide_renew(&slot, &A, LeaseHandle::epoch(2), None, t(30)), RenewDecision::Lost(slot.current.clone()));
    assert_eq!(decide_renew(&slot, &A, LeaseHandle::epoch(1), None, t(60)), RenewDecision::Lost(None));
    assert!(matches!(decide_renew(&slot, &B, LeaseHandle::epoch(1), None, t(30)), RenewDecision::Held(_)));
}

#[test]
fn l6_l7_release() {
    let mut slot = LeaseSlot::default();
    assert_eq!(decide_release(&slot, &A, LeaseHandle::default(), false, t(0)), ReleaseDecision::NoLiveLease);
    granted(&mut slot, &A, 60, t(0));
    assert!(matches!(decide_release(&slot, &B, LeaseHandle::default(), false, t(1)), ReleaseDecision::Held(_)));
    assert!(matches!(decide_release(&slot, &A, LeaseHandle::epoch(7), false, t(1)), ReleaseDecision::Lost(_)));
    assert!(matches!(decide_release(&slot, &B, LeaseHandle::default(), true, t(1)), ReleaseDecision::Broken(_)));
    assert!(matches!(decide_release(&slot, &A, LeaseHandle::epoch(1), false, t(1)), ReleaseDecision::Released(_)));
    assert_eq!(decide_release(&slot, &A, LeaseHandle::default(), false, t(60)), ReleaseDecision::NoLiveLease);
}

#[test]
fn l10_fence() {
    let mut slot = LeaseSlot::default();
    assert!(check_fence(&slot, LeaseHandle::default(), t(0)).is_ok());
    assert_eq!(check_fence(&slot, LeaseHandle::epoch(1), t(0)), Err(None));
    granted(&mut slot, &A, 60, t(0));
    assert!(check_fence(&slot, LeaseHandle::epoch(1), t(1)).is_ok());
    assert!(check_fence(&slot, LeaseHandle::epoch(1), t(60)).is_err());
}

#[test]
fn l13_quarantine_threshold() {
    let none: Vec<String> = vec![];
    assert!(!should_quarantine(2, 3, &none));
    assert!(should_quarantine(3, 3, &none));
    assert!(!should_quarantine(3, 3, &["needs-human".to_string()]));
    assert!(!should_quarantine(10, 0, &none));
}

#[test]
fn expires_in_rounds_up() {
    let mut slot = LeaseSlot::default();
    let l = granted(&mut slot, &A, 60, t(0));
    assert_eq!(l.expires_in_seconds(t(0)), 60);
    assert_eq!(l.expires_in_seconds(t(0) + Duration::milliseconds(1)), 60);
    assert_eq!(l.expires_in_seconds(t(61)), 0);
}

#[test]
fn l17_lease_id_names_the_grant_and_no_refresh_is_contention() {
    let mut slot = LeaseSlot::default();
    let l = granted(&mut slot, &A, 60, t(0));
    assert_eq!(l.lease_id, 100);
    // A refresh keeps the handle; refresh: false makes even the holder contend.
    match decide_claim(&slot, &A, ttl(60).into(), true, 999, t(1)) {
        ClaimDecision::Refresh(r) => assert_eq!(r.lease_id, 100),
        other => panic!("{other:?}"),
    }
    assert!(matches!(decide_claim(&slot, &A, ttl(60).into(), false, 999, t(1)), ClaimDecision::Held(_)));
    let by_id = LeaseHandle::lease_id(100);
    assert!(matches!(decide_renew(&slot, &A, by_id, None, t(1)), RenewDecision::Renewed(_)));
    assert!(matches!(decide_renew(&slot, &A, LeaseHandle::lease_id(7), None, t(1)), RenewDecision::Lost(_)));
    // Both given: both must name the live lease.
    let mixed = LeaseHandle { epoch: Some(1), lease_id: Some(7) };
    assert!(matches!(decide_renew(&slot, &A, mixed, None, t(1)), RenewDecision::Lost(_)));
    assert!(check_fence(&slot, by_id, t(1)).is_ok());
    assert!(check_fence(&slot, mixed, t(1)).is_err());
    assert!(matches!(decide_release(&slot, &A, LeaseHandle::lease_id(7), false, t(1)), ReleaseDecision::Lost(_)));
    assert!(matches!(decide_release(&slot, &A, by_id, false, t(1)), ReleaseDecision::Released(_)));
}

#[test]
fn l14_l15_end_needs_the_live_lease_named_and_ours() {
    let mut slot = LeaseSlot::default();
    assert_eq!(decide_end(&slot, &A, LeaseHandle::epoch(1), t(0)), Err(EndRefusal::Lost(None)));
    let l = granted(&mut slot, &A, 60, t(0));
    assert_eq!(decide_end(&slot, &A, LeaseHandle::epoch(1), t(1)), Ok(l.clone()));
    assert_eq!(decide_end(&slot, &A, LeaseHandle::lease_id(l.lease_id), t(1)), Ok(l.clone()));
    assert!(matches!(decide_end(&slot, &A, LeaseHandle::epoch(2), t(1)), Err(EndRefusal::Lost(Some(_)))));
    assert!(matches!(decide_end(&slot, &A, LeaseHandle::default(), t(1)), Err(EndRefusal::Lost(Some(_)))));
    assert!(matches!(decide_end(&slot, &B, LeaseHandle::epoch(1), t(1)), Err(EndRefusal::Held(_))));
    // An expired lease cannot be completed or failed.
    assert_eq!(decide_end(&slot, &A, LeaseHandle::epoch(1), t(60)), Err(EndRefusal::Lost(None)));
}

#[test]
fn l14_backoff_doubles_from_base_to_cap() {
    let secs = |n| retry_backoff(n, 30, 3600).num_seconds();
    assert_eq!([secs(1), secs(2), secs(3), secs(4)], [30, 60, 120, 240]);
    assert_eq!(secs(8), 3600);
    assert_eq!(secs(1000), 3600);
    assert_eq!(secs(0), 30);
}

#[test]
fn l18_expired_lease_reads_as_last_lease_ended_by_expiry() {
    let mut slot = LeaseSlot::default();
    assert_eq!(last_lease(&slot, None, None, t(0)), None);
    let l = granted(&mut slot, &A, 60, t(0));
    let recorded = LastLease::of(&l, LeaseEnd::Released, t(5), None);
    // While live, the recorded (previous) ending shows.
    assert_eq!(last_lease(&slot, Some("n"), Some(recorded.clone()), t(10)), Some(recorded.clone()));
    let expired = last_lease(&slot, Some("n"), Some(recorded), t(60)).unwrap();
    assert_eq!((expired.ended, expired.ended_at, expired.note.as_deref()), (LeaseEnd::Expired, t(60), Some("n")));
    assert_eq!(expired.lease_id, l.lease_id);
}

/// One step of a random history over three holders on one item.
#[derive(Debug, Clone)]
enum Op {
    Claim { who: usize, ttl: i64 },
    Renew { who: usize, epoch_offset: i64, ttl: Option<i64> },
    Release { who: usize, force: bool },
    Advance(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 1..20i64).prop_map(|(who, ttl)| Op::Claim { who, ttl }),
        (0..3usize, -1..2i64, proptest::option::of(1..20i64)).prop_map(|(who, epoch_offset, ttl)| Op::Renew {
            who,
            epoch_offset,
            ttl
        }),
        (0..3usize, any::<bool>()).prop_map(|(who, force)| Op::Release { who, force }),
        (0..15i64).prop_map(Op::Advance),
    ]
}

/// L19: renewals and refreshes never move a capped lease's expiry past
/// `acquired_at + max_hold`; bad caps are refused.
#[test]
fn l19_a_cap_bounds_every_renewal() {
    let mut slot = LeaseSlot::default();
    let terms = Terms { ttl: ttl(60), max_hold_seconds: Some(150) };
    let ClaimDecision::Grant { lease, .. } = decide_claim(&slot, &A, terms, true, 1, t(0)) else { panic!() };
    assert_eq!((lease.hold_until, lease.expires_at), (Some(t(150)), t(60)));
    slot.current = Some(lease.clone());
    let mut now = 0;
    loop {
        now += 20;
        match decide_renew(&slot, &A, LeaseHandle::epoch(lease.epoch), None, t(now)) {
            RenewDecision::Renewed(l) => {
                assert!(l.expires_at <= t(150), "renewed past the cap at {now}");
                assert_eq!(l.is_capped(), l.expires_at == t(150));
                slot.current = Some(l);
            }
            RenewDecision::Lost(None) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(now, 160, "the lease ended at its cap");
    assert!(resolve_max_hold(Some(30), None, ttl(60)).unwrap_err().0.contains("TTL"));
    assert!(resolve_max_hold(Some(-1), None, ttl(60)).is_err());
    assert!(resolve_max_hold(Some(7200), Some(3600), ttl(60)).is_err());
    assert_eq!(resolve_max_hold(None, Some(3600), ttl(60)), Ok(Some(3600)));
    assert_eq!(resolve_max_hold(Some(600), Some(3600), ttl(60)), Ok(Some(600)));
    assert_eq!(resolve_max_hold(None, None, ttl(60)), Ok(None));
}

proptest! {
    /// L19: whatever the TTL, cap and renewal times, no lease outlives its cap.
    #[test]
    fn l19_no_lease_outlives_its_cap(ttl_s in 1_i64..600, extra in 0_u32..600, steps in proptest::collection::vec(1_i64..300, 1..20)) {
        let cap = u32::try_from(ttl_s).unwrap() + extra;
        let terms = Terms { ttl: ttl(ttl_s), max_hold_seconds: Some(cap) };
        let ClaimDecision::Grant { lease, .. } = decide_claim(&LeaseSlot::default(), &A, terms, true, 1, t(0)) else { panic!() };
        let mut slot = LeaseSlot { current: Some(lease.clone()), last_epoch: lease.epoch };
        let mut now = 0;
        for step in steps {
            now += step;
            if let RenewDecision::Renewed(l) = decide_renew(&slot, &A, LeaseHandle::epoch(lease.epoch), None, t(now)) {
                prop_assert!(l.expires_at <= t(i64::from(cap)));
                slot.current = Some(l);
            }
            if let ClaimDecision::Refresh(l) = decide_claim(&slot, &A, ttl(ttl_s).into(), true, 2, t(now)) {
                prop_assert!(l.expires_at <= t(i64::from(cap)));
            }
        }
    }

    /// For any interleaving: at most one live holder, epochs grow by one
    /// on every grant and never on a refresh, expiry is renewed_at + ttl.
    #[test]
    fn never_two_live_holders(ops in proptest::collection::vec(op(), 1..200)) {
        let holders = ["a", "b", "c"];
        let who = |i: usize| Claimant { user_id: i as i64 + 1, holder: holders[i], session_id: None };
        let mut slot = LeaseSlot::default();
        let mut now = t(0);
        let mut grants = 0i64;
        for op in ops {
            let before = slot.clone();
            match op {
                Op::Claim { who: w, ttl: s } => match decide_claim(&slot, &who(w), ttl(s).into(), true, slot.last_epoch + 100, now) {
                    ClaimDecision::Grant { lease, .. } => {
                        prop_assert!(before.live(now).is_none(), "granted over a live lease");
                        grants += 1;
                        prop_assert_eq!(lease.epoch, grants);
                        prop_assert_eq!(lease.epoch, before.last_epoch + 1);
                        slot.last_epoch = lease.epoch;
                        slot.current = Some(lease);
                    }
                    ClaimDecision::Refresh(lease) => {
                        let live = before.live(now).expect("refresh of a live lease");
                        prop_assert_eq!(lease.epoch, live.epoch);
                        prop_assert_eq!(lease.acquired_at, live.acquired_at);
                        prop_assert_eq!(&lease.holder, &live.holder);
                        slot.current = Some(lease);
                    }
                    ClaimDecision::Held(h) => prop_assert_ne!(h.user_id, who(w).user_id),
                },
                Op::Renew { who: w, epoch_offset, ttl: s } => {
                    let epoch = slot.last_epoch + epoch_offset;
                    if let RenewDecision::Renewed(lease) = decide_renew(&slot, &who(w), LeaseHandle::epoch(epoch), s.map(ttl), now) {
                        let live = before.live(now).expect("renew of a live lease");
                        prop_assert_eq!(live.user_id, who(w).user_id);
                        prop_assert_eq!(lease.epoch, live.epoch);
                        slot.current = Some(lease);
                    }
                }
                Op::Release { who: w, force } => match decide_release(&slot, &who(w), LeaseHandle::default(), force, now) {
                    ReleaseDecision::Released(l) | ReleaseDecision::Broken(l) => {
                        prop_assert!(l.is_live(now));
                        slot.current = None;
                    }
                    ReleaseDecision::NoLiveLease => prop_assert!(before.live(now).is_none()),
                    ReleaseDecision::Held(_) | ReleaseDecision::Lost(_) => prop_assert!(!force),
                },
                Op::Advance(s) => now += Duration::seconds(s),
            }
            if let Some(l) = &slot.current {
                prop_assert_eq!(l.expires_at, l.renewed_at + Duration::seconds(i64::from(l.ttl_seconds)));
                prop_assert!(l.epoch <= slot.last_epoch);
            }
            prop_assert!(slot.last_epoch >= before.last_epoch);
        }
    }
}
