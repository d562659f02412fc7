//! The event log's query and pages (docs/api.md, "Events").

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::split;

/// Query of `GET …/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Events with a greater id; 0 (the default) is from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Page size, default 100; values outside 1..=1000 are clamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Only events of this item.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    #[param(rename = "ref")]
    pub item_ref: Option<String>,
    /// Only events of these types, comma-separated (`lease.claimed,lease.released`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[param(rename = "type")]
    pub kind: Option<String>,
}

impl EventsQuery {
    /// The store filter, or the field that is wrong.
    pub fn filter(&self) -> Result<crate::EventFilter, crate::ValidationError> {
        let item_ref = self.item_ref.as_deref().map(|r| crate::ItemRef::parse_field("ref", r)).transpose()?;
        let kinds = split(&self.kind)
            .into_iter()
            .map(|k| k.parse::<crate::EventKind>().map_err(|e| crate::ValidationError::new("type", e.message)))
            .collect::<Result<_, _>>()?;
        Ok(crate::EventFilter { item_ref, kinds })
    }
}

/// A page of the event log, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<crate::Event>,
}
