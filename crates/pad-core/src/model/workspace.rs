//! Workspaces, their members, kinds and tokens.

use super::*;

/// The default kinds every new workspace gets.
pub const DEFAULT_KINDS: &[(&str, &str)] = &[("task", "TASK"), ("bug", "BUG"), ("feature", "FEAT"), ("chore", "CHORE")];

/// Workspace settings that bound leases and quarantine (docs/leases.md L8, L13).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceSettings {
    pub default_ttl_seconds: u32,
    pub max_ttl_seconds: u32,
    pub quarantine_after_expiries: u32,
    /// L14: the wait after a first failure; it doubles with each failure.
    pub retry_backoff_base_seconds: u32,
    /// L14: the longest wait after a failure.
    pub retry_backoff_max_seconds: u32,
    /// L14: failures that quarantine an item (0 turns it off).
    pub quarantine_after_failures: u32,
    /// L19: the longest a lease may be held, renewals included; `null`: no cap.
    #[serde(default)]
    pub max_hold_seconds: Option<u32>,
}

impl Default for WorkspaceSettings {
    fn default() -> Self {
        Self {
            default_ttl_seconds: 15 * 60,
            max_ttl_seconds: crate::lease::TTL_MAX_SECONDS,
            quarantine_after_expiries: 3,
            retry_backoff_base_seconds: 30,
            retry_backoff_max_seconds: 3600,
            quarantine_after_failures: 3,
            max_hold_seconds: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Workspace {
    #[serde(skip)]
    pub id: i64,
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub settings: WorkspaceSettings,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Kind {
    pub name: String,
    pub prefix: String,
}

/// A person or program that authenticates with tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct User {
    #[serde(skip)]
    pub id: i64,
    pub email: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Member {
    pub email: String,
    pub role: Role,
    pub added_at: DateTime<Utc>,
}

/// A token as listed: never the secret, which is shown once at creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub email: String,
    /// The one workspace the token reaches; `null`: all of its user's.
    pub workspace: Option<String>,
    /// The role cap of a scoped token; `null` when unscoped.
    pub role: Option<Role>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    /// The email of the user who minted it; `null` for tokens minted before
    /// pad recorded it. Removing that user from the workspace revokes it.
    #[serde(default)]
    pub minted_by: Option<String>,
}
