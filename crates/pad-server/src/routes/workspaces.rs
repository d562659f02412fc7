//! Workspaces, kinds, members, tokens and `me`.

use axum::extract::State;
use axum::http::StatusCode;
use pad_core::api::{
    CreateKind, CreateToken, CreateWorkspace, ErrorEnvelope, KindList, Me, MemberList, SetMember, TokenCreated,
    TokenList, WorkspaceList, WorkspaceRole, WorkspaceView,
};
use pad_core::{Action, Kind, Member, Role, Workspace};

use crate::AppState;
use crate::auth::{hash_token, new_token};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, Ctx, Json};

type JsonOut<T> = ApiResult<axum::Json<T>>;

async fn view(s: &AppState, ws: Workspace, role: Role) -> ApiResult<WorkspaceView> {
    let kinds = s.store.list_kinds(&ws).await?;
    Ok(WorkspaceView { slug: ws.slug, name: ws.name, created_at: ws.created_at, settings: ws.settings, role, kinds })
}

/// Who the token belongs to, and where it may go.
#[utoipa::path(get, path = "/api/v1/me", tag = "auth",
    responses((status = 200, body = Me), (status = "default", body = ErrorEnvelope)))]
pub async fn me(State(s): State<AppState>, caller: Caller) -> JsonOut<Me> {
    let workspaces = s.store.list_workspaces(caller.actor()).await?;
    Ok(axum::Json(Me {
        email: caller.user.email,
        workspaces: workspaces.into_iter().map(|(w, role)| WorkspaceRole { slug: w.slug, role }).collect(),
    }))
}

#[utoipa::path(get, path = "/api/v1/workspaces", tag = "workspaces",
    responses((status = 200, body = WorkspaceList), (status = "default", body = ErrorEnvelope)))]
pub async fn list(State(s): State<AppState>, caller: Caller) -> JsonOut<WorkspaceList> {
    let mut workspaces = Vec::new();
    for (ws, role) in s.store.list_workspaces(caller.actor()).await? {
        workspaces.push(view(&s, ws, role).await?);
    }
    Ok(axum::Json(WorkspaceList { workspaces }))
}

/// Any authenticated user may create a workspace and becomes its owner.
#[utoipa::path(post, path = "/api/v1/workspaces", tag = "workspaces", request_body = CreateWorkspace,
    responses((status = 201, body = WorkspaceView), (status = "default", body = ErrorEnvelope)))]
pub async fn create(
    State(s): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateWorkspace>,
) -> ApiResult<(StatusCode, axum::Json<WorkspaceView>)> {
    let name = body.name.unwrap_or_else(|| body.slug.clone());
    let ws = s.store.create_workspace(&body.slug, &name, caller.actor()).await?;
    Ok((StatusCode::CREATED, axum::Json(view(&s, ws, Role::Owner).await?)))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{ws}", tag = "workspaces", params(("ws" = String, Path)),
    responses((status = 200, body = WorkspaceView), (status = "default", body = ErrorEnvelope)))]
pub async fn show(State(s): State<AppState>, ctx: Ctx) -> JsonOut<WorkspaceView> {
    ctx.require(Action::Read)?;
    Ok(axum::Json(view(&s, ctx.ws, ctx.role).await?))
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
    State(s): State<AppState>,
    ctx: Ctx,
    Json(body): Json<CreateKind>,
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
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/members", tag = "members", params(("ws" = String, Path)),
    request_body = SetMember, responses((status = 200, body = Member), (status = "default", body = ErrorEnvelope)))]
pub async fn set_member(State(s): State<AppState>, ctx: Ctx, Json(body): Json<SetMember>) -> JsonOut<Member> {
    ctx.require(Action::Administer)?;
    Ok(axum::Json(s.store.set_member(&ctx.ws, &body.email, body.role).await?))
}

/// Owners see every member's tokens; others their own.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/tokens", tag = "members", params(("ws" = String, Path)),
    responses((status = 200, body = TokenList), (status = "default", body = ErrorEnvelope)))]
pub async fn tokens(State(s): State<AppState>, ctx: Ctx) -> JsonOut<TokenList> {
    let mut tokens = s.store.list_tokens(&ctx.ws).await?;
    if !pad_core::permits(ctx.role, Action::Administer) {
        tokens.retain(|t| t.email == ctx.caller.user.email);
    }
    Ok(axum::Json(TokenList { tokens }))
}

/// Create a token; the secret is in this answer and nowhere else, ever.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/tokens", tag = "members", params(("ws" = String, Path)),
    request_body = CreateToken, responses((status = 201, body = TokenCreated), (status = "default", body = ErrorEnvelope)))]
pub async fn create_token(
    State(s): State<AppState>,
    ctx: Ctx,
    Json(body): Json<CreateToken>,
) -> ApiResult<(StatusCode, axum::Json<TokenCreated>)> {
    let owner = match body.email.as_deref() {
        Some(email) if !email.eq_ignore_ascii_case(&ctx.caller.user.email) => {
            ctx.require(Action::Administer)?;
            let members = s.store.list_members(&ctx.ws).await?;
            if !members.iter().any(|m| m.email.eq_ignore_ascii_case(email)) {
                return Err(pad_store::StoreError::invalid(
                    "email",
                    format!("{email} is not a member of {}", ctx.ws.slug),
                )
                .into());
            }
            pad_store::Actor { user_id: s.store.ensure_user(email).await?.id }
        }
        _ => ctx.actor(),
    };
    let token = new_token();
    let info = s.store.create_token(owner, &body.name, &hash_token(&token)).await?;
    Ok((StatusCode::CREATED, axum::Json(TokenCreated { token, info })))
}

#[utoipa::path(delete, path = "/api/v1/workspaces/{ws}/tokens/{id}", tag = "members",
    params(("ws" = String, Path), ("id" = i64, Path)),
    responses((status = 204, description = "revoked"), (status = "default", body = ErrorEnvelope)))]
pub async fn revoke_token(State(s): State<AppState>, ctx: Ctx) -> ApiResult<StatusCode> {
    let id: i64 =
        ctx.param("id").parse().map_err(|_| ApiError::bad_request("token id must be a number", Some("id")))?;
    let token = s.store.get_token(&ctx.ws, id).await?;
    if !token.email.eq_ignore_ascii_case(&ctx.caller.user.email) {
        ctx.require(Action::Administer)?;
    }
    s.store.revoke_token(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
