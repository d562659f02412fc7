//! The webhook outbox (docs/webhooks.md): claimed in order and retried,
//! paused when an event is given up, and trimmed when full.

use std::sync::Arc;
use std::time::Duration;

use pad_store::{Store, StoreError};

use super::{Fixture, pass, rf};

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
    pass(Duration::from_millis(1100)).await; // the first retry's backoff is 1 s
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

/// docs/webhooks.md, "Isolation": a workspace's deliveries count against the
/// account its creation was charged to, whoever its members are later. The
/// creator hands a workspace to a user it invited and leaves it: that
/// workspace still shares the creator's cap with the one it kept, so the
/// invited user's name buys the creator no more deliveries in flight. A
/// workspace one user creates on another account's charge counts against
/// that account; one another user creates on its own, against that user.
pub async fn webhooks_a_workspace_counts_against_the_account_charged_for_its_creation(store: Arc<dyn Store>) {
    use pad_core::webhook::{CreateWebhook, WEBHOOKS_PER_WORKSPACE_MAX};
    use pad_core::{NewItem, Role};
    use pad_store::{Actor, DueDelivery};
    let cap = DueDelivery::IN_FLIGHT_PER_ACCOUNT as usize;
    let each = WEBHOOKS_PER_WORKSPACE_MAX as usize;
    assert!(2 * each > cap && each <= cap, "two full workspaces are past one account's cap");
    let s = store;
    let user = |email: &'static str| {
        let s = s.clone();
        async move { Actor { user_id: s.ensure_user(email).await.unwrap().id } }
    };
    let (creator, minted, other) =
        (user("creator@example.com").await, user("minted@example.com").await, user("other@example.com").await);
    let hook = CreateWebhook { url: "http://127.0.0.1:9/".into(), events: vec![] };
    let kept = s.create_workspace("kept", "Kept", creator).await.unwrap();
    let handed = s.create_workspace("handed", "Handed", creator).await.unwrap();
    for ws in [&kept, &handed] {
        for _ in 0..each {
            s.create_webhook(ws, creator, &hook, "s").await.unwrap();
        }
    }
    s.set_member(&handed, "invited@example.com", Role::Owner).await.unwrap();
    let invited = user("invited@example.com").await;
    s.remove_member(&handed, "creator@example.com").await.unwrap();
    let members = s.list_members(&handed).await.unwrap();
    assert_eq!(members.iter().map(|m| m.email.as_str()).collect::<Vec<_>>(), ["invited@example.com"]);
    // Created by another user, on the creator's charge; and by a user on
    // its own.
    let charged = s.create_workspace_charged_to("charged", "Charged", minted, creator).await.unwrap();
    s.create_webhook(&charged, minted, &hook, "s").await.unwrap();
    let own = s.create_workspace_charged_to("own", "Own", other, other).await.unwrap();
    s.create_webhook(&own, other, &hook, "s").await.unwrap();

    let flood = |title: &str| NewItem { title: title.into(), ..Default::default() };
    s.create_item(&kept, creator, &flood("kept")).await.unwrap();
    s.create_item(&handed, invited, &flood("handed")).await.unwrap();
    s.create_item(&charged, minted, &flood("charged")).await.unwrap();
    s.create_item(&own, other, &flood("own")).await.unwrap();
    let first = s.claim_webhook_deliveries(100, 30).await.unwrap();
    let of_own = first.iter().filter(|d| d.workspace == "own").count();
    assert_eq!((first.len() - of_own, of_own), (cap, 1), "kept, handed and charged share their creator's cap");
    assert!(s.claim_webhook_deliveries(100, 30).await.unwrap().is_empty(), "the creator is at its cap");
}
