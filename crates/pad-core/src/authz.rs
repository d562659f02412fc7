//! Who may do what in a workspace. The server asks [`permits`] on every
//! route; the table lives here so it is read in one place.

use crate::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read items, comments, history, members, events.
    Read,
    /// Create, update, delete, restore and comment on items.
    Write,
    /// Claim, renew and release leases.
    Lease,
    /// Break another worker's live lease (L7).
    BreakLease,
    /// Members, kinds, and other members' tokens.
    Administer,
}

pub fn permits(role: Role, action: Action) -> bool {
    match action {
        Action::Read => true,
        Action::Write | Action::Lease => matches!(role, Role::Owner | Role::Editor),
        Action::BreakLease | Action::Administer => role == Role::Owner,
    }
}

/// The least role that permits `action`, and the action in words, so a
/// refusal can say what the caller would need (docs/api.md, "Roles").
pub fn needs(action: Action) -> (Role, &'static str) {
    match action {
        Action::Read => (Role::Viewer, "read"),
        Action::Write => (Role::Editor, "change items"),
        Action::Lease => (Role::Editor, "claim, renew or release leases"),
        Action::BreakLease => (Role::Owner, "break another worker's lease"),
        Action::Administer => (Role::Owner, "manage members, kinds and settings"),
    }
}

/// The most live (unrevoked) tokens one user may hold (docs/api.md, "Tokens").
pub const TOKENS_PER_USER_MAX: i64 = 100;

/// Where a token reaches: `None` on a [`Principal`] is all of its user's
/// workspaces; a scope is one workspace, with a role cap there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenScope {
    pub workspace_id: i64,
    pub role: Role,
}

/// An authenticated request's identity: the user, the token it came with
/// (a web session carries its token's), and that token's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: crate::User,
    pub token_id: i64,
    pub scope: Option<TokenScope>,
    /// The account at the root of the token's minting chain, when it is not
    /// the user itself (an owner minted the token, or a token of theirs
    /// minted it, down any number of mints): requests, streams and budgets
    /// count against that account too (docs/api.md, "Limits"). `None` for a
    /// chain that starts with the user's own token.
    pub charged_to: Option<i64>,
}

/// The lesser of two roles (viewer < editor < owner).
pub fn least(a: Role, b: Role) -> Role {
    fn rank(r: Role) -> u8 {
        match r {
            Role::Viewer => 0,
            Role::Editor => 1,
            Role::Owner => 2,
        }
    }
    if rank(a) <= rank(b) { a } else { b }
}

/// Whether changing a member's role from `from` to `to` lowers it. A
/// lowering revokes the tokens the member minted for others in the
/// workspace, as removal does, so none reaches further than its minter now
/// could (docs/api.md, "Tokens").
pub fn lowers(from: Role, to: Role) -> bool {
    from != to && least(from, to) == to
}

/// The role a request acts with in workspace `workspace_id`, where its user
/// is a member with `membership`: `min(scope role, membership)`. `None`
/// when the token is scoped to another workspace: the request is then
/// answered as if the user were no member (docs/api.md, "Tokens").
pub fn effective_role(scope: Option<TokenScope>, workspace_id: i64, membership: Role) -> Option<Role> {
    match scope {
        None => Some(membership),
        Some(s) if s.workspace_id == workspace_id => Some(least(s.role, membership)),
        Some(_) => None,
    }
}

/// What `POST /workspaces/{ws}/tokens` was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MintRequest {
    /// The token is for the caller's own user.
    pub for_self: bool,
    /// `Some(true)`: scoped to this workspace; `Some(false)`: unscoped;
    /// `None`: the default (see [`mint`]).
    pub scoped: Option<bool>,
    /// A role cap asked for; it can only lower the granted role.
    pub role: Option<Role>,
}

/// Why a token is refused. `Forbidden` maps to 403, `Invalid` to 422.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MintRefusal {
    Forbidden(String),
    Invalid { field: &'static str, message: String },
}

/// The rule "a token never reaches further than its minter could"
/// (docs/api.md, "Tokens"). `minter_role` is the caller's effective role in
/// the workspace; `minter_scoped` whether the caller's own token is scoped;
/// `target_role` the target user's membership there (`None`: not a member).
/// Answers the scope to grant: `None` for an unscoped token (all of the
/// target's workspaces), `Some(role)` for one scoped to this workspace.
pub fn mint(
    req: MintRequest, minter_role: Role, minter_scoped: bool, target_role: Option<Role>,
) -> Result<Option<Role>, MintRefusal> {
    if req.for_self {
        // The default keeps a scoped caller's tokens scoped.
        let scoped = req.scoped.unwrap_or(minter_scoped || req.role.is_some());
        if !scoped {
            if minter_scoped {
                return Err(MintRefusal::Forbidden(
                    "a token scoped to one workspace cannot mint an unscoped token".into(),
                ));
            }
            if req.role.is_some() {
                return Err(MintRefusal::Invalid {
                    field: "role",
                    message: "a role cap needs a scoped token (\"scope\": \"workspace\")".into(),
                });
            }
            return Ok(None);
        }
        return Ok(Some(req.role.map_or(minter_role, |r| least(r, minter_role))));
    }
    if !permits(minter_role, Action::Administer) {
        return Err(MintRefusal::Forbidden(format!(
            "only owners may create tokens for other members (your role: {minter_role})"
        )));
    }
    if req.scoped == Some(false) {
        return Err(MintRefusal::Forbidden(
            "a token for another user is always scoped to this workspace; only its user may create an unscoped one"
                .into(),
        ));
    }
    let Some(target_role) = target_role else {
        return Err(MintRefusal::Invalid { field: "email", message: "is not a member of this workspace".into() });
    };
    let cap = least(target_role, minter_role);
    Ok(Some(req.role.map_or(cap, |r| least(r, cap))))
}

/// Whether a caller may see (list) and revoke a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenAccess {
    Allowed,
    /// The token lives in this workspace, but the caller's role is too low
    /// (`forbidden`).
    Forbidden,
    /// The token is none of this workspace's business (`not_found`).
    Hidden,
}

/// Who may see and revoke a token, in the workspace `workspace_slug` where
/// the caller acts with `caller_role` (docs/api.md, "Tokens"). Tokens scoped
/// to the workspace: their user, and the workspace's owners. Any other token
/// (an unscoped one, or one scoped elsewhere): only its own user, and only
/// with an unscoped token, so a scoped token never reaches beyond its
/// workspace and an owner never reaches another user's other workspaces.
pub fn token_access(
    caller_email: &str, caller_scoped: bool, caller_role: Role, workspace_slug: &str, token: &crate::TokenInfo,
) -> TokenAccess {
    let own = token.email.eq_ignore_ascii_case(caller_email);
    match token.workspace.as_deref() {
        Some(ws) if ws == workspace_slug => {
            if own || permits(caller_role, Action::Administer) {
                TokenAccess::Allowed
            } else {
                TokenAccess::Forbidden
            }
        }
        _ if own && !caller_scoped => TokenAccess::Allowed,
        _ => TokenAccess::Hidden,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewer_reads_but_cannot_claim_or_edit() {
        assert!(permits(Role::Viewer, Action::Read));
        assert!(!permits(Role::Viewer, Action::Lease));
        assert!(!permits(Role::Viewer, Action::Write));
        assert!(permits(Role::Editor, Action::Lease));
        assert!(!permits(Role::Editor, Action::BreakLease));
        assert!(permits(Role::Owner, Action::BreakLease));
    }

    fn req(for_self: bool, scoped: Option<bool>, role: Option<Role>) -> MintRequest {
        MintRequest { for_self, scoped, role }
    }

    #[test]
    fn a_token_for_another_user_is_scoped_and_capped_by_both_roles() {
        use Role::*;
        // The takeover of issue 13: an owner of their own workspace asks for
        // the victim's token. It is scoped here, at the victim's role here.
        assert_eq!(mint(req(false, None, None), Owner, false, Some(Owner)), Ok(Some(Owner)));
        assert_eq!(mint(req(false, None, None), Owner, false, Some(Viewer)), Ok(Some(Viewer)));
        assert_eq!(mint(req(false, None, Some(Viewer)), Owner, false, Some(Editor)), Ok(Some(Viewer)));
        // Asking for more than either role gets the lesser.
        assert_eq!(mint(req(false, None, Some(Owner)), Owner, false, Some(Editor)), Ok(Some(Editor)));
        assert!(matches!(
            mint(req(false, Some(false), None), Owner, false, Some(Editor)),
            Err(MintRefusal::Forbidden(_))
        ));
        assert!(matches!(mint(req(false, None, None), Editor, false, Some(Viewer)), Err(MintRefusal::Forbidden(_))));
        assert!(matches!(
            mint(req(false, None, None), Owner, false, None),
            Err(MintRefusal::Invalid { field: "email", .. })
        ));
    }

    #[test]
    fn own_tokens_are_unscoped_by_default_and_never_exceed_the_minter() {
        use Role::*;
        assert_eq!(mint(req(true, None, None), Viewer, false, Some(Viewer)), Ok(None));
        assert_eq!(mint(req(true, None, Some(Editor)), Owner, false, Some(Owner)), Ok(Some(Editor)));
        assert_eq!(mint(req(true, Some(true), Some(Owner)), Viewer, false, Some(Viewer)), Ok(Some(Viewer)));
        // A scoped caller stays scoped.
        assert_eq!(mint(req(true, None, None), Editor, true, Some(Owner)), Ok(Some(Editor)));
        assert!(matches!(
            mint(req(true, Some(false), None), Editor, true, Some(Owner)),
            Err(MintRefusal::Forbidden(_))
        ));
        assert!(matches!(
            mint(req(true, Some(false), Some(Viewer)), Owner, false, Some(Owner)),
            Err(MintRefusal::Invalid { .. })
        ));
    }

    #[test]
    fn the_effective_role_is_the_lesser_and_nothing_outside_the_scope() {
        use Role::*;
        assert_eq!(effective_role(None, 1, Editor), Some(Editor));
        let s = TokenScope { workspace_id: 1, role: Editor };
        assert_eq!(effective_role(Some(s), 1, Owner), Some(Editor));
        assert_eq!(effective_role(Some(s), 1, Viewer), Some(Viewer));
        assert_eq!(effective_role(Some(s), 2, Owner), None);
        assert_eq!(least(Owner, Viewer), Viewer);
        assert_eq!(least(Editor, Owner), Editor);
    }

    #[test]
    fn only_a_lower_role_lowers() {
        use Role::*;
        assert!(lowers(Owner, Editor) && lowers(Owner, Viewer) && lowers(Editor, Viewer));
        assert!(!lowers(Owner, Owner) && !lowers(Viewer, Editor) && !lowers(Editor, Owner));
    }

    #[test]
    fn owners_see_tokens_scoped_to_their_workspace_only() {
        let token = |email: &str, ws: Option<&str>| crate::TokenInfo {
            id: 1,
            name: "t".into(),
            email: email.into(),
            workspace: ws.map(str::to_string),
            role: ws.map(|_| Role::Viewer),
            created_at: chrono::Utc::now(),
            last_used_at: None,
            minted_by: None,
        };
        let victim_unscoped = token("victim@x", None);
        let victim_here = token("victim@x", Some("mine"));
        let victim_elsewhere = token("victim@x", Some("theirs"));
        use TokenAccess::*;
        assert_eq!(token_access("owner@x", false, Role::Owner, "mine", &victim_unscoped), Hidden);
        assert_eq!(token_access("owner@x", false, Role::Owner, "mine", &victim_elsewhere), Hidden);
        assert_eq!(token_access("owner@x", false, Role::Owner, "mine", &victim_here), Allowed);
        assert_eq!(token_access("editor@x", false, Role::Editor, "mine", &victim_here), Forbidden);
        assert_eq!(token_access("victim@x", false, Role::Viewer, "mine", &victim_elsewhere), Allowed);
        assert_eq!(token_access("victim@x", true, Role::Viewer, "mine", &victim_unscoped), Hidden);
    }
}
