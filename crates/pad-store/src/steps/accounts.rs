//! The account flows: users, workspaces with their owner and default kinds,
//! the first start, members and tokens, over a backend's [`AccountSteps`].

use pad_core::model::{DEFAULT_KINDS, validate_slug};
use pad_core::validate::{self, Lines};
use pad_core::{Member, Role, TokenInfo, User, Workspace, authz};

use super::{AccountSteps, Begin, WriteTx};
use crate::shared;
use crate::{Actor, StoreError, StoreResult};

pub async fn ensure_user<S: Begin>(s: &S, email: &str) -> StoreResult<User> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    let user = tx.ensure_user(email).await?;
    tx.commit().await?;
    Ok(user)
}

/// A workspace with its owner and the default kinds, its creation charged
/// to `charged_to` (docs/webhooks.md, "Isolation").
async fn new_workspace<T: WriteTx>(
    tx: &mut T, slug: &str, name: &str, owner: i64, charged_to: i64,
) -> StoreResult<Workspace> {
    let ws = tx
        .insert_workspace(slug, name, charged_to)
        .await?
        .ok_or_else(|| StoreError::invalid("slug", format!("workspace {slug:?} already exists")))?;
    tx.put_member(ws.id, owner, Role::Owner).await?;
    for (kind, prefix) in DEFAULT_KINDS {
        tx.insert_kind(ws.id, kind, prefix).await?;
    }
    Ok(ws)
}

pub async fn create_workspace<S: Begin>(
    s: &S, slug: &str, name: &str, owner: Actor, charged_to: Actor,
) -> StoreResult<Workspace> {
    validate_slug("slug", slug)?;
    validate::text("name", name, 1, 200, Lines::Single)?;
    let mut tx = s.begin().await?;
    let ws = new_workspace(&mut tx, slug, name, owner.user_id, charged_to.user_id).await?;
    tx.commit().await?;
    Ok(ws)
}

/// The first start, in one transaction (docs/reliability.md, "First start").
pub async fn bootstrap<S: Begin>(s: &S, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
    validate::email("email", email)?;
    validate_slug("slug", slug)?;
    let mut tx = s.begin().await?;
    // Instances starting at once on an empty store: the first bootstraps,
    // the others wait and then see its user.
    tx.lock_first_start().await?;
    if tx.any_user().await? {
        return Ok(false);
    }
    let user = tx.ensure_user(email).await?;
    shared::failpoint("bootstrap-user");
    // Charged to the first user, as its token is.
    new_workspace(&mut tx, slug, name, user.id, user.id).await?;
    shared::failpoint("bootstrap-workspace");
    tx.insert_token(user.id, "bootstrap", hash, None, user.id, user.id).await?;
    shared::failpoint("bootstrap-token");
    tx.commit().await?;
    Ok(true)
}

fn last_owner(field: &str) -> StoreError {
    StoreError::invalid(field, "a workspace needs at least one owner")
}

/// Adds a member (creating the user) or changes its role; never demotes the
/// last owner. Lowering a role revokes the tokens the member minted for
/// others here, as removal does: a token never reaches further than its
/// minter could (docs/api.md, "Tokens"). Its own tokens stay; they act with
/// the new role.
pub async fn set_member<S: Begin>(s: &S, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    // Two concurrent demotions must not both see "another owner remains".
    tx.lock_members(ws.id).await?;
    let user = tx.ensure_user(email).await?;
    let before = tx.member_role(ws.id, user.id).await?;
    if before == Some(Role::Owner) && role != Role::Owner && tx.owners(ws.id).await? <= 1 {
        return Err(last_owner("role"));
    }
    let added_at = tx.put_member(ws.id, user.id, role).await?;
    if before.is_some_and(|b| authz::lowers(b, role)) {
        tx.revoke_minted_for_others(ws.id, user.id).await?;
    }
    tx.commit().await?;
    Ok(Member { email: user.email, role, added_at })
}

/// Removes a member (never the last owner) and revokes its scoped tokens
/// and every token it minted for others in the workspace.
pub async fn remove_member<S: Begin>(s: &S, ws: &Workspace, email: &str) -> StoreResult<()> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    tx.lock_members(ws.id).await?;
    let (user, role) =
        tx.member_by_email(ws.id, email).await?.ok_or_else(|| StoreError::not_found(format!("member {email}")))?;
    if role == Role::Owner && tx.owners(ws.id).await? <= 1 {
        return Err(last_owner("email"));
    }
    tx.delete_member(ws.id, user).await?;
    tx.revoke_minted_for_others(ws.id, user).await?;
    tx.commit().await?;
    Ok(())
}

/// One token insert, under the per-user cap (docs/api.md, "Tokens"),
/// charged to `charged_to` (docs/api.md, "Limits").
pub async fn insert_token<S: Begin>(
    s: &S, user: Actor, name: &str, hash: &str, scope: Option<(i64, Role)>, minted_by: Actor, charged_to: Actor,
) -> StoreResult<TokenInfo> {
    validate::text("name", name, 1, 200, Lines::Single)?;
    let mut tx = s.begin().await?;
    // A token for another member is an owner's to mint (`authz::mint`, asked
    // before). Asked again under the members' lock, which a demotion or a
    // removal takes before it revokes what the member minted for others: a
    // demotion that commits between the first check and this insert would
    // otherwise miss the new token, and leave its secret with owner powers in
    // the hands of someone who is no longer an owner.
    if let Some((ws, _)) = scope
        && minted_by.user_id != user.user_id
    {
        tx.lock_members(ws).await?;
        let role = tx.member_role(ws, minted_by.user_id).await?;
        if !role.is_some_and(|r| authz::permits(r, authz::Action::Administer)) {
            return Err(StoreError::Forbidden(format!(
                "only owners may create tokens for other members, and your role here is now {}",
                role.map_or_else(|| "none (no longer a member)".to_string(), |r| r.to_string())
            )));
        }
    }
    // Concurrent mints of one user take turns, so the cap holds.
    tx.lock_tokens(user.user_id).await?;
    shared::too_many_tokens(tx.live_tokens(user.user_id).await?)?;
    let token = tx.insert_token(user.user_id, name, hash, scope, minted_by.user_id, charged_to.user_id).await?;
    tx.commit().await?;
    Ok(token)
}

/// Read, check and write in one transaction, the row locked from the read,
/// so two owners' changes cannot interleave into a default above the
/// maximum (docs/api.md, "Workspace settings"). Leases already granted keep
/// their expiry.
pub async fn update_settings<S: Begin>(
    s: &S, ws: &Workspace, patch: &pad_core::settings::SettingsPatch,
) -> StoreResult<Workspace> {
    let mut tx = s.begin().await?;
    let current = tx.lock_settings(ws.id).await?;
    let next = patch.apply(&current, |f| f.field().to_string())?;
    let updated = tx.write_settings(ws.id, &next).await?;
    tx.commit().await?;
    Ok(updated)
}
