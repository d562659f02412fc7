//! Workspaces, kinds, members, tokens and `me`.

use axum::extract::State;
use axum::http::StatusCode;
use pad_core::api::{
    CreateKind, CreateToken, CreateWorkspace, ErrorEnvelope, KindList, Me, MemberList, SetMember, TokenCreated,
    TokenList, TokenScopeKind, WorkspaceList, WorkspaceRole, WorkspaceView,
};
use pad_core::authz::{self, MintRefusal, MintRequest, TokenAccess};
use pad_core::settings::SettingsPatch;
use pad_core::{Action, Kind, Member, Role, Workspace};

use crate::AppState;
use crate::auth::{hash_token, new_token};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, Ctx, Json, MemberEmail, TokenId};
use crate::limits::Budget;

type JsonOut<T> = ApiResult<axum::Json<T>>;

async fn view(s: &AppState, ws: Workspace, role: Role) -> ApiResult<WorkspaceView> {
    let kinds = s.store.list_kinds(&ws).await?;
    Ok(WorkspaceView { slug: ws.slug, name: ws.name, created_at: ws.created_at, settings: ws.settings, role, kinds })
}

/// Who the token belongs to, and where it may go.
#[utoipa::path(get, path = "/api/v1/me", tag = "auth",
    responses((status = 200, body = Me), (status = "default", body = ErrorEnvelope)))]
pub async fn me(State(s): State<AppState>, caller: Caller) -> JsonOut<Me> {
    let workspaces = caller.workspaces(s.store.as_ref()).await?;
    Ok(axum::Json(Me {
        email: caller.user.email,
        workspaces: workspaces.into_iter().map(|(w, role)| WorkspaceRole { slug: w.slug, role }).collect(),
    }))
}

#[utoipa::path(get, path = "/api/v1/workspaces", tag = "workspaces",
    responses((status = 200, body = WorkspaceList), (status = "default", body = ErrorEnvelope)))]
pub async fn list(State(s): State<AppState>, caller: Caller) -> JsonOut<WorkspaceList> {
    let mut workspaces = Vec::new();
    for (ws, role) in caller.workspaces(s.store.as_ref()).await? {
        workspaces.push(view(&s, ws, role).await?);
    }
    Ok(axum::Json(WorkspaceList { workspaces }))
}

/// Any authenticated user may create a workspace and becomes its owner;
/// not with a token scoped to one workspace.
#[utoipa::path(post, path = "/api/v1/workspaces", tag = "workspaces", request_body = CreateWorkspace,
    responses((status = 201, body = WorkspaceView), (status = "default", body = ErrorEnvelope)))]
pub async fn create(
    State(s): State<AppState>, caller: Caller, Json(body): Json<CreateWorkspace>,
) -> ApiResult<(StatusCode, axum::Json<WorkspaceView>)> {
    caller.require_unscoped()?;
    let charged = caller.charged_account();
    s.accounts.charge_chain(caller.actor().user_id, charged.user_id, Budget::Workspaces).map_err(budget_spent)?;
    let name = body.name.unwrap_or_else(|| body.slug.clone());
    // Recorded with the workspace: its webhook deliveries count against the
    // account its creation was charged to, whoever its members are later
    // (docs/webhooks.md, "Isolation").
    let ws = s.store.create_workspace_charged_to(&body.slug, &name, caller.actor(), charged).await?;
    Ok((StatusCode::CREATED, axum::Json(view(&s, ws, Role::Owner).await?)))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{ws}", tag = "workspaces", params(("ws" = String, Path)),
    responses((status = 200, body = WorkspaceView), (status = "default", body = ErrorEnvelope)))]
pub async fn show(State(s): State<AppState>, ctx: Ctx) -> JsonOut<WorkspaceView> {
    ctx.require(Action::Read)?;
    Ok(axum::Json(view(&s, ctx.ws, ctx.role).await?))
}

/// Change the lease settings: TTL default and maximum, quarantine
/// thresholds (docs/api.md, "Workspace settings"). Owners only.
#[utoipa::path(patch, path = "/api/v1/workspaces/{ws}", tag = "workspaces", params(("ws" = String, Path)),
    request_body = SettingsPatch,
    responses((status = 200, body = WorkspaceView), (status = 400, body = ErrorEnvelope, description = "validation_failed, naming the setting"),
        (status = 403, body = ErrorEnvelope, description = "forbidden: not an owner"), (status = "default", body = ErrorEnvelope)))]
pub async fn update_settings(
    State(s): State<AppState>, ctx: Ctx, Json(body): Json<serde_json::Value>,
) -> JsonOut<WorkspaceView> {
    ctx.require(Action::Administer)?;
    // Read in two steps so a setting given a negative or fractional value is
    // refused naming the setting and its range, as an out-of-range one is,
    // rather than as a body the parser could not read.
    SettingsPatch::check_kinds(&body)?;
    let body: SettingsPatch = crate::extract::parse_json(body.to_string().as_bytes())?;
    // The settings ride in the cached workspace row (docs/operations.md,
    // "Authentication cache"): the next request must read the new ones.
    let _fresh = s.auth_cache.invalidation();
    let ws = s.store.update_settings(&ctx.ws, &body).await?;
    Ok(axum::Json(view(&s, ws, ctx.role).await?))
}

/// The caller's view of one workspace, with its role there.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/me", tag = "auth", params(("ws" = String, Path)),
    responses((status = 200, body = WorkspaceView), (status = "default", body = ErrorEnvelope)))]
pub async fn me_in(State(s): State<AppState>, ctx: Ctx) -> JsonOut<WorkspaceView> {
    Ok(axum::Json(view(&s, ctx.ws, ctx.role).await?))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/kinds", tag = "workspaces", params(("ws" = String, Path)),
    responses((status = 200, body = KindList), (status = "default", body = ErrorEnvelope)))]
pub async fn kinds(State(s): State<AppState>, ctx: Ctx) -> JsonOut<KindList> {
    ctx.require(Action::Read)?;
    Ok(axum::Json(KindList { kinds: s.store.list_kinds(&ctx.ws).await? }))
}

#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/kinds", tag = "workspaces", params(("ws" = String, Path)),
    request_body = CreateKind, responses((status = 201, body = Kind), (status = "default", body = ErrorEnvelope)))]
pub async fn add_kind(
    State(s): State<AppState>, ctx: Ctx, Json(body): Json<CreateKind>,
) -> ApiResult<(StatusCode, axum::Json<Kind>)> {
    ctx.require(Action::Administer)?;
    Ok((StatusCode::CREATED, axum::Json(s.store.add_kind(&ctx.ws, &body.name, &body.prefix).await?)))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/members", tag = "members", params(("ws" = String, Path)),
    responses((status = 200, body = MemberList), (status = "default", body = ErrorEnvelope)))]
pub async fn members(State(s): State<AppState>, ctx: Ctx) -> JsonOut<MemberList> {
    ctx.require(Action::Read)?;
    Ok(axum::Json(MemberList { members: s.store.list_members(&ctx.ws).await? }))
}

/// Add a member (creating the user) or change a member's role. Owners only.
/// Lowering a role revokes the tokens the member minted here for others.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/members", tag = "members", params(("ws" = String, Path)),
    request_body = SetMember, responses((status = 200, body = Member), (status = "default", body = ErrorEnvelope)))]
pub async fn set_member(State(s): State<AppState>, ctx: Ctx, Json(body): Json<SetMember>) -> JsonOut<Member> {
    ctx.require(Action::Administer)?;
    // Inviting an email pad does not know creates a user: charged to the
    // inviting account and to the root of its token's minting chain, so an
    // invented owner spends its inventor's budget (docs/api.md, "Limits").
    let (user, charged) = (ctx.actor().user_id, ctx.caller.charged_account().user_id);
    if s.store.user_by_email(&body.email).await?.is_none() {
        s.accounts.charge_chain(user, charged, Budget::InvitedUsers).map_err(budget_spent)?;
    }
    // So is each member added (a role change is not one).
    if !s.store.list_members(&ctx.ws).await?.iter().any(|m| m.email.eq_ignore_ascii_case(&body.email)) {
        s.accounts.charge_chain(user, charged, Budget::MembersAdded).map_err(budget_spent)?;
    }
    let _fresh = s.auth_cache.invalidation();
    Ok(axum::Json(s.store.set_member(&ctx.ws, &body.email, body.role).await?))
}

/// 429 `rate_limited`, with when to try again.
fn budget_spent((message, wait): (String, u64)) -> ApiError {
    ApiError {
        retry_after: Some(i64::try_from(wait).unwrap_or(i64::MAX)),
        ..ApiError::new(pad_core::api::ErrorCode::RateLimited, message)
    }
}

/// Remove a member; their tokens scoped to this workspace are revoked, and
/// their open event streams here end within seconds. Owners only.
#[utoipa::path(delete, path = "/api/v1/workspaces/{ws}/members/{email}", tag = "members",
    params(("ws" = String, Path), ("email" = String, Path)),
    responses((status = 204, description = "removed"), (status = "default", body = ErrorEnvelope)))]
pub async fn remove_member(
    State(s): State<AppState>, ctx: Ctx, MemberEmail(email): MemberEmail,
) -> ApiResult<StatusCode> {
    ctx.require(Action::Administer)?;
    let _fresh = s.auth_cache.invalidation();
    s.store.remove_member(&ctx.ws, &email).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's own tokens, and, for owners, every token scoped to this
/// workspace (`pad_core::authz::token_access`).
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/tokens", tag = "members", params(("ws" = String, Path)),
    responses((status = 200, body = TokenList), (status = "default", body = ErrorEnvelope)))]
pub async fn tokens(State(s): State<AppState>, ctx: Ctx) -> JsonOut<TokenList> {
    let mut tokens = s.store.list_tokens(&ctx.ws, ctx.actor()).await?;
    tokens.retain(|t| access(&ctx, t) == TokenAccess::Allowed);
    Ok(axum::Json(TokenList { tokens }))
}

fn access(ctx: &Ctx, t: &pad_core::TokenInfo) -> TokenAccess {
    authz::token_access(&ctx.caller.user.email, ctx.caller.scope.is_some(), ctx.role, &ctx.ws.slug, t)
}

/// Create a token; the secret is in this answer and nowhere else, ever. Who
/// may mint what is `pad_core::authz::mint` (docs/api.md, "Tokens").
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/tokens", tag = "members", params(("ws" = String, Path)),
    request_body = CreateToken, responses((status = 201, body = TokenCreated), (status = "default", body = ErrorEnvelope)))]
pub async fn create_token(
    State(s): State<AppState>, ctx: Ctx, Json(body): Json<CreateToken>,
) -> ApiResult<(StatusCode, axum::Json<TokenCreated>)> {
    let other = body.email.as_deref().filter(|e| !e.eq_ignore_ascii_case(&ctx.caller.user.email));
    let (target, target_role) = match other {
        None => (Some(ctx.actor()), Some(ctx.role)),
        Some(email) => match s.store.user_by_email(email).await? {
            None => (None, None),
            Some(u) => {
                let actor = pad_store::Actor { user_id: u.id };
                let role = match s.store.membership(actor, &ctx.ws.slug).await {
                    Ok((_, role)) => Some(role),
                    Err(pad_store::StoreError::NotFound { .. }) => None,
                    Err(e) => return Err(e.into()),
                };
                (Some(actor), role)
            }
        },
    };
    let req = MintRequest {
        for_self: other.is_none(),
        scoped: body.scope.map(|k| k == TokenScopeKind::Workspace),
        role: body.role,
    };
    let grant = authz::mint(req, ctx.role, ctx.caller.scope.is_some(), target_role).map_err(|r| match r {
        MintRefusal::Forbidden(m) => ApiError::forbidden(m),
        MintRefusal::Invalid { field, message } => {
            let who = other.map(|e| format!("{e} ")).unwrap_or_default();
            pad_store::StoreError::invalid(field, format!("{who}{message}")).into()
        }
    })?;
    // `mint` refuses a non-member, so a target exists here.
    let target = target.ok_or_else(|| ApiError::forbidden("no such member"))?;
    let token = new_token();
    let hash = hash_token(&token);
    let info = match grant {
        None => s.store.create_token(target, &body.name, &hash).await?,
        // Charged to the account the caller's token is charged to, so a token
        // minted with a minted token still charges the chain's root
        // (docs/api.md, "Limits").
        Some(role) => {
            let charged_to = ctx.caller.charged_account();
            s.store.create_scoped_token(target, &body.name, &hash, &ctx.ws, role, ctx.actor(), charged_to).await?
        }
    };
    Ok((StatusCode::CREATED, axum::Json(TokenCreated { token, info })))
}

#[utoipa::path(delete, path = "/api/v1/workspaces/{ws}/tokens/{id}", tag = "members",
    params(("ws" = String, Path), ("id" = i64, Path)),
    responses((status = 204, description = "revoked"), (status = "default", body = ErrorEnvelope)))]
pub async fn revoke_token(State(s): State<AppState>, ctx: Ctx, TokenId(id): TokenId) -> ApiResult<StatusCode> {
    let token = s.store.get_token(id).await?;
    match access(&ctx, &token) {
        TokenAccess::Allowed => {}
        TokenAccess::Forbidden => {
            return Err(ApiError::forbidden(format!(
                "only owners of {} may revoke other members' tokens",
                ctx.ws.slug
            )));
        }
        TokenAccess::Hidden => return Err(pad_store::StoreError::not_found(format!("token {id}")).into()),
    }
    let _fresh = s.auth_cache.invalidation();
    s.store.revoke_token(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
