//! Workspaces, kinds, members and tokens on the wire (docs/api.md, "Routes",
//! "Tokens").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Kind, Member, Role, TokenInfo, WorkspaceSettings};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceView {
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub settings: WorkspaceSettings,
    /// The caller's role here.
    pub role: Role,
    #[serde(default)]
    pub kinds: Vec<Kind>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceList {
    pub workspaces: Vec<WorkspaceView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkspace {
    #[schema(min_length = 1, max_length = 63, pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub slug: String,
    /// Defaults to the slug.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKind {
    #[schema(min_length = 1, max_length = 32, pattern = "^[a-z0-9][a-z0-9-]{0,31}$")]
    pub name: String,
    #[schema(min_length = 1, max_length = 10, pattern = "^[A-Z][A-Z0-9]{0,9}$")]
    pub prefix: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KindList {
    pub kinds: Vec<Kind>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMember {
    #[schema(min_length = 3, max_length = 254, format = Email)]
    pub email: String,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberList {
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// Whose token: defaults to the caller; only owners may name another member.
    #[serde(default)]
    #[schema(min_length = 3, max_length = 254)]
    pub email: Option<String>,
    /// `workspace`: the token reaches this workspace only; `user`: all of
    /// its user's workspaces, for one's own tokens only. Default: `user` for
    /// one's own token from an unscoped caller without `role`, else `workspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<TokenScopeKind>,
    /// A role cap for a scoped token; the granted role is never higher than
    /// the minter's nor the token user's role in the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// How far a new token reaches (docs/api.md, "Tokens").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenScopeKind {
    /// This workspace only.
    Workspace,
    /// Every workspace of the token's user.
    User,
}

/// The one time a token's secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreated {
    pub token: String,
    #[serde(flatten)]
    pub info: TokenInfo,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Me {
    pub email: String,
    pub workspaces: Vec<WorkspaceRole>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceRole {
    pub slug: String,
    pub role: Role,
}
