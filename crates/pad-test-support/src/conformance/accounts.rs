//! Accounts and tokens (docs/api.md, "Tokens", "Workspace settings"): users,
//! workspaces and members, scoped tokens and their cap, web sessions, the
//! first start, and a settings change.

use std::sync::Arc;
use std::time::Duration;

use pad_core::Role;
use pad_store::{Actor, Store, StoreError};

use super::{Fixture, pass, rf};

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
    let t = s.create_scoped_token(f.editor, "agent", "hash-s", &f.ws, Role::Viewer, f.editor, f.editor).await.unwrap();
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
        s.create_scoped_token(f.editor, "over", "cap-over", &f.ws, Role::Viewer, f.editor, f.editor).await,
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
    let t = s.create_scoped_token(f.editor, "web", "tok-web", &f.ws, Role::Editor, f.editor, f.editor).await.unwrap();
    s.create_session(t.id, "sess-1", 3600).await.unwrap();
    let p = s.authenticate_session("sess-1").await.unwrap().unwrap();
    assert_eq!((p.user.id, p.token_id, p.scope.map(|x| x.role)), (f.editor.user_id, t.id, Some(Role::Editor)));
    assert_eq!(s.authenticate_session("tok-web").await.unwrap(), None, "a token hash is no session");
    assert_eq!(s.authenticate("sess-1").await.unwrap(), None, "a session hash is no token");
    assert!(s.revoke_session("sess-1").await.unwrap(), "a live session is revoked");
    assert_eq!(s.authenticate_session("sess-1").await.unwrap(), None);
    assert!(!s.revoke_session("sess-1").await.unwrap(), "a revoked session is not revoked again");
    assert!(!s.revoke_session("no-such-session").await.unwrap(), "an unknown hash revokes nothing");
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
    s.create_scoped_token(f.editor, "here", "rm-scoped", &f.ws, Role::Editor, f.editor, f.editor).await.unwrap();
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
    let minted = s.create_scoped_token(f.editor, "ci", "by-second", &f.ws, Role::Editor, second, second).await.unwrap();
    assert_eq!(minted.minted_by.as_deref(), Some("second@example.com"));
    s.create_scoped_token(f.editor, "ci2", "by-owner", &f.ws, Role::Editor, f.owner, f.owner).await.unwrap();
    let own = s.create_token(f.editor, "own", "by-self").await.unwrap();
    assert_eq!(own.minted_by.as_deref(), Some("editor@example.com"));
    // Each token is charged to the account given at its mint (docs/api.md,
    // "Limits"): a token the editor mints for itself with the owner's token
    // stays charged to the owner, by hash and through a web session.
    let charged = |hash: &'static str| async move { s.authenticate(hash).await.unwrap().unwrap().charged_to };
    assert_eq!(charged("by-owner").await, Some(f.owner.user_id));
    assert_eq!(charged("by-self").await, None, "one's own token charges no one else");
    let chained = s.create_scoped_token(f.editor, "chain", "by-chain", &f.ws, Role::Editor, f.editor, f.owner).await;
    assert_eq!(chained.unwrap().minted_by.as_deref(), Some("editor@example.com"));
    assert_eq!(charged("by-chain").await, Some(f.owner.user_id));
    let chain_id = s.authenticate("by-chain").await.unwrap().unwrap().token_id;
    s.create_session(chain_id, "session-by-chain", 3600).await.unwrap();
    let session = s.authenticate_session("session-by-chain").await.unwrap().unwrap();
    assert_eq!(session.charged_to, Some(f.owner.user_id));
    s.remove_member(&f.ws, "second@example.com").await.unwrap();
    assert_eq!(s.authenticate("by-second").await.unwrap(), None, "the removed owner's mint is revoked");
    assert!(s.authenticate("by-owner").await.unwrap().is_some());
    assert!(s.authenticate("by-self").await.unwrap().is_some());
    let listed = s.list_tokens(&f.ws, f.editor).await.unwrap();
    assert!(listed.iter().all(|t| t.name != "ci"), "{listed:?}");
}

/// Lowering a role revokes, like removal, the tokens the member minted for
/// others in the workspace (docs/api.md, "Tokens"); its own scoped token
/// stays, and setting the same role or raising one revokes nothing.
pub async fn lowering_a_role_revokes_the_tokens_it_minted_for_others(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let s = &f.store;
    s.set_member(&f.ws, "second@example.com", Role::Owner).await.unwrap();
    let second = Actor { user_id: s.ensure_user("second@example.com").await.unwrap().id };
    s.create_scoped_token(f.editor, "ci", "demote-by-second", &f.ws, Role::Editor, second, second).await.unwrap();
    s.create_scoped_token(second, "mine", "demote-own", &f.ws, Role::Owner, second, second).await.unwrap();
    s.set_member(&f.ws, "second@example.com", Role::Owner).await.unwrap();
    s.set_member(&f.ws, "editor@example.com", Role::Owner).await.unwrap();
    assert!(s.authenticate("demote-by-second").await.unwrap().is_some(), "same role and a raise revoke nothing");
    s.set_member(&f.ws, "second@example.com", Role::Editor).await.unwrap();
    assert_eq!(s.authenticate("demote-by-second").await.unwrap(), None, "the demoted owner's mint is revoked");
    assert!(s.authenticate("demote-own").await.unwrap().is_some(), "its own token stays, capped by its role");
    assert_eq!(s.membership(second, "acme").await.unwrap().1, Role::Editor);
    // A mint checked while `second` was an owner and written after the
    // demotion: the store asks again, in the insert's transaction, and
    // refuses it, so no token escapes the revocation.
    let late = s.create_scoped_token(f.editor, "late", "demote-late", &f.ws, Role::Editor, second, second).await;
    assert!(matches!(&late, Err(StoreError::Forbidden(m)) if m.contains("now editor")), "{late:?}");
    assert_eq!(s.authenticate("demote-late").await.unwrap(), None);
    // Minting for oneself is not an owner's power: it stays allowed.
    s.create_scoped_token(second, "again", "demote-own-2", &f.ws, Role::Editor, second, second).await.unwrap();
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
