//! The workspace event log's entries (docs/api.md, Events).

use super::*;

/// One entry of a workspace's event log (docs/api.md, Events). Ids increase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: EventKind,
    #[serde(rename = "ref")]
    pub item_ref: Option<String>,
    /// The member who caused it; `null` for what the store observed itself (an expiry).
    pub actor: Option<String>,
    pub at: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}
