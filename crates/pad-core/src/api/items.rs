//! Items, their versions and comments on the wire (docs/api.md, "The item model"):
//! the list query and its store filter, pages and bodies.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Comment, Version};

use super::split;

/// One page of an item's history, newest first (docs/api.md, "Pages of
/// history and comments").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VersionList {
    pub versions: Vec<Version>,
    /// The `cursor` of the next (older) page; `null` on the last.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// One page of an item's comments, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CommentList {
    pub comments: Vec<Comment>,
    /// The `cursor` of the next (newer) page; `null` on the last.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Versions per history page unless `limit` says otherwise, and at most.
pub const HISTORY_LIMIT_DEFAULT: u32 = 20;
pub const HISTORY_LIMIT_MAX: u32 = 50;
/// Comments per page unless `limit` says otherwise, and at most.
pub const COMMENTS_LIMIT_DEFAULT: u32 = 100;
pub const COMMENTS_LIMIT_MAX: u32 = 200;
/// A page of history or comments stops once it holds this many bytes of
/// changes or bodies (it always holds at least one entry).
pub const PAGE_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Query of `GET …/history` and `GET …/comments`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size: history 20 by default and at most 50, comments 100 and at
    /// most 200; values outside are clamped. A page also stops at 4 MiB of
    /// changes or bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewComment {
    /// Markdown, at most 64 KiB of UTF-8.
    #[schema(min_length = 1, max_length = 65536)]
    pub body: String,
}

/// Query of `GET …/items`. Multi-valued filters are comma-separated
/// (`status=open,in-progress`); `label=a,b` means both labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased: Option<bool>,
    /// Case-insensitive substring of title or body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(max_length = 200)]
    pub q: Option<String>,
    /// Only children of this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Page size, default 50; values outside 1..=500 are clamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// Fencing (L10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_epoch: Option<i64>,
    /// Fencing by handle (L17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ItemPage {
    pub items: Vec<crate::Item>,
    pub next_cursor: Option<String>,
}

impl ListQuery {
    /// The store filter this query asks for, or the field that is wrong.
    pub fn filter(&self) -> Result<crate::ItemFilter, crate::ValidationError> {
        use crate::ValidationError;
        let named = |field: &'static str| move |e: ValidationError| ValidationError::new(field, e.message);
        Ok(crate::ItemFilter {
            status: split(&self.status)
                .into_iter()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(named("status"))?,
            kind: split(&self.kind).into_iter().map(str::to_ascii_lowercase).collect(),
            labels: split(&self.label).into_iter().map(str::to_string).collect(),
            priority: split(&self.priority)
                .into_iter()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(named("priority"))?,
            assignee: self.assignee.clone(),
            leased: self.leased,
            q: self.q.clone().filter(|q| !q.is_empty()),
            parent: self.parent.as_deref().map(|p| crate::ItemRef::parse_field("parent", p)).transpose()?,
            include_deleted: false,
        })
    }
}
